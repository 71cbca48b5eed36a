"""Experiments end to end on the tiny models, their resumability, and the shared statistics.

Every experiment runs its ``tiny`` preset (tiny random models around the real
tokenizers, a handful of tokens) through the same driver as ``python -m wash
experiment``, and its CSVs are checked for the expected columns and sane values.
The driver is checked for what a long run relies on: the same rows from one
process or two, and a resumed run that computes only the jobs an interruption
left undone. The statistics helpers are checked against values computed independently with
scipy or known from the literature.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from wash.experiments import EXPERIMENTS, load, stats
from wash.experiments.driver import execute


# -- statistics ------------------------------------------------------------------------
def test_z_and_p_match_scipy():
    for p in (0.5, 0.05, 1e-3, 1e-12):
        assert stats.z_from_p(p) == pytest.approx(sps.norm.ppf(1 - p) if p > 1e-10 else sps.norm.isf(p), rel=1e-9)
    assert stats.z_from_p(0.05) == pytest.approx(1.6448536269514722)
    assert stats.p_from_z(1.959963984540054) == pytest.approx(0.025)
    assert 37.0 < stats.z_from_p(0.0) <= stats.Z_CAP  # finite, not inf
    assert math.isnan(stats.z_from_p(float("nan")))
    assert stats.NOMINAL_Z_5PCT == pytest.approx(1.6448536269514722)


def test_summary_matches_scipy_t_interval():
    x = [1.0, 2.0, 3.0, 4.0, 10.0]
    s = stats.summarize(x)
    lo, hi = sps.t.interval(0.95, df=4, loc=np.mean(x), scale=sps.sem(x))
    assert (s.n, s.mean, s.sd) == (5, pytest.approx(4.0), pytest.approx(np.std(x, ddof=1)))
    assert (s.ci_low, s.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert stats.summarize([3.0, float("nan")]).n == 1 and math.isnan(stats.summarize([3.0]).sd)
    assert stats.summarize([]).n == 0


def test_threshold_and_tpr_at_fpr():
    neg = list(range(1, 21))  # 20 null scores: 5% FPR lets exactly one through
    assert stats.threshold_at_fpr(neg, 0.05) == 19
    res = stats.tpr_at_fpr([18.5, 19.5, 25.0, 30.0], neg, 0.05)
    assert res.threshold == 19 and res.tpr == pytest.approx(0.75) and res.fpr == pytest.approx(0.05)
    assert stats.threshold_at_fpr([0.3], 0.05) == 0.3  # one negative: nothing may exceed it
    assert stats.rate_above([1.0, float("nan"), 3.0], 2.0) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        stats.threshold_at_fpr([], 0.05)


def test_wilson_interval_known_values():
    lo, hi = stats.wilson_interval(8, 10)  # the textbook example: 0.490 to 0.943
    assert (lo, hi) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert stats.wilson_interval(0, 5)[0] == 0.0


def test_group_summary_is_tidy():
    frame = pd.DataFrame({"g": ["a", "a", "b"], "n": [1, 1, 2], "z": [1.0, 3.0, 5.0]})
    out = stats.group_summary(frame, ["g", "n"], "z")
    assert list(out.columns) == ["g", "n", "count", "mean", "sd", "ci_low", "ci_high"]
    assert out.loc[out["g"] == "a", "mean"].item() == pytest.approx(2.0)


# -- assets ----------------------------------------------------------------------------
def test_prompt_set_covers_every_domain(tiny_smollm2):
    from wash.content.prompts import DOMAINS, load_prompts

    prompts = load_prompts()
    assert len(prompts) >= 60 and len({p.id for p in prompts}) == len(prompts)
    for d in DOMAINS:
        assert len(load_prompts(domain=d)) >= 12
    assert [p.domain for p in load_prompts(limit=5)] == list(DOMAINS)  # interleaved
    lengths = [len(tiny_smollm2.encode(p.text)) for p in prompts]
    assert 20 <= min(lengths) and max(lengths) <= 40  # ~30-token prefixes, as in the paper


def test_arithmetic_set_and_checker():
    from wash.content.prompts import check_answer, extract_last_integer, load_arithmetic

    problems = load_arithmetic()
    assert len(problems) == 50 and all(isinstance(p.answer, int) for p in problems)
    assert extract_last_integer("3 + 4 = 7, so the answer is 1,234.") == 1234
    assert extract_last_integer("It is -5") == -5
    assert extract_last_integer("no number") is None
    assert check_answer(problems[0], f"He has {problems[0].answer} apples.")


# -- every experiment end to end -------------------------------------------------------
EXPECTED = {
    "decay": {"setting", "scheme", "n", "count", "mean", "sd", "ci_low", "ci_high", "detected_rate"},
    "coordinated": {"scheme", "condition", "mean", "ci_low", "ci_high", "detected_rate"},
    "biased": {"bias", "mode", "z_mean", "detected_rate", "accuracy"},
    "tpr": {"scheme", "mode", "n", "tpr", "tpr_ci_low", "tpr_ci_high", "threshold", "tpr_nominal",
            "fpr_calibration", "fpr_check", "fpr_check_ci_low", "fpr_check_ci_high", "n_cal", "n_check",
            "n_prompts", "calibration"},
    "routing": {"domain", "routed_token_fraction", "mean_routed_span_length", "mean_z"},
    "quality": {"task", "scheme", "mode", "scorer", "value", "median", "median_ci_low", "median_ci_high", "metric"},
    "cost": {"variant", "per_token_ms", "latency_ratio", "peak_rss_mb", "memory_ratio"},
    "identify": {"mode", "scheme", "n", "aggregate", "z", "band", "mean_score", "s", "s_low", "s_high", "p",
                 "p_holm", "holm_tests", "p_r3", "p_floor", "identified", "null_s_mean", "null_runs", "samples", "samples_per_context", "fit"},
    "entropy": {"scheme", "n", "top_k", "temperature", "z", "z_times_n", "z_single_over_n", "entropy"},
    "rules": {"arm", "rule", "scheme", "n", "rows", "z_mean", "z_sd", "ppl", "ppl_ratio_to_mean",
              "beats_mean", "beats_mean_every_scheme"},
    "baselines": {"scheme", "arm", "n", "z_mean", "tpr", "threshold", "ppl", "seconds_per_text", "cost_ratio",
                  "reencoded_ids", "probe_queries", "attempts"},
    "presets": {"preset", "condition", "provider", "scheme", "z_min", "z_max", "z_mean", "detected_rate",
                "ppl_mean", "models", "tokens", "seeds"},
}
#: Test-only overrides of the tiny presets that keep this file short.
OVERRIDES = {
    # one base model and three variants: the offloading and the lazy paths, each in its own process
    "cost": dict(models=("tiny-smollm2",), variants=("single", "wash-seq", "lazy")),
}


class _TinyRuns(dict):
    """Each experiment's tiny run, made on first use: a test pays for the experiments it reads, and
    no test pays for all of them at once."""

    def __init__(self, run) -> None:
        super().__init__()
        self.run = run

    def __missing__(self, name: str):
        self[name] = done = self.run(name, **OVERRIDES.get(name, {}))
        return done


@pytest.fixture(scope="module")
def outputs(tiny_experiment):
    return _TinyRuns(tiny_experiment)


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_experiment_writes_tidy_outputs(outputs, name):
    _module, _config, out = outputs[name]
    assert out.jobs_run == out.jobs_total > 0
    assert EXPECTED[name] <= set(out.summary.columns), set(out.summary.columns)
    assert len(out.summary) > 0
    assert out.runs_csv.exists() and out.summary_csv.exists()
    assert out.figures["html"].exists() and out.figures["png"].stat().st_size > 1000
    assert pd.read_csv(out.summary_csv).shape == out.summary.shape
    runs = pd.read_csv(out.runs_csv)
    assert runs["job"].nunique() == out.jobs_total
    if "z" in runs:  # arithmetic rows carry no detection
        scored = runs["z"][runs["provider"].notna()] if "provider" in runs else runs["z"]
        assert len(scored) and np.isfinite(scored).all()
    assert (out.out_dir / f"{name}_meta.json").exists()


def test_values_are_sane(outputs):
    decay = outputs["decay"][2].summary
    assert np.isfinite(decay["mean"]).all() and decay["detected_rate"].between(0, 1).all()
    tpr = outputs["tpr"][2].summary
    assert tpr[["tpr", "tpr_nominal", "fpr_calibration"]].stack().between(0, 1).all()
    assert (tpr["fpr_calibration"] <= 0.05 + 1e-9).all() and tpr["fpr_check"].between(0, 1).all()
    routing = outputs["routing"][2].summary
    assert routing["routed_token_fraction"].between(0, 1).all()
    assert routing.iloc[-1]["domain"] == "all" and routing.iloc[-1]["texts"] == 5
    assert (routing["mean_routed_span_length"] >= 0).all()
    quality = outputs["quality"][2].summary
    cont = quality[quality["task"] == "continuation"]
    assert (cont[cont["scorer"] != "words"]["value"] > 1).all()
    assert cont[cont["scorer"] == "words"]["value"].between(0, 1).all()
    acc = quality[quality["task"] == "arithmetic"]["value"]
    assert acc.between(0, 1).all()
    biased = outputs["biased"][2].summary
    assert set(biased["mode"]) == {"single", "wash"} and np.isfinite(biased["z_mean"]).all()
    cost = outputs["cost"][2].summary.set_index("variant")
    assert cost.loc["single", "latency_ratio"] == pytest.approx(1.0)
    assert (cost["per_token_ms"] > 0).all()
    # offloaded weights leave (almost) nothing resident
    assert cost.loc["wash-seq", "resident_weights_mb"] < 0.1 * cost.loc["single", "resident_weights_mb"]
    # wash-seq runs its models one after the other; lazy is WASH with lazy forwards
    assert cost.loc["wash-seq", "forwards"] == "eager"
    assert not csv_bool(cost.loc["wash-seq", "parallel_forwards"])
    assert cost.loc["single", "forwards"] == "eager" and cost.loc["lazy", "forwards"] == "lazy"
    cost_rows = outputs["cost"][2].rows.set_index("variant")
    assert cost_rows.loc["lazy", "forwards"] == "lazy"  # in the job key: a lazy row never passes for an eager one
    coordinated = outputs["coordinated"][2].summary
    assert set(coordinated["condition"]) == {"single", "independent", "coordinated"}
    identify = outputs["identify"][2].summary
    assert set(identify["mode"]) == {"single", "wash", "unwatermarked"}
    assert identify["band"].isin(["high", "low", "none"]).all() and identify["mean_score"].between(-1, 1).all()
    # every system is judged against its own line-up's null, at its own budget
    assert (identify["null_runs"] == 8).all() and identify["p"].between(0, 1, inclusive="right").all()
    # the verdict reads Holm's adjustment over the systems sharing a null: never below the raw p
    assert (identify["p_holm"] >= identify["p"]).all() and identify["p_holm"].le(1).all()
    assert (identify["identified"] == (identify["p_holm"] < 0.05)).all()
    assert (identify["s_low"] <= identify["s"] + 1e-12).all() and (identify["s"] <= identify["s_high"] + 1e-12).all()
    assert sorted(identify["samples"].unique()) == [20, 40]  # the budget sweep beside the full budget
    identify_rows = outputs["identify"][2].rows
    assert set(identify_rows[identify_rows["mode"] == "null"]["n"]) == {1, 2}
    baselines = outputs["baselines"][2].summary.set_index("arm")
    assert {"single", "wash", "toblend", "demark", "randomwalk", "unwatermarked"} <= set(baselines.index)
    assert baselines.loc["single", "cost_ratio"] == pytest.approx(1.0)
    assert baselines.loc["demark", "probe_queries"] > 0  # De-mark's probing is counted, never free
    assert baselines.loc["toblend", "reencoded_ids"] > 0 and baselines.loc["toblend", "n"] == 2
    assert baselines.loc["randomwalk", "n"] == baselines.loc["demark", "n"] == 1
    assert baselines["tpr"].dropna().between(0, 1).all() and (baselines["ppl"] > 1).all()
    presets = outputs["presets"][2].summary
    paper = presets[presets["preset"].str.startswith("Paper setting")]
    assert list(paper["condition"]) == ["preset"] * 3 + ["alone"]  # three providers, then P1 alone
    single = presets[presets["preset"] == "Single watermarked model"]
    assert list(single["condition"]) == ["preset"]  # no comparison run for a single preset
    assert (presets["z_min"] <= presets["z_mean"] + 1e-9).all() and (presets["z_mean"] <= presets["z_max"] + 1e-9).all()


def test_rerun_recomputes_nothing(outputs):
    module, config, first = outputs["decay"]
    again = execute(module, config, command="test again")
    assert again.jobs_run == 0 and again.jobs_total == first.jobs_total
    # a pure re-summary keeps the date, code, machine and compute time of the run that made the rows
    assert again.meta["date"] == first.meta["date"] and again.meta["code"] == first.meta["code"]
    assert again.meta["jobs_run_now"] == first.meta["jobs_run_now"] > 0
    assert again.meta["elapsed_s_now"] == first.meta["elapsed_s_now"] and again.meta["machine"] == first.meta["machine"]
    assert again.meta["elapsed_s_total"] >= first.meta["elapsed_s_total"] > 0
    pd.testing.assert_frame_equal(again.summary.reset_index(drop=True), first.summary.reset_index(drop=True),
                                  check_dtype=False)


def test_resume_runs_only_missing_jobs(outputs):
    module, config, first = outputs["coordinated"]
    runs = pd.read_csv(first.runs_csv)
    dropped = runs["job"].iloc[-1]
    runs[runs["job"] != dropped].to_csv(first.runs_csv, index=False)
    again = execute(module, config, command="test resume")
    assert again.jobs_run == 1
    assert pd.read_csv(first.runs_csv)["job"].nunique() == first.jobs_total


def test_partial_summarises_the_done_jobs_and_runs_nothing(outputs, tmp_path):
    from wash.experiments.report import section

    module, config, first = outputs["decay"]
    config = dataclasses_replace(config, out=tmp_path / "decay")
    (tmp_path / "decay").mkdir()
    runs = pd.read_csv(first.runs_csv)
    dropped = runs["job"].iloc[-1]
    runs[runs["job"] != dropped].to_csv(tmp_path / "decay" / "decay_runs.csv", index=False)
    part = execute(module, config, command="test partial", partial=True)
    assert part.jobs_run == 0 and part.meta["jobs_done"] == first.jobs_total - 1
    assert dropped not in set(part.rows["job"]) and len(part.summary) > 0
    assert f"{first.jobs_total - 1} of {first.jobs_total} jobs done (a partial summary)" in section(
        tmp_path / "decay", None)
    assert first.meta["jobs_done"] == first.jobs_total
    assert f"{first.jobs_total} jobs," in section(first.out_dir, None)


def test_a_re_summary_keeps_the_record_of_the_run_that_computed_the_rows(outputs, tmp_path):
    import shutil

    module, config, first = outputs["coordinated"]
    out = tmp_path / "coordinated"
    shutil.copytree(first.out_dir, out)
    config = dataclasses_replace(config, out=out)
    before = json.loads(next(out.glob("*_meta.json")).read_text())  # the last run that computed rows
    again = execute(module, config, command="test re-summary", partial=True)
    assert again.jobs_run == 0
    assert again.meta["command"] == before["command"] != "test re-summary"
    assert again.meta["date"] == before["date"] and again.meta["code"] == before["code"]
    assert again.meta["summarised_by"] == "test re-summary"
    # a meta written before a config field existed is the same plan while the field is at its default
    path = next(out.glob("*_meta.json"))
    path.write_text(json.dumps({**before, "note": "restored by hand", "machine": "the machine of the run"}))
    kept = execute(module, config, command="test note", partial=True).meta
    assert kept["note"] == "restored by hand" and kept["machine"] == "the machine of the run"
    older = {**before, "config": {k: v for k, v in before["config"].items() if k != "lineup"}}
    path.write_text(json.dumps(older))
    assert execute(module, config, command="test older meta", partial=True).meta["command"] == before["command"]
    path.write_text(json.dumps(older))
    anchor = dataclasses_replace(config, lineup="anchor")  # not the default: another plan
    assert execute(module, anchor, command="test other plan", partial=True).meta["command"] == "test other plan"


def test_the_recorded_commit_is_dirty_for_changed_code_not_for_changed_results(tmp_path):
    import subprocess

    from wash.core.version import git_commit

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    (tmp_path / "wash").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "wash" / "engine.py").write_text("x = 1\n")
    (tmp_path / "results" / "runs.csv").write_text("z\n1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    clean = git_commit(tmp_path)
    assert clean and "+dirty" not in clean and clean != "unknown"
    (tmp_path / "results" / "runs.csv").write_text("z\n1\n2\n")  # a resumed run grows its CSV
    git_commit.cache_clear()
    assert git_commit(tmp_path) == clean
    (tmp_path / "wash" / "engine.py").write_text("x = 2\n")
    git_commit.cache_clear()
    assert git_commit(tmp_path) == clean + "+dirty"
    git_commit.cache_clear()


def test_cli_show_and_bad_input(capsys, tmp_path):
    from wash.cli import main

    assert main(["experiment", "decay", "--tiny", "--out", str(tmp_path), "--show",
                 "--set", "n_values=1,3"]) == 0
    shown = capsys.readouterr().out
    assert '"n_values": [\n    1,\n    3\n  ]' in shown and '"jobs": 6' in shown  # N = 1 shared by both settings
    assert main(["experiment", "decay", "--tiny", "--set", "bogus=1", "--show"]) == 2
    assert "unknown setting 'bogus'" in capsys.readouterr().err
    assert main(["experiment", "tpr", "--tiny", "--schemes", "nosuch", "--show"]) == 2
    assert main(["experiment", "tpr", "--tiny", "--tokens", "0", "--show"]) == 2
    assert main(["experiment", "tpr", "--tiny", "--set", "forwards=sideways", "--show"]) == 2
    assert "unknown forwards 'sideways'" in capsys.readouterr().err


def test_report_renders_markdown_from_outputs(outputs, tmp_path):
    from wash.experiments.report import section

    _module, _config, out = outputs["tpr"]
    text = section(out.out_dir, tmp_path / "figures")
    assert text.startswith("Command: `test tpr`") and "| scheme | mode | n |" in text
    assert (tmp_path / "figures" / f"{out.out_dir.name}.png").exists()


# -- shared generations, worker processes and interruptions ---------------------------
def _by_job(rows: pd.DataFrame) -> pd.DataFrame:
    cols = ["job", "provider", "z", "text"]
    return rows[cols].sort_values(["job", "provider"]).reset_index(drop=True)


def test_stored_generations_are_shared_and_equal_fresh_ones(tmp_path, tiny_smollm2, tiny_gemma3):
    from wash.experiments.store import GenerationStore

    tpr = load("tpr")
    config = tpr.Config.from_preset("tiny", out=tmp_path / "tpr", schemes=("kgw", "unigram"))
    first = execute(tpr, config, command="test store")
    files = list((tmp_path / "generations").glob("*.json"))
    # per scheme 6 watermarked texts (single, naive, wash x 2 prompts); the 8 unwatermarked
    # negatives (N = 1 and 2 x 4 held-out prompts) do not depend on the scheme and are made once
    assert first.jobs_total == 2 * (6 + 8) and len(files) == 2 * 6 + 8
    unw = first.rows[first.rows["mode"] == "unwatermarked"]
    assert unw.groupby(["n", "prompt_id"])["text"].nunique().eq(1).all()  # same text for both schemes
    fresh = execute(tpr, tpr.Config.from_preset("tiny", out=tmp_path / "fresh", schemes=("kgw", "unigram"),
                                                cache=False), command="test fresh")
    pd.testing.assert_frame_equal(_by_job(first.rows), _by_job(fresh.rows), check_dtype=False)
    assert len(list((tmp_path / "generations").glob("*.json"))) == len(files)  # cache=False writes nothing
    store = GenerationStore(tmp_path / "generations")
    assert store.get({"mode": "wash", "providers": "nothing"}) is None


def test_a_detector_variant_rescores_the_stored_texts_without_generating(tmp_path, tiny_smollm2, tiny_gemma3):
    """``detector=`` changes only how a text is scored: a run of ``aar:detector=release`` beside
    ``aar`` makes no new text, and its rows carry the same texts scored by the other test."""
    tpr = load("tpr")
    config = tpr.Config.from_preset("tiny", out=tmp_path / "tpr", schemes=("aar",))
    first = execute(tpr, config, command="test store")
    made = len(list((tmp_path / "generations").glob("*.json")))
    both = execute(tpr, tpr.Config.from_preset("tiny", out=tmp_path / "tpr", schemes=("aar", "aar:detector=release")),
                   command="test rescore")
    assert len(list((tmp_path / "generations").glob("*.json"))) == made  # nothing generated again
    rows = both.rows
    ours, release = rows[rows["scheme"] == "aar"], rows[rows["scheme"] == "aar:detector=release"]
    assert len(ours) == len(release) == len(first.rows)
    assert sorted(ours["text"]) == sorted(release["text"])
    assert not np.allclose(sorted(ours["z"]), sorted(release["z"]))  # scored by a different test


def test_store_of_a_committed_output_stays_in_scratch(tmp_path):
    decay = load("decay")
    assert decay.Config(out=tmp_path / "runs" / "decay").store_root() == tmp_path / "runs" / "generations"
    # results/ is committed; the generations of a run written there go to the scratch runs/
    assert decay.Config(out=tmp_path / "results" / "decay").store_root() == tmp_path / "runs" / "generations"


def test_jobs_are_plain_data():
    import pickle

    from wash.experiments.jobs import Job

    decay = load("decay")
    config = decay.Config.from_preset("tiny")
    for job in decay.jobs(config):
        again = pickle.loads(pickle.dumps(job))  # what a worker process receives
        assert again.id == job.id and again.fn is job.fn and again.args[1:] == job.args[1:]
    with pytest.raises(TypeError, match="module-level"):
        Job({"i": 1}, lambda: [])
    with pytest.raises(TypeError, match="module-level"):
        Job({"i": 1}, _a_closure())


def _a_closure():
    def rows() -> list:
        return []
    return rows


def interrupt(*_args, **_kwargs):
    """A job body standing for Ctrl-C arriving while that job runs."""
    raise KeyboardInterrupt


def _plan(experiment, jobs):
    """``experiment`` with a fixed plan: its summaries and figure, ``jobs`` as its jobs."""
    from types import SimpleNamespace

    return SimpleNamespace(NAME=experiment.NAME, Config=experiment.Config, jobs=lambda _config: jobs,
                           summarize=experiment.summarize, figure=experiment.figure)


def _interrupted_at(jobs, k, fn=interrupt, args=()):
    from wash.experiments.jobs import Job

    return [*jobs[:k], Job(jobs[k].key, fn, args), *jobs[k + 1:]]


def test_resume_after_an_interruption(tmp_path, outputs):
    decay, config, whole = outputs["decay"]
    config = dataclasses_replace(config, out=tmp_path / "decay", cache=False)
    plan = decay.jobs(config)
    k = 3
    with pytest.raises(KeyboardInterrupt):
        execute(_plan(decay, _interrupted_at(plan, k)), config, command="test interrupted")
    runs = pd.read_csv(tmp_path / "decay" / "decay_runs.csv")
    assert set(runs["job"]) == {j.id for j in plan[:k]}  # every job finished before the interruption is kept
    stopped = json.loads((tmp_path / "decay" / "decay_meta.json").read_text())
    assert stopped["jobs_done"] == k < stopped["jobs_total"]  # the meta says the run is partial
    again = execute(decay, config, command="test resumed")
    assert again.jobs_run == whole.jobs_total - k  # only the remaining jobs run
    pd.testing.assert_frame_equal(_by_job(pd.read_csv(again.runs_csv)), _by_job(pd.read_csv(whole.runs_csv)),
                                  check_dtype=False)
    pd.testing.assert_frame_equal(again.summary, whole.summary, check_dtype=False)


def test_two_workers_give_the_same_rows_and_resume_after_a_failure(tmp_path, outputs):
    from wash.experiments import generation
    from wash.experiments.ensembles import make_ensemble

    decay, config, one = outputs["decay"]
    out = tmp_path / "decay"
    config = dataclasses_replace(config, out=out, cache=False)
    plan = decay.jobs(config)
    # a job that fails in its worker: a provider on a model that does not exist
    broken = (make_ensemble(1, ["tiny-nosuch"], ["kgw"], 0), "Once upon a time", "wash", config, 0)
    k = 2
    with pytest.raises(Exception, match="tiny-nosuch"):
        execute(_plan(decay, _interrupted_at(plan, k, generation.generation_job, broken)), config,
                command="test failed", workers=2)
    kept = set(pd.read_csv(out / "decay_runs.csv")["job"])
    assert plan[k].id not in kept and kept <= {j.id for j in plan}
    two = execute(decay, config, command="test workers", workers=2)
    assert two.jobs_run == two.jobs_total - len(kept) and two.jobs_total == one.jobs_total
    # the parent alone wrote the outputs, in plan order, whatever order the workers finished in
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in one.out_dir.iterdir())
    cols = ["job", "provider", "z", "text"]
    pd.testing.assert_frame_equal(pd.read_csv(two.runs_csv)[cols], pd.read_csv(one.runs_csv)[cols],
                                  check_dtype=False)
    pd.testing.assert_frame_equal(one.summary.reset_index(drop=True), two.summary.reset_index(drop=True),
                                  check_dtype=False)
    meta = json_load(out / "decay_meta.json")
    assert meta["workers"] == 2
    # workers run their models one after the other, on their share of the cores
    assert meta["forward_settings"] == {"parallel": False, "threads_per_model": threads_per_worker(2)}


def test_cli_rejects_workers_for_timings(capsys, tmp_path):
    from wash.cli import main

    assert main(["experiment", "cost", "--tiny", "--out", str(tmp_path), "--workers", "2"]) == 2
    assert "one worker" in capsys.readouterr().err


def test_worker_env_turns_off_parallel_forwards():
    from wash.experiments.driver import forward_env

    env = forward_env(2)
    assert env["WASH_PARALLEL_FORWARDS"] == "0"
    assert env["WASH_THREADS_PER_MODEL"] == env["OMP_NUM_THREADS"] == str(threads_per_worker(2))
    assert int(forward_env(64)["WASH_THREADS_PER_MODEL"]) == 1  # never below one thread


def threads_per_worker(workers):
    from wash.experiments.driver import threads_per_worker as tpw

    return tpw(workers)


def csv_bool(value):
    from wash.experiments.scoring import as_bool

    return bool(as_bool([value]).iloc[0])


def dataclasses_replace(config, **changes):
    import dataclasses

    return dataclasses.replace(config, **changes)


def json_load(path):
    import json

    return json.loads(path.read_text())


# -- forwards (eager / lazy) and the engine fingerprint --------------------------------
def test_experiments_default_to_lazy_forwards_unless_they_measure_eager(outputs):
    lazy = {"decay", "tpr", "routing", "quality", "coordinated", "biased", "entropy"}
    for name in EXPERIMENTS:
        module = load(name)
        expected = "lazy" if name in lazy else "eager"
        assert module.Config().forwards == expected, name
        assert module.Config.from_preset("tiny").forwards == expected, name
        assert f"Forwards default to ``{expected}``" in " ".join((module.__doc__ or "").split()), name
    _module, config, out = outputs["decay"]
    assert config.forwards == "lazy" and out.meta["forwards"] == "lazy"
    assert out.meta["config"]["forwards"] == "lazy"
    assert set(out.meta["forward_settings"]) == {"parallel", "threads_per_model"}
    assert (pd.read_csv(out.runs_csv)["forwards"] == "lazy").all()  # part of every job key


@pytest.mark.parametrize("forwards", ["lazy", "eager"])
def test_forwards_option_reaches_the_engine_and_the_meta(forwards, tmp_path, monkeypatch, capsys, tiny_smollm2,
                                                         tiny_gemma3):
    from support import spy_on_generate
    from wash.cli import main
    from wash.core.version import engine_fingerprint

    seen = []
    spy_on_generate(monkeypatch, lambda c, r: seen.append((c.forwards, r)))
    out = tmp_path / "decay"
    assert main(["experiment", "decay", "--tiny", "--out", str(out), "--forwards", forwards, "--schemes", "kgw",
                 "--set", "n_values=2", "--set", "settings=mixed"]) == 0
    capsys.readouterr()
    assert [f for f, _ in seen] == [forwards]  # one job, one generation, with these forwards
    result = seen[0][1]
    assert result.settings["forwards"] == forwards
    starts = {span.start for span in result.spans}  # a span's first token was drawn by a step too
    drawn = [t for i, t in enumerate(result.tokens) if not t.routed or i in starts]
    # a lazy token names the provider it was drawn from; an eager one came from the average
    assert drawn and all((t.chosen is not None) == (forwards == "lazy") for t in drawn)
    meta = json_load(out / "decay_meta.json")
    assert meta["forwards"] == meta["config"]["forwards"] == forwards
    assert meta["engine"] == engine_fingerprint()
    assert (pd.read_csv(out / "decay_runs.csv")["forwards"] == forwards).all()
    stored = [json_load(f) for f in (tmp_path / "generations").glob("*.json")]
    assert [(s["key"]["forwards"], s["key"]["engine"]) for s in stored] == [(forwards, engine_fingerprint())]


def test_generation_store_reuses_only_texts_of_the_same_engine(tmp_path, monkeypatch, tiny_smollm2, tiny_gemma3):
    from support import spy_on_generate
    from wash.experiments import store as store_module
    from wash.experiments.ensembles import make_ensemble, prompt_set
    from wash.experiments.generation import generated
    from wash.experiments.store import store_of

    calls = []
    spy_on_generate(monkeypatch, lambda c, r: calls.append(1))
    decay = load("decay")
    config = decay.Config.from_preset("tiny", out=tmp_path / "decay")
    specs = make_ensemble(2, config.models, ["kgw"], seed=0)
    prompt = prompt_set(config)[0].text
    store = store_of(config)

    def generate_and_store(config):
        gen = generated(specs, prompt, "wash", config, 0)
        if gen.new_entry:  # what the driver's parent does with a job's new generations
            store.put(*gen.new_entry)
        return gen

    monkeypatch.setattr(store_module, "engine_fingerprint", lambda: "engine-a")
    fresh = generate_and_store(config)
    assert len(calls) == 1 and fresh.detections is not None and fresh.new_entry is not None
    again = generate_and_store(config)
    assert len(calls) == 1 and again.detections is None  # reused from the store...
    assert again.new_entry is None
    assert again.fields == fresh.fields  # ...and equal to the fresh generation's fields, JSON-exact
    monkeypatch.setattr(store_module, "engine_fingerprint", lambda: "engine-b")
    other = generate_and_store(config)
    assert len(calls) == 2 and other.detections is not None  # another engine: generated afresh, not reused
    assert other.fields["text"] == fresh.fields["text"]  # (the same source, really: the same text)
    assert len(list((tmp_path / "generations").glob("*.json"))) == 2
    generate_and_store(dataclasses_replace(config, forwards="eager"))
    assert len(calls) == 3  # eager and lazy texts are stored apart
    generate_and_store(dataclasses_replace(config, profile="paper"))
    assert len(calls) == 4  # so are texts served with other settings (top-k 10)
    assert not generated(specs, prompt, "wash", dataclasses_replace(config, cache=False), 0).new_entry


def test_engine_fingerprint_covers_the_engine_sources(tmp_path):
    from pathlib import Path

    from wash.core import version

    root = Path(version.__file__).resolve().parents[2]
    names = {p.relative_to(root).as_posix() for p in version.engine_sources()}
    # the folders, not a list: a module added to the engine is counted without anyone listing it
    expected = {p.relative_to(root).as_posix() for folder in ("engine", "watermarks", "baselines")
                # their options' parser
                for p in (root / "wash" / folder).glob("*.py")} | {"wash/core/options.py"}
    assert names == expected
    for module in ("ensemble", "routing", "resync", "averaging", "sampling", "vocab", "models", "providers",
                   "config", "parallel", "members", "served", "decode"):
        assert f"wash/engine/{module}.py" in names
    assert not any(n.startswith(("wash/experiments/", "wash/detection/", "wash/ui/")) for n in names)
    fp = version.engine_fingerprint()
    assert len(fp) == 12 and fp == version.engine_fingerprint()
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    before = version.source_fingerprint([a, b], root=tmp_path)
    assert version.source_fingerprint([b, a], root=tmp_path) == before  # order does not matter
    b.write_text("y = 3\n")
    assert version.source_fingerprint([a, b], root=tmp_path) != before


# -- serving profiles ---------------------------------------------------------------------
def test_profile_reaches_the_engine_the_rows_the_store_and_the_meta(tmp_path, monkeypatch, capsys,
                                                                     tiny_smollm2, tiny_gemma3):
    from support import spy_on_generate
    from wash.cli import main

    seen = []
    spy_on_generate(monkeypatch, lambda c, r: seen.append(c))
    out = tmp_path / "decay"
    assert main(["experiment", "decay", "--preset", "tiny", "--out", str(out), "--profile", "paper",
                 "--schemes", "kgw", "--set", "n_values=2", "--set", "settings=mixed"]) == 0
    capsys.readouterr()
    assert [(c.temperature, c.top_k, c.top_p) for c in seen] == [(1.0, 10, 1.0)]
    meta = json_load(out / "decay_meta.json")
    assert meta["profile"] == {"name": "paper", "temperature": 1.0, "top_k": 10, "top_p": 1.0}
    assert meta["config"]["profile"] == "paper"
    assert (pd.read_csv(out / "decay_runs.csv")["top_k"] == 10).all()  # part of every job key
    [stored] = [json_load(f) for f in (tmp_path / "generations").glob("*.json")]
    assert stored["key"]["top_k"] == 10
    assert main(["experiment", "decay", "--tiny", "--set", "profile=greedy", "--show"]) == 2
    assert "unknown serving profile 'greedy'" in capsys.readouterr().err


def test_a_task_temperature_keeps_the_profile_truncation():
    quality = load("quality")
    config = quality.Config.from_preset("tiny", profile="paper")
    settings = config.generation(seed=0, max_new_tokens=6, temperature=config.arith_temperature)
    assert (settings.temperature, settings.top_k, settings.top_p) == (0.7, 10, 1.0)
    assert quality.Config().profile == "open" and quality.Config().generation().top_k == 0


def test_the_page_quotes_the_presets_measurement(outputs, tmp_path):
    from wash.content import presets as demo

    out = outputs["presets"][2]
    name = "Paper setting: 3 providers, 2 model families"
    line = demo.measured(name, out.summary_csv)
    assert line.startswith("Measured (tiny-smollm2 + tiny-gemma3, 4 tokens, seeds 0") and "P1 alone z" in line
    assert "P2 aar z" in line and "perplexity" in line
    assert demo.measured("Five providers, five schemes", out.summary_csv).startswith("Not measured yet")
    assert demo.measured(name, tmp_path / "missing.csv").startswith("Not measured yet")
    assert demo.description(name, path=out.summary_csv).startswith(f"**{name}.**")
    assert "will differ" not in line
    assert "This page serves smollm2 + gemma3, so its numbers will differ." in demo.measured(
        name, out.summary_csv, ["smollm2", "gemma3"])


def test_quality_plans_the_unwatermarked_baseline_once_whatever_the_schemes():
    """One unwatermarked text per item: planned once per scheme, it was counted once per scheme."""
    from wash.experiments.jobs import unique_jobs

    quality = load("quality")
    config = quality.Config.from_preset("tiny", schemes=("kgw", "aar"))
    plan = unique_jobs(quality.jobs(config))
    baseline = [j for j in plan if j.key["mode"] == "unwatermarked"]
    items = config.prompts + config.arith_problems
    assert len(baseline) == items * len(config.seeds)
    watermarked = [j for j in plan if j.key["mode"] == "single"]
    assert len(watermarked) == 2 * items * len(config.seeds)  # each scheme keeps its own


def test_quality_reports_the_median_perplexity_of_the_same_texts(outputs):
    from wash.experiments.scoring import perplexity_long

    _, config, out = outputs["quality"]
    texts = perplexity_long(out.rows[out.rows["task"] == "continuation"], config.models, ["scheme", "mode"])
    cont = out.summary[(out.summary["task"] == "continuation") & (out.summary["scorer"] != "words")]
    assert len(cont)
    for row in cont.itertuples():
        mine = texts[(texts["scheme"] == row.scheme) & (texts["mode"] == row.mode) & (texts["scorer"] == row.scorer)]
        assert row.median == pytest.approx(mine["ppl"].median())
    assert out.summary[out.summary["task"] == "arithmetic"]["median"].isna().all()


def test_repeated_ngram_share_counts_repeats_of_earlier_word_trigrams():
    from wash.experiments.scoring import repeated_ngram_share

    assert repeated_ngram_share("the cat sat on the mat") == 0.0
    # "a b c a b c a b c": 7 trigrams, 3 distinct
    assert repeated_ngram_share("a b c a b c a b c") == pytest.approx(1 - 3 / 7)
    assert math.isnan(repeated_ngram_share("too short"))  # no trigram to count


def test_quality_reports_the_repetition_of_each_mode_s_texts():
    """A looping text scores a low perplexity: its repetition is summarised beside it, text by text."""
    quality = load("quality")
    config = quality.Config.from_preset("tiny")
    texts = {("none", "unwatermarked"): ["the cat sat on the mat", "a dog ran in the park today"],
             ("kgw", "single"): ["go on go on go on go on", "we we we we we", "too short"]}
    rows = pd.DataFrame([{"job": f"{scheme}-{mode}-{i}", "task": "continuation", "scheme": scheme, "mode": mode,
                          "text": text, "provider": p}
                         for (scheme, mode), items in texts.items() for i, text in enumerate(items) for p in (0, 1)])
    reps = quality.summarize(rows, config).set_index(["scheme", "mode"])
    assert (reps["scorer"] == "words").all() and reps["metric"].str.startswith("repeated word 3-grams").all()
    assert reps.loc[("none", "unwatermarked"), "value"] == 0.0
    looping = reps.loc[("kgw", "single")]
    assert looping["count"] == 2  # "too short" has no trigram: not counted, and not counted as 0
    assert looping["value"] == pytest.approx(((1 - 2 / 6) + (1 - 1 / 3)) / 2)  # 6 trigrams, 2 distinct; 3, 1
    assert looping["median"] == pytest.approx(looping["value"])
