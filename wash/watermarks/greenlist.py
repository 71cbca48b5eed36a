"""What every green/red-list scheme shares: the logit boost and the green-count test.

KGW, its context-free "biased" variant, Unigram and Water-Bag all perturb a model
the same way: split the vocabulary into a keyed green list holding a fraction
gamma of the tokens and add ``delta`` to the green logits. They differ only in
*which* list applies at a position (hashed from the context, fixed per key, drawn
per generation from a bag). So the perturbation and the detector live here once
and a scheme supplies just its ``green_mask``.

The detector is the one from Kirchenbauer et al.: count the green tokens among
the n scored ones; without the key a token is green with probability gamma
whatever the text, so the count is Binomial(n, gamma) under the null and
z = (hits - gamma n) / sqrt(n gamma (1 - gamma)). DiPMark's detector is the same
count with another notion of "green", so it reuses :class:`GreenCountDetector`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Sequence

import torch

from wash.watermarks.base import Detection, Detector, WatermarkScheme, check_range, softmax
from wash.watermarks.scoring import binomial_z


def boost_green(logits: torch.Tensor, mask: torch.Tensor, delta: float) -> torch.Tensor:
    """softmax(logits + delta * mask) in float64; ``-inf`` logits stay at probability 0."""
    shifted = logits.to(torch.float64) + float(delta) * mask.to(torch.float64)
    return softmax(shifted)


def check_fraction(params: Any, name: str) -> None:
    """A gamma-like share of the vocabulary: strictly between 0 and 1 (both ends leave one list empty)."""
    check_range(params, name, 0.0, 1.0, lo_open=True, hi_open=True)


def is_green(mask: torch.Tensor, token_id: int) -> bool:
    """Membership test; ids outside the mask's range (never sampled) count as red, as in MarkLLM."""
    return 0 <= token_id < mask.shape[0] and bool(mask[token_id])


class GreenCountDetector(Detector):
    """Binomial green-count detector: O(1) per push given the token's green test.

    Subclasses implement ``_is_green`` (``None`` = not scored). ``null_rate`` is the
    probability that an unwatermarked token is green (gamma for KGW-like lists).
    """

    def __init__(self, scheme: WatermarkScheme, prefix: Sequence[int], null_rate: float) -> None:
        super().__init__(scheme, prefix)
        self.null_rate = float(null_rate)
        self.hits = 0
        self.scored = 0

    @abstractmethod
    def _is_green(self, token_id: int) -> bool | None:
        """Whether ``token_id`` is green after ``self.ids``; ``None`` when it is not scored."""

    def _score(self, token_id: int) -> float | None:
        green = self._is_green(token_id)
        if green is None:
            return None
        self.scored += 1
        self.hits += int(green)
        return 1.0 if green else 0.0

    def result(self) -> Detection:
        z = binomial_z(self.hits, self.scored, self.null_rate)
        return Detection.from_z(
            self.scheme.name, z, tokens_scored=self.scored, per_token=list(self.per_token),
            statistic=float(self.hits),
            note=f"{self.hits}/{self.scored} green (null rate {self.null_rate:g})",
        )


class _MaskDetector(GreenCountDetector):
    """Green = member of the scheme's green list for the tokens before it.

    With ``scheme.unique_tokens`` each token id is scored at its first occurrence
    only (Zhao et al.'s ``unidetect``). A context-free list needs this: a word
    that recurs ("the", ",") is green or red every time, so all-token counts of
    ordinary text vary more than Binomial(n, gamma) (sd about 1.3 instead of 1 at
    50 tokens, measured) and false alarms follow. Counting distinct ids restores
    the binomial null.
    """

    scheme: "GreenListScheme"

    def __init__(self, scheme: "GreenListScheme", prefix: Sequence[int], null_rate: float) -> None:
        super().__init__(scheme, prefix, null_rate)
        self.seen_ids: set[int] = set()

    def _is_green(self, token_id: int) -> bool | None:
        mask = self.scheme.green_mask(self.ids, None)
        if mask is None:
            return None
        if self.scheme.unique_tokens:
            if token_id in self.seen_ids:
                return None
            self.seen_ids.add(token_id)
        return is_green(mask, token_id)


class GreenListScheme(WatermarkScheme):
    """A scheme that adds ``delta`` to the logits of a keyed green list of fraction ``gamma``.

    Subclasses set ``self.gamma`` and ``self.delta`` in ``__init__`` and implement
    ``green_mask``; the perturbation and (by default) the detector follow.
    """

    gamma: float
    delta: float
    #: Score each distinct token id once (for context-free lists; see ``_MaskDetector``).
    unique_tokens: bool = False

    @abstractmethod
    def green_mask(self, ids: Sequence[int], state: Any) -> torch.Tensor | None:
        """Boolean mask over ``vocab_size`` of the list that applies after ``ids``.

        ``state`` is ``new_state``'s per-generation draw (``None`` when detecting).
        ``None`` means no list applies (too little context): the token is left
        unperturbed and unscored.
        """

    def distribution(
        self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int, state: Any
    ) -> torch.Tensor:
        mask = self.green_mask(ids, state)
        if mask is None:
            return softmax(logits)
        return boost_green(logits, mask, self.delta)

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return _MaskDetector(self, prefix, self.gamma)
