"""Per-text TPR at a threshold set on held-out negatives, with intervals clustered by prompt.

The statistics are checked on small hand-made examples against a direct scipy
computation; the guard that keeps a threshold from being judged on its own
calibration texts is checked to refuse; the tiny preset runs end to end and its
summary is recomputed from its own rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from wash.experiments import load, stats
from wash.experiments.driver import execute

pytestmark = pytest.mark.usefixtures("single_thread")  # small tiny-model forwards: one torch thread


def scored(rows: list[tuple[str, str, int, float]]) -> stats.ScoredTexts:
    """(text, prompt, provider, z) tuples as ``ScoredTexts``."""
    text, prompt, provider, z = zip(*rows)
    return stats.ScoredTexts(z=np.array(z, dtype=float), text=np.array(text), prompt=np.array(prompt),
                             provider=np.array(provider))


#: Six prompts, one text each, three providers: flagged above z = 2 on 3, 2, 0, 3, 1, 2 of them.
Z = {"p1": [5.0, 4.0, 3.0], "p2": [2.5, 1.0, 6.0], "p3": [0.0, 1.9, -1.0], "p4": [3.0, 3.0, 3.0],
     "p5": [2.1, 0.3, 0.1], "p6": [7.0, -0.5, 2.2]}


def test_cluster_bootstrap_equals_scipy_on_the_per_prompt_shares():
    s = scored([(f"t-{p}", p, i, z) for p, zs in Z.items() for i, z in enumerate(zs)])
    per_prompt = np.array([3, 2, 0, 3, 1, 2]) / 3  # flagged share of each prompt's text, by hand
    assert stats.flagged_share(s, 2.0) == pytest.approx(per_prompt.mean())
    assert stats.flagged_per_provider(s, 2.0) == [(0, 5, 6), (1, 2, 6), (2, 4, 6)]
    direct = sps.bootstrap((per_prompt,), np.mean, method="percentile", n_resamples=9999,
                           rng=np.random.default_rng(stats.BOOTSTRAP_SEED)).confidence_interval
    lo, hi = stats.prompt_bootstrap_interval(s, 2.0)
    assert (lo, hi) == (pytest.approx(direct.low), pytest.approx(direct.high))
    assert lo < per_prompt.mean() < hi
    # the same texts counted as 18 independent trials give a narrower (too narrow) interval
    wilson = stats.wilson_interval(11, 18)
    assert wilson[1] - wilson[0] < hi - lo
    one = s.of_prompts(["p1"])
    assert np.isnan(stats.prompt_bootstrap_interval(one, 2.0)).all()  # one prompt: no interval


def test_two_seeds_of_a_prompt_are_resampled_together():
    s = scored([(f"t-{p}-{seed}", p, i, z + seed)
                for p, zs in Z.items() for seed in (0, 1) for i, z in enumerate(zs)])
    hits = s.flagged(2.0)
    # both texts of a prompt form one cluster
    per_prompt = np.array([hits[s.prompt == p].mean() for p in sorted(Z)])
    direct = sps.bootstrap((per_prompt,), np.mean, method="percentile",
                           rng=np.random.default_rng(stats.BOOTSTRAP_SEED)).confidence_interval
    assert stats.prompt_bootstrap_interval(s, 2.0) == (pytest.approx(direct.low), pytest.approx(direct.high))


def test_split_half_alternates_the_held_out_prompts():
    assert stats.split_half_by_prompt(["a", "b", "c", "d", "e"]) == (["a", "c", "e"], ["b", "d"])
    assert stats.split_half_by_prompt(["a", "b", "a", "c"]) == (["a", "c"], ["b"])  # first appearance counts


def test_a_threshold_never_sees_the_texts_it_is_judged_on():
    negatives = scored([(f"n-{k}", f"h{k}", i, z) for k in range(8) for i, z in enumerate(
        np.random.default_rng(k).normal(size=2))])
    positives = scored([(f"t-{p}", p, i, z) for p, zs in Z.items() for i, z in enumerate(zs[:2])])
    split = stats.HeldOutSplit.by_prompt(negatives, [f"h{k}" for k in range(8)])
    assert split.calibration.prompts == {"h0", "h2", "h4", "h6"}
    assert split.check.prompts == {"h1", "h3", "h5", "h7"}
    res = stats.held_out_detection(positives, split, 0.25)
    assert res.threshold == stats.threshold_at_fpr(split.calibration.z.tolist(), 0.25)
    assert (res.n_cal, res.n_check, res.n_pos, res.n_prompts) == (4, 4, 6, 6)
    assert res.fpr_check == pytest.approx(stats.flagged_share(split.check, res.threshold))
    # the check half's scores do not move the threshold
    louder = stats.ScoredTexts(split.check.z + 10, split.check.text, split.check.prompt, split.check.provider)
    again = stats.held_out_detection(positives, stats.HeldOutSplit(split.calibration, louder), 0.25)
    assert again.threshold == res.threshold and again.fpr_check == 1.0
    # the same texts on both sides are refused, whichever side they are on
    with pytest.raises(ValueError, match="never see the texts it is judged on"):
        stats.HeldOutSplit(negatives, negatives)
    with pytest.raises(ValueError, match="never see the texts it is judged on"):
        # one shared prompt is enough
        stats.HeldOutSplit(split.calibration, negatives.of_prompts(["h1", "h2"]))
    with pytest.raises(ValueError, match="never see the texts it is judged on"):
        stats.held_out_detection(split.calibration, split, 0.25)  # calibration texts passed as positives


def test_tiny_tpr_is_calibrated_on_held_out_prompts(tmp_path, tiny_smollm2, tiny_gemma3):
    tpr = load("tpr")
    config = tpr.Config.from_preset("tiny", out=tmp_path / "tpr")
    out = execute(tpr, config, command="test held-out tpr")
    rows, summary = out.rows, out.summary
    negatives = rows[rows["role"] == "negative"]
    positives = rows[rows["role"] != "negative"]
    cal, check = tpr.negative_split(config)
    assert set(negatives["prompt_id"]) == set(cal) | set(check) and not set(cal) & set(check)
    assert not set(negatives["prompt_id"]) & set(positives["prompt_id"])  # held out from the positives
    assert (negatives["mode"] == "unwatermarked").all() and set(negatives["n"]) == {1, 2}
    assert len(summary) == len(config.conditions())
    assert summary["fpr_check"].between(0, 1).all() and summary["tpr"].between(0, 1).all()
    assert (summary["fpr_calibration"] <= config.fpr + 1e-9).all()
    assert (summary["n_cal"] == len(cal) * len(config.negative_seeds)).all()
    assert (summary["n_check"] == len(check) * len(config.negative_seeds)).all()
    assert (summary["n_pos"] == config.prompts * len(config.seeds)).all()
    assert (summary["n_prompts"] == config.prompts).all()
    for row in summary.itertuples():
        # the threshold comes from the calibration half's rows alone
        own = negatives[(negatives["scheme"] == row.scheme) & (negatives["n"] == row.n)]
        calibration_z = own[own["prompt_id"].isin(cal)]["z"].tolist()
        assert row.threshold == stats.threshold_at_fpr(calibration_z, config.fpr)
        pos = positives[(positives["scheme"] == row.scheme) & (positives["mode"] == row.mode)
                        & (positives["n"] == row.n)]
        assert row.tpr == pytest.approx(float(np.mean(pos["z"] > row.threshold)))
        assert len(row.flagged.split(", ")) == row.n  # texts flagged out of texts, per provider
    # the negative of each model set carries the keys of the positives on prompt j mod prompts
    neg_keys = negatives[negatives["n"] == 2].groupby("job", sort=False)["providers"].first().tolist()
    pos_keys = positives[positives["mode"] == "wash"].groupby("job", sort=False)["providers"].first().tolist()
    assert neg_keys == [pos_keys[j % config.prompts] for j in range(len(neg_keys))]
    assert pd.read_csv(out.summary_csv).shape == summary.shape


def test_too_many_positive_prompts_leave_no_negatives():
    tpr = load("tpr")
    with pytest.raises(ValueError, match="held-out"):
        tpr.Config.from_preset("tiny", prompts=64)


def test_positive_jobs_keep_the_keys_of_the_committed_paper_run():
    """The positives of results/tpr-paper are reused, not regenerated: their job ids must not change."""
    from pathlib import Path

    tpr = load("tpr")
    runs = Path(__file__).resolve().parents[1] / "results" / "tpr-paper" / "tpr_runs.csv"
    if not runs.exists():
        pytest.skip("no committed paper-profile run")
    done = set(pd.read_csv(runs, usecols=["job"])["job"])
    plan = tpr.jobs(tpr.Config.from_preset("full", profile="paper", out=runs.parent))
    positives = [j for j in plan if "role" not in j.key]
    assert len(positives) == 8 * 5 * 30 and all(j.id in done for j in positives)
    positive_prompts = {j.key["prompt_id"] for j in positives}
    negatives = [j for j in plan if "role" in j.key]
    assert len(negatives) == 8 * 3 * 35 * 2  # 35 held-out prompts x 2 seeds, per scheme and model set
    assert all(j.key["role"] == "negative" and j.key["prompt_id"] not in positive_prompts for j in negatives)


def test_cluster_interval_resamples_whole_prompts():
    """The interval of a mean over rows that share prompts equals scipy's bootstrap over the
    prompts' (sum, count) pairs, and is wider than a t interval that counts rows as independent
    when the providers on one text agree."""
    import numpy as np
    from scipy import stats as sps

    from wash.experiments.stats import BOOTSTRAP_SEED, cluster_mean_interval, summarize

    rng = np.random.default_rng(0)
    prompt_level = rng.normal(2.0, 1.0, 12)
    values = np.repeat(prompt_level, 5) + rng.normal(0, 0.1, 60)  # 5 providers per text, nearly equal
    clusters = np.repeat([f"p{i:02d}" for i in range(12)], 5)
    low, high = cluster_mean_interval(values, clusters)
    sums = np.array([values[clusters == c].sum() for c in sorted(set(clusters))])
    counts = np.full(12, 5.0)
    direct = sps.bootstrap((sums, counts), lambda k, m, axis=-1: k.sum(axis=axis) / m.sum(axis=axis),
                           paired=True, vectorized=True, method="percentile",
                           rng=np.random.default_rng(BOOTSTRAP_SEED)).confidence_interval
    assert (low, high) == (direct.low, direct.high)
    t = summarize(values)
    assert high - low > 1.8 * (t.ci_high - t.ci_low)


def test_a_fixed_length_run_makes_every_text_its_full_length_and_keeps_other_keys(tmp_path, tiny_smollm2,
                                                                                 tiny_gemma3):
    """``--preset long``'s two settings on the tiny models: no single-provider condition, and every job asks
    the engine to mask the end of text until ``tokens`` exist (each text its full length)."""
    from wash.engine import MAX_NEW_TOKENS_CAP

    tpr = load("tpr")
    config = tpr.Config.from_preset("tiny", out=tmp_path / "tpr", tokens=24, baseline=False, fixed_length=True)
    assert ("single", 1) not in config.conditions() and config.model_sets() == [2]
    plan = tpr.jobs(config)
    assert all(j.key["fixed_length"] is True and j.kwargs == {"min_new_tokens": 24} for j in plan)
    rows = execute(tpr, config, command="test fixed length").rows
    assert (rows["tokens_generated"] == 24).all() and (rows["finish_reason"] == "length").all()
    assert set(rows["n"]) == {2}
    # a run of the default plan keeps its keys: no fixed_length field, no engine settings added
    plain = tpr.Config.from_preset("tiny", out=tmp_path / "plain")
    assert all("fixed_length" not in j.key and not j.kwargs for j in tpr.jobs(plain))
    # the long preset itself is past the demo's cap, which a request still refuses
    long = tpr.Config.from_preset("long", out=tmp_path / "long")
    assert long.tokens > MAX_NEW_TOKENS_CAP and long.schemes == ("aar", "kgw", "synthid", "dipmark")


def test_the_demo_caps_a_request_and_the_engine_runs_longer(tiny_smollm2) -> None:
    """A request (app, API, CLI) is refused past the demo's cap; the engine itself, which the experiments
    call, generates past it."""
    from wash.core.errors import WashInputError
    from wash.engine import MAX_NEW_TOKENS_CAP, MAX_NEW_TOKENS_ENGINE, GenerationConfig, ProviderSpec, generate

    config = GenerationConfig(providers=[ProviderSpec("tiny-smollm2", "kgw", 1)], prompt="Once",
                              max_new_tokens=MAX_NEW_TOKENS_CAP + 20, min_new_tokens=MAX_NEW_TOKENS_CAP + 20,
                              mode="single", live_detection=False)
    with pytest.raises(WashInputError, match=f"from 1 to {MAX_NEW_TOKENS_CAP}"):
        config.validate()
    config.validate(max_tokens=MAX_NEW_TOKENS_ENGINE)
    assert len(generate(config).tokens) == MAX_NEW_TOKENS_CAP + 20
