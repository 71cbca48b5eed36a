"""The calibrated identification statistics: sparse counts, the context bootstrap, the
permutation p against the null's runs and Holm's adjustment over the systems sharing it.

The examples are small enough to check by hand; the p-value's law (uniform for a
system drawn like its null, its floor for one above every null run) and the
family-wise error of the Holm-adjusted verdict are checked on simulated run scores
with fixed seeds and binomial tolerances, and again on the tiny random models around
real tokenizers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from wash.detection.identify_stats import (PERMUTATION_RESAMPLES, TokenCounts, context_bootstrap, holm, holm_by,
                                           identified, matrix_score, p_floor, pair_matrix, pair_score,
                                           permutation_exact, permutation_p, ranks, resampled_score)

pytestmark = pytest.mark.usefixtures("single_thread")  # small tiny-model forwards: one torch thread


def dense_pair_score(p1c1, p1c2, p2c1, p2c2, top=50):
    """The statistic written directly on dense arrays, as Water-Probe's paper states it."""
    def tops(c):
        seen = np.flatnonzero(c > 0)
        return set(seen[np.argsort(-c[seen], kind="stable")[:top]].tolist())

    shared = sorted((tops(p1c1) | tops(p1c2)) & (tops(p2c1) | tops(p2c2)))
    if not shared:
        return None
    d1 = np.sign(ranks(p1c1)[shared] - ranks(p1c2)[shared]).astype(float)
    d2 = np.sign(ranks(p2c1)[shared] - ranks(p2c2)[shared]).astype(float)
    n1, n2 = np.linalg.norm(d1), np.linalg.norm(d2)
    if n1 == 0 and n2 == 0:
        return 1.0
    if n1 == 0 or n2 == 0:
        return 0.0
    return float(d1 @ d2 / (n1 * n2))


def test_sparse_counts_score_every_pair_as_the_dense_definition():
    rng = np.random.default_rng(0)
    for trial in range(40):
        size = int(rng.integers(5, 400))
        arrays = [np.where(rng.random(size) < 0.3, rng.integers(1, 6, size), 0) for _ in range(4)]
        top = int(rng.integers(1, 60))
        expected = dense_pair_score(*arrays, top=top)
        got = pair_score(*(TokenCounts.from_dense(a) for a in arrays), top=top)
        assert (got is None) == (expected is None)
        if got is not None:
            assert got == pytest.approx(expected), trial


def test_token_counts_rank_like_the_dense_ranks_and_merge_by_adding():
    dense = np.array([0, 3, 0, 1, 3, 7])
    counts = TokenCounts.from_dense(dense)
    assert counts.rank == {i: int(r) for i, r in enumerate(ranks(dense)) if dense[i] > 0}
    merged = TokenCounts.merge([TokenCounts.from_tokens(np.array([1, 1, 5]), 6),
                                TokenCounts.from_tokens(np.array([5, 3]), 6)], 6)
    assert merged.dense().tolist() == [0, 2, 0, 1, 0, 2] and merged.total == 5


def test_pair_matrix_is_symmetric_and_skips_missing_contexts():
    a = np.array([5, 3, 0, 1])
    p1 = {"x": a, "y": np.array([2, 4, 0, 1]), "z": np.array([1, 1, 1, 1])}
    p2 = {"x": np.array([6, 1, 2, 0]), "y": np.array([1, 5, 2, 0])}
    m = pair_matrix(p1, p2, ["x", "y", "z"], top=2)
    assert m[0, 1] == m[1, 0] == pytest.approx(1.0)
    assert np.isnan(m[2]).all() and np.isnan(np.diag(m)).all()
    assert matrix_score(m) == (pytest.approx(1.0), 1)


def test_a_resample_pairs_drawn_contexts_but_never_a_context_with_its_own_copy():
    m = np.array([[np.nan, 0.2, 0.8], [0.2, np.nan, 0.5], [0.8, 0.5, np.nan]])
    assert resampled_score([m], np.array([1, 1, 1])) == pytest.approx((0.2 + 0.8 + 0.5) / 3)
    # contexts 0, 0, 1: the pairs (0a, 1) and (0b, 1); (0a, 0b) is not a pair
    assert resampled_score([m], np.array([2, 1, 0])) == pytest.approx(0.2)
    # 0, 0, 2, 1: (0,1) x2, (0,2) x2, (1,2) x1 over 5 pairs
    assert resampled_score([m], np.array([2, 1, 1])) == pytest.approx((2 * 0.2 + 2 * 0.8 + 0.5) / 5)
    # runs are averaged after each run's own mean
    assert resampled_score([m, np.full((3, 3), 1.0)], np.array([1, 1, 1])) == pytest.approx((0.5 + 1.0) / 2)


def test_the_bootstrap_resamples_contexts_not_pairs():
    """Pair scores share their contexts: with a strong per-context effect (s_ij = a_i + a_j),
    resampling contexts gives a wider interval than treating the pairs as independent."""
    rng = np.random.default_rng(1)
    k = 40
    effect = rng.normal(0, 0.2, k)
    m = effect[:, None] + effect[None, :] + rng.normal(0, 0.05, (k, k))
    m = (m + m.T) / 2
    np.fill_diagonal(m, np.nan)
    s, low, high = context_bootstrap([m], seed=0)
    assert s == pytest.approx(np.nanmean(m)) and low < s < high
    pairs = m[np.triu_indices(k, 1)]
    naive = [rng.choice(pairs, pairs.size).mean() for _ in range(2000)]
    naive_width = np.percentile(naive, 97.5) - np.percentile(naive, 2.5)
    assert high - low > 3 * naive_width


def test_a_deterministic_system_has_a_point_interval():
    m = np.ones((5, 5))
    np.fill_diagonal(m, np.nan)
    assert context_bootstrap([m, m, m]) == (1.0, 1.0, 1.0)


def test_permutation_p_by_hand_and_finite_for_a_deterministic_system():
    """Two runs against three: C(5, 2) = 10 splits, every one enumerated."""
    null = [0.1, 0.4, 0.5]
    # the observed pair sums to 0.5; the pairs of {0.1, ..., 0.5} summing to 0.5 or more: 8 of 10
    assert permutation_p([0.3, 0.2], null) == pytest.approx(8 / 10)
    assert permutation_p([0.9, 0.9], null) == pytest.approx(1 / 10)  # above every null run: the floor, finite
    assert permutation_p([0.0, 0.05], null) == pytest.approx(1.0)
    assert permutation_p([0.9, 0.9, 0.0], null, runs=2) == pytest.approx(1 / 10)  # the first ``runs`` runs
    assert p_floor(2, 3) == pytest.approx(1 / 10) and permutation_exact(2, 3)
    assert identified(1 / 10, alpha=0.2) and not identified(8 / 10) and not identified(math.nan)


def test_the_floor_is_the_exact_count_or_the_monte_carlo_resamples():
    """R = 3 against 50 runs is exact (23,426 splits); R = 10 against 50 is a Monte Carlo whose
    floor 1 / (resamples + 1) a system above every null run reaches exactly, seed for seed."""
    rng = np.random.default_rng(0)
    null = rng.normal(0.1, 0.02, 50)
    high = rng.normal(0.4, 0.01, 10)
    assert permutation_exact(3, 50) and not permutation_exact(10, 50)
    assert p_floor(3, 50) == pytest.approx(1 / math.comb(53, 3))
    assert p_floor(10, 50) == pytest.approx(1 / (PERMUTATION_RESAMPLES + 1))
    assert permutation_p(high, null, runs=3) == pytest.approx(p_floor(3, 50))
    assert permutation_p(high, null) == pytest.approx(p_floor(10, 50))
    assert permutation_p(high, null, resamples=999) == pytest.approx(1 / 1000)
    middle = rng.normal(0.11, 0.02, 10)
    assert permutation_p(middle, null, resamples=999, seed=3) == permutation_p(middle, null, resamples=999, seed=3)


def test_permutation_p_of_a_system_drawn_like_its_null_is_uniform():
    """300 seeds of 10 runs against 50 from one law: p's uniform (KS), 5% of them below 0.05
    within a binomial 99.9% band, and each p at least its floor."""
    from scipy import stats

    ps = []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        ps.append(permutation_p(rng.normal(0.1, 0.02, 10), rng.normal(0.1, 0.02, 50), resamples=999, seed=seed))
    ps = np.asarray(ps)
    assert (ps >= 1 / 1000).all() and (ps <= 1).all()
    assert stats.kstest(ps, "uniform").pvalue > 0.01
    low, high = stats.binom.ppf([0.0005, 0.9995], 300, 0.05)
    assert low <= np.count_nonzero(ps < 0.05) <= high, np.count_nonzero(ps < 0.05)


def test_a_shifted_system_gets_a_small_p():
    """A shift of one null sd over 10 runs against 50 (power about 0.9 at 5%): caught in at
    least 30 of 40 seeds."""
    caught = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        caught += permutation_p(rng.normal(0.12, 0.02, 10), rng.normal(0.1, 0.02, 50), resamples=999,
                                seed=seed) < 0.05
    assert caught >= 30, caught


def test_a_null_without_scored_runs_gives_no_p():
    assert math.isnan(permutation_p([0.3, 0.2, 0.4], [math.nan] * 50))
    assert math.isnan(permutation_p([math.nan, 0.2, 0.4], [0.1] * 50))
    assert math.isnan(permutation_p([0.3, 0.2], [0.1] * 50, runs=3))  # fewer runs than asked
    assert math.isnan(p_floor(3, 2))


# -- Holm over the systems that share a null -----------------------------------------------
def test_holm_by_hand():
    """Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max 0.06."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.02]) == pytest.approx([0.02])  # one test: no adjustment
    adjusted = holm([0.01, math.nan, 0.04])  # a NaN is no test: m = 2
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.04)
    assert holm([]).size == 0


def test_holm_never_lowers_a_p_and_keeps_the_order():
    rng = np.random.default_rng(7)
    for _ in range(50):
        p = rng.uniform(0, 0.2, rng.integers(1, 12))
        adjusted = holm(p)
        order = np.argsort(p, kind="stable")
        assert (adjusted >= p - 1e-15).all() and (adjusted <= 1).all()
        assert (np.diff(adjusted[order]) >= -1e-15).all()


def test_holm_by_adjusts_each_family_alone():
    adjusted = holm_by([0.01, 0.04, 0.01, 0.03], ["a", "b", "a", "b"])
    assert adjusted == pytest.approx([0.02, 0.06, 0.02, 0.06])


def test_the_holm_verdict_keeps_the_false_identifications_at_5_percent():
    """Seven unwatermarked systems of 10 runs against one shared null of 50 (as a table's
    line-up), 400 seeds: the chance that any is called identified stays within a binomial
    99.9% band of 5% or below; the raw p's, uncorrected, call one far more often."""
    from scipy import stats

    trials, systems = 400, 7
    any_holm = any_raw = 0
    for seed in range(trials):
        rng = np.random.default_rng(1000 + seed)
        null = rng.normal(0.1, 0.02, 50)
        ps = [permutation_p(rng.normal(0.1, 0.02, 10), null, resamples=199, seed=seed) for _ in range(systems)]
        any_holm += any(identified(p) for p in holm(ps))
        any_raw += any(identified(p) for p in ps)
    assert any_holm <= stats.binom.ppf(0.999, trials, 0.05), any_holm
    assert any_raw > stats.binom.ppf(0.999, trials, 0.05), any_raw


# -- on the tiny models ------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_null(tiny_smollm2):
    from wash.engine.config import ProviderSpec
    from wash.detection.identification import Probe, identify

    spec = [ProviderSpec.parse("tiny-smollm2:kgw:1:delta=4")]
    return spec, identify(spec, "unwatermarked", Probe(contexts=12, samples=100, runs=40, seed=1000,
                                                       interval=False))


def test_an_unwatermarked_system_is_not_identified_against_its_null(tiny_null):
    """Its p over several seeds looks uniform: a loose bound (8 seeds, fixed)."""
    from scipy import stats

    from wash.detection.identification import Probe, identify

    spec, null = tiny_null
    ps = [permutation_p(identify(spec, "unwatermarked", Probe(contexts=12, samples=100, runs=3, seed=seed,
                                                               interval=False)).scores, null.scores)
          for seed in range(8)]
    assert sum(p < 0.05 for p in ps) <= 2, ps
    assert 0.2 < float(np.mean(ps)) < 0.8, ps
    assert stats.kstest(ps, "uniform").pvalue > 0.01, ps


def test_a_point_mass_system_gets_a_small_finite_p(tiny_null):
    from wash.engine.config import ProviderSpec
    from wash.detection.identification import Probe, identify

    _spec, null = tiny_null
    aar = identify([ProviderSpec.parse("tiny-smollm2:aar:1")], "single", Probe(contexts=12, samples=100, runs=3))
    assert aar.z == math.inf and aar.s == aar.s_low == pytest.approx(aar.s_high) == pytest.approx(1.0)
    p = permutation_p(aar.scores, null.scores)  # 3 runs against 40, exact: the floor, 1 / C(43, 3)
    assert p == pytest.approx(p_floor(3, 40)) and identified(p)


def test_rows_kept_on_disk_serve_a_later_process_bit_for_bit(tiny_smollm2, tmp_path):
    """A null of many runs walks a tree too large for memory; rows on disk are read back exactly."""
    from wash.engine.config import ProviderSpec
    from wash.detection.identification import SERVED_ROWS, Probe, identify

    spec = [ProviderSpec.parse("tiny-smollm2:kgw:1")]
    probe = Probe(version="v2", samples=60, runs=2, min_count=1, seed=4)
    SERVED_ROWS.clear()
    SERVED_ROWS.use_directory(tmp_path)
    try:
        first = identify(spec, "single", probe)
        assert first.forwards > 0 and len(list(tmp_path.rglob("*.pt"))) == first.forwards
        SERVED_ROWS.clear()  # as a new process: memory empty, the directory kept
        again = identify(spec, "single", probe)
        assert again.forwards == 0 and again.scores == first.scores
    finally:
        SERVED_ROWS.use_directory(None)
        SERVED_ROWS.clear()


def test_the_summary_reads_null_rows_back_from_csv(tmp_path):
    """pandas reads a CSV cell "null" as NaN: the summary takes each row's mode from its job key."""
    import json

    import pandas as pd

    from wash.experiments import identify as experiment
    from wash.experiments.table import read_rows

    def row(mode, scores):
        key = {"mode": mode, "n": 3, "samples": 100, "seed": 0}
        return {"job": json.dumps(key), **key, "scheme": "kgw" if mode != "null" else "none", "aggregate": "mean",
                "scores": " ".join(map(str, scores)), "z": 1.0, "band": "none", "s": 0.5, "s_low": 0.4,
                "s_high": 0.6, "mean_score": 0.5, "sd_score": 0.1, "samples_per_context": 30.0, "fit": 0.5,
                "contexts_scored": 10}

    path = tmp_path / "identify_runs.csv"
    pd.DataFrame([row("null", [0.1, 0.2, 0.15, 0.12, 0.18]), row("wash", [0.5, 0.6, 0.55])]).to_csv(path, index=False)
    summary = experiment.summarize(read_rows(path), experiment.Config.from_preset("tiny"))
    assert list(summary["mode"]) == ["wash"] and summary["null_runs"].iloc[0] == 5
    assert summary["p"].iloc[0] == pytest.approx(1 / 56)  # above every null run: 1 of C(8, 3) = 56 splits
    assert summary["p_floor"].iloc[0] == pytest.approx(1 / 56)
    assert summary["holm_tests"].iloc[0] == 1 and summary["p_holm"].iloc[0] == summary["p"].iloc[0]


def test_the_summary_adjusts_by_holm_within_each_shared_null(tmp_path):
    """Two systems share the N = 3 null, one is alone at N = 2: Holm doubles the smaller p of the
    shared pair and leaves the lone system's p as it is."""
    import json

    import pandas as pd

    from wash.experiments import identify as experiment
    from wash.experiments.table import read_rows

    def row(mode, n, scheme, scores):
        key = {"mode": mode, "n": n, "samples": 100, "seed": 0, "scheme": scheme}
        return {"job": json.dumps(key), **key, "aggregate": "mean", "scores": " ".join(map(str, scores)),
                "z": 1.0, "band": "none", "s": 0.5, "s_low": 0.4, "s_high": 0.6, "mean_score": 0.5,
                "sd_score": 0.1, "samples_per_context": 30.0, "fit": 0.5, "contexts_scored": 10}

    null = [0.1, 0.2, 0.15, 0.12, 0.18]
    path = tmp_path / "identify_runs.csv"
    pd.DataFrame([row("null", 3, "none", null), row("null", 2, "none", null),
                  row("wash", 3, "kgw", [0.5, 0.6, 0.55]), row("wash", 3, "aar", [0.16, 0.17, 0.14]),
                  row("wash", 2, "kgw", [0.5, 0.6, 0.55])]).to_csv(path, index=False)
    s = experiment.summarize(read_rows(path), experiment.Config.from_preset("tiny")).set_index(["n", "scheme"])
    assert list(s["holm_tests"]) == [2, 2, 1]
    assert s.loc[(3, "kgw"), "p_holm"] == pytest.approx(2 / 56) and s.loc[(2, "kgw"), "p_holm"] == pytest.approx(1 / 56)
    assert s.loc[(3, "aar"), "p"] > 2 / 56  # the larger p of two: times 1, Holm leaves it
    assert s.loc[(3, "aar"), "p_holm"] == pytest.approx(s.loc[(3, "aar"), "p"])
    assert list(s["identified"]) == [True, False, True]


def test_a_results_table_keeps_words_pandas_would_call_missing(tmp_path):
    """A resumed run re-reads its CSV and writes it back: a null's mode "null" (and a
    scheme "None") must survive the round trip, an empty cell stays missing."""
    import math

    from wash.experiments.jobs import Job
    from wash.experiments.table import ResultTable

    path = tmp_path / "identify_runs.csv"
    table = ResultTable(path)
    table.add(Job({"mode": "null", "n": 3}, print, ()), [{"scheme": "None", "z": math.nan}])
    again = ResultTable(path)
    again.add(Job({"mode": "wash", "n": 3}, print, ()), [{"scheme": "kgw", "z": 1.5}])
    rows = ResultTable(path).frame
    assert list(rows["mode"]) == ["null", "wash"] and list(rows["scheme"]) == ["None", "kgw"]
    assert math.isnan(rows["z"].iloc[0]) and rows["z"].iloc[1] == 1.5
