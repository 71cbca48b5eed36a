"""The paper's baselines beside WASH on the same prompts, providers and detectors (Tables 1, 2, 3, 5).

One experiment measures every attack the same way, on the same texts, so removal,
quality and cost are read off one set of generations. Per scheme and prompt:

* ``single``: provider 1 alone, watermarked (the reference every attack starts from);
* ``wash``: WASH over ``n`` providers (decay's ``mixed`` setting: provider i on
  ``models[i % len]``, each with the scheme and its own key; provider 1 is the single one);
* ``toblend``: the same ``n`` providers taking turns (``wash.baselines.toblend``);
* ``demark``: provider 1 probed, its green list and bias undone (``wash.baselines.demark``;
  green-list schemes and DiPMark only: other schemes get no job, and the summary says so);
* ``randomwalk``: provider 1's text rewritten span by span (``wash.baselines.randomwalk``);
* ``unwatermarked``: the negatives, the same base models with every watermark off, at
  N = 1 (for single, demark, randomwalk) and at N = ``n`` (for wash and toblend).

Removal: each provider's own detector z on the final text (mean over (text, provider)
pairs, as in ``decay``) and the TPR at ``fpr`` with the threshold calibrated on the
N-matched negatives scored by the same providers' detectors. Unlike ``tpr``, whose
thresholds come from held-out prompts, these negatives are on the positives' own
prompts (an in-sample threshold, the ``calibration`` column says so: read the TPR
as a comparison between arms on equal terms, not as a held-out rate). It is not
re-fitted on the null over keys (``tpr``'s ``wash.detection.key_null``) because the
run holds no held-out text to score: every negative shares its prompt with a
positive. Its 95% interval, as in ``tpr``, is a bootstrap over prompts, exact
binomial where every text or none is flagged (``stats.rate_interval``), since the
``n`` providers' verdicts on one text are not independent trials. Quality:
the continuation's perplexity under each unwatermarked base model (as in ``quality``).
Cost: wall seconds per text and per generated token, the ratio to ``single``'s median
on the same run, and each attack's own counters (ToBlend's switches and re-encoded
ids, De-mark's probe queries, RandomWalk's rewrite attempts), from
``RunResult.settings["baseline"]``. Times are measured while the run's other worker
shares the machine: compare ratios within one run, and take latency figures from
``experiment cost`` on an idle machine.

Forwards default to ``eager`` so that WASH pays for what its paper's WASH-Par pays
(every model's forward each step); attacks decode their own way whatever the setting.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import ClassVar, Sequence

import pandas as pd

from wash.engine import ProviderSpec
from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, prompt_set, specs_text
from wash.experiments.generation import generation_job
from wash.experiments.jobs import Job, JobOutput
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.experiments.rules import mean_perplexity
from wash.experiments.scoring import as_bool, first_per_job
from wash.experiments.stats import (NOMINAL_Z_5PCT, ScoredTexts, group_summary, rate_above, rate_interval,
                                    tpr_at_fpr)
from wash.detection import FPR_CALIBRATED

NAME = "baselines"
#: How the TPR thresholds are set (the ``calibration`` column): in-sample, see the module docstring.
CALIBRATION = "in-sample: negatives on the positives' own prompts"
SINGLE, WASH, UNWATERMARKED = "single", "wash", "unwatermarked"
ATTACKS = ("toblend", "demark", "randomwalk")
#: Attacks that take provider 1 alone (their papers attack one watermarked model).
ONE_PROVIDER = ("demark", "randomwalk")
BY = ["scheme", "arm", "n"]
#: Each attack's own cost counters kept in the summary (medians per text), by arm.
COST_COUNTERS = {"toblend": ("switches", "reencoded_ids"),
                 "demark": ("probe_queries", "queries_per_token", "probe_s"),
                 "randomwalk": ("attempts", "accepted", "changed", "rewrite_s")}


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = ("kgw", "dipmark")
    #: The arms run besides ``single`` and the negatives: WASH and any of ``ATTACKS``.
    arms: tuple[str, ...] = (WASH, "toblend", "demark", "randomwalk")
    #: Providers of WASH and ToBlend (the paper's main setting: 3).
    n: int = 3
    #: ``param=value,...`` per attack (empty: its paper's defaults, docs/BASELINES.md).
    toblend_options: str = ""
    demark_options: str = ""
    randomwalk_options: str = ""
    fpr: float = FPR_CALIBRATED
    #: WASH pays every model's forward at every step, as the paper's WASH-Par does.
    forwards: str = "eager"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=48),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4, n=2, schemes=("kgw",),
                     demark_options="k=4,h=1,delta=2", randomwalk_options="steps=3,span=1,rewriter=tiny-smollm2,"
                                                                          "judge=tiny-gemma3"),
    }

    def __post_init__(self) -> None:
        unknown = [a for a in self.arms if a not in (WASH, *ATTACKS)]
        if unknown:
            raise ValueError(f"experiment {NAME}: unknown arm '{unknown[0]}' (accepted: {WASH}, "
                             f"{', '.join(ATTACKS)})")
        if self.n < 2:
            raise ValueError(f"experiment {NAME}: n must be at least 2, got {self.n}")
        from wash.engine import parse_mode as parse

        for attack in ATTACKS:  # refuse bad options before any job runs, and record them spelt out
            setattr(self, f"{attack}_options", str(parse(attack, getattr(self, f"{attack}_options"))))

    def options(self, arm: str) -> str:
        return getattr(self, f"{arm}_options", "")


def applies(arm: str, scheme: str) -> bool:
    """Whether ``arm`` can attack ``scheme`` (De-mark needs a green list and a bias)."""
    if arm != "demark":
        return True
    from wash.baselines import attackable

    return scheme in attackable()


def jobs(config: Config) -> list[Job]:
    out = []
    for scheme in config.schemes:
        arms = [(SINGLE, 1), *[(a, 1 if a in ONE_PROVIDER else config.n) for a in config.arms
                              if applies(a, scheme)]]
        negatives = sorted({n for _, n in arms})
        for pi, prompt in enumerate(prompt_set(config)):
            for seed in config.seeds:
                full = make_ensemble(config.n, config.models, [scheme], seed, salt=pi)
                for arm, n in [*arms, *[(UNWATERMARKED, n) for n in negatives]]:
                    specs = full[:n]  # provider 1 is the same model, scheme and key in every arm
                    key = config.key(scheme=scheme, arm=arm, n=n, prompt_id=prompt.id, seed=seed,
                                     providers=specs_text(specs), options=config.options(arm))
                    out.append(Job(key, attack_job, (specs, prompt.text, arm, config, seed)))
    return out


def attack_job(specs: Sequence[ProviderSpec], prompt: str, arm: str, config: Config, seed: int) -> JobOutput:
    """A job: one text in mode ``arm``, each provider's z, the text's perplexities and its costs."""
    extra = {"baseline_options": config.options(arm)} if arm in ATTACKS else {}
    out = generation_job(specs, prompt, arm, config, seed, scorers=config.models, **extra)
    rows = [{**row, "ppl_mean": mean_perplexity(row, config.models)} for row in out.rows]
    return JobOutput(rows=rows, generations=out.generations)


def _counter(costs: object, name: str) -> float:
    """One cost counter of a text's ``attack_costs`` JSON (a per-model dict is summed)."""
    try:
        value = json.loads(costs).get(name) if isinstance(costs, str) else None
    except ValueError:
        return math.nan
    if isinstance(value, dict):
        value = sum(v for v in value.values() if isinstance(v, (int, float)))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """Per (scheme, arm, n): z, detected share, TPR at ``fpr``, perplexity, cost."""
    cost_cols = sorted({c for cs in COST_COUNTERS.values() for c in cs})
    cols = [*BY, "rows", "z_mean", "z_sd", "z_ci_low", "z_ci_high", "detected_rate", "tpr", "tpr_ci_low",
            "tpr_ci_high", "threshold", "calibration", "n_neg", "tpr_nominal", "texts", "ppl", "tokens", "seconds_per_text",
            "ms_per_token", "cost_ratio", *cost_cols]
    if rows.empty or "z" not in rows:
        return pd.DataFrame(columns=cols)
    z = group_summary(rows, BY, "z", cluster="prompt_id").rename(columns={
        "count": "rows", "mean": "z_mean", "sd": "z_sd", "ci_low": "z_ci_low", "ci_high": "z_ci_high"})
    detected = rows.groupby(BY, sort=False).agg(detected_rate=("detected", lambda s: float(as_bool(s).mean())))
    texts = first_per_job(rows)
    seconds = pd.to_numeric(texts.get("total_s"), errors="coerce")
    texts = texts.assign(seconds=seconds, ms_token=1000 * seconds / texts["tokens_generated"].clip(lower=1))
    for c in cost_cols:
        texts[c] = [_counter(v, c) for v in texts.get("attack_costs", pd.Series([None] * len(texts)))]
    per_text = texts.groupby(BY, sort=False).agg(
        texts=("job", "size"), ppl=("ppl_mean", "mean"), tokens=("tokens_generated", "mean"),
        seconds_per_text=("seconds", "median"), ms_per_token=("ms_token", "median"),
        **{c: (c, "median") for c in cost_cols})
    summary = z.merge(detected.reset_index(), on=BY).merge(per_text.reset_index(), on=BY)
    records = []
    for _, r in summary.iterrows():
        part = rows[(rows["scheme"] == r["scheme"]) & (rows["arm"] == r["arm"]) & (rows["n"] == r["n"])]
        neg = rows[(rows["scheme"] == r["scheme"]) & (rows["arm"] == UNWATERMARKED) & (rows["n"] == r["n"])]
        pos, negz = part["z"].tolist(), neg["z"].tolist()
        rec = {"tpr": math.nan, "tpr_ci_low": math.nan, "tpr_ci_high": math.nan, "threshold": math.nan,
               "calibration": CALIBRATION, "n_neg": len(negz), "tpr_nominal": rate_above(pos, NOMINAL_Z_5PCT)}
        if pos and negz:
            cal = tpr_at_fpr(pos, negz, config.fpr)
            lo, hi = rate_interval(ScoredTexts.from_rows(part), cal.threshold)
            rec.update(tpr=cal.tpr, tpr_ci_low=lo, tpr_ci_high=hi, threshold=cal.threshold)
        records.append(rec)
    summary = pd.concat([summary.reset_index(drop=True), pd.DataFrame(records)], axis=1)
    single = summary[summary["arm"] == SINGLE].set_index("scheme")["seconds_per_text"]
    summary["cost_ratio"] = summary["seconds_per_text"] / summary["scheme"].map(single)
    order = {a: i for i, a in enumerate((SINGLE, WASH, *ATTACKS, UNWATERMARKED))}
    summary = summary.sort_values(["scheme", "arm", "n"], key=lambda s: s.map(order) if s.name == "arm" else s,
                                  kind="stable")
    return summary[cols].reset_index(drop=True)


def not_applicable(config: Config) -> list[tuple[str, str]]:
    """(arm, scheme) pairs the run skipped because the attack does not apply to the scheme."""
    return [(a, s) for s in config.schemes for a in config.arms if not applies(a, s)]


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec | None:
    """Per scheme: each arm's mean z (95% CI) and TPR at the calibrated FPR, and its cost ratio."""
    if summary.empty:
        return None
    arms = [a for a in (SINGLE, WASH, *ATTACKS) if a in set(summary["arm"])]
    z_panel = Panel("each provider's own detector z on the final text", "arm", "mean z (95% CI)",
                    hlines=[(config.z_threshold, f"z = {config.z_threshold:g}")])
    tpr_panel = Panel(f"TPR at {config.fpr:.0%} FPR (in-sample, N-matched unwatermarked negatives)", "arm",
                      "TPR (95% CI, bootstrap over prompts)")
    cost_panel = Panel("seconds per text / single's (one run, 2 workers sharing the machine)", "arm",
                       "cost ratio")
    for scheme in config.schemes:
        s = summary[(summary["scheme"] == scheme) & summary["arm"].isin(arms)]
        if not len(s):
            continue
        x = s["arm"].tolist()
        z_panel.series.append(Series(scheme, x, s["z_mean"].tolist(), (s["z_mean"] - s["z_ci_low"]).tolist(),
                                     (s["z_ci_high"] - s["z_mean"]).tolist(), kind="bar"))
        tpr_panel.series.append(Series(scheme, x, s["tpr"].tolist(), (s["tpr"] - s["tpr_ci_low"]).tolist(),
                                       (s["tpr_ci_high"] - s["tpr"]).tolist(), kind="bar"))
        cost_panel.series.append(Series(scheme, x, s["cost_ratio"].tolist(), kind="bar"))
    return FigureSpec(f"WASH (N = {config.n}) and the paper's baselines ({config.tokens} new tokens, "
                      f"{config.prompts} prompts, models {', '.join(config.models)})",
                      [z_panel, tpr_panel, cost_panel])
