"""DiPMark (Wu et al. 2023, "A resilient and accessible distribution-preserving watermark").

KGW skews every distribution toward its green list, which costs quality and is
the bias WASH's averaging removes only on average over keys. DiPMark instead
reweights so that, averaged over its keyed permutations, the distribution is
exactly the model's own ("distribution-preserving"): for a given key it still
prefers some tokens, which is what the detector finds.

Per step:
  1. a permutation pi of the vocabulary is drawn from the key and the last
     ``context_width`` ids (``hashing.permutation`` seeded by
     ``hashing.derive_seed("dipmark", key, *ngram)``: the whole n-gram, so distinct
     contexts get independent permutations, which the repeated-context rule below
     and the detector's "seen context" bookkeeping rely on);
  2. with F the CDF of the probabilities taken in pi's order, the reweighted CDF
     is F'(x) = max(F(x) - alpha, 0) + max(F(x) - (1 - alpha), 0): the first alpha of
     probability mass in pi's order is removed and the last alpha doubled; each
     token's new probability is the increment of F' over its own slice.
Averaged over a uniformly random pi every token keeps its probability: that is
the unbiasedness WASH's theory assumes, and a test checks it by Monte Carlo.

Repeated-context rule: if the current n-gram already served as the context of an
earlier *generated* token (positions >= prompt_len), the distribution is left
unchanged, so a repeated context does not keep pushing the same tokens (that
would bias the text and, in the detector, count the same evidence twice). This
is computed from ``ids`` alone, so ``distribution`` stays pure.

Detection (Wu et al.'s green-token test): a token is green when its index in pi
is >= gamma V (the tail whose mass was doubled); without the key that happens
with probability 1 - gamma, so the green count gets a binomial z with rate
1 - gamma. Tokens whose context was already seen in the pushed sequence, or with
fewer than ``context_width`` previous ids, are not scored (``None``).
Defaults follow the WASH paper's release: alpha 0.45, context width 4, gamma 0.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import Detector, WatermarkScheme, check_range, keyed_on, softmax
from wash.watermarks.greenlist import GreenCountDetector, check_fraction
from wash.watermarks.laws import KeyedLaw, RereadText, served


def alpha_reweight(probs: torch.Tensor, order: torch.Tensor, alpha: float) -> torch.Tensor:
    """DiPMark's alpha-reweight of ``probs`` (float64) along the permutation ``order``, on the last axis.

    Batched (``probs`` broadcasts against ``order``): rows with probability 0 (padding) add
    nothing to the cumulative mass wherever they sit, so reweighting a position's served
    rows equals reweighting the whole vocabulary under the same keyed order.
    """
    order = keyed_on(order, probs)
    in_order = torch.gather(probs.expand_as(order), -1, order)
    cdf = torch.cumsum(in_order, dim=-1)
    new_cdf = (cdf - alpha).clamp_min(0.0) + (cdf - (1.0 - alpha)).clamp_min(0.0)
    increments = torch.diff(new_cdf, dim=-1, prepend=torch.zeros_like(new_cdf[..., :1]))
    out = torch.empty_like(increments).scatter_(-1, order, increments)
    return out / out.sum(-1, keepdim=True)


class _DiPMarkDetector(GreenCountDetector):
    scheme: "DiPMark"

    def __init__(self, scheme: "DiPMark", prefix: Sequence[int]) -> None:
        super().__init__(scheme, prefix, null_rate=scheme.null_green_rate)

    def _is_green(self, token_id: int) -> bool | None:
        w = self.scheme.context_width
        if len(self.ids) < w:
            return None
        context = tuple(self.ids[len(self.ids) - w:])
        # a context seen before: the generator left it unmarked (and a repeated
        # (context, token) pair would repeat a coin), so it is never scored twice
        if not self.first_occurrence(context):
            return None
        return self.scheme.is_green(context, token_id)


@register
class DiPMark(WatermarkScheme):
    name = "dipmark"
    title = "DiPMark"
    rank = 2
    paper_columns = {1: 1, 2: 0}
    green_list = True
    summary = "Wu et al. distribution-preserving alpha-reweight along a keyed permutation"
    description = (
        'Wu et al. DiPMark: a hash of the last {context_width} ids permutes the vocabulary and '
        'the first part of the probability mass is moved to the rest (alpha = {alpha:g}), so each'
        " step's expected distribution is unchanged. The detector counts tokens in the favoured "
        'part.')

    @dataclass(frozen=True)
    class Params:
        alpha: float = 0.45
        context_width: int = 4
        gamma: float = 0.5

        def __post_init__(self) -> None:
            # F' is symmetric in alpha <-> 1 - alpha, and alpha < 0 breaks F'(1) = 1:
            # 0 leaves p unchanged, 0.5 is the strongest reweight.
            check_range(self, "alpha", 0.0, 0.5)
            check_range(self, "context_width", lo=1, integer=True)
            check_fraction(self, "gamma")

    def __init__(self, key: int, vocab_size: int, params: "DiPMark.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        p = self.params
        self.alpha = float(p.alpha)
        self.context_width = int(p.context_width)
        #: permutation indices below this are red, the rest green.
        self.red_count = math.ceil(p.gamma * self.vocab_size)
        self.null_green_rate = (self.vocab_size - self.red_count) / self.vocab_size

    def order(self, context: Sequence[int]) -> torch.Tensor:
        """The keyed permutation for a context n-gram (exactly ``context_width`` ids)."""
        seed = hashing.derive_seed("dipmark", self.key, *(int(t) for t in context))
        return hashing.permutation(seed, self.vocab_size)

    def is_green(self, context: Sequence[int], token_id: int) -> bool:
        """Whether ``token_id`` sits in the doubled tail of the context's permutation."""
        hits = np.flatnonzero(self.order(context).numpy() == token_id)
        return bool(hits.size) and int(hits[0]) >= self.red_count

    def repeated_context(self, ids: Sequence[int], prompt_len: int) -> bool:
        """Whether the last n-gram of ``ids`` was already the context of a generated token."""
        w = self.context_width
        seq = [int(t) for t in ids]
        current = seq[len(seq) - w:]
        return any(seq[j - w:j] == current for j in range(max(prompt_len, w), len(seq)))

    def distribution(
        self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int, state: Any
    ) -> torch.Tensor:
        probs = softmax(logits)
        if len(ids) < self.context_width or self.repeated_context(ids, prompt_len):
            return probs
        context = [int(t) for t in ids[len(ids) - self.context_width:]]
        return alpha_reweight(probs, self.order(context), self.alpha)

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return _DiPMarkDetector(self, prefix)

    def keyed_law(self) -> KeyedLaw:
        return DiPMarkLaw(self)


class DiPMarkLaw(KeyedLaw):
    """The alpha-reweight along the keyed permutation, restricted to the served rows (their order in
    it); a random key orders the rows uniformly at random."""

    scheme: DiPMark

    def compact_laws(self, text: RereadText, t: int, probs: torch.Tensor) -> torch.Tensor:
        scheme, ids = self.scheme, text.ids[:t]
        if len(ids) < scheme.context_width or scheme.repeated_context(ids, 0):
            return probs[None]
        perm = scheme.order([int(i) for i in ids[len(ids) - scheme.context_width:]])
        place = torch.empty_like(perm)
        place[perm] = torch.arange(perm.numel())
        return alpha_reweight(probs, torch.argsort(place[served(text, t)]), scheme.alpha)[None]

    def simulate_laws(self, text: RereadText, probs: torch.Tensor, rng: np.random.Generator,
                      n: int) -> torch.Tensor:
        rank = torch.as_tensor(rng.random((n, *text.rows.shape)))
        return alpha_reweight(probs[None], torch.argsort(rank, dim=-1), self.scheme.alpha)
