"""When does averaging wash a watermark out? Detection z against the entropy of the served base distributions.

``decay`` finds a provider's own z falling roughly like 1/N for green-list schemes
(KGW) but far more slowly for sampling-based ones (AAR, SynthID): a scheme that picks
one token deterministically from its key puts a point mass into its p_i, and the
average keeps 1/N of it. How much a watermark can move a distribution, and so how
much of it survives in the average, should depend on how spread out the base
distribution is: serving settings that lower its entropy (a small top-k, a low
temperature) leave a green-list boost little to reorder, while a point mass is as
strong at any entropy. This experiment measures both at once.

The grid: each scheme of ``schemes``, every serving setting of ``top_k_values`` x
``temperature_values`` (top-p from the profile; the profile's own temperature and
top-k are replaced by the grid's, and both enter every job and store key), and each
N of ``n_values``. N providers serve the base models in turn (decay's ``mixed``
setting, ``ensembles.make_ensemble``), every one carrying the row's scheme with its
own key; N = 1 is ``models[0]`` alone, the watermarked baseline. Each row is one
provider's own detector on one text (decay's row layout); ``mean_entropy`` is the
text's mean served base entropy per token (nats, ``wash.engine.events.StepEvent.entropy``):
the entropy of softmax of the base logits after temperature and top-k, before the
watermark, of the distribution each token was drawn from.

The summary gives, per (scheme, N, top-k, temperature): mean z (95% CI), z x N
(flat in N where z falls like 1/N), the single-provider z / N (the 1/N law's
prediction) and the mean entropy. The figure plots z against entropy, one panel per
scheme, a line per N, with the 1/N law dashed beside each N > 1.

Forwards default to ``lazy`` (``--forwards eager`` to change): only the texts'
detection z and each step's entropy are read, and a lazy step draws from the same
law as the average. A lazy step's entropy is the picked provider's, whose
expectation is the eager step's provider mean, so both forwards measure the same
quantity.
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
from wash.experiments.scoring import as_bool, first_per_job
from wash.experiments.stats import group_summary

NAME = "entropy"
#: A summary's group: one scheme, ensemble size and serving setting.
GROUP = ["scheme", "n", "top_k", "temperature"]
COLUMNS = [*GROUP, "count", "z", "z_sd", "z_ci_low", "z_ci_high", "detected_rate", "z_times_n", "z_single",
           "z_single_over_n", "entropy", "entropy_sd", "texts", "routed_token_fraction"]


@dataclass
class Config(ExperimentConfig):
    prompts: int = 10
    tokens: int = 100
    schemes: tuple[str, ...] = ("kgw", "aar", "dipmark", "synthid")
    n_values: tuple[int, ...] = (1, 3, 5)
    #: Serving top-k of every provider (0: no truncation), one run each.
    top_k_values: tuple[int, ...] = (5, 10, 50, 0)
    #: Serving temperature of every provider, one run each.
    temperature_values: tuple[float, ...] = (0.7, 1.0)
    #: Only the texts and each step's entropy are read, never the distributions: lazy.
    forwards: str = "lazy"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=48, schemes=("kgw", "aar"), n_values=(1, 3), top_k_values=(10, 0),
                      temperature_values=(1.0,)),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4, schemes=("kgw",),
                     n_values=(1, 2), top_k_values=(5, 0), temperature_values=(1.0,)),
    }

    def servings(self) -> list[tuple[float, int]]:
        """Every (temperature, top-k) of the grid."""
        return [(float(t), int(k)) for t in self.temperature_values for k in self.top_k_values]


def jobs(config: Config) -> list[Job]:
    out = []
    for scheme in config.schemes:
        for temperature, top_k in config.servings():
            for n in config.n_values:
                for pi, prompt in enumerate(prompt_set(config)):
                    for seed in config.seeds:
                        specs = make_ensemble(n, config.models, [scheme], seed, salt=pi)
                        key = config.key(scheme=scheme, n=n, temperature=temperature, top_k=top_k,
                                         prompt_id=prompt.id, seed=seed, providers=specs_text(specs))
                        out.append(Job(key, generation_job, (specs, prompt.text, "wash", config, seed),
                                       {"temperature": temperature, "top_k": top_k}))
    return out


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """Per scheme, N and serving setting: z over every (text, provider) pair, entropy over texts."""
    if rows.empty or "z" not in rows:
        return pd.DataFrame(columns=COLUMNS)
    z = group_summary(rows, GROUP, "z").rename(
        columns={"mean": "z", "sd": "z_sd", "ci_low": "z_ci_low", "ci_high": "z_ci_high"})
    detected = rows.groupby(GROUP, sort=False).agg(
        detected_rate=("detected", lambda s: float(as_bool(s).mean()))).reset_index()
    texts = first_per_job(rows).groupby(GROUP, sort=False).agg(
        entropy=("mean_entropy", "mean"), entropy_sd=("mean_entropy", "std"), texts=("job", "count"),
        routed_token_fraction=("routed_token_fraction", "mean")).reset_index()
    summary = z.merge(detected, on=GROUP).merge(texts, on=GROUP)
    # A provider's own perturbation enters the average with weight 1/N: z x N stays
    # flat where z falls like 1/N, and the single provider's z / N is the law's prediction.
    summary["z_times_n"] = summary["z"] * summary["n"]
    setting = ["scheme", "top_k", "temperature"]
    single = summary[summary["n"] == 1][[*setting, "z"]].rename(columns={"z": "z_single"})
    summary = summary.merge(single, on=setting, how="left")
    summary["z_single_over_n"] = summary["z_single"] / summary["n"]
    order = {"scheme": list(config.schemes), "temperature": [float(t) for t in config.temperature_values],
             "top_k": [int(k) for k in config.top_k_values]}
    summary = summary.sort_values(["scheme", "temperature", "top_k", "n"], kind="stable",
                                  key=lambda c: c.map({v: i for i, v in enumerate(order[c.name])})
                                  if c.name in order else c)
    return summary[COLUMNS].reset_index(drop=True)


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    panels = []
    for scheme in config.schemes:
        part = summary[summary["scheme"] == scheme]
        panel = Panel(scheme, "mean served base entropy (nats/token)", "detection z (mean, 95% CI)",
                      hlines=[(config.z_threshold, f"z = {config.z_threshold:g}")])
        for n in config.n_values:
            s = part[part["n"] == n].sort_values("entropy")
            if not len(s):
                continue
            label = f"N={n}"
            panel.series.append(Series(label, s["entropy"].tolist(), s["z"].tolist(),
                                       (s["z"] - s["z_ci_low"]).tolist(), (s["z_ci_high"] - s["z"]).tolist()))
            if n > 1:  # the 1/N law at the same serving settings, drawn at the N run's entropy
                panel.series.append(Series(f"z(N=1)/{n}", s["entropy"].tolist(),
                                           s["z_single_over_n"].tolist(), dash=True, color_of=label))
        panels.append(panel)
    top_k = ", ".join(str(k or "none") for k in config.top_k_values)
    temperature = ", ".join(f"{t:g}" for t in config.temperature_values)
    return FigureSpec(f"Detection z against served base entropy ({config.tokens} new tokens; top-k {top_k}; "
                      f"T {temperature})", panels)
