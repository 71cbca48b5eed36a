"""Line-ups (independent vs the release's one watermarked anchor) and scheme-variant tokens in experiments."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from wash.core.errors import WashInputError
from wash.experiments import load
from wash.experiments.driver import execute
from wash.experiments.ensembles import make_ensemble, scheme_variant, specs_text


def test_anchor_lineup_builds_exactly_one_watermarked_provider():
    for n in (1, 3, 5):
        specs = make_ensemble(n, ("smollm2", "gemma3"), ["kgw"], seed=0, salt=4, lineup="anchor")
        assert [s.scheme for s in specs] == ["kgw"] + ["none"] * (n - 1)
        # the partners keep today's mixed base models: only the watermark is off
        assert [s.model for s in specs] == [("smollm2", "gemma3")[i % 2] for i in range(n)]
        independent = make_ensemble(n, ("smollm2", "gemma3"), ["kgw"], seed=0, salt=4)
        assert specs[0] == independent[0] and all(s.scheme == "kgw" for s in independent)
        assert len({s.key for s in independent}) == n


def test_independent_specs_are_unchanged_by_the_line_up_option():
    # the providers (and so job keys and stored generations) of a run made before line-ups existed
    from pathlib import Path

    tpr = load("tpr")
    runs = pd.read_csv(Path(__file__).parents[1] / "results" / "tpr-paper" / "tpr_runs.csv",
                       usecols=["scheme", "mode", "n", "prompt_id", "providers"])
    config = tpr.Config(profile="paper")
    order = [p.id for p in tpr.prompt_set(config)]
    wash = runs[(runs["mode"] == "wash") & (runs["n"] == 3)].drop_duplicates(["scheme", "prompt_id"])
    assert len(wash) >= 30
    for row in wash.itertuples():
        specs = make_ensemble(3, config.models, [row.scheme], seed=0, salt=order.index(row.prompt_id))
        assert specs_text(specs) == row.providers


def test_scheme_variant_tokens():
    assert scheme_variant("kgw") == ("kgw", {})
    assert scheme_variant("aar:form=soft") == ("aar", {"form": "soft"})
    assert scheme_variant("its-edit:permutation=shared+detector=release") == (
        "its-edit", {"permutation": "shared", "detector": "release"})
    specs = make_ensemble(2, ("smollm2",), ["exp-edit:form=soft"], seed=1)
    assert all(s.scheme == "exp-edit" and dict(s.params) == {"form": "soft"} for s in specs)
    with pytest.raises(ValueError, match="name=value"):
        scheme_variant("aar:soft")
    with pytest.raises(WashInputError, match="form"):
        make_ensemble(1, ("smollm2",), ["aar:form=sofft"], seed=0)  # validated by the scheme
    with pytest.raises(ValueError, match="line-up"):
        make_ensemble(2, ("smollm2",), ["kgw"], seed=0, lineup="anchors")


def _args(name: str, **kw) -> argparse.Namespace:
    base = dict(name=name, preset=None, quick=False, tiny=True, out=None, models=None, prompts=None, tokens=None,
                seeds=None, schemes=None, forwards=None, aggregate=None, profile=None, lineup=None, set=[])
    return argparse.Namespace(**{**base, **kw})


def test_cli_refuses_a_line_up_or_variant_an_experiment_cannot_run():
    from wash.experiments.cli import build_config

    _, config = build_config(_args("tpr", lineup="anchor", schemes=["kgw", "aar:form=soft"]))
    assert config.lineup == "anchor" and config.schemes == ("kgw", "aar:form=soft")
    with pytest.raises(WashInputError, match="line-up 'anchor' is not offered"):
        build_config(_args("quality", lineup="anchor"))
    with pytest.raises(WashInputError, match="no parameter 'shape'"):
        build_config(_args("tpr", schemes=["aar:shape=soft"]))


def test_anchor_tpr_scores_the_anchor_alone_and_records_the_line_up(tmp_path, tiny_smollm2, tiny_gemma3):
    tpr = load("tpr")
    config = tpr.Config.from_preset("tiny", out=tmp_path / "tpr", lineup="anchor")
    out = execute(tpr, config, command="test anchor")
    rows = out.rows
    # every row is the anchor's detector: the unwatermarked partners have no detector to sample
    assert set(rows["provider"]) == {0} and set(rows["provider_scheme"]) == {"kgw"}
    assert set(rows["lineup"]) == {"anchor"}
    wash = rows[(rows["mode"] == "wash") & (rows["n"] == 2)]
    assert len(wash) == config.prompts and all(p.endswith(":none:0") for p in wash["providers"].str.split("|").str[1])
    assert out.meta["config"]["lineup"] == "anchor"
    # the negatives are the same unwatermarked texts as an independent run's (they depend on base models only)
    indep = execute(tpr, tpr.Config.from_preset("tiny", out=tmp_path / "indep"), command="test independent")
    neg = lambda r: r[r["role"].eq("negative")].groupby(["n", "prompt_id", "seed"])["text"].first()  # noqa: E731
    pd.testing.assert_series_equal(neg(rows), neg(indep.rows))
    assert "lineup" not in indep.rows  # keys of independent runs are as before


def test_decay_and_identify_plans_under_the_anchor_line_up():
    decay, identify = load("decay"), load("identify")
    for job in decay.jobs(decay.Config.from_preset("tiny", lineup="anchor")):
        schemes = [p.split(":")[1] for p in job.key["providers"].split("|")]
        assert schemes[0] != "none" and set(schemes[1:]) <= {"none"} and job.key["lineup"] == "anchor"
    anchor = identify.jobs(identify.Config.from_preset("tiny", lineup="anchor", schemes=("kgw", "exp-edit:form=soft")))
    indep = identify.jobs(identify.Config.from_preset("tiny", schemes=("kgw", "exp-edit:form=soft")))
    assert len(anchor) == len(indep)
    for a, i in zip(anchor, indep):
        if a.key["mode"] == "null":  # a null serves no watermark: the same providers under both
            assert a.key["providers"] == i.key["providers"]
        elif a.key["mode"] == "wash":
            assert a.key["providers"].split("|")[1:] == ["tiny-gemma3:none:0"] * (a.key["n"] - 1)
    # a stateful scheme's variant still runs after the cheap systems
    assert anchor[-1].key["scheme"] == "exp-edit:form=soft" and anchor[-1].key["mode"] == "wash"
