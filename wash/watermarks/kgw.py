"""KGW (Kirchenbauer et al. 2023): a green list hashed from the last few context ids.

At each position the last ``context_width`` ids are folded into one number
(``reduction``: additive | time | skip | min), which seeds a random split of the
vocabulary into a green fraction gamma and a red rest; green logits get +delta.
Someone holding the key recomputes each position's list and counts green tokens:
watermarked text over-uses green, ordinary text hits it at rate gamma.

The derivation is MarkLLM's KGW with the "left" window, so either side's text is
detectable by the other's detector for the same key and parameters:

    prf  = randperm(V) seeded with the key            (hashing.base_permutation)
    f    = prf[reduce(last context_width ids) mod V]  ("min": min of prf[id])
    seed = (key * f) mod V
    green = first floor(gamma V) of randperm(V) seeded with seed   (hashing.green_mask)

V is the width of the provider's logits, which is what MarkLLM's
``TransformersConfig.vocab_size`` must be set to. Defaults are the WASH paper's
release: gamma 0.5, delta 2.0, additive reduction over 4 ids. Positions with
fewer than ``context_width`` previous ids (prompt ids count) are neither boosted
nor scored, as in MarkLLM.

Detection scores each (list seed, token) pair once (``skip_repeated``, default
true; Kirchenbauer et al.'s "ignore repeated n-grams", see ``greenlist``): on
looping text the all-pairs count had P(z > 4) up to 19 % without a watermark
(docs/DETECTORS.md). ``skip_repeated=false`` is MarkLLM's all-token count (their
z on the same ids).

Under WASH each provider's key is secret and independent, so each token is green
for a provider with probability gamma whatever its id: the boosts average to a
constant shift across tokens (no systematic preference), which is the paper's
zero-mean assumption (contrast ``biased_kgw``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import numpy as np
import torch

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import check_choice, check_range
from wash.watermarks.greenlist import GreenListScheme, check_fraction, check_skip_repeated


def check_context(params: Any) -> None:
    """``params.reduction`` must be known and ``params.context_width`` one it can fold.

    skip/min read an id, so they need >= 1; additive/time fold an empty context to a
    constant (0 / 1), which gives one fixed list (how ``biased-kgw`` is built), so 0 is allowed.
    """
    check_choice(params, "reduction", hashing.CONTEXT_REDUCTIONS)
    needs_id = params.reduction in ("skip", "min")
    check_range(params, "context_width", lo=1 if needs_id else 0, integer=True,
                why=f"with reduction '{params.reduction}'" if needs_id else "")


@register
class KGW(GreenListScheme):
    name = "kgw"
    title = "KGW"
    rank = 0
    paper_columns = {1: 3, 2: 1}
    summary = "Kirchenbauer et al. green/red list hashed from the last context ids (+delta on green)"
    description = (
        'Kirchenbauer et al.: a hash of the last {context_width} token ids and the key picks a '
        'green {gamma:.0%} of the vocabulary; green tokens get +{delta:g} on their logits. The '
        'detector counts green tokens.')

    @dataclass(frozen=True)
    class Params:
        gamma: float = 0.5
        delta: float = 2.0
        context_width: int = 4
        reduction: str = "additive"
        #: Detector: score each (list seed, token) pair once; false = MarkLLM's all-token count.
        skip_repeated: bool = True

        def __post_init__(self) -> None:
            check_fraction(self, "gamma")
            check_range(self, "delta", lo=0.0)
            check_context(self)
            check_skip_repeated(self)

    def __init__(self, key: int, vocab_size: int, params: "KGW.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        p = self.params
        self._configure(gamma=p.gamma, delta=p.delta, context_width=p.context_width, reduction=p.reduction)

    def _configure(self, gamma: float, delta: float, context_width: int, reduction: str) -> None:
        """Store the list parameters (shared with the variants built on KGW; their Params validated them)."""
        self.gamma = float(gamma)
        self.delta = float(delta)
        self.context_width = int(context_width)
        self.reduction = reduction
        # numpy view: indexing it per token is ~50x cheaper than indexing the tensor.
        self._prf = hashing.base_permutation(self.key, self.vocab_size).numpy()

    def context_seed(self, ids: Sequence[int]) -> int:
        """MarkLLM's left-hash seed ``(key * f) mod V`` for the list after ``ids``.

        Callers ensure ``len(ids) >= context_width``.
        """
        v = self.vocab_size
        w = self.context_width
        if self.reduction == "min":
            # MarkLLM takes the minimum of the *permuted* ids, and uses it unpermuted.
            mapped = [int(self._prf[int(t) % v]) for t in ids[len(ids) - w:]]
            f = hashing.reduce_context(mapped, w, "min", v)
        else:
            f = int(self._prf[hashing.reduce_context(ids, w, self.reduction, v)])
        return (self.key * f) % v

    def list_id(self, ids: Sequence[int]) -> Hashable | None:
        """The list's seed: contexts that hash to one seed share one list (and one trial)."""
        if len(ids) < self.context_width:
            return None
        return self.context_seed(ids)

    def green_mask(self, ids: Sequence[int], state: Any = None) -> torch.Tensor | None:
        seed = self.list_id(ids)
        if seed is None:
            return None
        return hashing.green_mask(seed, self.vocab_size, self.gamma)

    def green_ids(self, ids: Sequence[int]) -> np.ndarray | None:
        """The green token ids after ``ids`` (for inspection and interop tests)."""
        mask = self.green_mask(ids)
        return None if mask is None else np.flatnonzero(mask.numpy())
