"""Control: providers that coordinate one watermark signal keep it (paper Fig. 3c).

WASH removes watermarks because independent keys perturb the distribution in
uncorrelated directions that cancel in the average. If every provider applies the
SAME perturbation (one key, applied in the shared union vocabulary:
``coordinated=true``), the average carries it undiminished and the detector should
still fire. Three conditions per scheme, on the same prompts and seeds:

* ``single``: provider 0 alone (the watermarked baseline);
* ``independent``: N providers over the mixed base models, independent keys (WASH);
* ``coordinated``: the same N providers, one shared key, coordinated in the union.

Forwards default to ``lazy`` (``--forwards eager`` to change): only the texts'
detection z is read. Drawing from one uniformly picked provider has the law of the
average whatever the keys, so a coordinated signal survives (or independent ones
cancel) exactly as under eager forwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, prompt_set, specs_text
from wash.experiments.generation import generation_job
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.experiments.scoring import as_bool
from wash.experiments.stats import group_summary

NAME = "coordinated"
CONDITIONS = ("single", "independent", "coordinated")


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = ("kgw", "unigram", "dipmark", "aar", "its-edit", "exp-edit", "waterbag")
    n: int = 3
    #: Only the texts' detection z is read, never the distributions: lazy.
    forwards: str = "lazy"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=64, schemes=("kgw", "aar")),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4, schemes=("kgw",), n=2),
    }


def providers_for(condition: str, scheme: str, config: Config, seed: int, salt: int):
    if condition == "single":
        return make_ensemble(1, config.models, [scheme], seed, salt)
    if condition == "independent":
        return make_ensemble(config.n, config.models, [scheme], seed, salt)
    if condition == "coordinated":
        return make_ensemble(config.n, config.models, [scheme], seed, salt, shared_key=True,
                             coordinated="true")
    raise ValueError(f"unknown condition '{condition}' (accepted: {', '.join(CONDITIONS)})")


def jobs(config: Config) -> list[Job]:
    out = []
    for scheme in config.schemes:
        for condition in CONDITIONS:
            for pi, prompt in enumerate(prompt_set(config)):
                for seed in config.seeds:
                    specs = providers_for(condition, scheme, config, seed, pi)
                    key = config.key(scheme=scheme, condition=condition, prompt_id=prompt.id, seed=seed,
                                     providers=specs_text(specs))
                    out.append(Job(key, generation_job, (specs, prompt.text, "wash", config, seed)))
    return out


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    summary = group_summary(rows, ["scheme", "condition"], "z")
    if rows.empty:
        return summary
    rate = rows.groupby(["scheme", "condition"], sort=False)["detected"].apply(
        lambda s: float(as_bool(s).mean())).rename("detected_rate").reset_index()
    return summary.merge(rate, on=["scheme", "condition"])


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    panel = Panel(f"N = {config.n} providers over {', '.join(config.models)}", "scheme",
                  "detection z (mean, 95% CI)", hlines=[(config.z_threshold, f"z = {config.z_threshold:g}")])
    for condition in CONDITIONS:
        s = summary[summary["condition"] == condition]
        if len(s):
            panel.series.append(Series(condition, s["scheme"].tolist(), s["mean"].tolist(),
                                       (s["mean"] - s["ci_low"]).tolist(), (s["ci_high"] - s["mean"]).tolist(),
                                       kind="bar"))
    return FigureSpec(f"Coordinated vs independent watermarks ({config.tokens} new tokens)", [panel])
