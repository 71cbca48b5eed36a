"""Test statistics shared by every detector, written once.

Every detector reports a z-score and a p-value. Green/red schemes count green
tokens (a binomial z); score-sum schemes (AAR) sum exponential scores (a Gamma
tail); permutation tests standardise against their simulated null. The survival
functions come from scipy so that extreme values (z of 50, p of 1e-300) stay exact
instead of saturating at 1 - 1e-16.
"""

from __future__ import annotations

import math

from scipy import stats

#: A text (or a model) is called watermarked when its z exceeds this: the one-sided detection
#: line of the paper and the KGW reference (p about 3e-5 under the null). Every detector's
#: verdict uses it, so it lives with the detectors; ``wash.detection.thresholds`` holds it
#: beside the other lines the app, the CLI and the reports draw.
Z_THRESHOLD = 4.0

#: Largest |z| we report; Phi^-1 of p-values below ~1e-300 is not meaningful.
Z_CAP = 38.0


def z_from_p(p: float) -> float:
    """z = Phi^-1(1 - p), computed with the inverse survival function (no 1-p rounding)."""
    if math.isnan(p):
        return float("nan")
    p = min(max(float(p), 1e-300), 1.0)
    if p >= 1.0:
        return -Z_CAP
    return float(max(min(stats.norm.isf(p), Z_CAP), -Z_CAP))


def p_from_z(z: float) -> float:
    """One-sided p-value of a z-score: P(Z >= z) under the null."""
    return float(stats.norm.sf(z))


def binomial_z(hits: int, n: int, gamma: float) -> float:
    """z of ``hits`` green tokens out of ``n`` when each is green with probability gamma."""
    if n <= 0:
        return 0.0
    return (hits - gamma * n) / math.sqrt(n * gamma * (1.0 - gamma))


def gamma_sum_p(total: float, n: int) -> float:
    """P(S >= total) for S a sum of n independent Exp(1) scores (AAR's null)."""
    if n <= 0:
        return 1.0
    return float(stats.gamma.sf(total, a=n))



def mean_t_z(total: float, total_sq: float, n: int, null_mean: float) -> tuple[float, float]:
    """(z, s): the t statistic of n scores against their null mean, and their empirical sd.

    z = (mean - null_mean) / (s / sqrt(n)) with s the sample sd (ddof 1), from the
    running sum and sum of squares; the WASH release's AAR test, which reads z as a
    Gaussian (p = 1 - Phi(z)). As the release: s = 1 for a single score, z = 0 when s = 0.
    """
    if n <= 0:
        return 0.0, float("nan")
    mean = total / n
    var = max(total_sq - n * mean * mean, 0.0) / (n - 1) if n > 1 else 1.0
    sd = math.sqrt(var)
    return ((mean - null_mean) / (sd / math.sqrt(n)) if sd > 0 else 0.0), sd
