"""Each model's own view of the shared text, and context re-synchronisation.

Every base model keeps its context in its OWN tokenisation, with a KV cache that
only ever advances by new ids: appending is free until logits are needed, and a
model that sat out a routed span catches up in one batched forward. With lazy
forwards a model can also be told to catch up in the background
(``catch_up_async``): the feed is queued on the model's own thread
(``parallel.py``), and anything that needs the cache later waits for it.

Re-synchronisation after a routed span: the span's bytes are re-tokenised by each
model's own tokenizer and each context becomes ``ids_before_span + T_m(span)``.
The common prefix with what a model already holds is kept (a specialist whose
tokenizer splits the word the same way loses nothing); only the differing tail is
cropped from its KV cache and fed again. The whole context is never re-encoded.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Sequence

import torch

from wash import parallel
from wash.models import LoadedModel
from wash.vocab import ModelVocab, encode_bytes


class ModelContext:
    """A model's context ids and KV cache; forwards run only the ids not fed yet.

    Thread contract: the generation's own thread appends, truncates and asks for
    logits; forwards run on the model's executor thread (``parallel.py``), which
    runs them in submission order. Logits are cached with the context length they
    belong to, so appending never needs to invalidate them.
    """

    def __init__(self, lm: LoadedModel, prompt_ids: Sequence[int], use_cache: bool = True) -> None:
        self.lm = lm
        self.ids: list[int] = list(prompt_ids)
        self.prompt_len = len(self.ids)
        self.use_cache = use_cache
        self.cache = None
        self.n_cached = 0
        self._logits: torch.Tensor | None = None
        self._logits_len = -1
        #: The last background feed queued on the model's thread, and where it feeds up to.
        self._queued: Future | None = None
        self._queued_to = 0
        #: Forward passes and ids fed, for the cost accounting of benchmarks.
        self.forward_calls = 0
        self.ids_fed = 0
        self.forward_s = 0.0

    def append(self, new_ids: Sequence[int]) -> None:
        self.ids.extend(int(i) for i in new_ids)

    def settle(self) -> None:
        """Wait for a queued background feed (on the model's own thread it has already run)."""
        if self._queued is not None:
            if not parallel.on_model_thread(self.lm.name):
                self._queued.result()
            if self._queued.done():
                self._queued = None

    def catch_up_async(self) -> None:
        """Queue a feed of every committed id on the model's thread, and return at once.

        No logits are needed for these positions, so the feed skips the output layer
        (for Gemma 3 its 262k x 640 matrix is about half of a decode step). Meant for
        a model that will take at least one more id before it is next asked for
        logits (lazy forwards call it for the models not picked next); if it is asked
        sooner, ``next_logits`` crops and re-feeds the last id: correct, only slower.
        The chunk is fixed now (the ids committed so far), not when the thread gets
        to it, so the floating-point result does not depend on timing.
        """
        target = len(self.ids)
        if not self.use_cache or target <= max(self.n_cached, self._queued_to):
            return
        self._queued_to = target
        self._queued = parallel.submit(self.lm.name, lambda: self._feed(target, logits=False), self.lm.device)

    def truncate(self, length: int) -> None:
        """Drop ids from ``length`` on, cropping the KV cache to match."""
        if length >= len(self.ids):
            return
        self.settle()
        del self.ids[length:]
        self._queued_to = min(self._queued_to, length)
        if self._logits_len > length:
            self._logits, self._logits_len = None, -1
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

    def next_logits(self) -> torch.Tensor:
        """Logits for the token after ``self.ids`` (float32, on the CPU)."""
        self.settle()
        if self._logits is not None and self._logits_len == len(self.ids):
            return self._logits
        if not self.use_cache:
            self.cache, self.n_cached = None, 0
        if self.n_cached == len(self.ids):  # cropped exactly to the end: re-feed the last id
            self._crop(len(self.ids) - 1)
        self._feed(len(self.ids))
        assert self._logits is not None
        return self._logits

    @torch.no_grad()
    def _feed(self, target: int, logits: bool = True) -> None:
        """Feed ``ids[n_cached:target]`` in one forward; keep the logits at ``target`` if asked."""
        from transformers import DynamicCache

        if self.cache is None:
            self.cache = DynamicCache(config=self.lm.model.config)
            self.n_cached = 0
        if target <= self.n_cached:
            return
        pending = torch.tensor([self.ids[self.n_cached:target]], dtype=torch.long, device=self.lm.device)
        t0 = time.perf_counter()
        if logits:
            out = self.lm.model(input_ids=pending, past_key_values=self.cache, use_cache=True,
                                logits_to_keep=1)
            self._logits, self._logits_len = out.logits[0, -1].float().cpu(), target
        else:  # the decoder alone fills the cache; the output layer is skipped
            self.lm.model.get_decoder()(input_ids=pending, past_key_values=self.cache, use_cache=True)
        self.forward_s += time.perf_counter() - t0
        self.forward_calls += 1
        self.ids_fed += pending.shape[1]
        self.n_cached = target

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
