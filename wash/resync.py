"""Each model's own view of the shared text, and context re-synchronisation.

Every base model keeps its context in its OWN tokenisation, with a KV cache that
only ever advances by new ids: appending is free until logits are needed, and a
model that sat out a routed span catches up in one batched forward.

Re-synchronisation after a routed span: the span's bytes are re-tokenised by each
model's own tokenizer and each context becomes ``ids_before_span + T_m(span)``.
The common prefix with what a model already holds is kept (a specialist whose
tokenizer splits the word the same way loses nothing); only the differing tail is
cropped from its KV cache and fed again. The whole context is never re-encoded.
"""

from __future__ import annotations

import time
from typing import Sequence

import torch

from wash.models import LoadedModel
from wash.vocab import ModelVocab, encode_bytes


class ModelContext:
    """A model's context ids and KV cache; ``next_logits`` runs only the pending ids."""

    def __init__(self, lm: LoadedModel, prompt_ids: Sequence[int], use_cache: bool = True) -> None:
        self.lm = lm
        self.ids: list[int] = list(prompt_ids)
        self.prompt_len = len(self.ids)
        self.use_cache = use_cache
        self.cache = None
        self.n_cached = 0
        self._logits: torch.Tensor | None = None
        #: Forward passes and ids fed, for the cost accounting of benchmarks.
        self.forward_calls = 0
        self.ids_fed = 0
        self.forward_s = 0.0

    def append(self, new_ids: Sequence[int]) -> None:
        if new_ids:
            self.ids.extend(int(i) for i in new_ids)
            self._logits = None

    def truncate(self, length: int) -> None:
        """Drop ids from ``length`` on, cropping the KV cache to match."""
        if length >= len(self.ids):
            return
        del self.ids[length:]
        self._logits = None
        if self.n_cached > length:
            self._crop(length)

    def sync_to(self, target: Sequence[int]) -> int:
        """Make the context equal ``target`` keeping the common prefix; returns ids replaced."""
        common = 0
        limit = min(len(self.ids), len(target))
        while common < limit and self.ids[common] == target[common]:
            common += 1
        replaced = len(self.ids) - common
        self.truncate(common)
        self.append(target[common:])
        return replaced

    def _crop(self, length: int) -> None:
        window = getattr(self.lm.model.config, "sliding_window", None)
        if self.cache is not None and (not window or self.n_cached < window - 1):
            self.cache.crop(length - self.n_cached)  # negative: number of tokens removed
            self.n_cached = length
        else:  # a sliding-window layer has already evicted what the crop would need
            self.cache = None
            self.n_cached = 0

    @torch.no_grad()
    def next_logits(self) -> torch.Tensor:
        """Logits for the token after ``self.ids`` (float32, on the CPU)."""
        if self._logits is not None:
            return self._logits
        if not self.use_cache:
            self.cache, self.n_cached = None, 0
        if self.n_cached == len(self.ids):  # cropped exactly to the end: re-feed the last id
            self._crop(len(self.ids) - 1)
        from transformers import DynamicCache

        if self.cache is None:
            self.cache = DynamicCache(config=self.lm.model.config)
            self.n_cached = 0
        pending = torch.tensor([self.ids[self.n_cached:]], dtype=torch.long, device=self.lm.device)
        t0 = time.perf_counter()
        out = self.lm.model(input_ids=pending, past_key_values=self.cache, use_cache=True,
                            logits_to_keep=1)
        logits = out.logits[0, -1].float().cpu()
        self.forward_s += time.perf_counter() - t0
        self.forward_calls += 1
        self.ids_fed += pending.shape[1]
        self.n_cached = len(self.ids)
        self._logits = logits
        return self._logits

    def generated_ids(self) -> list[int]:
        return self.ids[self.prompt_len:]


def resynchronise(span: bytes, contexts: dict[str, ModelContext], starts: dict[str, int],
                  vocabs: dict[str, ModelVocab]) -> dict[str, tuple[list[int], int]]:
    """Re-tokenise a finished span for every model.

    Returns, per model, the span's ids in that model's own tokenisation and how
    many ids the model held after the span start that had to be replaced.
    """
    out: dict[str, tuple[list[int], int]] = {}
    for name, ctx in contexts.items():
        ids = encode_bytes(span, ctx.lm.encode, vocabs[name])
        replaced = ctx.sync_to(ctx.ids[: starts[name]] + ids)
        out[name] = (ids, replaced)
    return out
