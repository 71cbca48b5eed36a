"""The served base entropy the engine records per step, and the ``entropy`` experiment on the tiny models.

The step entropy is checked against a hand computation from the model's own logits
(eager: the provider-weighted mean over models; lazy: the picked provider's model),
its serialisation, and that truncation lowers it. The experiment runs its ``tiny``
preset through the driver like every other experiment.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from wash.engine.config import GenerationConfig, ProviderSpec
from wash.engine.ensemble import generate, generate_stream
from wash.engine.events import FinishedEvent, StepEvent
from wash.experiments import load
from wash.engine.vocab import align, model_vocab

PROMPT = "The committee met on Tuesday to discuss"
MIXED = ["tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2", "tiny-smollm2:aar:3"]


def _run(specs, n=6, **kw):
    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT, max_new_tokens=n,
                           live_detection=False, **kw)
    return list(generate_stream(cfg))


def _steps(events):
    return [e for e in events if isinstance(e, StepEvent)]


def _hand_entropy(lm, invalid: torch.Tensor, temperature: float, top_k: int) -> float:
    """-Σ p log p of the first step's served distribution, from the model's logits on the prompt (numpy)."""
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([lm.encode_prompt(PROMPT)])).logits[0, -1].double().numpy()
    x = np.where(invalid.numpy(), -np.inf, logits) / temperature
    if top_k:
        x = np.where(x < np.sort(x)[::-1][top_k - 1], -np.inf, x)
    p = np.exp(x - x.max())
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())


@pytest.fixture(scope="module")
def invalid(tiny_smollm2, tiny_gemma3):
    a = align([model_vocab(tiny_smollm2), model_vocab(tiny_gemma3)])
    return {lm.name: a.to_union[lm.name] < 0 for lm in (tiny_smollm2, tiny_gemma3)}


def test_eager_step_entropy_is_the_provider_mean_of_hand_computed_entropies(tiny_smollm2, tiny_gemma3, invalid):
    first = _steps(_run(MIXED, n=1, forwards="eager", temperature=0.7, top_k=50))[0]
    h_s = _hand_entropy(tiny_smollm2, invalid["tiny-smollm2"], 0.7, 50)
    h_g = _hand_entropy(tiny_gemma3, invalid["tiny-gemma3"], 0.7, 50)
    assert first.chosen is None  # drawn from the average
    assert first.entropy == pytest.approx((2 * h_s + h_g) / 3, rel=1e-5)  # two providers serve smollm2
    assert 0 < h_s < math.log(50) and 0 < h_g < math.log(50)


def test_lazy_step_entropy_is_the_picked_providers(tiny_smollm2, tiny_gemma3, invalid):
    first = _steps(_run(MIXED, n=1, forwards="lazy"))[0]
    lm = tiny_gemma3 if first.chosen == 1 else tiny_smollm2
    assert first.entropy == pytest.approx(_hand_entropy(lm, invalid[lm.name], 1.0, 0), rel=1e-5)


def test_every_step_records_an_entropy_that_serialises(tiny_smollm2, tiny_gemma3):
    events = _run(MIXED, n=30, forwards="lazy")
    steps = _steps(events)
    result = next(e for e in events if isinstance(e, FinishedEvent)).result
    assert any(s.routed for s in steps)  # routed steps (drawn by a specialist) record one too
    assert all(s.entropy is not None and 0 <= s.entropy <= math.log(tiny_gemma3.vocab_size) for s in steps)
    assert [t.entropy for t in result.tokens] == [s.entropy for s in steps]
    assert result.mean_entropy() == pytest.approx(np.mean([s.entropy for s in steps]))
    assert json.loads(json.dumps(steps[0].to_dict()))["entropy"] == steps[0].entropy
    assert json.loads(json.dumps(result.to_dict()))["tokens"][0]["entropy"] == steps[0].entropy


def test_truncation_lowers_the_entropy_on_the_same_model(tiny_smollm2):
    def mean_entropy(top_k: int) -> float:
        cfg = GenerationConfig(providers=[ProviderSpec.parse("tiny-smollm2:kgw:1")], prompt=PROMPT, mode="single",
                               max_new_tokens=8, seed=0, top_k=top_k, live_detection=False)
        return generate(cfg).mean_entropy()

    assert mean_entropy(5) < mean_entropy(0)


# -- the experiment ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tiny_experiment):
    """The entropy experiment's tiny run, shared with test_experiments.py (read only here)."""
    return tiny_experiment("entropy")


def test_experiment_runs_end_to_end_with_its_columns(tiny_run):
    module, config, out = tiny_run
    assert out.jobs_run == out.jobs_total == len(config.schemes) * len(config.n_values) * len(config.servings())
    runs = pd.read_csv(out.runs_csv)
    assert {"scheme", "n", "top_k", "temperature", "provider", "provider_scheme", "z", "mean_entropy"} <= set(runs)
    assert np.isfinite(runs["mean_entropy"]).all() and (runs["mean_entropy"] >= 0).all()
    assert set(runs["top_k"]) == set(config.top_k_values)
    summary = out.summary
    assert list(summary.columns) == module.COLUMNS and len(summary) == out.jobs_total
    assert np.isfinite(summary["entropy"]).all() and (summary["entropy"] >= 0).all()
    single = summary[summary["n"] == 1]
    assert (single["z_single"] == single["z"]).all()
    assert np.allclose(summary["z_times_n"], summary["z"] * summary["n"])
    assert np.allclose(summary["z_single_over_n"], summary["z_single"] / summary["n"])
    assert out.figures["png"].stat().st_size > 1000 and out.figures["html"].exists()


def test_experiment_entropy_is_lower_under_top_k_5(tiny_run):
    _module, _config, out = tiny_run
    s = out.summary.set_index(["n", "top_k"])["entropy"]
    for n in (1, 2):
        assert s[(n, 5)] < s[(n, 0)]
    assert s[(1, 5)] <= math.log(5)


def test_grid_settings_reach_the_key_the_engine_and_the_store(tiny_run):
    from wash.experiments.store import GenerationStore

    module, config, _out = tiny_run
    for job in module.jobs(config):
        assert (job.key["top_k"], job.key["temperature"]) == (job.kwargs["top_k"], job.kwargs["temperature"])
    stored = [json.loads(f.read_text()) for f in config.store_root().glob("*.json")]
    assert {s["key"]["top_k"] for s in stored} == set(config.top_k_values)
    assert all("mean_entropy" in s["value"] for s in stored)
    job = module.jobs(config)[0]
    specs, prompt, mode, _c, seed = job.args
    assert GenerationStore.key(specs, prompt, mode, config, seed, **job.kwargs) in [s["key"] for s in stored]


def test_a_stored_generation_without_entropy_is_made_again(tmp_path, monkeypatch, tiny_smollm2, tiny_gemma3):
    from support import spy_on_generate
    from wash.experiments.ensembles import make_ensemble
    from wash.experiments.generation import generated
    from wash.experiments.store import GenerationStore, store_of

    calls = []
    spy_on_generate(monkeypatch, lambda c, r: calls.append(1))
    config = load("entropy").Config.from_preset("tiny", out=tmp_path / "entropy")
    specs = make_ensemble(1, config.models, ["kgw"], seed=0)
    store = store_of(config)
    fresh = generated(specs, PROMPT, "wash", config, 0, top_k=5)
    key, fields = fresh.new_entry
    store.put(key, {k: v for k, v in fields.items() if k != "mean_entropy"})  # as an older engine stored it
    again = generated(specs, PROMPT, "wash", config, 0, top_k=5)
    assert len(calls) == 2 and again.fields["mean_entropy"] == fresh.fields["mean_entropy"]
    store.put(*again.new_entry)
    assert generated(specs, PROMPT, "wash", config, 0, top_k=5).new_entry is None and len(calls) == 2
    assert key == GenerationStore.key(specs, PROMPT, "wash", config, 0, top_k=5)


def test_presets_job_counts():
    module = load("entropy")
    assert len(module.jobs(module.Config())) == 4 * 3 * 4 * 2 * 10
    assert len(module.jobs(module.Config.from_preset("quick"))) == 2 * 2 * 2 * 1 * 2
