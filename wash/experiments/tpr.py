"""TPR at 5% FPR per scheme: watermarked baseline, naive averaging and WASH (Tables 2, 6).

z-scores of different schemes are not comparable, so the paper reports the share
of texts a scheme's detector flags at a threshold that flags 5% of unwatermarked
texts. Here, for every condition (``single``; ``naive`` and ``wash`` at each N) the
negatives are unwatermarked generations of the SAME base models on the SAME prompts
and seeds (mode ``unwatermarked``: WASH with every watermark off, routing included),
scored by the same providers' detectors; every (text, provider) pair is one test.

Besides the calibrated TPR, the TPR at the nominal threshold z > 1.645 (a 5%
one-sided test if the detector's null is exactly standard normal) is reported:
with the few negatives of a quick run the calibrated threshold is coarse.
``naive`` vs ``wash`` is the routing ablation (Table 6's detection column).

Forwards default to ``lazy`` (``--forwards eager`` to change): only the texts'
detection z is read, and a lazy step draws from the same law as the average.
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
from wash.experiments.stats import NOMINAL_Z_5PCT, rate_above, tpr_at_fpr, wilson_interval

NAME = "tpr"


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = ("dipmark", "kgw", "aar", "its-edit", "exp-edit", "unigram", "waterbag", "synthid")
    n_values: tuple[int, ...] = (3, 5)
    modes: tuple[str, ...] = ("naive", "wash")
    fpr: float = 0.05
    #: Only the texts' detection z is read, never the distributions: lazy.
    forwards: str = "lazy"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=48, schemes=("kgw", "aar"), n_values=(3, 5)),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=2, tokens=4, schemes=("kgw",),
                     n_values=(2,)),
    }

    def conditions(self) -> list[tuple[str, int]]:
        return [("single", 1)] + [(m, n) for n in self.n_values for m in self.modes]


def jobs(config: Config) -> list[Job]:
    out = []
    for scheme in config.schemes:
        for mode, n in config.conditions():
            for pi, prompt in enumerate(prompt_set(config)):
                for seed in config.seeds:
                    specs = make_ensemble(n, config.models, [scheme], seed, salt=pi)
                    for m in (mode, "unwatermarked"):  # the negatives of naive and wash coincide
                        key = config.key(scheme=scheme, mode=m, n=n, prompt_id=prompt.id, seed=seed,
                                         providers=specs_text(specs))
                        out.append(Job(key, generation_job, (specs, prompt.text, m, config, seed)))
    return out


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    records = []
    for scheme in config.schemes:
        for mode, n in config.conditions():
            pos = rows[(rows["scheme"] == scheme) & (rows["mode"] == mode) & (rows["n"] == n)]["z"].tolist()
            neg = rows[(rows["scheme"] == scheme) & (rows["mode"] == "unwatermarked") & (rows["n"] == n)]["z"].tolist()
            if not pos or not neg:
                continue
            cal = tpr_at_fpr(pos, neg, config.fpr)
            flagged = round(cal.tpr * len(pos))
            lo, hi = wilson_interval(flagged, len(pos))
            records.append({"scheme": scheme, "mode": mode, "n": n, "condition": _label(mode, n),
                            "tpr": cal.tpr, "tpr_ci_low": lo, "tpr_ci_high": hi, "threshold": cal.threshold,
                            "fpr_calibration": cal.fpr, "n_pos": cal.n_pos, "n_neg": cal.n_neg,
                            "tpr_nominal": rate_above(pos, NOMINAL_Z_5PCT),
                            "fpr_nominal": rate_above(neg, NOMINAL_Z_5PCT),
                            "mean_z_pos": float(pd.Series(pos).mean()), "mean_z_neg": float(pd.Series(neg).mean())})
    return pd.DataFrame(records, columns=["scheme", "mode", "n", "condition", "tpr", "tpr_ci_low", "tpr_ci_high",
                                          "threshold", "fpr_calibration", "n_pos", "n_neg", "tpr_nominal",
                                          "fpr_nominal", "mean_z_pos", "mean_z_neg"])


def _label(mode: str, n: int) -> str:
    return "watermarked (single)" if mode == "single" else f"{mode} N={n}"


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    panel = Panel(f"threshold calibrated at {config.fpr:.0%} FPR on unwatermarked texts", "scheme",
                  "TPR (Wilson 95% CI)")
    for mode, n in config.conditions():
        s = summary[(summary["mode"] == mode) & (summary["n"] == n)]
        if len(s):
            panel.series.append(Series(_label(mode, n), s["scheme"].tolist(), s["tpr"].tolist(),
                                       (s["tpr"] - s["tpr_ci_low"]).tolist(), (s["tpr_ci_high"] - s["tpr"]).tolist(),
                                       kind="bar"))
    return FigureSpec(f"TPR at {config.fpr:.0%} FPR ({config.tokens} new tokens, models {', '.join(config.models)})",
                      [panel])
