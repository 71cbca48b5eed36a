"""The null over keys (``wash.detection.key_null``): keys, rank p-values, the "any provider" decision,
and the key-null against fresh unwatermarked generations on the committed texts.

Each check can fail: the combination's FPR is counted on 20,000 simulated texts against a
binomial tolerance (a combination that rejects on min p <= alpha, without the N-fold
correction, flags 23% and fails); the key-null test scores real committed negatives with
the real detector under 20 random keys and compares them with the check half's own-key
scores (a detector with a broken null, e.g. a shifted z, fails the KS test).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from wash.detection import key_null
from wash.experiments.ensembles import KEY_BASE

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "results" / "tpr-paper"


def test_null_keys_are_seeded_and_disjoint_from_experiment_keys() -> None:
    keys = key_null.null_keys(50)
    assert keys == key_null.null_keys(50) and len(set(keys)) == 50
    assert min(keys) >= key_null.KEY_FLOOR > KEY_BASE + 10 ** 6
    assert key_null.keys_per_slot(36, 1) == 28 and 36 * 28 >= key_null.MIN_NULL_SCORES
    assert key_null.keys_per_slot(36, 5) * 36 * 5 >= key_null.MIN_NULL_SCORES


def test_upper_tail_p_is_the_rank_in_the_null() -> None:
    null = [0.0, 1.0, 2.0, 3.0]
    p = key_null.upper_tail_p([-1.0, 1.0, 2.5, 9.0, float("nan")], null)
    assert p.tolist() == [1.0, (1 + 3) / 5, (1 + 1) / 5, 1 / 5, 1.0]


@pytest.mark.parametrize("method", key_null.COMBINE_METHODS)
def test_any_provider_decision_holds_its_family_wise_fpr(method: str) -> None:
    rng = np.random.default_rng(41)
    texts, n, alpha = 20_000, 5, 0.05
    flagged = key_null.any_flags(rng.uniform(size=(texts, n)), alpha, method).mean()
    # Simes is exact under independence; Holm (Bonferroni for "any") is conservative, 1-(1-a/N)^N
    expected = alpha if method == "simes" else 1 - (1 - alpha / n) ** n
    tol = 3 * np.sqrt(expected * (1 - expected) / texts)
    assert abs(flagged - expected) < tol
    # without any correction the decision would flag 1 - 0.95^5 = 23% of texts
    assert flagged < 1 - (1 - alpha) ** n - 0.1


def test_any_provider_decision_on_rank_p_values_of_finite_nulls() -> None:
    # p-values from 1,080-score key-nulls (discrete, as in the tables) keep the level on
    # average over null draws: 50 nulls of 1,080 scores, 400 texts judged against each.
    # One fixed null does not: its own tail decides, e.g. seed 7's flags 6.6% of 20,000
    # texts, which is why every threshold reports its check-half FPR with an interval.
    rng = np.random.default_rng(7)
    rates = []
    for _ in range(50):
        null = rng.normal(size=1080)
        z = rng.normal(size=(400, 3))
        p = key_null.upper_tail_p(z.ravel(), null).reshape(z.shape)
        rates.append(key_null.any_flags(p, 0.05, "simes").mean())
    assert abs(np.mean(rates) - 0.05) < 3 * np.sqrt(0.05 * 0.95 / 20_000) + 0.003
    assert np.std(rates) > np.sqrt(0.05 * 0.95 / 400)  # the null's own draw adds spread


def test_slots_on_one_model_read_disjoint_keys_and_the_first_keeps_block_zero() -> None:
    models = ["smollm2", "gemma3", "smollm2", "gemma3", "smollm2"]  # the paper line-up at N = 5
    keys = key_null.slot_keys(models, 6)
    assert [len(k) for k in keys] == [6] * 5
    assert keys[0] == keys[1] == key_null.null_keys(6)  # the first slot on each model: block 0
    for model in set(models):
        mine = [set(k) for k, m in zip(keys, models) if m == model]
        assert sum(len(k) for k in mine) == len(set().union(*mine)), model  # no key read twice on a model
    assert keys[2] == key_null.null_keys(12)[6:] and keys[4] == key_null.null_keys(18)[12:]


def test_a_cell_of_two_slots_on_one_model_holds_distinct_scores(tmp_path) -> None:
    """Two KGW slots on the tiny SmolLM2 score one text: under the old shared keys their rows were
    copies (``duplicate_scores`` counts them); under ``slot_keys`` every row is a score of its own.
    A cache scored under the shared keys keeps slot 0's rows and re-scores slot 1's alone."""
    from wash.engine.config import ProviderSpec
    from wash.experiments.scoring import watermarked_providers

    providers = watermarked_providers([ProviderSpec.parse("tiny-smollm2:kgw:1"),
                                       ProviderSpec.parse("tiny-smollm2:kgw:2")])
    text = [key_null.NullText("job-a", "p0", 0, "The old lighthouse keeper climbed the stairs one last "
                                                 "time, and the storm rolled in over the harbour.")]
    shared = key_null.null_keys(4)
    cache = key_null.CellCache(tmp_path / "cell.csv")
    key_null.score_cell("kgw", 2, providers, text, [shared, shared], cache)
    old = pd.DataFrame(cache.rows())
    assert key_null.duplicate_scores(old) == 4  # slot 1 copied slot 0, score for score
    assert (old[old["provider"] == "0"]["z"].to_numpy() == old[old["provider"] == "1"]["z"].to_numpy()).all()

    own = key_null.slot_keys([p.model for p in providers], 4)
    assert cache.keep_keys(own) == 4 and cache.done() == {("job-a", 0)}
    key_null.score_cell("kgw", 2, providers, text, own, cache)
    new = pd.DataFrame(cache.rows())
    assert len(new) == 8 and key_null.duplicate_scores(new) == 0
    assert new[new["provider"] == "0"]["z"].tolist() == old[old["provider"] == "0"]["z"].tolist()


def test_key_null_matches_fresh_unwatermarked_texts_on_committed_negatives() -> None:
    """Unigram on SmolLM2 (N = 1): 18 calibration texts x 20 random keys against the check
    half's 34 texts scored under their own keys (the committed z)."""
    from wash.engine.config import ProviderSpec
    from wash.experiments.key_null_scores import folder_config
    from wash.experiments.scoring import watermarked_providers

    module, config = folder_config(PAPER)
    rows = pd.read_csv(PAPER / "tpr_runs.csv", usecols=["scheme", "n", "prompt_id", "providers", "z",
                                                        "text", "role"])
    neg = rows[rows["role"].eq("negative") & rows["scheme"].eq("unigram") & rows["n"].eq(1)]
    cal, check = module.negative_split(config)
    texts = neg[neg["prompt_id"].isin(cal)].drop_duplicates("text")["text"].tolist()[::2]
    fresh = neg[neg["prompt_id"].isin(check)]["z"].to_numpy()
    provider = watermarked_providers([ProviderSpec.parse(neg["providers"].iloc[0])])[0]
    keys = key_null.null_keys(20)
    null = [z for t in texts for z, _ in key_null.score_under_keys(provider, t, keys)]
    assert len(null) == 18 * 20 and len(fresh) == 34
    match = key_null.match_fresh(null, fresh)
    assert match.ks_p > 0.01 and match.ad_p > 0.01
    # the same test tells a shifted null apart: it is not blind
    assert key_null.match_fresh(np.asarray(null) + 1.0, fresh).ks_p < 0.01
    assert stats.ks_2samp(null, fresh).pvalue == pytest.approx(match.ks_p)


def test_key_null_threshold_is_checked_on_other_texts_with_an_exact_interval() -> None:
    from wash.experiments.stats import ScoredTexts, exact_interval, key_null_detection

    rng = np.random.default_rng(3)

    def texts(prefix: str, count: int, keys: int, shift: float = 0.0) -> ScoredTexts:
        ids = np.repeat([f"{prefix}{i}" for i in range(count)], keys)
        return ScoredTexts(rng.normal(size=count * keys) + shift, ids, ids, np.zeros(count * keys, dtype=int))

    null, check, positive = texts("cal", 36, 30), texts("check", 34, 1, -9.0), texts("pos", 30, 1, 5.0)
    res = key_null_detection(positive, null, check)
    assert res.n_null == 1080 and res.n_null_texts == 36
    assert res.fpr_check == 0.0 and res.fpr_check_ci == pytest.approx((0.0, 0.1028), abs=1e-4)  # 0 of 34, not [0, 0]
    assert res.tpr == 1.0 and res.tpr_ci[0] == pytest.approx(exact_interval(30, 30)[0]) and res.tpr_ci[0] < 0.9
    with pytest.raises(ValueError):
        key_null_detection(positive, null, texts("cal", 5, 1))  # a check text the threshold saw


EDIT_CASES = {"exp-edit": ("exp-edit", {}), "its-edit": ("its-edit", {}),
              "exp-edit:detector=release": ("exp-edit", {"detector": "release"})}


@pytest.mark.parametrize("case", list(EDIT_CASES))
def test_edit_keys_share_one_null_draw_and_keep_their_own_statistic(case: str) -> None:
    """The Edit schemes' key-null shares one draw of T random keys per text: the first key's
    verdict is its detector's own, every key's alignment is its own, and only the null is shared."""
    from wash.watermarks import build_scheme
    from wash.watermarks.keyseq import align_edit, align_edit_keys

    name, extra = EDIT_CASES[case]
    params = {"n_permutations": 20, "keylen": 60, **extra}
    vocab = 500
    ids = np.random.default_rng(1).integers(0, vocab, size=40).tolist()
    schemes = [build_scheme(name, k, vocab, params) for k in key_null.null_keys(4)]
    shared = schemes[0].detect_under_keys(schemes, ids)
    assert shared[0] == schemes[0].detect(ids)
    own = [align_edit(s, ids) for s in schemes]
    pooled = align_edit_keys(schemes, ids)
    for a, b in zip(own, pooled):
        assert (a.obs, a.offset, a.per_token) == (b.obs, b.offset, b.per_token)
        assert torch.equal(b.null_stats, pooled[0].null_stats)
    assert len({a.obs for a in pooled}) == 4  # four keys, four statistics
    assert [d.z for d in shared[1:]] != [shared[0].z] * 3
    with pytest.raises(ValueError):
        align_edit_keys([schemes[0], build_scheme(name, 7, vocab, {**params, "keylen": 61})], ids)


def test_edit_key_null_with_a_shared_draw_is_uniform_on_unwatermarked_tokens() -> None:
    """300 random texts x 5 keys, the release's permutation p with T = 20: each key's p keeps
    the discrete uniform law of a rank among 21 exchangeable alignments, so P(p <= 2/21) = 2/21.
    (Counting the keys' own alignments into the shared null, or comparing the wrong way, fails.)"""
    from wash.watermarks import build_scheme

    params = {"n_permutations": 20, "keylen": 60, "detector": "release"}
    vocab = 500
    rng = np.random.default_rng(5)
    keys = key_null.null_keys(5)
    p = []
    for _ in range(300):
        ids = rng.integers(0, vocab, size=30).tolist()
        schemes = [build_scheme("exp-edit", k, vocab, params) for k in keys]
        p += [d.p for d in schemes[0].detect_under_keys(schemes, ids)]
    p = np.asarray(p)
    assert set(np.round(p * 21).astype(int)) <= set(range(1, 22))
    # texts share their null, so the 1,500 p's are not independent: a tolerance for 300 texts
    assert abs(np.mean(p <= 2 / 21) - 2 / 21) < 3 * np.sqrt((2 / 21) * (19 / 21) / 300)
    assert abs(np.mean(p) - 11 / 21) < 3 * np.sqrt(1 / 12 / 300)
