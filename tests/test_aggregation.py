"""Aggregation rules (``wash.engine.aggregation``) and their wiring into config, engine, CLI and experiments.

The rules are checked on small hand-made stacks (a point mass among smooth
providers, tokens missing from some vocabularies), then once through the engine
on the tiny random models.
"""

from __future__ import annotations

import math
import shlex

import pytest
import torch

from wash.engine.aggregation import RULES, Mean, MedianClip, parse
from wash.engine.config import GenerationConfig, ProviderSpec
from wash.core.errors import WashInputError

#: Every rule, with default and non-default parameters.
ALL = [*RULES, "loo-clip:xi=0.3", "median-clip:xi=0.5", "cap:xi=0.5", "geo-clip:xi=0.5", "median-clip:xi=0"]


def _random_stack(n: int, v: int, seed: int, missing: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """N random distributions over V union tokens, each missing a random share of them."""
    g = torch.Generator().manual_seed(seed)
    present = torch.rand(n, v, generator=g) >= missing
    present[:, 0] = True  # every provider has something
    dists = torch.softmax(torch.randn(n, v, generator=g, dtype=torch.float64) * 2, dim=1) * present
    return dists / dists.sum(1, keepdim=True), present


def _smooth(v: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(v, generator=g, dtype=torch.float64), dim=0)


# -- every rule ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_every_rule_gives_a_probability_vector_over_the_union(name):
    dists, present = _random_stack(4, 50, seed=1)
    out = parse(name)(dists, present)
    assert out.shape == (50,) and out.dtype == torch.float64
    assert float(out.min()) >= 0 and math.isclose(float(out.sum()), 1.0, abs_tol=1e-12)
    assert float(out[~present.any(0)].abs().sum()) == 0  # no mass on a token nobody has


@pytest.mark.parametrize("name", ALL)
def test_identical_providers_give_the_mean(name):
    dists, present = _random_stack(1, 60, seed=2)
    dists[0, 5] = 0.0  # a present token with probability 0 (a masked row, a top-k cut)
    dists = dists / dists.sum()
    stack, mask = dists.expand(3, -1).clone(), present.expand(3, -1).clone()
    out = parse(name)(stack, mask)
    assert float((out - stack.mean(0)).abs().max()) <= 1e-12


@pytest.mark.parametrize("name", ALL)
def test_one_provider_is_its_own_aggregate(name):
    dists, present = _random_stack(1, 40, seed=3)
    assert float((parse(name)(dists, present) - dists[0]).abs().max()) <= 1e-12


# -- a lone point mass: N = 3, provider 0 one-hot on t, providers 1 and 2 a smooth q ------------
V = 12


@pytest.fixture(scope="module")
def point_mass():
    q = _smooth(V, seed=4)
    t = int(torch.argmin(q))  # the keyed choice falls on an unlikely token: the mean's worst case
    one_hot = torch.zeros(V, dtype=torch.float64)
    one_hot[t] = 1.0
    return torch.stack([one_hot, q, q]), torch.ones(3, V, dtype=torch.bool), q, t


def test_point_mass_mean_hands_the_keyed_token_a_third(point_mass):
    dists, present, q, t = point_mass
    out = parse("mean")(dists, present)
    assert math.isclose(float(out[t]), (1 + 2 * float(q[t])) / 3, rel_tol=1e-12)


def test_point_mass_median_is_the_smooth_providers(point_mass):
    dists, present, q, _ = point_mass
    assert float((parse("median")(dists, present) - q).abs().max()) <= 1e-12


def test_point_mass_median_clip_holds_the_outlier_to_the_bound(point_mass):
    dists, present, q, t = point_mass
    xi = 0.5
    out = parse(f"median-clip:xi={xi}")(dists, present)
    qt = float(q[t])
    # Provider 0 is clipped to q e^xi on t and lifted to q e^-xi elsewhere.
    z = qt * math.exp(xi) + 2 * qt + (1 - qt) * (math.exp(-xi) + 2)
    assert math.isclose(float(out[t]), (qt * math.exp(xi) + 2 * qt) / z, rel_tol=1e-12)
    assert float(out[t]) <= math.exp(xi) * qt
    mean_t = (1 + 2 * qt) / 3
    assert float(out[t]) < mean_t / 10  # the mean gives the keyed token more than ten times as much


def test_point_mass_loo_clip_keeps_the_known_failure(point_mass):
    """The others' mean still carries half the point mass: each smooth provider is lifted to e^-xi/2 on t."""
    dists, present, q, t = point_mass
    out = parse("loo-clip:xi=1")(dists, present)
    assert float(out[t]) > 0.1 > 5 * float(q[t])


def test_point_mass_cap_caps_the_mean_at_e_xi_times_the_median(point_mass):
    dists, present, q, t = point_mass
    xi = 0.5
    out = parse(f"cap:xi={xi}")(dists, present)
    qt = float(q[t])
    capped = math.exp(xi) * qt  # the mean elsewhere is 2q/3, below the cap
    assert math.isclose(float(out[t]), capped / (capped + 2 * (1 - qt) / 3), rel_tol=1e-12)


def test_point_mass_geo_clip_gains_e_to_two_thirds_xi(point_mass):
    dists, present, q, t = point_mass
    xi = 0.5
    out = parse(f"geo-clip:xi={xi}")(dists, present)
    other = (t + 1) % V
    ratio = float(out[t] / out[other]) / float(q[t] / q[other])
    assert math.isclose(ratio, math.exp(2 * xi / 3), rel_tol=1e-9)


def test_median_clip_spans_median_to_mean(point_mass):
    dists, present, _, _ = point_mass
    def agg(name):
        return parse(name)(dists, present)

    assert torch.allclose(agg("median-clip:xi=0"), agg("median"), atol=1e-15)
    # A large xi is the mean wherever the median is positive (here: everywhere).
    assert torch.allclose(agg("median-clip:xi=40"), agg("mean"), atol=1e-15)


# -- tokens missing from some vocabularies -------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_a_token_in_one_vocabulary_keeps_the_means_one_nth(name):
    """Before renormalising, every rule gives a one-vocabulary token 1/N of its provider's probability."""
    dists, present = _random_stack(3, 30, seed=5, missing=0.0)
    u = 7
    present[:2, u] = False
    dists[:2, u] = 0.0
    dists = dists / dists.sum(1, keepdim=True)
    weights = parse(name).combine(dists, present)
    assert math.isclose(float(weights[u]), float(dists[2, u]) / 3, rel_tol=1e-12)


def test_the_median_ignores_missing_providers_rather_than_counting_zeros():
    """A token in 2 of 3 vocabularies: the median of the two that have it, not median(0, a, b) = min(a, b)."""
    a, b = 0.30, 0.10
    dists = torch.tensor([[0.0, 1.0], [a, 1 - a], [b, 1 - b]], dtype=torch.float64)
    present = torch.tensor([[False, True], [True, True], [True, True]])
    weights = parse("median").combine(dists, present)
    assert math.isclose(float(weights[0]), (2 / 3) * (a + b) / 2, rel_tol=1e-12)  # the mean's (a + b) / 3


def test_no_mass_left_falls_back_to_the_mean():
    """Disjoint supports (each provider's top-k elsewhere): every median is 0, the rule returns the mean."""
    dists = torch.eye(3, dtype=torch.float64)
    present = torch.ones(3, 3, dtype=torch.bool)
    for name in ("median", "median-clip", "cap", "geo-clip"):
        assert torch.allclose(parse(name)(dists, present), torch.full((3,), 1 / 3, dtype=torch.float64))


# -- names and parameters -------------------------------------------------------------------
def test_parsing_and_canonical_names():
    assert isinstance(parse("mean"), Mean)
    assert parse("median-clip") == MedianClip(xi=1.0)
    assert parse(" Median-Clip : xi = 0.5 ") == MedianClip(xi=0.5)
    assert str(parse("median-clip:xi=1")) == str(parse("median-clip")) == "median-clip:xi=1.0"
    assert str(parse("mean")) == "mean" and str(parse("median")) == "median"
    for name in RULES:
        assert str(parse(str(parse(name)))) == str(parse(name))
        assert parse(name).is_mean == (name == "mean")


@pytest.mark.parametrize("text,message", [
    ("medain", "unknown aggregate 'medain' \\(accepted: mean, median, loo-clip:xi=1.0, median-clip:xi=1.0"),
    ("", "unknown aggregate"),
    ("median-clip:eta=2", "aggregate 'median-clip' has no parameter 'eta' \\(accepted: xi\\)"),
    ("median:xi=1", "aggregate 'median' has no parameter 'xi' \\(accepted: none\\)"),
    ("median-clip:xi=big", "xi='big' is not a number"),
    ("median-clip:xi", "not of the form name=value"),
    ("median-clip:xi=-1", "xi must be from 0 to 50"),
    ("cap:xi=nan", "xi must be from 0 to 50"),
])
def test_bad_names_and_parameters_are_refused(text, message):
    with pytest.raises(WashInputError, match=message):
        parse(text)


# -- config and command lines ---------------------------------------------------------------
SPECS = ["tiny-smollm2:kgw:1", "tiny-gemma3:aar:2", "tiny-smollm2:exp-edit:3"]
PROMPT = "The committee met on Tuesday to discuss"


def _config(**kw) -> GenerationConfig:
    return GenerationConfig(providers=[ProviderSpec.parse(s) for s in SPECS], prompt=PROMPT,
                            max_new_tokens=kw.pop("n", 16), **kw)


def test_config_validates_and_spells_the_rule_canonically():
    cfg = _config(aggregate="median-clip")
    cfg.validate()
    assert cfg.aggregate == "median-clip:xi=1.0"
    with pytest.raises(WashInputError, match="unknown aggregate 'nope'"):
        _config(aggregate="nope").validate()


def test_lazy_forwards_with_a_robust_rule_are_refused():
    with pytest.raises(WashInputError, match="aggregate median needs --forwards eager: a lazy step draws "
                                             "from one provider, which has the law of the mean only"):
        _config(aggregate="median", forwards="lazy").validate()
    _config(aggregate="mean", forwards="lazy").validate()


def test_command_line_carries_the_rule_and_round_trips():
    from wash.cli import build_parser, command_line

    assert "--aggregate" not in command_line(_config())
    line = command_line(_config(aggregate="median-clip:xi=0.5"))
    args = build_parser().parse_args(shlex.split(line)[3:])
    assert args.aggregate == "median-clip:xi=0.5" and args.forwards == "eager"


def test_cli_refuses_lazy_with_a_robust_rule(capsys):
    from wash.cli import main

    assert main(["generate", "--provider", SPECS[0], "--prompt", "hi", "--aggregate", "median",
                 "--forwards", "lazy"]) == 2
    assert "needs --forwards eager" in capsys.readouterr().err
    assert main(["generate", "--provider", SPECS[0], "--prompt", "hi", "--aggregate", "trimmed"]) == 2
    assert "unknown aggregate 'trimmed'" in capsys.readouterr().err


# -- the engine -----------------------------------------------------------------------------
def test_engine_draws_from_a_robust_rule_deterministically(tiny_smollm2, tiny_gemma3):
    from wash.engine.ensemble import generate_stream
    from wash.engine.events import StepEvent

    def run(**kw):
        events = list(generate_stream(_config(seed=5, **kw)))
        return [e for e in events if isinstance(e, StepEvent)], events[-1].result

    steps, result = run(aggregate="median-clip:xi=0.5")
    again = run(aggregate="median-clip:xi=0.5")[1]
    assert result.text and result.text == again.text and len(result.tokens) == 16
    assert result.settings["aggregation"] == "median-clip:xi=0.5" and result.settings["forwards"] == "eager"
    mean_steps, mean = run()
    assert mean.text == run(aggregate="mean")[1].text and mean.settings["aggregation"] == "mean"
    # First step, same context: the drawn distribution p̄ follows the rule (AAR and EXP-Edit
    # serve point masses, so it differs from the mean), the consensus p* stays the mean.
    first, first_mean = steps[0], mean_steps[0]
    assert first.average_probs is not None and first.linf is not None
    p_bar = dict(zip(first.candidate_ids, first.average_probs))
    p_bar_mean = dict(zip(first_mean.candidate_ids, first_mean.average_probs))
    assert any(not math.isclose(p_bar[u], p_bar_mean[u], rel_tol=1e-6) for u in set(p_bar) & set(p_bar_mean))
    p_star = dict(zip(first.candidate_ids, first.consensus_probs))
    p_star_mean = dict(zip(first_mean.candidate_ids, first_mean.consensus_probs))
    assert all(p_star[u] == p_star_mean[u] for u in set(p_star) & set(p_star_mean))


def test_engine_rule_over_identical_providers_makes_the_means_text(tiny_smollm2):
    """Unwatermarked providers of one model are identical: every rule must give the mean's text."""
    from wash.engine.ensemble import generate

    specs = [ProviderSpec.parse("tiny-smollm2:kgw:1"), ProviderSpec.parse("tiny-smollm2:kgw:2")]
    texts = {rule: generate(GenerationConfig(providers=specs, prompt=PROMPT, mode="unwatermarked",
                                             max_new_tokens=12, seed=2, aggregate=rule,
                                             live_detection=False)).text
             for rule in ("mean", "median-clip:xi=0.5", "geo-clip")}
    assert len(set(texts.values())) == 1


def test_engine_refuses_lazy_with_a_robust_rule_before_loading():
    from wash.engine.ensemble import generate_stream

    with pytest.raises(WashInputError, match="needs --forwards eager"):
        next(generate_stream(_config(aggregate="cap", forwards="lazy")))


# -- experiments ----------------------------------------------------------------------------
def test_experiment_keys_name_the_rule_only_when_it_is_not_the_mean():
    from wash.experiments.config import ExperimentConfig
    from wash.experiments.store import GenerationStore

    specs = [ProviderSpec.parse(s) for s in SPECS]
    mean = ExperimentConfig()
    robust = ExperimentConfig(aggregate="median-clip", forwards="eager")
    assert "aggregate" not in mean.key(n=3)
    assert robust.key(n=3)["aggregate"] == "median-clip:xi=1.0"
    assert "aggregate" not in GenerationStore.key(specs, "p", "wash", mean, 0)
    assert GenerationStore.key(specs, "p", "wash", robust, 0)["aggregate"] == "median-clip:xi=1.0"
    # One provider is its own aggregate: a single text is shared with the mean's.
    assert GenerationStore.key(specs, "p", "single", robust, 0) == GenerationStore.key(
        specs, "p", "single", ExperimentConfig(forwards="eager"), 0)
    assert robust.generation(seed=0).rule == MedianClip() and robust.rule == MedianClip()
    assert mean.generation(seed=0).aggregate == "mean"


def test_experiment_cli_runs_a_rule_eager_and_refuses_lazy(capsys, tmp_path):
    import json

    from wash.cli import main

    assert main(["experiment", "decay", "--tiny", "--out", str(tmp_path), "--aggregate", "median-clip:xi=0.5",
                 "--show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["aggregate"] == "median-clip:xi=0.5"
    assert shown["forwards"] == "eager"  # decay's default is lazy
    assert main(["experiment", "decay", "--tiny", "--aggregate", "median", "--forwards", "lazy",
                 "--show"]) == 2
    assert "aggregate median needs --forwards eager" in capsys.readouterr().err
    assert main(["experiment", "cost", "--tiny", "--aggregate", "median", "--show"]) == 2
    assert "variant lazy: aggregate median needs --forwards eager" in capsys.readouterr().err
    assert main(["experiment", "decay", "--tiny", "--aggregate", "nope", "--show"]) == 2
    assert "unknown aggregate 'nope'" in capsys.readouterr().err
    assert main(["experiment", "decay", "--tiny", "--out", str(tmp_path), "--show"]) == 0
    assert json.loads(capsys.readouterr().out)["aggregate"] == "mean"


def test_experiment_rule_reaches_the_engine_the_rows_the_store_and_the_meta(tmp_path, monkeypatch, capsys,
                                                                           tiny_smollm2, tiny_gemma3):
    import json

    import pandas as pd

    from support import spy_on_generate
    from wash.cli import main
    from wash.core.version import engine_sources

    assert any(p.name == "aggregation.py" for p in engine_sources())  # a rule's code determines the text
    seen = []
    spy_on_generate(monkeypatch, lambda c, r: seen.append(c))
    out = tmp_path / "decay"
    assert main(["experiment", "decay", "--tiny", "--out", str(out), "--aggregate", "median-clip:xi=0.5",
                 "--schemes", "kgw", "--set", "n_values=2", "--set", "settings=mixed"]) == 0
    capsys.readouterr()
    assert [(c.aggregate, c.forwards) for c in seen] == [("median-clip:xi=0.5", "eager")]
    meta = json.loads((out / "decay_meta.json").read_text())
    assert meta["config"]["aggregate"] == "median-clip:xi=0.5"
    rows = pd.read_csv(out / "decay_runs.csv")
    assert (rows["aggregate"] == "median-clip:xi=0.5").all()  # part of every job key
    [stored] = [json.loads(f.read_text()) for f in (tmp_path / "generations").glob("*.json")]
    assert stored["key"]["aggregate"] == "median-clip:xi=0.5"
