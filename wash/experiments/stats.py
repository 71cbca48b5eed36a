"""Statistics shared by every experiment, written once and unit-tested against scipy.

The paper reports detection as z-scores (p-values mapped through the normal
quantile), summarises z over ensemble draws as mean, sd and a 95% interval
(Table 1), and compares attacks by the true-positive rate at a threshold that
falsely flags 5% of unwatermarked texts (Table 2). Those three computations live
here so that all experiments summarise their CSVs the same way.

The last part serves that TPR with the text as the unit: a threshold set on one
half of held-out negatives (``HeldOutSplit``: halves that share no prompt and no
text, so a threshold is never judged on the texts it was set on), the FPR it
gives on the other half, and intervals from a bootstrap over prompts
(``prompt_bootstrap_interval``), since the detectors of an ensemble all read the
same text and are not independent trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy import stats

from wash.detection import FPR_CALIBRATED

#: Largest |z| reported (the engine's detectors cap at the same value).
Z_CAP = 38.0
#: The one-sided z above which a detector flags a text at a nominal 5% FPR.
NOMINAL_Z_5PCT = float(stats.norm.isf(FPR_CALIBRATED))


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


def threshold_at_fpr(null_scores: Sequence[float], fpr: float = FPR_CALIBRATED) -> float:
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


def tpr_at_fpr(positive: Sequence[float], negative: Sequence[float], fpr: float = FPR_CALIBRATED) -> TprAtFpr:
    """TPR of ``positive`` scores at the threshold calibrated on ``negative`` at ``fpr``.

    Also returns the FPR actually achieved on the calibration scores (<= fpr).
    """
    t = threshold_at_fpr(negative, fpr)
    return TprAtFpr(threshold=t, tpr=rate_above(positive, t), fpr=rate_above(negative, t),
                    n_pos=len(positive), n_neg=len(negative))


def _proportion_interval(successes: int, n: int, confidence: float, method: str) -> tuple[float, float]:
    """``scipy.stats.binomtest(...).proportion_ci`` by ``method``; NaN when ``n`` is 0."""
    if n <= 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method=method)
    return float(ci.low), float(ci.high)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (accuracies and TPRs of few samples)."""
    return _proportion_interval(successes, n, confidence, "wilson")


def exact_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson (exact binomial) interval of a proportion: 0 of 34 reads [0, 10.3%], never [0, 0]."""
    return _proportion_interval(successes, n, confidence, "exact")


def group_summary(frame, by: Sequence[str], column: str, confidence: float = 0.95, cluster: str | None = None):
    """``summarize`` of ``column`` within each group of ``by``: a tidy pandas frame.

    Columns: the ``by`` columns, then count, mean, sd, ci_low, ci_high (in that order).
    With ``cluster`` (a column such as ``prompt_id``) the interval is the cluster
    bootstrap of ``cluster_mean_interval`` instead of Student's t over rows: use it
    when rows share a text (an ensemble's providers), which the t interval would
    count as independent.
    """
    import pandas as pd

    records = []
    if len(frame):
        for keys, group in frame.groupby(list(by), sort=False, dropna=False):
            keys = keys if isinstance(keys, tuple) else (keys,)
            s = summarize(group[column].tolist(), confidence)
            record = {**dict(zip(by, keys)), **s.as_dict()}
            if cluster is not None:
                record["ci_low"], record["ci_high"] = cluster_mean_interval(
                    group[column].astype(float).to_numpy(), group[cluster].astype(str).to_numpy(), confidence)
            records.append(record)
    return pd.DataFrame(records, columns=[*by, "count", "mean", "sd", "ci_low", "ci_high"])


#: Seed of every prompt bootstrap (fixed, so a re-summary of the same rows gives the same interval).
BOOTSTRAP_SEED = 20240917
#: Resamples of every prompt bootstrap (scipy's default).
BOOTSTRAP_RESAMPLES = 9999


@dataclass(frozen=True)
class ScoredTexts:
    """Detector z-scores of a set of texts: one entry per (text, provider) test.

    A text is the unit of a detection rate: a provider's detector flags it or not.
    Every entry names its text (``text``: an id, e.g. the job that made it), the
    prompt the text continues (``prompt``: the cluster, since texts on one prompt
    share its topic and, in an ensemble, all providers read the same text) and
    the provider whose detector scored it (``provider``: its index in the ensemble).
    """

    z: np.ndarray
    text: np.ndarray
    prompt: np.ndarray
    provider: np.ndarray

    def __post_init__(self) -> None:
        sizes = {len(self.z), len(self.text), len(self.prompt), len(self.provider)}
        if len(sizes) != 1:
            raise ValueError(f"z, text, prompt and provider must have one entry per test, got sizes {sizes}")

    @classmethod
    def from_rows(cls, rows, z: str = "z", text: str = "job", prompt: str = "prompt_id",
                  provider: str = "provider") -> "ScoredTexts":
        """One entry per row of a results frame (one row per (text, provider) detection)."""
        return cls(z=np.asarray(rows[z], dtype=float), text=np.asarray(rows[text]).astype(str),
                   prompt=np.asarray(rows[prompt]).astype(str),
                   provider=np.asarray(rows[provider]).astype(int))

    def __len__(self) -> int:
        return len(self.z)

    @property
    def texts(self) -> set[str]:
        return set(self.text.tolist())

    @property
    def prompts(self) -> set[str]:
        return set(self.prompt.tolist())

    def of_prompts(self, prompts: Iterable[str]) -> "ScoredTexts":
        """The tests of the texts on ``prompts``."""
        keep = np.isin(self.prompt, np.asarray(list(prompts), dtype=str))
        return ScoredTexts(self.z[keep], self.text[keep], self.prompt[keep], self.provider[keep])

    def flagged(self, threshold: float) -> np.ndarray:
        """Which tests are flagged (z > threshold; a NaN z is not flagged)."""
        return np.nan_to_num(self.z, nan=-np.inf) > threshold


def flagged_per_provider(scores: ScoredTexts, threshold: float) -> list[tuple[int, int, int]]:
    """``(provider, texts flagged, texts)`` for each provider, in provider order."""
    hits = scores.flagged(threshold)
    return [(int(p), int(hits[scores.provider == p].sum()), int((scores.provider == p).sum()))
            for p in sorted(set(scores.provider.tolist()))]


def flagged_share(scores: ScoredTexts, threshold: float) -> float:
    """The mean over providers of the share of their texts each one's detector flags (NaN: no texts).

    Every text of an ensemble is scored by all its ``n`` providers, so this equals
    the pooled share of (text, provider) tests flagged; it stays the providers'
    mean where a partial run left some provider with fewer texts.
    """
    per = flagged_per_provider(scores, threshold)
    return float(np.mean([k / m for _, k, m in per])) if per else float("nan")


def prompt_bootstrap_interval(scores: ScoredTexts, threshold: float, confidence: float = 0.95,
                              seed: int = BOOTSTRAP_SEED,
                              n_resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap interval of the flagged share, resampling PROMPTS (a cluster bootstrap).

    Why clustered: the ``n`` detectors of an ensemble read the same text, and texts
    on one prompt share its topic, so (text, provider) tests are not independent;
    a Wilson interval over them counts ``n`` correlated verdicts as ``n`` trials
    and is too narrow. Here each prompt contributes (flagged tests, tests); a
    resample draws prompts with replacement (all the providers and seeds of a
    prompt together) and its statistic is flagged / tests over the drawn prompts,
    which is the mean of the prompts' flagged shares when every prompt has as many
    tests (the usual case). ``scipy.stats.bootstrap`` draws the resamples
    (``paired=True`` over the prompt index, fixed ``seed``); the percentile method
    is used because BCa is undefined for the common all-flagged or none-flagged
    cells (every resample equal). In those cells the interval collapses to the
    point (0 of 34 texts: [0, 0]): it then says nothing about uncertainty, and a
    reader should bound it by the number of prompts instead (a Wilson interval
    of 0 of 17 prompts reaches 18%). NaN when there are fewer than two prompts.
    """
    return cluster_mean_interval(scores.flagged(threshold).astype(float), scores.prompt, confidence, seed,
                                 n_resamples)


def cluster_mean_interval(values: Sequence[float], clusters: Sequence[str], confidence: float = 0.95,
                          seed: int = BOOTSTRAP_SEED, n_resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values``, resampling whole ``clusters`` (prompts).

    Each cluster contributes (sum of its values, how many); a resample draws clusters
    with replacement and its statistic is the pooled mean over the drawn clusters
    (``scipy.stats.bootstrap``, ``paired=True`` over the cluster index, fixed
    ``seed``). Used wherever several measurements share a prompt: the providers of an
    ensemble read one text, so their z-scores or verdicts on it are not independent.
    NaN values are dropped; NaN when fewer than two clusters remain.
    """
    v = np.asarray(values, dtype=float)
    c = np.asarray(clusters).astype(str)
    keep = ~np.isnan(v)
    v, c = v[keep], c[keep]
    names, inverse = np.unique(c, return_inverse=True)
    if names.size < 2:
        return float("nan"), float("nan")
    k = np.bincount(inverse, weights=v, minlength=names.size)
    m = np.bincount(inverse, minlength=names.size).astype(float)

    def pooled(k_: np.ndarray, m_: np.ndarray, axis: int = -1) -> np.ndarray:
        return k_.sum(axis=axis) / m_.sum(axis=axis)

    res = stats.bootstrap((k, m), pooled, paired=True, vectorized=True, n_resamples=n_resamples,
                          confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def median_interval(values: Sequence[float], confidence: float = 0.95, seed: int = BOOTSTRAP_SEED,
                    n_resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``values`` (one per text), NaNs dropped.

    For heavy-tailed per-text measures such as perplexity, where a median is quoted
    beside the mean; NaN below two values."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size < 2:
        return float("nan"), float("nan")
    res = stats.bootstrap((v,), np.median, vectorized=True, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def split_half_by_prompt(prompts: Sequence[str]) -> tuple[list[str], list[str]]:
    """The fixed split of held-out prompts: positions 0, 2, 4, ... calibrate, 1, 3, 5, ... check.

    Alternating along an interleaved prompt list (news, law, medicine, fiction,
    how-to, news, ...) puts every domain in both halves. The rule is fixed before
    any score is seen; it is never chosen by its result.
    """
    ordered = list(dict.fromkeys(prompts))
    return ordered[0::2], ordered[1::2]


@dataclass(frozen=True)
class HeldOutSplit:
    """Negatives in two halves that share no prompt and no text: one calibrates, the other checks.

    Constructing one with overlapping halves raises, so a threshold can never be
    judged on the texts it was set on.
    """

    calibration: ScoredTexts
    check: ScoredTexts

    def __post_init__(self) -> None:
        _refuse_overlap(self.calibration, self.check, "the check half")

    @classmethod
    def by_prompt(cls, negatives: ScoredTexts, prompts: Sequence[str]) -> "HeldOutSplit":
        """``negatives`` split by ``split_half_by_prompt(prompts)`` (``prompts``: their fixed order)."""
        cal, check = split_half_by_prompt(prompts)
        return cls(negatives.of_prompts(cal), negatives.of_prompts(check))


def _refuse_overlap(calibration: ScoredTexts, judged: ScoredTexts, what: str) -> None:
    texts = calibration.texts & judged.texts
    prompts = calibration.prompts & judged.prompts
    if texts or prompts:
        shared = sorted(texts)[:1] or sorted(prompts)[:1]
        raise ValueError(f"the calibration negatives share {len(texts)} text(s) and {len(prompts)} "
                         f"prompt(s) with {what} (e.g. {shared[0]}): a threshold must never see the texts "
                         "it is judged on")


@dataclass(frozen=True)
class ThresholdTpr:
    """A threshold and the positives' TPR at it (what every held-out detection reports)."""

    threshold: float
    tpr: float
    tpr_ci: tuple[float, float]
    #: ``(provider, texts flagged, texts)`` of the positives at the threshold.
    flagged: list[tuple[int, int, int]]
    n_pos: int
    n_prompts: int


@dataclass(frozen=True)
class HeldOutDetection(ThresholdTpr):
    """TPR at a threshold set on one half of held-out negatives, and the FPR it gives on the other."""

    #: FPR on the calibration half itself (<= the target by construction).
    fpr_calibration: float
    fpr_check: float
    fpr_check_ci: tuple[float, float]
    n_cal: int
    n_check: int


def held_out_detection(positive: ScoredTexts, negatives: HeldOutSplit, fpr: float = FPR_CALIBRATED,
                       confidence: float = 0.95, seed: int = BOOTSTRAP_SEED,
                       n_resamples: int = BOOTSTRAP_RESAMPLES) -> HeldOutDetection:
    """Per-text TPR of ``positive`` at the ``fpr`` threshold of the calibration half, and its held-out FPR.

    The threshold is ``threshold_at_fpr`` of the calibration half's (text, provider)
    z-scores only; the positives and the check half are then judged at it, each
    rate with its prompt-bootstrap interval (``rate_interval``: exact where the share is
    0 or 1). The positives must share no text and no prompt with the calibration half (else a
    ``ValueError``); the check half cannot (``HeldOutSplit``). Counts are texts.
    """
    _refuse_overlap(negatives.calibration, positive, "the positives")
    cal, check = negatives.calibration, negatives.check
    t = threshold_at_fpr(cal.z.tolist(), fpr)
    return HeldOutDetection(
        threshold=t, tpr=flagged_share(positive, t),
        tpr_ci=rate_interval(positive, t, confidence, seed, n_resamples),
        flagged=flagged_per_provider(positive, t), n_pos=len(positive.texts), n_prompts=len(positive.prompts),
        fpr_calibration=flagged_share(cal, t), fpr_check=flagged_share(check, t),
        fpr_check_ci=rate_interval(check, t, confidence, seed, n_resamples),
        n_cal=len(cal.texts), n_check=len(check.texts))


def rate_interval(scores: ScoredTexts, threshold: float, confidence: float = 0.95, seed: int = BOOTSTRAP_SEED,
                  n_resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """The flagged share's interval: the prompt bootstrap, or the exact binomial one where it is degenerate.

    The prompt bootstrap (``prompt_bootstrap_interval``) is the right unit where the
    share is strictly between 0 and 1; where every test or none is flagged each
    resample repeats the point and the bootstrap prints [0, 0] or [1, 1], which says
    nothing, so the Clopper-Pearson interval of the (text, provider) tests is given
    instead (``exact_interval``)."""
    hits = scores.flagged(threshold)
    if len(hits) and 0 < hits.mean() < 1:
        return prompt_bootstrap_interval(scores, threshold, confidence, seed, n_resamples)
    return exact_interval(int(hits.sum()), len(hits), confidence)


@dataclass(frozen=True)
class KeyNullDetection(ThresholdTpr):
    """TPR at a threshold from the null over keys, and that threshold's FPR on fresh check texts."""

    #: Key-null scores the threshold is the (1 - fpr) order statistic of, and the texts they come from.
    n_null: int
    n_null_texts: int
    #: The check half under its own keys: share of (text, provider) tests flagged, Clopper-Pearson interval.
    fpr_check: float
    fpr_check_ci: tuple[float, float]
    n_check: int


def key_null_detection(positive: ScoredTexts, null: ScoredTexts, check: ScoredTexts, fpr: float = FPR_CALIBRATED,
                       confidence: float = 0.95) -> KeyNullDetection:
    """Per-text TPR of ``positive`` at the ``fpr`` threshold of ``null`` (calibration texts under many
    random keys, ``wash.detection.key_null``), and the FPR it gives on ``check`` (other texts, own keys).

    The threshold never sees a check text or a positive (``ValueError`` otherwise).
    The check FPR's interval is Clopper-Pearson over its (text, provider) tests: under the
    null each provider's key is independent of the text, so its verdicts are close to
    independent trials (the key-null's within-text correlation is recorded with it).
    """
    _refuse_overlap(null, positive, "the positives")
    _refuse_overlap(null, check, "the check half")
    t = threshold_at_fpr(null.z.tolist(), fpr)
    hits = check.flagged(t)
    return KeyNullDetection(
        threshold=t, tpr=flagged_share(positive, t), tpr_ci=rate_interval(positive, t, confidence),
        flagged=flagged_per_provider(positive, t), n_pos=len(positive.texts), n_prompts=len(positive.prompts),
        n_null=int(np.isfinite(null.z).sum()), n_null_texts=len(null.texts),
        fpr_check=flagged_share(check, t), fpr_check_ci=exact_interval(int(hits.sum()), len(hits), confidence),
        n_check=len(check.texts))


@dataclass(frozen=True)
class PowerLaw:
    """``value - baseline ~ c * N ** exponent``, fitted over ensemble sizes, with an interval.

    ``kept`` is how many of the ``draws`` resamples stayed above the baseline at every
    N (the others have no logarithm); an interval from few kept draws is not one.
    """

    exponent: float
    low: float
    high: float
    kept: int
    draws: int


def power_law_exponent(ns: Sequence[int], values: Sequence[float], lows: Sequence[float],
                       highs: Sequence[float], baseline: Sequence[float] | float = 0.0,
                       baseline_se: Sequence[float] | float = 0.0, confidence: float = 0.95,
                       draws: int = 10_000, seed: int = BOOTSTRAP_SEED) -> PowerLaw:
    """How a signal above its null shrinks with N: the slope of log(value - baseline) on log N.

    Why this and not a ratio of two cells: the question is a law (1/N for a provider's own
    per-text z and for one diluted anchor, 1/sqrt(N) for the keyless sum of N
    independent watermarks), and the slope over every measured N with its interval
    tells -1 from -0.5 or says that the data cannot. The interval is a parametric
    bootstrap: each cell is redrawn from a normal law whose 95% interval is the cell's
    own (a prompt or context bootstrap upstream, so not assumed independent within a
    cell), each baseline from its mean and standard error, and the least-squares slope
    refitted; percentiles of the refits give the interval.
    """
    n = np.asarray(ns, dtype=float)
    v, lo, hi = (np.asarray(x, dtype=float) for x in (values, lows, highs))
    base = np.broadcast_to(np.asarray(baseline, dtype=float), v.shape)
    base_se = np.broadcast_to(np.asarray(baseline_se, dtype=float), v.shape)
    if len(n) < 2 or len(set(n)) < 2:
        raise ValueError("a power law needs at least two distinct ensemble sizes")
    z = stats.norm.ppf(0.5 + confidence / 2)
    se = (hi - lo) / (2 * z)
    x = np.log(n)

    def slope(y: np.ndarray) -> np.ndarray:
        xc = x - x.mean()
        return ((y - y.mean(axis=-1, keepdims=True)) * xc).sum(axis=-1) / (xc ** 2).sum()

    above = v - base
    point = float(slope(np.log(above))) if (above > 0).all() else math.nan
    rng = np.random.default_rng(seed)
    sample = rng.normal(v, se, size=(draws, len(v))) - rng.normal(base, base_se, size=(draws, len(v)))
    ok = (sample > 0).all(axis=1)
    fits = slope(np.log(sample[ok])) if ok.any() else np.array([])
    alpha = (1 - confidence) / 2
    low, high = (float(np.quantile(fits, q)) for q in (alpha, 1 - alpha)) if len(fits) else (math.nan, math.nan)
    return PowerLaw(point, low, high, int(ok.sum()), draws)
