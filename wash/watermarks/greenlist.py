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

Each (list, token) pair is scored once by default (``skip_repeated``, every
green-list scheme's parameter, as AAR's): a token's colour is a function of the
list that applies and of the token, so a repeated pair repeats a coin already
counted, and the binomial null holds only over distinct pairs. "The list" is
``GreenListScheme.list_id``: KGW's list seed (hashed from the context, so this is
Kirchenbauer et al.'s "ignore repeated n-grams"), the one fixed list of the
context-free schemes (each distinct token once, Zhao et al.'s ``unidetect``), or
all of Water-Bag's bag lists at once. Looping text is where it matters: a 40-token
loop repeated 5 times gave KGW's all-pairs count a null sd of 2.4 and
P(z > 4) = 3 %, Water-Bag's 17 % (docs/DETECTORS.md). ``skip_repeated=false``
counts every token, as MarkLLM and the KGW reference code do (the interop tests
compare that count).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any, Hashable, Sequence

import numpy as np
import torch

from wash.watermarks.base import (BOOL, Detection, Detector, WatermarkScheme, check_choice, check_range,
                                  keyed_on, softmax)
from wash.watermarks.laws import KeyedLaw, RereadText, served
from wash.watermarks.scoring import binomial_z


def boost_green(logits: torch.Tensor, mask: torch.Tensor, delta: float) -> torch.Tensor:
    """softmax(logits + delta * mask) in float64; ``-inf`` logits stay at probability 0."""
    shifted = logits.to(torch.float64) + float(delta) * keyed_on(mask, logits).to(torch.float64)
    return softmax(shifted)


def check_fraction(params: Any, name: str) -> None:
    """A gamma-like share of the vocabulary: strictly between 0 and 1 (both ends leave one list empty)."""
    check_range(params, name, 0.0, 1.0, lo_open=True, hi_open=True)


def check_skip_repeated(params: Any) -> None:
    """``skip_repeated`` is a boolean (every green-list scheme's Params has it)."""
    check_choice(params, "skip_repeated", BOOL)


def is_green(mask: torch.Tensor, token_id: int) -> bool:
    """Membership test; ids outside the mask's range (never sampled) count as red, as in MarkLLM."""
    return 0 <= token_id < mask.shape[0] and bool(mask[token_id])


class GreenCountDetector(Detector):
    """Binomial green-count detector: O(1) per push given the token's green test.

    Subclasses implement ``_is_green`` (``None`` = not scored). ``null_rate`` is the
    probability that an unwatermarked token is green (gamma for KGW-like lists).
    """

    counts_green = True

    def __init__(self, scheme: WatermarkScheme, prefix: Sequence[int], null_rate: float) -> None:
        super().__init__(scheme, prefix)
        self.null_rate = float(null_rate)
        self.token_null = (self.null_rate, math.sqrt(self.null_rate * (1.0 - self.null_rate)))
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

    With ``scheme.skip_repeated`` a (list, token) pair is scored at its first
    occurrence only (see the module docstring): for KGW a repeated n-gram, for a
    context-free list a recurring word ("the", ","), which otherwise is green or
    red at every occurrence and inflates the count's variance even on ordinary
    text (sd about 1.3 instead of 1 at 50 tokens, measured).
    """

    scheme: "GreenListScheme"

    def _is_green(self, token_id: int) -> bool | None:
        list_id = self.scheme.list_id(self.ids)
        if list_id is None:
            return None
        if self.scheme.skip_repeated and not self.first_occurrence((list_id, token_id)):
            return None
        return is_green(self.scheme.green_mask(self.ids, None), token_id)


class GreenListScheme(WatermarkScheme):
    """A scheme that adds ``delta`` to the logits of a keyed green list of fraction ``gamma``.

    Subclasses set ``self.gamma`` and ``self.delta`` in ``__init__``, give their
    ``Params`` a ``skip_repeated`` field (checked by ``check_skip_repeated``) and
    implement ``green_mask`` and ``list_id``; the perturbation and (by default)
    the detector follow.
    """

    gamma: float
    delta: float
    green_list = True

    @property
    def skip_repeated(self) -> bool:
        """Whether the detector scores each (list, token) pair once (``Params.skip_repeated``)."""
        return bool(self.params.skip_repeated)

    @abstractmethod
    def green_mask(self, ids: Sequence[int], state: Any) -> torch.Tensor | None:
        """Boolean mask over ``vocab_size`` of the list that applies after ``ids``.

        ``state`` is ``new_state``'s per-generation draw (``None`` when detecting).
        ``None`` means no list applies (too little context): the token is left
        unperturbed and unscored.
        """

    @abstractmethod
    def list_id(self, ids: Sequence[int]) -> Hashable | None:
        """What the detector's list after ``ids`` is a function of (given the key), or ``None``
        where no list applies, as for ``green_mask``.

        Two positions with equal ``list_id`` and the same token are one trial, scored
        once under ``skip_repeated``. It must be at least as fine as the list itself
        (equal ids, equal lists), and should be no finer: a seed, not the raw context,
        so that contexts that hash alike (additive sums collide) count once too.
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

    def keyed_law(self) -> KeyedLaw:
        return GreenListLaw(self)


def served_green(mask: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor:
    """Which of ``rows`` a list colours green (none where no list applies)."""
    return torch.zeros(len(rows), dtype=torch.bool) if mask is None else mask[rows]


class GreenListLaw(KeyedLaw):
    """``boost_green`` on the served rows. A random key colours each row green with probability
    gamma; a context-free scheme (one list per key) colours a token the same at every position."""

    scheme: GreenListScheme

    def compact_laws(self, text: RereadText, t: int, probs: torch.Tensor) -> torch.Tensor:
        green = served_green(self.scheme.green_mask(text.ids[:t], None), served(text, t))
        return boost_green(torch.log(probs), green, self.scheme.delta)[None]

    def simulate_laws(self, text: RereadText, probs: torch.Tensor, rng: np.random.Generator,
                      n: int) -> torch.Tensor:
        scheme = self.scheme
        if scheme.list_id([0] * len(text.ids)) == scheme.list_id([1] * len(text.ids)):
            # one list per key (context-free): a token has one colour at every position
            ids, inv = np.unique(text.rows, return_inverse=True)
            colour = rng.random((n, len(ids))) < scheme.gamma
            green = colour[:, inv.reshape(text.rows.shape)]
        else:
            green = rng.random((n, *text.rows.shape)) < scheme.gamma
        return boost_green(torch.log(probs)[None], torch.as_tensor(green), scheme.delta)
