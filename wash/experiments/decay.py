"""Signal decay: detection z against the ensemble size N (paper Fig. 3a/3b, Tables 1 and 9).

The paper bounds the distance of the average from the unwatermarked consensus by
O(1/sqrt(N)): the sum of N independent perturbations, each weighted 1/N. One
provider's detector, however, responds only to its own perturbation, weighted
1/N, so its z should fall like 1/N (the summary's ``mean_times_n`` stays flat if
it does). Two settings test it:

* ``fixed``: one base model (``models[0]``) served by N providers with independent
  keys (Fig. 3a); the shared base model leaves a residual, so decay is slower;
* ``mixed``: providers cycle through the base models (Fig. 3b), which also
  exercises routing and re-synchronisation.

Every scheme is run on its own, plus ``mix``: provider i gets the i-th scheme of
a per-run rotation of the scheme pool (the paper's mixture of watermarks). The
summary breaks ``mix`` down by the provider's scheme too (``mix/kgw``, ...): every
scheme's z when its WASH partners carry other schemes. Each
row is one provider's detector on one WASH text; N = 1 is the watermarked
baseline (WASH over one provider is that provider alone), run once and shared by
both settings.

Forwards default to ``lazy`` (``--forwards eager`` to change): each row reads only
the final text's detection z and routing counts, never p̄ or p*, and a lazy step
draws from the same law as the average while running one model instead of all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from wash.experiments.config import ALL_SCHEMES, ExperimentConfig
from wash.experiments.ensembles import LINEUPS, make_ensemble, prompt_set, rotate, specs_text
from wash.experiments.generation import generation_job
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.experiments.scoring import as_bool
from wash.experiments.stats import group_summary

NAME = "decay"
MIX = "mix"
#: The ``setting`` recorded for N = 1 jobs, which every setting shares.
BASELINE = "baseline"


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = ALL_SCHEMES + (MIX,)
    n_values: tuple[int, ...] = (1, 2, 3, 4, 5)
    settings: tuple[str, ...] = ("fixed", "mixed")
    #: Schemes drawn from for ``mix`` (defaults to the non-mix entries of ``schemes``).
    mix_pool: tuple[str, ...] = ()
    #: Only the texts are read (detection z, routing counts), never the distributions: lazy.
    forwards: str = "lazy"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=48, schemes=("kgw", "aar", MIX), n_values=(1, 3, 5),
                      mix_pool=("kgw", "aar", "dipmark", "exp-edit", "unigram")),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4, schemes=("kgw", MIX),
                     n_values=(1, 2), mix_pool=("kgw", "aar")),
    }
    LINEUPS: ClassVar[tuple[str, ...]] = LINEUPS

    def pool(self) -> tuple[str, ...]:
        return self.mix_pool or tuple(s for s in self.schemes if s != MIX) or ALL_SCHEMES


def _models(config: Config, setting: str) -> tuple[str, ...]:
    if setting == "fixed":
        return config.models[:1]
    if setting == "mixed":
        return config.models
    raise ValueError(f"unknown decay setting '{setting}' (accepted: fixed, mixed)")


def jobs(config: Config) -> list[Job]:
    out = []
    for setting in config.settings:
        models = _models(config, setting)
        for scheme in config.schemes:
            for n in config.n_values:
                for pi, prompt in enumerate(prompt_set(config)):
                    for seed in config.seeds:
                        schemes = rotate(config.pool(), pi + seed) if scheme == MIX else [scheme]
                        specs = make_ensemble(n, models, schemes, seed, salt=pi, lineup=config.lineup)
                        # N = 1 is models[0] alone in both settings: one job, shared (see summarize)
                        key = config.key(setting=BASELINE if n == 1 else setting, scheme=scheme, n=n,
                                         prompt_id=prompt.id, seed=seed, providers=specs_text(specs))
                        out.append(Job(key, generation_job, (specs, prompt.text, "wash", config, seed)))
    return out


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """Per setting, scheme and N: z over every (text, provider) pair, and the share detected.

    The interval of the mean z is a bootstrap over prompts (``group_summary``'s
    ``cluster``): an ensemble's N providers score one text, so their z are not N
    independent measurements."""
    if rows.empty:
        return group_summary(rows, ["setting", "scheme", "n"], "z")
    base = rows[rows["setting"] == BASELINE]
    rows = pd.concat([rows[rows["setting"] != BASELINE], *[base.assign(setting=s) for s in config.settings]],
                     ignore_index=True)
    mixed = rows[rows["scheme"] == MIX]
    if len(mixed):  # every scheme of the mix on its own
        rows = pd.concat([rows, mixed.assign(scheme=MIX + "/" + mixed["provider_scheme"].astype(str))],
                         ignore_index=True)
    summary = group_summary(rows, ["setting", "scheme", "n"], "z", cluster="prompt_id")
    extra = rows.groupby(["setting", "scheme", "n"], sort=False).agg(
        detected_rate=("detected", lambda s: float(as_bool(s).mean())),
        mean_tokens_scored=("tokens_scored", "mean"),
        routed_token_fraction=("routed_token_fraction", "mean")).reset_index()
    summary = summary.merge(extra, on=["setting", "scheme", "n"]).sort_values(["setting", "scheme", "n"],
                                                                               kind="stable")
    # A provider's own perturbation enters the average with weight 1/N, so its
    # detector's z should fall like 1/N: mean * N stays flat if it does.
    summary["mean_times_n"] = summary["mean"] * summary["n"]
    return summary


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    titles = {"fixed": f"(a) fixed base model ({config.models[0]}), independent keys",
              "mixed": f"(b) mixed base models ({', '.join(config.models)})"}
    panels = []
    for setting in config.settings:
        panel = Panel(titles.get(setting, setting), "ensemble size N", "detection z (mean, 95% CI by prompt bootstrap)",
                      hlines=[(config.z_threshold, f"z = {config.z_threshold:g}")])
        part = summary[summary["setting"] == setting]
        per_scheme_of_mix = sorted(s for s in part["scheme"].unique() if str(s).startswith(MIX + "/"))
        for scheme in [*config.schemes, *per_scheme_of_mix]:
            s = part[part["scheme"] == scheme].sort_values("n")
            if len(s):
                panel.series.append(Series(scheme, s["n"].tolist(), s["mean"].tolist(),
                                           (s["mean"] - s["ci_low"]).tolist(), (s["ci_high"] - s["mean"]).tolist()))
        panels.append(panel)
    return FigureSpec(f"Watermark signal decay under WASH ({config.tokens} new tokens)", panels)
