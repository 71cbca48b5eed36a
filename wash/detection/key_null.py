"""The null over keys: thresholds from thousands of null scores without generating thousands of texts.

Why: a detector's threshold at 5% FPR was the order statistic of a few dozen
unwatermarked texts (36 per model set: the second-largest score), and its check-half
FPR ranged from 0% to 15%. A text that no key watermarked is a null sample for
EVERY key: scoring each held-out unwatermarked text under K random keys (drawn
here, seeded, disjoint from every key an experiment uses) gives K null scores per
text, so 36 texts x 30 keys = 1,080 scores for one threshold.

What it is not: the K scores of one text are not K independent texts. They share
the text's length, repeats and tokenisation, so they are correlated (for a green
list only weakly: distinct keys give distinct lists; for the Edit schemes' alignment
statistic more). A threshold's precision comes from the number of texts as much as
from the number of keys, which is why calibration and check are split by TEXT (by
prompt, ``stats.split_half_by_prompt``), never by key, and why the key-null is
tested against fresh unwatermarked generations scored under their own keys
(``match_fresh``).

The scoring is each scheme's own detector (``WatermarkScheme.detect_under_keys``)
with the provider's scheme and parameters and another key: nothing is
re-implemented. The schemes' per-token scores are seeded per (key, context), so a
green-list or race detector runs once per (text, provider, key). The Edit schemes'
verdict compares the key's alignment with T random keys' alignments; those T
draws do not depend on the key, so the keys of one text share one draw
(``keyseq.align_edit_keys``): each key's z keeps its law, at K + T alignments per
text instead of K (T + 1). Cost is measured in the results' meta.

API (used by ``wash.experiments.tpr`` and by the dilution-aware statistics):

* ``null_keys(count)``: the seeded random keys, disjoint from experiment keys.
* ``keys_per_slot(texts, slots)``: how many keys give ``MIN_NULL_SCORES`` scores.
* ``slot_keys(models, per_slot)``: each provider slot's keys, disjoint between slots on one model.
* ``score_under_keys(provider, text, keys)``: the provider's detector z under each key.
* ``score_cell(...)`` / ``CellCache``: a cell's key-null scores, resumable on disk.
* ``upper_tail_p(scores, null)``: a score's rank p-value in a key-null.
* ``any_flags(pvalues, alpha, method)``: the "any provider flags" decision per text
  with the family-wise FPR held at ``alpha`` across the N detectors (Simes or Holm).
* ``match_fresh(null, fresh)``: two-sample KS and Anderson-Darling p-values.
"""

from __future__ import annotations

import csv
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy import stats

from wash.detection.identify_stats import holm
from wash.watermarks import build_scheme
from wash.watermarks.hashing import derive_seed

#: Fewest key-null scores a threshold is fitted on.
MIN_NULL_SCORES = 1000
#: Every key-null key is at least this: experiment keys (``ensembles.derive_key``) are far below it.
KEY_FLOOR = 2 ** 40
#: Family-wise combinations of N per-provider p-values ("any provider flags").
COMBINE_METHODS = ("simes", "holm")
#: Columns of a key-null scores file (one row per text, provider slot and key).
COLUMNS = ["scheme", "n", "job", "prompt_id", "seed", "provider", "provider_model", "key", "z", "tokens_scored"]


def null_keys(count: int, salt: str = "key-null") -> list[int]:
    """``count`` seeded keys, the same for every call with the same ``salt``; all >= ``KEY_FLOOR``.

    Disjoint from experiment keys by construction (those are ``KEY_BASE`` plus a few
    thousand, ``wash.experiments.ensembles.derive_key``)."""
    return [KEY_FLOOR + derive_seed(salt, i) % (2 ** 62 - KEY_FLOOR) for i in range(count)]


def keys_per_slot(texts: int, slots: int, minimum: int = MIN_NULL_SCORES) -> int:
    """Keys per (text, provider slot) so that ``texts * slots * keys >= minimum``."""
    if texts < 1 or slots < 1:
        raise ValueError(f"a key-null needs at least one text and one provider, got {texts} and {slots}")
    return max(1, math.ceil(minimum / (texts * slots)))


def slot_keys(models: Sequence[str], per_slot: int, salt: str = "key-null") -> list[list[int]]:
    """The keys each provider slot (base model ``models[s]``) is scored under: the j-th slot on a
    model reads block j of ``null_keys``, ``per_slot`` keys long.

    Why: slots on one base model with one scheme differ only in their key, so two of them
    scored under the same keys give the same scores, copied: a cell would count scores it
    does not have. Blocks are disjoint within a model. Slots on different models may read
    the same block: their tokenisers and vocabularies differ, so one key gives them unrelated
    lists and draws. The first slot on each model reads block 0, ``null_keys(per_slot)``."""
    if per_slot < 1:
        raise ValueError(f"a slot needs at least one key, got {per_slot}")
    seen: Counter[str] = Counter()
    blocks = []
    for model in models:
        blocks.append(seen[model])
        seen[model] += 1
    keys = null_keys(per_slot * (max(blocks, default=0) + 1), salt)
    return [keys[j * per_slot:(j + 1) * per_slot] for j in blocks]


def duplicate_scores(frame) -> int:
    """How many of a cell's key-null rows repeat an earlier (text, base model, key): copies, not scores."""
    return int(frame.duplicated(["job", "provider_model", "key"]).sum())


def score_under_keys(provider, text: str, keys: Sequence[int]) -> list[tuple[float, int]]:
    """(z, tokens scored) of ``provider``'s own detector on ``text`` under each of ``keys``.

    The text is tokenised by the provider's tokenizer once; the scheme is rebuilt with
    the provider's name and parameters and each key (``build_scheme``), so the
    detector, its repeat rule and its statistic are the provider's own
    (``detect_under_keys``: the Edit schemes' keys share their random-key null)."""
    ids = provider.scheme_ids(provider.member.encode(text))
    spec = provider.spec
    schemes = [build_scheme(spec.scheme, int(key), provider.scheme.vocab_size, dict(spec.params)) for key in keys]
    if not schemes:
        return []
    return [(float(d.z), int(d.tokens_scored)) for d in schemes[0].detect_under_keys(schemes, ids)]


@dataclass(frozen=True)
class NullText:
    """One held-out unwatermarked text of a cell: its job id, prompt and generation seed."""

    job: str
    prompt_id: str
    seed: int
    text: str


class CellCache:
    """A cell's key-null scores on disk, appended one (text, provider) at a time: resumable.

    The file is a CSV with ``COLUMNS``; ``done`` says which (job, provider) pairs are
    complete, so an interrupted scoring run goes on where it stopped; ``keep_keys`` drops the
    rows of keys a slot no longer reads, so a changed key assignment re-scores only those."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def rows(self) -> list[dict]:
        if not self.path.exists():
            return []
        with self.path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))

    def done(self) -> set[tuple[str, int]]:
        return {(r["job"], int(r["provider"])) for r in self.rows()}

    def keep_keys(self, keys: Sequence[Sequence[int]]) -> int:
        """Keep only the rows whose key is among its slot's ``keys[slot]``; returns how many were dropped.

        A (text, slot) pair with any row dropped loses all its rows, so it is scored again whole."""
        rows = self.rows()
        allowed = [set(int(k) for k in ks) for ks in keys]
        stale = {(r["job"], int(r["provider"])) for r in rows
                 if int(r["provider"]) >= len(allowed) or int(r["key"]) not in allowed[int(r["provider"])]}
        kept = [r for r in rows if (r["job"], int(r["provider"])) not in stale]
        if len(kept) < len(rows):
            with self.path.open("w", newline="", encoding="utf-8") as fh:
                w = csv.DictWriter(fh, fieldnames=COLUMNS)
                w.writeheader()
                w.writerows(kept)
        return len(rows) - len(kept)

    def append(self, rows: Iterable[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        with self.path.open("a", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS)
            if new:
                w.writeheader()
            w.writerows(rows)


def score_cell(scheme: str, n: int, providers: Sequence, texts: Sequence[NullText], keys: Sequence[Sequence[int]],
               cache: CellCache, progress: Callable[[str], None] | None = None) -> float:
    """Score every text of a cell with each of the cell's provider slots under that slot's ``keys[slot]``
    (``slot_keys``); returns seconds.

    ``providers`` are the cell's detectors (their keys are ignored: each slot is
    re-keyed with every one of its keys). Pairs already in ``cache`` under these keys are skipped."""
    if len(keys) != len(providers):
        raise ValueError(f"{len(providers)} provider slots but {len(keys)} key lists")
    cache.keep_keys(keys)
    done = cache.done()
    start = time.perf_counter()
    for t in texts:
        for slot, provider in enumerate(providers):
            if (t.job, slot) in done:
                continue
            scored = score_under_keys(provider, t.text, keys[slot])
            cache.append({"scheme": scheme, "n": n, "job": t.job, "prompt_id": t.prompt_id, "seed": t.seed,
                          "provider": slot, "provider_model": provider.model, "key": k, "z": z,
                          "tokens_scored": m} for k, (z, m) in zip(keys[slot], scored))
        if progress:
            progress(f"{scheme} N={n}: {t.job[:60]} done ({time.perf_counter() - start:.0f} s)")
    return time.perf_counter() - start


def upper_tail_p(scores: Sequence[float], null: Sequence[float]) -> np.ndarray:
    """Each score's rank p-value in ``null``: (1 + #{null >= score}) / (1 + m).

    Valid (P(p <= a) <= a) when the score is exchangeable with the null draws; the
    smallest value is 1 / (1 + m). A NaN score gets p = 1 (never flagged)."""
    x = np.sort(np.asarray(null, dtype=float))
    x = x[~np.isnan(x)]
    s = np.asarray(scores, dtype=float)
    above = x.size - np.searchsorted(x, np.nan_to_num(s, nan=np.inf), side="left")
    p = (1.0 + above) / (1.0 + x.size)
    return np.where(np.isnan(s), 1.0, p)


def any_flags(pvalues: np.ndarray, alpha: float = 0.05, method: str = "simes") -> np.ndarray:
    """Per text (row), whether the "any of the N providers flags" test rejects at family-wise level ``alpha``.

    ``pvalues`` is texts x N (NaN: that provider did not score the text, left out).
    ``simes``: reject when some ordered p_(i) <= i * alpha / N, i.e. the smallest
    Benjamini-Hochberg adjusted p (scipy's ``false_discovery_control``) is <= alpha;
    exact under independent p-values, valid under positive dependence. ``holm``:
    reject when the smallest Holm-adjusted p is <= alpha (the same as Bonferroni's
    min p <= alpha / N for this global question); valid under any dependence.
    """
    p = np.atleast_2d(np.asarray(pvalues, dtype=float))
    if method not in COMBINE_METHODS:
        raise ValueError(f"unknown combination '{method}' (accepted: {', '.join(COMBINE_METHODS)})")
    if p.size and np.isfinite(p).all():  # every provider scored every text: one vectorised call
        adjusted = (stats.false_discovery_control(p, axis=1, method="bh") if method == "simes"
                    else np.minimum(1.0, p.shape[1] * p))  # Holm's smallest adjusted p is N * min p
        return adjusted.min(axis=1) <= alpha
    out = np.zeros(p.shape[0], dtype=bool)
    for i, row in enumerate(p):
        row = row[np.isfinite(row)]
        if row.size == 0:
            continue
        adjusted = stats.false_discovery_control(row, method="bh") if method == "simes" else holm(row)
        out[i] = bool(np.min(adjusted) <= alpha)
    return out


def any_provider_flags(text: Sequence[str], provider: Sequence[int], z: Sequence[float],
                       nulls: dict[int, Sequence[float]], alpha: float = 0.05,
                       method: str = "simes") -> dict[str, bool]:
    """The "any provider flags" decision per text, from (text, provider, z) tests.

    Each test's p-value is its z's upper-tail rank in ``nulls[provider]`` (that
    provider's key-null: its model's detector under random keys, ``upper_tail_p``);
    the text's N p-values are combined by ``any_flags``, so the chance that an
    unwatermarked text is flagged by any of its N detectors stays at ``alpha``."""
    text = np.asarray(text).astype(str)
    provider = np.asarray(provider, dtype=int)
    z = np.asarray(z, dtype=float)
    names, row = np.unique(text, return_inverse=True)
    slots = sorted(set(provider.tolist()))
    col = np.searchsorted(np.asarray(slots), provider)
    p = np.full((names.size, len(slots)), np.nan)
    for k in slots:
        at = provider == k
        p[row[at], col[at]] = upper_tail_p(z[at], nulls[k])
    return dict(zip(names.tolist(), any_flags(p, alpha, method).tolist()))


def within_text_correlation(text: Sequence[str], z: Sequence[float]) -> float:
    """Share of the key-null's variance that is between texts (one-way intraclass correlation).

    0: a text's scores under different keys are as independent as scores of different
    texts; 1: the text decides its score whatever the key. Says how much the many
    keys add beyond the number of texts."""
    frame_text = np.asarray(text).astype(str)
    v = np.asarray(z, dtype=float)
    names, idx = np.unique(frame_text, return_inverse=True)
    k = np.bincount(idx)
    if names.size < 2 or (k < 2).any():
        return float("nan")
    means = np.bincount(idx, weights=v) / k
    within = ((v - means[idx]) ** 2).sum() / (v.size - names.size)
    between = (k * (means - v.mean()) ** 2).sum() / (names.size - 1)
    k0 = (v.size - (k ** 2).sum() / v.size) / (names.size - 1)
    sb = max((between - within) / k0, 0.0)
    return float(sb / (sb + within)) if sb + within > 0 else float("nan")


@dataclass(frozen=True)
class NullMatch:
    """Does the key-null look like fresh unwatermarked texts scored under their own keys?"""

    ks_p: float
    ad_p: float
    n_null: int
    n_fresh: int


def match_fresh(null: Sequence[float], fresh: Sequence[float]) -> NullMatch:
    """Two-sample Kolmogorov-Smirnov and Anderson-Darling p-values of key-null against fresh scores.

    Both tests treat every score as independent; the key-null's scores of one text
    are not (see the module docstring), so a small p is stronger evidence against the
    key-null when it comes from many texts. scipy's Anderson-Darling p is clipped to
    [0.001, 0.25]."""
    a = np.asarray(null, dtype=float)
    b = np.asarray(fresh, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    ks = stats.ks_2samp(a, b)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ad = stats.anderson_ksamp([a, b])
    return NullMatch(float(ks.pvalue), float(ad.pvalue), int(a.size), int(b.size))
