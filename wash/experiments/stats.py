"""Statistics shared by every experiment, written once and unit-tested against scipy.

The paper reports detection as z-scores (p-values mapped through the normal
quantile), summarises z over ensemble draws as mean, sd and a 95% interval
(Table 1), and compares attacks by the true-positive rate at a threshold that
falsely flags 5% of unwatermarked texts (Table 2). Those three computations live
here so that all experiments summarise their CSVs the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy import stats

#: Largest |z| reported (the engine's detectors cap at the same value).
Z_CAP = 38.0
#: The one-sided z above which a detector flags a text at a nominal 5% FPR.
NOMINAL_Z_5PCT = float(stats.norm.isf(0.05))


def z_from_p(p: float) -> float:
    """z = Phi^-1(1 - p) via the inverse survival function (exact for tiny p), capped."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return float("nan")
    p = min(max(float(p), 1e-300), 1.0)
    return float(np.clip(stats.norm.isf(p), -Z_CAP, Z_CAP))


def p_from_z(z: float) -> float:
    """One-sided p-value P(Z >= z)."""
    return float(stats.norm.sf(z))


@dataclass(frozen=True)
class Summary:
    """Mean, sample sd and a two-sided confidence interval of the mean."""

    n: int
    mean: float
    sd: float
    ci_low: float
    ci_high: float

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}count": self.n, f"{prefix}mean": self.mean, f"{prefix}sd": self.sd,
                f"{prefix}ci_low": self.ci_low, f"{prefix}ci_high": self.ci_high}


def summarize(values: Iterable[float], confidence: float = 0.95) -> Summary:
    """Student-t interval of the mean (NaNs dropped); sd and interval are NaN below two values.

    The t interval (rather than the paper's apparent normal one) is used because
    our experiments average few runs, where the normal interval is too narrow.
    """
    x = np.asarray([v for v in values if v is not None and not math.isnan(float(v))], dtype=float)
    n = int(x.size)
    if n == 0:
        return Summary(0, float("nan"), float("nan"), float("nan"), float("nan"))
    mean = float(x.mean())
    if n < 2:
        return Summary(1, mean, float("nan"), float("nan"), float("nan"))
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, df=n - 1)) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half)


def threshold_at_fpr(null_scores: Sequence[float], fpr: float = 0.05) -> float:
    """The smallest threshold t with at most ``fpr`` of the null scores strictly above t.

    A text is flagged when its score is > t. With m null scores, t is the
    ceil(m * (1 - fpr))-th smallest score (an order statistic, no interpolation),
    so that exactly floor(m * fpr) null scores exceed it when there are no ties.
    """
    x = np.sort(np.asarray([v for v in null_scores if not math.isnan(float(v))], dtype=float))
    if x.size == 0:
        raise ValueError("no null scores to calibrate a threshold on")
    if not 0.0 <= fpr < 1.0:
        raise ValueError(f"fpr must be in [0, 1), got {fpr}")
    k = math.ceil(x.size * (1.0 - fpr))
    return float(x[max(k, 1) - 1])


def rate_above(scores: Sequence[float], threshold: float) -> float:
    """Fraction of scores strictly above ``threshold`` (NaNs count as not flagged)."""
    x = np.asarray(scores, dtype=float)
    if x.size == 0:
        return float("nan")
    return float(np.mean(np.nan_to_num(x, nan=-np.inf) > threshold))


@dataclass(frozen=True)
class TprAtFpr:
    threshold: float
    tpr: float
    fpr: float
    n_pos: int
    n_neg: int


def tpr_at_fpr(positive: Sequence[float], negative: Sequence[float], fpr: float = 0.05) -> TprAtFpr:
    """TPR of ``positive`` scores at the threshold calibrated on ``negative`` at ``fpr``.

    Also returns the FPR actually achieved on the calibration scores (<= fpr).
    """
    t = threshold_at_fpr(negative, fpr)
    return TprAtFpr(threshold=t, tpr=rate_above(positive, t), fpr=rate_above(negative, t),
                    n_pos=len(positive), n_neg=len(negative))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (accuracies and TPRs of few samples)."""
    if n <= 0:
        return float("nan"), float("nan")
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def group_summary(frame, by: Sequence[str], column: str, confidence: float = 0.95):
    """``summarize`` of ``column`` within each group of ``by``: a tidy pandas frame.

    Columns: the ``by`` columns, then count, mean, sd, ci_low, ci_high (in that order).
    """
    import pandas as pd

    records = []
    if len(frame):
        for keys, group in frame.groupby(list(by), sort=False, dropna=False):
            keys = keys if isinstance(keys, tuple) else (keys,)
            s = summarize(group[column].tolist(), confidence)
            records.append({**dict(zip(by, keys)), **s.as_dict()})
    return pd.DataFrame(records, columns=[*by, "count", "mean", "sd", "ci_low", "ci_high"])
