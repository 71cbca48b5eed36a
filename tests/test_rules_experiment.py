"""The ``rules`` experiment: aggregation rules screened against each scheme's z and perplexity."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wash.experiments import load
from wash.experiments.driver import execute

rules = load("rules")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_smollm2, tiny_gemma3):
    root = tmp_path_factory.mktemp("rules")
    config = rules.Config.from_preset("tiny", out=root / "rules")
    return config, execute(rules, config, command="test rules"), root / "generations"


def test_tiny_preset_runs_end_to_end_with_its_columns(tiny_run):
    config, out, _store = tiny_run
    assert config.forwards == "eager" and config.rules == ("mean", "median-clip:xi=0.5")
    # per scheme: the single provider, one WASH text per rule, the unwatermarked control
    assert out.jobs_run == out.jobs_total == 2 * (1 + 2 + 1)
    runs = out.rows
    assert {"arm", "rule", "scheme", "n", "prompt_id", "seed", "providers", "provider", "provider_scheme", "z",
            "detected", "text", "ppl_tiny-smollm2", "ppl_tiny-gemma3", "ppl_mean"} <= set(runs.columns)
    assert np.isfinite(runs["z"]).all() and (runs["ppl_mean"] > 1).all()
    # every provider of a row carries the row's scheme; N = 1 for the single provider, n otherwise
    assert (runs["provider_scheme"] == runs["scheme"]).all()
    assert runs.groupby("job")["provider"].count().to_dict() == runs.groupby("job")["n"].first().to_dict()
    assert set(runs[runs["arm"] == "wash"]["provider_model"]) == {"tiny-smollm2", "tiny-gemma3"}
    summary = out.summary
    assert {"arm", "rule", "scheme", "n", "rows", "z_mean", "z_sd", "z_ci_low", "z_ci_high", "detected_rate",
            "texts", "ppl", "ppl_tiny-smollm2", "ppl_tiny-gemma3", "single_z", "z_minus_mean",
            "ppl_ratio_to_mean", "beats_mean", "beats_mean_every_scheme"} <= set(summary.columns)
    assert len(summary) == out.jobs_total  # one prompt, one seed: one group per job
    mean = summary[(summary["arm"] == "wash") & (summary["rule"] == "mean")]
    assert (mean["ppl_ratio_to_mean"] == 1).all() and (mean["z_minus_mean"] == 0).all()
    assert not mean["beats_mean"].astype(bool).any()
    clip = summary[summary["rule"] == "median-clip:xi=0.5"]
    assert clip["beats_mean_every_scheme"].nunique() == 1
    assert out.figures["png"].stat().st_size > 1000


def test_the_store_tells_rules_apart(tiny_run):
    _config, out, store = tiny_run
    keys = [json.loads(p.read_text())["key"] for p in store.glob("*.json")]
    wash = [k for k in keys if k["mode"] == "wash" and "|" in k["providers"]]
    # two rules on the same prompt and seed: two generations per scheme, told apart by the rule
    assert len(wash) == 2 * 2
    assert sorted(k.get("aggregate", "mean") for k in wash) == ["mean", "mean", "median-clip:xi=0.5",
                                                                "median-clip:xi=0.5"]
    # the unwatermarked control is one text per prompt, whatever scheme scores it
    assert sum(k["mode"] == "unwatermarked" for k in keys) == 1
    runs = out.rows
    control = runs[runs["arm"] == "unwatermarked"]
    assert control["text"].nunique() == 1 and set(control["scheme"]) == {"kgw", "aar"}
    assert runs["job"].nunique() == out.jobs_total


def test_summary_flags_and_ratios_against_the_mean():
    def rows_of(arm, rule, scheme, n, z, ppl):
        job = f"{arm}|{rule}|{scheme}"
        return [{"job": job, "arm": arm, "rule": rule, "scheme": scheme, "n": n, "z": v, "detected": v > 4,
                 "ppl_mean": ppl, "ppl_m": ppl, "scored_tokens_m": 10} for v in z]

    rows = []
    for scheme, (mean_z, clip_z, cap_z) in {"kgw": (2.0, 1.0, 3.0), "aar": (6.0, 3.0, 1.0)}.items():
        rows += rows_of("single", "none", scheme, 1, [8.0], 10.0)
        rows += rows_of("wash", "mean", scheme, 2, [mean_z - 1, mean_z + 1], 10.0)
        rows += rows_of("wash", "median-clip:xi=0.5", scheme, 2, [clip_z, clip_z], 12.0)
        rows += rows_of("wash", "cap:xi=1.0", scheme, 2, [cap_z, cap_z], 11.0)
        rows += rows_of("unwatermarked", "mean", scheme, 2, [0.0, 0.0], 8.0)
    config = rules.Config(models=("m",), schemes=("kgw", "aar"), rules=("mean", "median-clip:xi=0.5", "cap"))
    s = rules.summarize(pd.DataFrame(rows), config).set_index(["arm", "rule", "scheme"])
    assert s.loc[("wash", "mean", "aar"), "z_mean"] == 6.0 and s.loc[("wash", "mean", "aar"), "rows"] == 2
    assert s.loc[("wash", "median-clip:xi=0.5", "kgw"), "ppl_ratio_to_mean"] == pytest.approx(1.2)
    assert s.loc[("wash", "median-clip:xi=0.5", "aar"), "z_minus_mean"] == -3.0
    assert s.loc[("single", "none", "kgw"), "single_z"] == 8.0
    assert s.loc[("unwatermarked", "mean", "kgw"), "ppl_ratio_to_mean"] == pytest.approx(0.8)
    assert s.loc[("wash", "cap:xi=1.0", "aar"), "beats_mean"] and not s.loc[("wash", "cap:xi=1.0", "kgw"), "beats_mean"]
    every = s.xs("wash")["beats_mean_every_scheme"].groupby("rule").first()
    assert every.to_dict() == {"cap:xi=1.0": False, "mean": False, "median-clip:xi=0.5": True}
    assert pd.isna(s.loc[("single", "none", "kgw"), "beats_mean_every_scheme"])
    assert rules.figure(s.reset_index(), config) is not None


def test_config_checks_and_job_counts(capsys):
    from wash.cli import main

    config = rules.Config.from_preset("quick", rules=("cap", "cap:xi=1", "MEAN"))
    assert config.rules == ("cap:xi=1.0", "mean")  # canonical, each once
    with pytest.raises(ValueError, match="rules"):
        rules.Config.from_preset("tiny", aggregate="median")
    with pytest.raises(ValueError, match="eager"):
        rules.Config.from_preset("tiny", forwards="lazy")
    with pytest.raises(ValueError, match="unknown aggregate"):
        rules.Config.from_preset("tiny", rules=("trimmed",))
    assert main(["experiment", "rules", "--quick", "--show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["jobs"] == 4 * (1 + 11 + 1) * 3 and shown["forwards"] == "eager"
    assert main(["experiment", "rules", "--tiny", "--aggregate", "median", "--show"]) == 2
    assert "--set rules=" in capsys.readouterr().err


def test_a_mixed_ensemble_is_read_per_provider_scheme(tmp_path, tiny_smollm2, tiny_gemma3):
    """``mix``: provider i carries the i-th of ``mix_schemes``; the summary reads each provider
    scheme on its own (``mix/kgw``, ``mix/aar``), against the mean rule on the same ensemble."""
    config = rules.Config.from_preset("tiny", out=tmp_path / "rules", schemes=("mix",), mix_schemes=("kgw", "aar"))
    out = execute(rules, config, command="test rules mix")
    wash = out.rows[out.rows["arm"] == "wash"]
    assert set(wash["provider_scheme"]) == {"kgw", "aar"} and (wash["scheme"] == "mix").all()
    summary = out.summary
    assert {"mix/kgw", "mix/aar"} <= set(summary["scheme"])
    clip = summary[(summary["arm"] == "wash") & (summary["rule"] == "median-clip:xi=0.5")]
    assert set(clip["scheme"]) == {"mix/kgw", "mix/aar"} and clip["z_minus_mean"].notna().all()
