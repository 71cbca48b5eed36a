"""Water-Probe's statistic, and how we calibrate it: a null, a p-value and an interval.

Water-Probe (Liu et al., ICLR 2025, "Can Watermarked LLMs be Identified by Users via
Crafted Prompts?") asks a model to continue lists of answers under two crafted
prompts P1 and P2 and counts, for each answer context c, which token comes next.
A watermark keyed on the context moves the same tokens up or down in context c
whatever the prompt, so the direction in which a token's rank changes between two
contexts agrees across the prompts; without a watermark the two prompts change the
ranks in unrelated directions.

For a pair of contexts (c1, c2): T is the tokens among the 50 most frequent in c1 or
c2 under P1 and also under P2; d_p[t] = sign(rank_p,c1(t) - rank_p,c2(t)) for each
prompt; the pair scores cos(d_1, d_2). A run's score S is the mean over all pairs,
and three independent runs give z = (mean(S) - 0.1) / sd(S) (sd with ddof 1; 0.1 is
Water-Probe's choice of the unwatermarked mean), read in bands: z > 10 high
confidence, 4 < z <= 10 low confidence, else none.

Why that z is not our verdict. It is a t statistic with two degrees of freedom
against a mean that is not our models' null: the same system can land a factor of
ten apart between two line-ups, a deterministic system gives +inf, and the
unwatermarked S measured here ranges from 0.05 to 0.15 with probe and line-up.
Water-Probe itself calibrates nothing. So this module also gives:

- ``permutation_p``: the one-sided p of a two-sample permutation test of the system's
  R run scores against the runs of the *unwatermarked* system of the same line-up,
  probed at the same budget, serving and prompts (``experiment identify`` probes 50 or
  more null runs); the statistic is the difference of the two means. Both samples
  enter the permutation law, so its spread is that of a mean of R runs from the pooled
  R + M runs, not of R runs drawn without replacement from the null's M alone (which
  comes out too narrow). Exact when the splits number at most ``PERMUTATION_RESAMPLES``
  (3 runs against 50: 23,426 splits), else a seeded Monte Carlo of that many splits,
  whose floor 1 / (resamples + 1) says only that no resample reached the system.
- ``holm``: Holm's step-down adjustment over the systems judged against one null
  (one folder, line-up, budget): every system of a table shares its line-up's null, so
  raw p's below 5% would flag one of several unwatermarked systems far more often than
  5%. The verdict "identified at 5%" (``identified``, ``ALPHA_IDENTIFY``) reads the
  Holm-adjusted p; a deterministic system gets a finite p like any other.
- ``context_bootstrap``: a percentile interval of S from resampling *contexts*. Pairs
  share contexts, so resampling pairs would treat 17,000 overlapping pairs as
  independent and give an interval far too narrow.

Two definitions this module makes where the paper's code leaves them implicit:
- Top-50 counts only tokens seen at least once. Tokens never sampled tie at the
  bottom rank, so they add 0 to both sign vectors wherever they are in a pair, and
  which of them a sort would put in a "top 50" is arbitrary.
- When the three scores are identical (sd = 0: a point-mass scheme gives the same
  counts in every run), z is +inf if their mean exceeds 0.1, -inf if it is below
  and 0 if it equals it. Reports show S, its interval and p beside z.

Counts are kept sparse (``TokenCounts``: the tokens seen and how often): a probe
of 50 runs over 190 contexts of a 300k-token union vocabulary would take tens of GB
as dense arrays, and a pair's score only ever reads the ranks of seen tokens.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Hashable, Mapping, Sequence

import numpy as np
from wash.detection.thresholds import ALPHA_IDENTIFY, Z_HIGH, Z_THRESHOLD

#: Water-Probe's choices: tokens compared per context, the unwatermarked mean, the bands.
TOP = 50
NULL_MEAN = 0.1
BANDS = ((Z_HIGH, "high"), (Z_THRESHOLD, "low"))
#: Resamples of the context bootstrap.
BOOTSTRAP_RESAMPLES = 2000
#: Splits of the permutation test: every split when there are at most this many, else this
#: many random ones (a Monte Carlo p, floor 1e-05).
PERMUTATION_RESAMPLES = 99_999
#: What the documents and the app call the verdict's test.
TEST_NAME = "Holm-corrected permutation test"


@dataclass(frozen=True, eq=False)
class TokenCounts:
    """Next-token counts at one context: the token ids seen (ascending) and how often.

    ``size`` is the vocabulary the counts live on (every context of a probe shares it):
    the unseen tokens tie at the bottom rank, and how many there are sets the ranks of
    the seen ones.
    """

    ids: np.ndarray
    counts: np.ndarray
    size: int

    @classmethod
    def from_dense(cls, counts: np.ndarray) -> "TokenCounts":
        counts = np.asarray(counts)
        seen = np.flatnonzero(counts > 0)
        return cls(seen.astype(np.int64), counts[seen].astype(np.int64), int(counts.size))

    @classmethod
    def from_tokens(cls, tokens: np.ndarray, size: int) -> "TokenCounts":
        """Counts of a sequence of drawn token ids."""
        ids, counts = np.unique(np.asarray(tokens, dtype=np.int64), return_counts=True)
        return cls(ids, counts.astype(np.int64), int(size))

    @classmethod
    def merge(cls, parts: Sequence["TokenCounts"], size: int) -> "TokenCounts":
        """The sum of several counts on the same vocabulary."""
        parts = [p for p in parts if p.ids.size]
        if not parts:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), int(size))
        ids = np.concatenate([p.ids for p in parts])
        counts = np.concatenate([p.counts for p in parts])
        uniq, inverse = np.unique(ids, return_inverse=True)
        return cls(uniq, np.bincount(inverse, weights=counts).astype(np.int64), int(size))

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def dense(self) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.int64)
        out[self.ids] = self.counts
        return out

    @cached_property
    def top(self) -> frozenset[int]:
        """The ``TOP`` most frequent seen tokens (ties broken by token id)."""
        return frozenset(self.top_n(TOP))

    def top_n(self, top: int) -> list[int]:
        # Stable sort on -count keeps ids in ascending order within a tie.
        order = np.argsort(-self.counts, kind="stable")[:top]
        return self.ids[order].tolist()

    @cached_property
    def rank(self) -> dict[int, int]:
        """Rank of each seen token by count, ties sharing the lowest rank (unseen tokens: 1).

        A seen token with count c ranks above every unseen token and every seen token
        with a smaller count: rank = (size - seen) + #(seen with count < c) + 1.
        """
        below = np.searchsorted(np.sort(self.counts), self.counts, side="left")
        base = self.size - self.ids.size + 1
        return dict(zip(self.ids.tolist(), (below + base).tolist()))


def as_counts(counts: "TokenCounts | np.ndarray") -> TokenCounts:
    return counts if isinstance(counts, TokenCounts) else TokenCounts.from_dense(counts)


# -- one pair, one run ------------------------------------------------------------------
def ranks(counts: np.ndarray) -> np.ndarray:
    """Rank of each entry by count, ties sharing the lowest rank (1 = rarest)."""
    order = np.sort(counts)
    return np.searchsorted(order, counts, side="left") + 1


def top_tokens(counts: "TokenCounts | np.ndarray", top: int = TOP) -> set[int]:
    """The ``top`` most frequent tokens seen at least once (ties broken by token id)."""
    return set(as_counts(counts).top_n(top))


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    """Cosine similarity; two zero vectors agree (1), one zero vector against another does not (0)."""
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0.0 and nv == 0.0:
        return 1.0
    if nu == 0.0 or nv == 0.0:
        return 0.0
    return float(np.dot(u, v) / (nu * nv))


def _signs(a: TokenCounts, b: TokenCounts, tokens: Sequence[int]) -> np.ndarray:
    ra, rb = a.rank, b.rank
    return np.sign(np.fromiter((ra.get(t, 1) - rb.get(t, 1) for t in tokens), dtype=np.float64,
                               count=len(tokens)))


def pair_score(p1_c1, p1_c2, p2_c1, p2_c2, top: int = TOP) -> float | None:
    """One context pair's score, or None when no token is in both prompts' top sets.

    Takes ``TokenCounts`` or dense count arrays (all on the same vocabulary)."""
    p1_c1, p1_c2, p2_c1, p2_c2 = (as_counts(c) for c in (p1_c1, p1_c2, p2_c1, p2_c2))
    if top == TOP:
        first, second = p1_c1.top | p1_c2.top, p2_c1.top | p2_c2.top
    else:
        first = set(p1_c1.top_n(top)) | set(p1_c2.top_n(top))
        second = set(p2_c1.top_n(top)) | set(p2_c2.top_n(top))
    shared = sorted(first & second)
    if not shared:
        return None
    return cosine(_signs(p1_c1, p1_c2, shared), _signs(p2_c1, p2_c2, shared))


def pair_matrix(counts_p1: Mapping[str, "TokenCounts | np.ndarray"],
                counts_p2: Mapping[str, "TokenCounts | np.ndarray"], contexts: Sequence[str],
                top: int = TOP) -> np.ndarray:
    """Every pair's score on a shared list of ``contexts``: a symmetric K x K matrix.

    NaN where a pair is not scored: a context missing under either prompt, no shared
    top token, and the diagonal (a context is never paired with itself)."""
    p1 = {c: as_counts(v) for c, v in counts_p1.items()}
    p2 = {c: as_counts(v) for c, v in counts_p2.items()}
    k = len(contexts)
    out = np.full((k, k), np.nan)
    present = [i for i, c in enumerate(contexts) if c in p1 and c in p2]
    for i, j in itertools.combinations(present, 2):
        c1, c2 = contexts[i], contexts[j]
        s = pair_score(p1[c1], p1[c2], p2[c1], p2[c2], top)
        if s is not None:
            out[i, j] = out[j, i] = s
    return out


def matrix_score(matrix: np.ndarray) -> tuple[float, int]:
    """(S, pairs) of one run's pair matrix: the mean over its scored pairs."""
    upper = matrix[np.triu_indices(matrix.shape[0], 1)]
    scored = upper[np.isfinite(upper)]
    return (float(scored.mean()) if scored.size else math.nan), int(scored.size)


def run_score(counts_p1: Mapping[str, "TokenCounts | np.ndarray"],
              counts_p2: Mapping[str, "TokenCounts | np.ndarray"], top: int = TOP) -> tuple[float, int]:
    """S of one run: the mean pair score over contexts present under both prompts.

    Returns (S, number of pairs scored); S is NaN when no pair could be scored.
    """
    contexts = sorted(set(counts_p1) & set(counts_p2))
    return matrix_score(pair_matrix(counts_p1, counts_p2, contexts, top))


# -- Water-Probe's z, kept for comparison with the paper ---------------------------------
def identification_z(scores: Sequence[float], null_mean: float = NULL_MEAN) -> float:
    """z = (mean - 0.1) / sd over independent runs (sd ddof 1); sd 0 gives +-inf (see module doc)."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size < 2 or np.isnan(values).any():
        return math.nan
    mean, sd = float(values.mean()), float(values.std(ddof=1))
    if np.all(values == values[0]):  # identical runs (the float sd may be 1e-17, not 0)
        return math.copysign(math.inf, mean - null_mean) if mean != null_mean else 0.0
    return (mean - null_mean) / sd


def band(z: float) -> str:
    """Water-Probe's confidence band of an identification z: high, low or none."""
    for threshold, name in BANDS:
        if z > threshold:
            return name
    return "none"


# -- calibration: an interval over contexts, a p against the measured null ----------------
def context_bootstrap(matrices: Sequence[np.ndarray], confidence: float = 0.95,
                      resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """S (the mean over runs of each run's mean pair score) and a percentile interval.

    ``matrices`` are the runs' pair matrices on one shared list of contexts. A resample
    draws contexts with replacement (``scipy.stats.bootstrap``); with w_i the times
    context i was drawn, a run's S* = sum w_i w_j s_ij / sum w_i w_j over its scored
    pairs i != j: every pair between the drawn contexts counts, and a context drawn
    twice is not paired with its own copy. Returns (S, low, high); an interval of a
    system whose every resample gives the same S (a deterministic one) is [S, S].
    """
    from scipy import stats

    mats = [np.asarray(m, dtype=np.float64) for m in matrices]
    if not mats or mats[0].shape[0] < 2:
        return math.nan, math.nan, math.nan
    k = mats[0].shape[0]

    def statistic(idx: np.ndarray) -> float:
        return resampled_score(mats, np.bincount(np.asarray(idx, dtype=np.int64), minlength=k))

    point = statistic(np.arange(k))
    if not math.isfinite(point):
        return math.nan, math.nan, math.nan
    with warnings.catch_warnings():  # a degenerate law (a deterministic system) is handled below
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap((np.arange(k),), statistic, n_resamples=resamples, vectorized=False,
                                 confidence_level=confidence, method="percentile",
                                 rng=np.random.default_rng(seed))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):  # a degenerate bootstrap law
        spread = np.asarray(result.bootstrap_distribution, dtype=np.float64)
        spread = spread[np.isfinite(spread)]
        low, high = (float(spread.min()), float(spread.max())) if spread.size else (point, point)
    return point, min(low, point), max(high, point)


def resampled_score(matrices: Sequence[np.ndarray], weights: np.ndarray) -> float:
    """S over a resample of contexts: context i drawn ``weights[i]`` times (see ``context_bootstrap``)."""
    w = np.asarray(weights, dtype=np.float64)
    runs = []
    for m in matrices:
        scored = np.isfinite(m)
        den = w @ scored.astype(np.float64) @ w
        if den > 0:
            runs.append((w @ np.where(scored, m, 0.0) @ w) / den)
    return float(np.mean(runs)) if runs else math.nan


def _finite(values: Sequence[float]) -> np.ndarray:
    return np.asarray([s for s in values if math.isfinite(s)], dtype=np.float64)


def permutation_exact(runs: int, null_runs: int, resamples: int = PERMUTATION_RESAMPLES) -> bool:
    """Whether the test of ``runs`` runs against ``null_runs`` enumerates every split (scipy's rule)."""
    return math.comb(runs + null_runs, runs) <= resamples


def p_floor(runs: int, null_runs: int, resamples: int = PERMUTATION_RESAMPLES) -> float:
    """The smallest p the test can give: 1 / (number of splits) when exact, 1 / (resamples + 1) if not.

    A system above every null run reaches it; NaN where no p is given (``permutation_p``)."""
    if runs < 1 or null_runs < runs:
        return math.nan
    if permutation_exact(runs, null_runs, resamples):
        return 1.0 / math.comb(runs + null_runs, runs)
    return 1.0 / (resamples + 1)


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def permutation_p(scores: Sequence[float], null_scores: Sequence[float], runs: int | None = None,
                  resamples: int = PERMUTATION_RESAMPLES, seed: int = 0) -> float:
    """One-sided p that the system's first ``runs`` runs score higher than the null's runs.

    A two-sample permutation test (``scipy.stats.permutation_test``, independent
    samples) of the difference of means, exact or Monte Carlo (see the module doc and
    ``p_floor``). NaN when the system has fewer than ``runs`` runs or a non-finite
    one, or the null has fewer than ``runs`` scored runs (a budget too small to keep
    any context pair); the null's unscored runs are dropped.
    """
    from scipy import stats

    runs = len(scores) if runs is None else runs
    values = np.asarray(list(scores)[:runs], dtype=np.float64)
    null = _finite(null_scores)
    if runs < 1 or values.size < runs or not np.isfinite(values).all() or null.size < runs:
        return math.nan
    result = stats.permutation_test((values, null), _mean_difference, permutation_type="independent",
                                    vectorized=True, n_resamples=resamples, alternative="greater",
                                    rng=np.random.default_rng(seed))
    return float(result.pvalue)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (same order as given); NaN entries are no test and stay NaN.

    With the m finite p's sorted, p_(1) <= ... <= p_(m), the i-th adjusted value is
    max over j <= i of min(1, (m - j + 1) p_(j)); rejecting where it is below alpha
    keeps the chance of any false rejection at most alpha whatever the tests'
    dependence (they share one null here).
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, math.nan)
    finite = np.flatnonzero(np.isfinite(p))
    order = finite[np.argsort(p[finite], kind="stable")]
    m = order.size
    out[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    return out


def holm_by(pvalues: Sequence[float], families: Sequence[Hashable]) -> np.ndarray:
    """``holm`` within each family (the systems that share one null), in the order given."""
    p = np.asarray(pvalues, dtype=np.float64)
    keys = list(families)
    out = np.full(p.shape, math.nan)
    for key in dict.fromkeys(keys):
        idx = np.asarray([i for i, k in enumerate(keys) if k == key])
        out[idx] = holm(p[idx])
    return out


def identified(p: float, alpha: float = ALPHA_IDENTIFY) -> bool:
    """The verdict "this system is watermarked" at level ``alpha``: its (Holm-adjusted) p below it."""
    return bool(math.isfinite(p) and p < alpha)
