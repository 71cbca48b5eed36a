"""Water-Probe's statistic: do two prompts shift next-token ranks between contexts alike?

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

Two definitions this module makes where the paper's code leaves them implicit:
- Top-50 counts only tokens seen at least once. Tokens never sampled tie at the
  bottom rank, so they add 0 to both sign vectors wherever they are in a pair, and
  which of them a sort would put in a "top 50" is arbitrary.
- When the three scores are identical (sd = 0: a point-mass scheme gives the same
  counts in every run), z is +inf if their mean exceeds 0.1, -inf if it is below
  and 0 if it equals it: the runs agree exactly, so the evidence is as strong as it
  can be in that direction. Reports show the mean and sd beside z.
"""

from __future__ import annotations

import itertools
import math
from typing import Mapping, Sequence

import numpy as np
from wash.thresholds import Z_HIGH, Z_THRESHOLD

#: Water-Probe's choices: tokens compared per context, the unwatermarked mean, the bands.
TOP = 50
NULL_MEAN = 0.1
BANDS = ((Z_HIGH, "high"), (Z_THRESHOLD, "low"))


def ranks(counts: np.ndarray) -> np.ndarray:
    """Rank of each entry by count, ties sharing the lowest rank (1 = rarest)."""
    order = np.sort(counts)
    return np.searchsorted(order, counts, side="left") + 1


def top_tokens(counts: np.ndarray, top: int = TOP) -> set[int]:
    """The ``top`` most frequent tokens seen at least once (ties broken by token id)."""
    seen = np.flatnonzero(counts > 0)
    if seen.size > top:
        # Stable sort on -count keeps ids in ascending order within a tie.
        seen = seen[np.argsort(-counts[seen], kind="stable")[:top]]
    return set(int(t) for t in seen)


def sign_vector(a: np.ndarray, b: np.ndarray, tokens: Sequence[int]) -> np.ndarray:
    """sign(rank_a(t) - rank_b(t)) over ``tokens``."""
    ra, rb = ranks(a), ranks(b)
    idx = np.asarray(tokens, dtype=np.int64)
    return np.sign(ra[idx] - rb[idx]).astype(np.float64)


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    """Cosine similarity; two zero vectors agree (1), one zero vector against another does not (0)."""
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0.0 and nv == 0.0:
        return 1.0
    if nu == 0.0 or nv == 0.0:
        return 0.0
    return float(np.dot(u, v) / (nu * nv))


def pair_score(p1_c1: np.ndarray, p1_c2: np.ndarray, p2_c1: np.ndarray, p2_c2: np.ndarray,
               top: int = TOP) -> float | None:
    """One context pair's score, or None when no token is in both prompts' top sets."""
    shared = (top_tokens(p1_c1, top) | top_tokens(p1_c2, top)) & (top_tokens(p2_c1, top) | top_tokens(p2_c2, top))
    if not shared:
        return None
    tokens = sorted(shared)
    return cosine(sign_vector(p1_c1, p1_c2, tokens), sign_vector(p2_c1, p2_c2, tokens))


def run_score(counts_p1: Mapping[str, np.ndarray], counts_p2: Mapping[str, np.ndarray],
              top: int = TOP) -> tuple[float, int]:
    """S of one run: the mean pair score over contexts present under both prompts.

    Returns (S, number of pairs scored); S is NaN when no pair could be scored.
    """
    contexts = sorted(set(counts_p1) & set(counts_p2))
    scores = []
    for c1, c2 in itertools.combinations(contexts, 2):
        s = pair_score(counts_p1[c1], counts_p1[c2], counts_p2[c1], counts_p2[c2], top)
        if s is not None:
            scores.append(s)
    return (float(np.mean(scores)) if scores else math.nan), len(scores)


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
