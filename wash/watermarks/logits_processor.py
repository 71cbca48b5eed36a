"""Any project scheme as a transformers ``LogitsProcessor``: watermark inside ``model.generate``.

The processor replaces each row of scores with the scheme's watermarked law
(``WatermarkScheme.distribution``) of the next token after that row's ids. Two ways to
use it:

* ``draw=None`` (default): it returns log p_wm and generate's own decoding samples from
  it (``do_sample=True`` with ``temperature=1.0, top_k=0, top_p=1.0``, so that generate
  reshapes nothing after the watermark; a point-mass scheme then decodes alike greedily).
* ``draw=f``: it draws the token itself, ``f(p_wm) -> token id``, and returns a row
  that is 0 at that id and -inf elsewhere, so any decoding (use ``do_sample=False``)
  emits it. This is how a caller reproduces a given sampler bit for bit, the WASH
  engine's included (``wash.engine.single_draw``).

``serve`` is the base-logit processing the scheme sees (mask, temperature, top-k,
top-p; the WASH engine's ``process_logits``); without one the raw scores go in, in
float64. The first call's ids length is the prompt's, which the schemes that skip
repeated contexts or count positions read; pass ``prompt_len`` when the processor is
reused. ``state`` is the scheme's per-generation draw (``new_state``; the WASH engine's
provider i uses ``new_state(derive_seed("generation", seed, i))``). Rows of a batch are
read as they stand: pad tokens in them would be hashed as context, so batch unpadded
prompts of equal length, or one prompt at a time.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from transformers import LogitsProcessor

from wash.watermarks.base import WatermarkScheme


class SchemeLogitsProcessor(LogitsProcessor):
    """``scheme``'s watermark applied to the scores of every generate step (see the module docstring)."""

    def __init__(self, scheme: WatermarkScheme, state: Any = None, prompt_len: int | None = None,
                 serve: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 draw: Callable[[torch.Tensor], int] | None = None) -> None:
        self.scheme = scheme
        self.state = state
        self.prompt_len = prompt_len
        self.serve = serve
        self.draw = draw

    def law(self, ids: list[int], scores: torch.Tensor) -> torch.Tensor:
        """The watermarked next-token law after ``ids`` (float64, over the scheme's vocabulary)."""
        base = self.serve(scores) if self.serve is not None else scores.to(torch.float64)
        return self.scheme.distribution(base, ids, self.prompt_len, self.state)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[-1] != self.scheme.vocab_size:
            raise ValueError(f"{self.scheme.name}: scores have {scores.shape[-1]} entries, "
                             f"the scheme expects {self.scheme.vocab_size}")
        if self.prompt_len is None:
            self.prompt_len = int(input_ids.shape[-1])
        out = torch.empty_like(scores)
        for b in range(scores.shape[0]):
            p = self.law(input_ids[b].tolist(), scores[b].detach().cpu())
            if self.draw is None:
                out[b] = torch.log(p).to(out.dtype)
            else:
                out[b] = float("-inf")
                out[b, self.draw(p)] = 0.0
        return out
