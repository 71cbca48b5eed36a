"""The app's presets, run as the page runs them, so each description quotes what it shows.

Every preset of ``wash.content.presets`` is generated on the app's default prompt (the
first of the project's prompt set, ``--set prompts=K`` for more), at the demo's
length and the default serving profile, once per seed. Forwards default to
``eager``, the page's default. A WASH preset also runs provider 1 alone, the page's
comparison switch. Each row is one provider's detector on the final text, with
the text's perplexity under the unwatermarked base models.

The summary (``presets_summary.csv``, one row per preset, condition and
provider) is what ``wash.content.presets.measured`` reads back for the page: the range of
final z over the seeds, so a teacher sees how much one click can vary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import prompt_set, specs_text
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.experiments.rules import rule_job
from wash.experiments.scoring import as_bool, first_per_job
from wash.content.presets import DEMO_TOKENS, PRESETS, preset

NAME = "presets"
PRESET, ALONE = "preset", "alone"
BY = ["preset", "condition", "provider", "scheme"]


@dataclass
class Config(ExperimentConfig):
    prompts: int = 1
    tokens: int = DEMO_TOKENS
    seeds: tuple[int, ...] = (0, 1, 2)
    #: The presets on the configured models: those with models of their own (hub-only) are named explicitly.
    names: tuple[str, ...] = tuple(p.name for p in PRESETS if not p.models)

    PRESETS: ClassVar[dict] = {
        "quick": dict(tokens=64, seeds=(0,)),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), tokens=4, seeds=(0,),
                     names=("Paper setting: 3 providers, 2 model families", "Single watermarked model")),
    }

    def __post_init__(self) -> None:
        for name in self.names:
            preset(name)  # an unknown name fails here, naming the accepted ones


def jobs(config: Config) -> list[Job]:
    out = []
    for name in config.names:
        p = preset(name)
        specs = p.specs(config.models)
        runs = [(PRESET, p.mode, specs, p.aggregate)]
        if p.mode != "single":
            runs.append((ALONE, "single", specs[:1], "mean"))
        for condition, mode, run_specs, aggregate in runs:
            for prompt in prompt_set(config):
                for seed in config.seeds:
                    key = config.key(preset=name, condition=condition, prompt_id=prompt.id, seed=seed,
                                     providers=specs_text(run_specs), rule=aggregate)
                    out.append(Job(key, rule_job, (run_specs, prompt.text, mode, config, seed, aggregate)))
    return out


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """Per preset, condition and provider: final z (min, max, mean), detected rate, mean perplexity."""
    cols = [*BY, "texts", "z_min", "z_max", "z_mean", "detected_rate", "ppl_mean", "models", "tokens", "seeds"]
    if rows.empty or "z" not in rows:
        return pd.DataFrame(columns=cols)
    rows = rows.assign(scheme=rows["provider_scheme"], z=pd.to_numeric(rows["z"], errors="coerce"))
    groups = rows.groupby(BY, sort=False)
    summary = groups.agg(texts=("z", "size"), z_min=("z", "min"), z_max=("z", "max"),
                         z_mean=("z", "mean")).reset_index()
    summary["detected_rate"] = groups["detected"].apply(lambda s: float(as_bool(s).mean())).to_numpy()
    ppl = first_per_job(rows).groupby(["preset", "condition"], sort=False)["ppl_mean"].mean()
    summary["ppl_mean"] = [ppl.get((p, c)) for p, c in zip(summary["preset"], summary["condition"])]
    summary["models"] = " + ".join(dict.fromkeys(config.models))
    summary["tokens"] = config.tokens
    summary["seeds"] = ",".join(str(s) for s in config.seeds)
    order = {name: i for i, name in enumerate(config.names)}
    summary = summary.sort_values(["preset", "condition"], key=lambda s: s.map(order) if s.name == "preset"
                                  else s.map({PRESET: 0, ALONE: 1}), kind="stable")
    return summary[cols].reset_index(drop=True)


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    panel = Panel("final z per provider: mean, bars to the lowest and highest seed", "preset / provider",
                  "detection z", hlines=[(config.z_threshold, f"z = {config.z_threshold:g}")])
    for condition, label in ((PRESET, "as the preset runs"), (ALONE, "provider 1 alone")):
        s = summary[summary["condition"] == condition]
        if len(s):
            x = [f"{p[:18]}… P{int(i) + 1} {sc}" for p, i, sc in zip(s["preset"], s["provider"], s["scheme"])]
            panel.series.append(Series(label, x, s["z_mean"].tolist(), (s["z_mean"] - s["z_min"]).tolist(),
                                       (s["z_max"] - s["z_mean"]).tolist(), kind="bar"))
    return FigureSpec(f"The app's presets on {', '.join(config.models)} ({config.tokens} tokens, "
                      f"seeds {', '.join(map(str, config.seeds))})", [panel])
