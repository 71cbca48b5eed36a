"""Each scheme's keyed law at the observed token, under its key and under random keys.

For a model-aware likelihood ratio a provider needs, at every scored position t,
rho_t = p_wm(x_t) / p(x_t): how much more likely its watermarked law made the
observed token x_t than its plain served law did.

A token outside the rows the provider serves at its position (its re-read law,
without the prompt the text was written after, puts it outside the top-k) gets
rho = 1, no evidence either way: its ratio would be 0 under every key alike, so it
carries nothing about the key, and the test is conditional on the text (the null
is over keys). Counting it as 0 would only punish any text the provider reads
differently from how it was written. Under WASH a token comes from the provider's watermarked law with
weight w (about 1/N) and from elsewhere otherwise, so the token's likelihood ratio
is (1 - w) + w rho_t. For AAR's point mass rho_t is 1/p(x_t) when x_t won the
keyed race and 0 otherwise: the exact ratio when every uniform of the race is
known, which the key holder knows.

The law itself is the scheme's (``WatermarkScheme.keyed_law``, ``wash.watermarks.laws``):
written once in the scheme's module or its family's, with the functions its
``distribution`` serves by. Here it is only evaluated: ``observed`` gathers rho under
the provider's own key from its law on the served rows; ``simulate`` draws rho under n
random keys from the law's own random-key draw (a green list colours each row green
with probability gamma; an exponential race draws one uniform per row; DiPMark permutes
the rows; SynthID draws g-values Bernoulli(q) per layer and row). Positions are treated
as independent, which holds for distinct contexts (the scheme's own detector already
skips repeats); Unigram's one list per key colours a token the same at every position,
and its simulation keeps that. A keyed point mass per variant (``KeyedPicks``: EXP-Edit's
and ITS-Edit's key offsets) gives rho = 1/p(x_t) where its pick is the observed token and
0 elsewhere, and its null is drawn as wins of the observed token (``PickRatios``). The
tests compare the simulated null with real random keys on real text.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from wash.detection.statistics.tests import log_ratio_sums, point_mass_sums
from wash.detection.statistics.served_text import ServedText
from wash.watermarks.base import WatermarkScheme
from wash.watermarks.laws import KeyedLaw, KeyedPicks


def _ratio_at(law: torch.Tensor, probs: torch.Tensor, col: int) -> float:
    # SynthID's closed form can round a vanishing probability to -1e-17: it is a 0
    return 1.0 if col < 0 else max(float(law[col] / probs[col]), 0.0)


def _gather_observed(laws: torch.Tensor, probs: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(n, T) rho from (n, T, K) laws: the observed column's law over its plain probability (0 if unserved)."""
    idx = torch.as_tensor(np.maximum(cols, 0))[None, :, None].expand(laws.shape[0], -1, 1)
    at = torch.gather(laws, 2, idx).squeeze(2).numpy()
    base = probs[np.arange(len(cols)), np.maximum(cols, 0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.maximum(at / base[None, :], 0.0)  # a law's -1e-17 (SynthID's rounding) is a 0
    return np.where(cols[None, :] >= 0, rho, 1.0)


class LawRatios:
    """rho_t of a ``KeyedLaw``: under the provider's key (``observed``) and under random keys (``simulate``).

    A generation may have been served by one of several keyed laws (Water-Bag draws
    one of its bag's lists per generation): rho gets one row per variant, (J, T); the
    statistics take the best or the average over rows."""

    def __init__(self, law: KeyedLaw) -> None:
        self.law = law

    def null_sums(self, st: ServedText, scored: np.ndarray, rng: np.random.Generator, n: int,
                  cuts: np.ndarray, r: np.ndarray | None = None) -> Iterator[np.ndarray]:
        """``tests.log_ratio_sums`` of rho under n random keys, in blocks of draws: (n_block, J, C, W) each.

        One block here; a law with many variants per draw yields several, so that the
        caller reduces each block over its variants before the next is drawn. ``r``: each
        position's q / p for the line-up-aware ratio (None: q = p); it does not depend on the key."""
        yield log_ratio_sums(self.simulate(st, scored, rng, n), cuts, r)

    def observed(self, st: ServedText, scored: np.ndarray) -> np.ndarray:
        """(J, T) rho under the scheme's own key; 1 where a position is not scored or its token not served."""
        cols = st.observed()
        probs = st.probs()
        rho = np.ones((self.law.variants, len(st)))
        for t in np.flatnonzero(scored & (cols >= 0)):
            k = st.rows[t] >= 0
            p = torch.as_tensor(probs[t][k])
            laws = self.law.compact_laws(st, int(t), p)
            for j in range(len(laws)):
                rho[j, t] = _ratio_at(laws[j], p, int(cols[t]))
        return rho

    def simulate(self, st: ServedText, scored: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, J, T) rho under n random keys; 1 where a position is not scored."""
        probs = st.probs()
        laws = self.law.simulate_laws(st, torch.as_tensor(probs), rng, n)
        if laws.dim() == 3:
            laws = laws[:, None]
        J = laws.shape[1]
        rho = _gather_observed(laws.reshape(n * J, *laws.shape[2:]), probs, st.observed()).reshape(n, J, -1)
        return np.where(scored[None, None, :], rho, 1.0)


class PickRatios:
    """rho_t of a ``KeyedPicks`` law (EXP-Edit, ITS-Edit: one variant per key offset): 1/p(x_t) where a
    variant's pick is the observed token and 0 elsewhere. ``lr`` takes the best variant, ``lr-mix``
    averages over them (the prior on the offset is the generation's own: uniform).

    A text whose re-read tokenisation differs from the provider's count (a re-synchronised
    span that merges differently) shifts the offset from there on, and the ratio keeps one
    offset per text.

    Null: under a random key a variant picks the observed token with probability exactly
    p(x_t), independently across the positions of one variant (its elements are independent
    draws; ITS-Edit's shared permutation leaves each pick's probability at p(x_t) whatever
    the permutation). Two offsets meet at the same element at different positions; the
    simulation draws them independently, and the tests compare it with real random keys on
    real text."""

    #: Null draws per block (each block is draws x variants x T wins).
    BLOCK = 16

    def __init__(self, law: KeyedPicks) -> None:
        self.law = law

    @staticmethod
    def live(st: ServedText, scored: np.ndarray) -> np.ndarray:
        """(T,) the positions whose rho can differ from 1: scored, with the observed token served."""
        return scored & (st.observed() >= 0)

    def observed(self, st: ServedText, scored: np.ndarray) -> np.ndarray:
        won = self.law.picks(st) == st.observed()[None, :]
        return np.where(self.live(st, scored)[None, :], np.where(won, self._ratio(st), 0.0), 1.0)

    @staticmethod
    def _ratio(st: ServedText) -> np.ndarray:
        """(T,) 1/p of the observed token (1 where it was not served)."""
        p = st.observed_probs()
        return np.where(p > 0, 1.0 / np.where(p > 0, p, 1.0), 1.0)

    def _wins(self, ratio: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, J, T) whether a random key's variant picks the observed token: probability p(x_t)."""
        return rng.random((n, self.law.variants, len(ratio))) < 1.0 / ratio

    def simulate(self, st: ServedText, scored: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        ratio = self._ratio(st)
        wins = self._wins(ratio, rng, n)
        return np.where(self.live(st, scored), np.where(wins, ratio, 0.0), 1.0)

    def null_sums(self, st: ServedText, scored: np.ndarray, rng: np.random.Generator, n: int,
                  cuts: np.ndarray, r: np.ndarray | None = None) -> Iterator[np.ndarray]:
        ratio, live = self._ratio(st), self.live(st, scored)
        for start in range(0, n, self.BLOCK):
            wins = self._wins(ratio, rng, min(self.BLOCK, n - start))
            yield point_mass_sums(wins, ratio, live, cuts, r)


def keyed_law(scheme: WatermarkScheme) -> LawRatios | PickRatios | None:
    """The ratios of ``scheme``'s keyed law (``WatermarkScheme.keyed_law``), or ``None`` where it has none."""
    law = scheme.keyed_law()
    if law is None:
        return None
    return PickRatios(law) if isinstance(law, KeyedPicks) else LawRatios(law)
