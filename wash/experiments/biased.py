"""Stress test of the zero-mean assumption: a biased watermark (paper Appendix C, Table 8).

WASH's guarantee assumes the providers' perturbations average to zero. The
``biased-kgw`` scheme breaks that on purpose: a fixed, context-free green list is
promoted by ``bias`` and (by default here, as in the scheme's design) every
provider uses the SAME key, in the union vocabulary (``coordinated=true``), so
providers on different base models promote the same token strings and the
perturbation does not cancel. The paper finds that the baseline's detection z
rises with the bias while its task accuracy collapses, and that WASH keeps z
under the threshold with better accuracy.

For each bias: the watermarked baseline (``single``, provider 0) and WASH over N
providers cycling through the base models. Detection z on prompt continuations,
with their perplexity under each unwatermarked base model; optionally (task
``arithmetic``) accuracy on the project's word problems.

Forwards default to ``lazy`` (``--forwards eager`` to change): z, perplexity and
accuracy come from the texts alone, and a lazy step draws from the same law as
the average, so the biased perturbation enters the text exactly as often.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from wash.experiments import quality
from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, prompt_set, specs_text
from wash.experiments.generation import generation_job
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.experiments.scoring import as_bool, perplexity_long
from wash.experiments.stats import group_summary

NAME = "biased"
SCHEME = "biased-kgw"
MODES = ("single", "wash")


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = (SCHEME,)
    biases: tuple[float, ...] = (2.0, 4.0, 6.0, 8.0, 10.0)
    n: int = 3
    same_key: bool = True
    tasks: tuple[str, ...] = ("continuation", "arithmetic")
    arith_problems: int = 50
    arith_models: tuple[str, ...] = ("smollm2", "gemma3")
    arith_tokens: int = 96
    arith_temperature: float = 0.7
    #: Only the texts are read (z, perplexity, answers), never the distributions: lazy.
    forwards: str = "lazy"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=64, biases=(2.0, 6.0, 10.0), tasks=("continuation",)),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4, biases=(2.0, 8.0), n=2,
                     arith_problems=1, arith_models=("tiny-smollm2", "tiny-gemma3"), arith_tokens=4),
    }


def _specs(mode: str, bias: float, models, config: Config, seed: int, salt: int):
    """The providers of one run: ``biased-kgw`` with the bias, coordinated in the union vocabulary.

    ``coordinated=true`` puts the list over union ids, which are a function of token
    text: with the same key every base model then promotes the same token strings,
    the one shared bias the experiment tests. Without it each model hashes its own
    vocabulary ids, so the same key gives smollm2 and gemma3 unrelated lists.
    """
    n = config.n if mode == "wash" else 1
    return make_ensemble(n, models, [SCHEME], seed, salt, shared_key=config.same_key, bias=bias,
                         coordinated="true")


def jobs(config: Config) -> list[Job]:
    from wash.content.prompts import load_arithmetic

    out = []
    for bias in config.biases:
        for mode in MODES:
            for seed in config.seeds:
                if "continuation" in config.tasks:
                    for pi, prompt in enumerate(prompt_set(config)):
                        specs = _specs(mode, bias, config.models, config, seed, pi)
                        key = config.key(task="continuation", bias=float(bias), mode=mode, item=prompt.id,
                                         seed=seed, providers=specs_text(specs))
                        out.append(Job(key, generation_job, (specs, prompt.text, mode, config, seed),
                                       {"scorers": config.models}))
                if "arithmetic" in config.tasks:
                    for qi, problem in enumerate(load_arithmetic(limit=config.arith_problems)):
                        specs = _specs(mode, bias, config.arith_models, config, seed, qi)
                        key = quality.arithmetic_key(config, config.arith_tokens, config.arith_temperature,
                                                     bias=float(bias), mode=mode, item=problem.id, seed=seed,
                                                     providers=specs_text(specs))
                        args = (specs, problem, mode, config, seed, config.arith_tokens, config.arith_temperature,
                                config.arith_models)
                        out.append(Job(key, quality.arithmetic_job, args))
    return out


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """One row per (bias, mode): z, detected share, perplexity under each model, accuracy."""
    index = pd.MultiIndex.from_product([[float(b) for b in config.biases], list(MODES)], names=["bias", "mode"])
    table = pd.DataFrame(index=index).reset_index()
    if rows.empty or "task" not in rows:
        return table
    rows = rows.assign(bias=rows["bias"].astype(float))
    cont = rows[rows["task"] == "continuation"]
    if len(cont):
        z = group_summary(cont, ["bias", "mode"], "z").rename(columns=lambda c: c if c in ("bias", "mode")
                                                              else f"z_{c}")
        det = cont.groupby(["bias", "mode"])["detected"].apply(lambda s: float(as_bool(s).mean()))
        table = table.merge(z, on=["bias", "mode"], how="left").merge(
            det.rename("detected_rate").reset_index(), on=["bias", "mode"], how="left")
        ppl = perplexity_long(cont, config.models, ["bias", "mode"])
        if len(ppl):
            wide = ppl.groupby(["bias", "mode", "scorer"])["ppl"].mean().unstack("scorer")
            wide.columns = [f"ppl_{c}" for c in wide.columns]
            table = table.merge(wide.reset_index(), on=["bias", "mode"], how="left")
    arith = rows[rows["task"] == "arithmetic"]
    if len(arith):
        acc = quality.accuracy_summary(arith, ["bias", "mode"]).rename(
            columns={"count": "arith_count", "accuracy": "accuracy", "ci_low": "accuracy_ci_low", "ci_high": "accuracy_ci_high"})
        table = table.merge(acc, on=["bias", "mode"], how="left")
    return table


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    z_panel = Panel("detection z", "bias", "z (mean, 95% CI)",
                    hlines=[(config.z_threshold, f"z = {config.z_threshold:g}")])
    q_panel = Panel("quality", "bias", "accuracy" if "accuracy" in summary else f"perplexity under {config.models[0]}")
    for mode in MODES:
        s = summary[summary["mode"] == mode].sort_values("bias")
        label = "watermarked (single)" if mode == "single" else f"WASH N={config.n}"
        if "z_mean" in s:
            z_panel.series.append(Series(label, s["bias"].tolist(), s["z_mean"].tolist(),
                                         (s["z_mean"] - s["z_ci_low"]).tolist(), (s["z_ci_high"] - s["z_mean"]).tolist()))
        if "accuracy" in s:
            q_panel.series.append(Series(label, s["bias"].tolist(), s["accuracy"].tolist(),
                                         (s["accuracy"] - s["accuracy_ci_low"]).tolist(),
                                         (s["accuracy_ci_high"] - s["accuracy"]).tolist()))
        elif f"ppl_{config.models[0]}" in s:
            q_panel.series.append(Series(label, s["bias"].tolist(), s[f"ppl_{config.models[0]}"].tolist()))
    key = "same key" if config.same_key else "independent keys"
    return FigureSpec(f"Biased watermark ({SCHEME}, {key}, {config.tokens} new tokens)", [z_panel, q_panel])
