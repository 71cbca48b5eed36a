"""SynthID-Text (Dathathri et al., Nature 2024): tournament sampling, distributional form.

Why a full distribution: SynthID picks a token by a tournament of ``depth`` (m)
layers over candidates sampled from p, where the match in layer l is won by the
candidate with the larger g-value g_l(context, token) in {0, 1}. With two
candidates per match, the winner's law after layer l has a closed form:

    p_l(x) = p_{l-1}(x) * (1 + g_l(x) - E_{p_{l-1}}[g_l]),

applied for l = 1..m (transformers' ``SynthIDTextWatermarkLogitsProcessor.update_scores``
computes the same). We return that exact law, so p_i is a full distribution
(``point_mass = False``) and the engine samples from it. It is unbiased over keys:
for g_l i.i.d. Bernoulli(q) across tokens, independent of p_{l-1},
E[g_l(x) - E_p[g_l]] = q - q = 0 layer by layer.

g-values: interoperable with transformers' SynthID processor. The n-gram
(``ngram_len - 1`` context ids, then the candidate) is folded with an LCG hash
(``hashing.lcg_fold``), then each layer key is folded in, and the result indexes a
table of ``sampling_table_size`` seeded bits (``hashing.random_bits`` with
``sampling_table_seed``). Layer keys are ``depth`` ints derived from the provider
key with ``hashing.derive_seed``; ``compute_g_values`` of a transformers processor
built with ``layer_keys`` returns the same g-values.

Repeated contexts, as SynthID: a step whose (ngram_len - 1)-token context already
occurred as the context of an earlier *generated* token is not watermarked (p_i is
the base distribution), and the detector leaves such tokens unscored. Only
contexts of generated tokens count (the prompt's own n-grams do not), so a
detector given the prompt as prefix masks exactly the unwatermarked steps (one
not given the prompt may score a few early tokens the generator left unmarked,
which only dilutes). transformers forgets contexts after 1024 steps; we never do
(only matters for texts over 1024 tokens).

Context: the real previous ids, prompt included. transformers starts each
generation from a zero-padded context instead; with a too-short context
(< ngram_len - 1 ids in total) we return the base distribution and never score.

Detection: the mean g-value score. Under the null (text independent of the key)
each scored token's m g-values are table look-ups at effectively uniform indices,
i.i.d. Bernoulli(q) with q the table's mean (0.4996 for seed 0, 2**16 entries;
using the realised q instead of 0.5 removes a bias of up to ~0.2 in z at 6,000
g-values). With n scored tokens and N = n * m:
``z = (sum g - q N) / sqrt(q (1 - q) N)``. ``push`` is O(1) in the text length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import torch

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import Detection, Detector, WatermarkScheme, check_range, keyed_on, softmax
from wash.watermarks.laws import KeyedLaw, RereadText, served

#: Most tournament layers accepted: each layer is one pass over the support per step.
MAX_DEPTH = 256
#: Largest g-value table accepted (transformers' default is 2**16).
MAX_TABLE_SIZE = 2**20


def tournament_layer(p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """One tournament layer's law, p * (1 + g - E_p[g]), on the last axis (unnormalised).

    One position's law takes E_p[g] as ``torch.dot``, a batch as a sum over the last axis:
    the two round differently in the last bits, and the served law keeps the bits it has
    always had.
    """
    mean = torch.dot(g, p) if p.dim() == 1 else (g * p).sum(-1, keepdim=True)
    return p * (g + (1.0 - mean))


@register
class SynthID(WatermarkScheme):
    name = "synthid"
    title = "SynthID"
    rank = 7
    summary = "SynthID-Text: tournament sampling over g-values; mean g-value detection"
    description = (
        'SynthID-Text: a {depth}-layer keyed tournament (g-values hashed over {ngram_len}-grams: '
        'the candidate and the ids before it) picks the token, so each step is nearly a point '
        'mass. The detector averages the g-values of the observed tokens.')
    point_mass = False

    @dataclass(frozen=True)
    class Params:
        ngram_len: int = 5
        #: Tournament layers m (number of layer keys).
        depth: int = 30
        sampling_table_size: int = 2**16
        sampling_table_seed: int = 0

        def __post_init__(self) -> None:
            check_range(self, "ngram_len", lo=2, integer=True)  # >= 1 context id before the candidate
            check_range(self, "depth", lo=1, hi=MAX_DEPTH, integer=True)
            check_range(self, "sampling_table_size", lo=2, hi=MAX_TABLE_SIZE, integer=True)
            check_range(self, "sampling_table_seed", integer=True)  # any integer seeds the table

    def __init__(self, key: int, vocab_size: int, params: "SynthID.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        # Layer keys as signed int64 so torch arithmetic wraps as in transformers.
        self.layer_keys = [hashing.derive_seed(self.name, self.key, "layer", layer)
                           for layer in range(self.params.depth)]
        self._keys = torch.tensor(self.layer_keys, dtype=torch.long)
        self.table = hashing.random_bits(self.params.sampling_table_seed, self.params.sampling_table_size)
        self._table64 = self.table.to(torch.float64)
        size = self.params.sampling_table_size
        self._mask: int | None = size - 1 if size & (size - 1) == 0 and size <= 2**30 else None

    @cached_property
    def g_mean(self) -> float:
        """q: probability that a null g-value is 1 (the table's mean)."""
        return float(self.table.double().mean())

    @property
    def context_len(self) -> int:
        return self.params.ngram_len - 1

    def _hash_parts(self, context: Sequence[int],
                    candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The two halves of every layer's hash, before reduction to a table index.

        Layer l hashes the n-gram hash h as ``lcg_fold(h, key_l) = h * A + (key_l * A + 1)``
        (mod 2**64): a per-candidate part ``h * A`` plus a per-layer part, so the
        (depth x candidates) hashes are one broadcast addition. For a power-of-two
        table only the low bits matter (floor-mod of two's complement), and both
        parts are reduced first to int32.
        """
        state = torch.ones((), dtype=torch.long)
        for token in context:
            state = hashing.lcg_fold(state, int(token))
        state = hashing.lcg_fold(state, candidates.to(torch.long))  # (C,) n-gram hashes
        per_candidate = state * hashing.LCG_MULTIPLIER
        per_layer = self._keys * hashing.LCG_MULTIPLIER + hashing.LCG_INCREMENT
        if self._mask is not None:
            return (per_layer & self._mask).to(torch.int32), (per_candidate & self._mask).to(torch.int32)
        return per_layer, per_candidate

    def _lookup(self, hashes: torch.Tensor) -> torch.Tensor:
        """g-values (float64 0/1) of summed hash parts."""
        index = hashes & self._mask if self._mask is not None else hashes % self.params.sampling_table_size
        return torch.index_select(keyed_on(self._table64, index), 0, index.reshape(-1)).view(index.shape)

    def g_values(self, context: Sequence[int], candidates: torch.Tensor) -> torch.Tensor:
        """(depth, len(candidates)) g-values (float64 0/1) of each candidate after ``context``."""
        per_layer, per_candidate = self._hash_parts(context, candidates)
        return self._lookup(per_layer[:, None] + per_candidate[None, :])

    def repeated_context(self, ids: Sequence[int], prompt_len: int) -> bool:
        """Whether the context of the next token was the context of an earlier generated token."""
        c = self.context_len
        first = max(prompt_len, c)
        if len(ids) - first < 1:
            return False
        window = torch.as_tensor([int(t) for t in ids[first - c:]], dtype=torch.long)
        earlier = window[:-1].unfold(0, c, 1)  # contexts of generated positions first..len-1
        return bool((earlier == window[-c:]).all(dim=1).any())

    def distribution(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int,
                     state: Any) -> torch.Tensor:
        if logits.shape[-1] != self.vocab_size:
            raise ValueError(f"synthid: logits have {logits.shape[-1]} entries, "
                             f"scheme expects {self.vocab_size}")
        probs = softmax(logits)
        if len(ids) < self.context_len or self.repeated_context(ids, prompt_len):
            return probs
        support = torch.nonzero(probs > 0).squeeze(1)  # zero-probability tokens stay at zero
        p = probs[support]
        per_layer, per_candidate = self._hash_parts(ids[len(ids) - self.context_len:], support)
        for layer_part in per_layer:
            p = tournament_layer(p, self._lookup(per_candidate + layer_part))
        out = torch.zeros_like(probs)
        out[support] = p / p.sum()
        return out

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return _SynthIDDetector(self, prefix)

    def keyed_law(self) -> KeyedLaw:
        return SynthIDLaw(self)


class SynthIDLaw(KeyedLaw):
    """The tournament's closed form layer by layer (``tournament_layer``): the scheme's own law on a
    position's served rows; a random key draws each layer's g-values Bernoulli(q) per row."""

    scheme: SynthID

    def compact_laws(self, text: RereadText, t: int, probs: torch.Tensor) -> torch.Tensor:
        return self.scheme.distribution(text.full_row(t), text.ids[:t], 0, None)[served(text, t)][None]

    def simulate_laws(self, text: RereadText, probs: torch.Tensor, rng: np.random.Generator,
                      n: int) -> torch.Tensor:
        p = probs[None].expand(n, -1, -1).clone()
        q = self.scheme.g_mean
        for _ in range(self.scheme.params.depth):
            p = tournament_layer(p, torch.as_tensor((rng.random(p.shape) < q).astype(np.float64)))
        return p / p.sum(-1, keepdim=True).clamp_min(1e-300)


class _SynthIDDetector(Detector):
    scheme: SynthID

    def __init__(self, scheme: SynthID, prefix: Sequence[int] = ()) -> None:
        super().__init__(scheme, prefix)
        # a token's score is the mean of ``depth`` fair 0/1 g-values without the key
        self.token_null = (0.5, 0.5 / math.sqrt(scheme.params.depth))
        self.g_sum = 0
        self.n = 0

    def _score(self, token_id: int) -> float | None:
        c = self.scheme.context_len
        if len(self.ids) < c:
            return None
        context = tuple(self.ids[len(self.ids) - c:])
        if not self.first_occurrence(context):  # the generator left a repeated context unmarked
            return None
        hits = int(self.scheme.g_values(context, torch.tensor([token_id])).sum())
        self.g_sum += hits
        self.n += 1
        return hits / self.scheme.params.depth

    def result(self) -> Detection:
        depth = self.scheme.params.depth
        total = self.n * depth
        if total == 0:
            return Detection.from_z(self.scheme.name, 0.0, tokens_scored=0, per_token=list(self.per_token),
                                    note="no token with a fresh full context yet")
        q = self.scheme.g_mean
        z = (self.g_sum - q * total) / math.sqrt(q * (1.0 - q) * total)
        return Detection.from_z(
            self.scheme.name, z, tokens_scored=self.n, per_token=list(self.per_token),
            statistic=self.g_sum / total,
            note=(f"mean g-value {self.g_sum / total:.4f} over {self.n} tokens x {depth} layers; "
                  f"null mean {q:.4f}"),
        )
