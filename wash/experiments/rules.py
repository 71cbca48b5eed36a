"""Aggregation rules screened against every scheme and quality: does a robust rule beat the mean?

The paper's WASH draws each token from the mean of the providers' distributions
(``wash.engine.aggregation``); sampling-based schemes (AAR's point mass) keep a signal under
it. Each rule of ``rules`` (the mean, the median and clipped variants at several
strengths xi) generates texts with N providers cycling through the base models
(decay's ``mixed`` setting), every provider carrying the row's scheme with its own key.
Every text is measured twice: each provider's own detector z (as in ``decay``) and its
perplexity under each unwatermarked base model (as in ``quality``), with
``ppl_mean`` the mean over those models. Two references per scheme: the watermarked
single provider (``arm`` ``single``, N = 1, where every rule is the provider itself:
run once, under the mean) and an unwatermarked control (``arm`` ``unwatermarked``,
the engine's ``unwatermarked`` mode under the mean, scored by the scheme's detectors:
the null z and the perplexity to aim for; one text per prompt, shared by every scheme
through the generation store). ``mix`` in ``schemes`` runs one ensemble mixing
``mix_schemes`` (provider i gets the i-th; by default KGW, DiPMark and AAR, where a
robust centre exists at every token) and reports each provider scheme on its own
(``mix/kgw``, ...): an all-AAR ensemble has no robust centre at all (three point
masses on different tokens leave a median of 0 everywhere, and every robust rule
falls back to the mean).

The summary gives, per (arm, rule, scheme), the provider z (mean, sd, 95% CI, rows),
the detected share, the mean perplexity (per base model and their mean), and against
the mean rule of the same scheme: ``z_minus_mean``, ``ppl_ratio_to_mean``,
``beats_mean`` (lower mean z on this scheme) and ``beats_mean_every_scheme`` (lower on
every scheme of the run). The figure plots z against perplexity, one panel per
scheme, each rule family a curve over its xi values, with the single provider's z and
the detection threshold as reference lines.

Forwards default to ``eager``: a rule other than the mean needs every provider's
distribution at every step (a lazy step has the law of the mean only), and the mean
is run eagerly too so that every rule is compared on the same forwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Sequence

import pandas as pd

from wash.engine import ProviderSpec, Rule
from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, prompt_set, specs_text
from wash.experiments.generation import generation_job
from wash.experiments.jobs import Job, JobOutput
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.experiments.scoring import as_bool, first_per_job, perplexity_long
from wash.experiments.stats import group_summary

NAME = "rules"
MEAN = "mean"
#: ``schemes`` entry for one ensemble mixing ``mix_schemes`` (provider i gets the i-th);
#: its rows are reported per provider scheme, ``mix/kgw``, ``mix/aar``, ...
MIX = "mix"
#: ``arm`` of each job: WASH under a rule, the watermarked single provider, the unwatermarked control.
WASH, SINGLE, UNWATERMARKED = "wash", "single", "unwatermarked"
#: The ``rule`` recorded for the single provider, whose text no rule changes.
NO_RULE = "none"
DEFAULT_RULES = ("mean", "median", "loo-clip:xi=1", "median-clip:xi=0.25", "median-clip:xi=0.5",
                 "median-clip:xi=1", "median-clip:xi=2", "cap:xi=0.5", "cap:xi=1", "geo-clip:xi=0.5",
                 "geo-clip:xi=1")
BY = ["arm", "rule", "scheme", "n"]


@dataclass
class Config(ExperimentConfig):
    prompts: int = 10
    tokens: int = 100
    schemes: tuple[str, ...] = ("kgw", "aar", "dipmark", "synthid")
    #: Aggregation rules (``wash.engine.aggregation``), one WASH generation per (rule, scheme, prompt, seed).
    rules: tuple[str, ...] = DEFAULT_RULES
    #: Provider i of a ``mix`` ensemble carries ``mix_schemes[i % len]``: by default the
    #: line-up on which the median and leave-one-out clipping first failed (smollm2/kgw,
    #: gemma3/dipmark, smollm2/aar). A robust centre exists only where providers are not
    #: all point masses.
    mix_schemes: tuple[str, ...] = ("kgw", "dipmark", "aar")
    n: int = 3
    #: Robust rules need every provider's distribution each step: eager (for the mean too, to compare alike).
    forwards: str = "eager"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=3, tokens=64),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4,
                     rules=("mean", "median-clip:xi=0.5"), schemes=("kgw", "aar")),
    }

    def __post_init__(self) -> None:
        if not self.rule.is_mean:
            raise ValueError(f"experiment {NAME} takes its rules from the 'rules' setting "
                             "(--set rules=mean,median-clip:xi=0.5), not --aggregate")
        # each rule's generation, as the engine's config parses and checks it (a robust rule
        # needs eager forwards); canonical spellings, each once: 'cap:xi=1' and 'cap' are one
        # rule and one job key
        runs = [self.generation(aggregate=r) for r in self.rules]
        self.rules = tuple(dict.fromkeys(str(run.rule) for run in runs))
        for run in runs:
            run.check_forwards()
        if not self.rules:
            raise ValueError(f"experiment {NAME}: give at least one rule")
        if self.n < 2:
            raise ValueError(f"experiment {NAME}: n must be at least 2 (N = 1 is the single-provider arm), "
                             f"got {self.n}")

    def parsed_rules(self) -> dict[str, Rule]:
        """Each of ``rules`` (canonical spellings) with its ``Rule``, as the engine's config parses it."""
        return {r: self.generation(aggregate=r).rule for r in self.rules}


def jobs(config: Config) -> list[Job]:
    out = []
    arms = [(SINGLE, NO_RULE, 1), *[(WASH, rule, config.n) for rule in config.rules],
            (UNWATERMARKED, MEAN, config.n)]
    for scheme in config.schemes:
        for arm, rule, n in arms:
            mode = UNWATERMARKED if arm == UNWATERMARKED else "wash"
            for pi, prompt in enumerate(prompt_set(config)):
                for seed in config.seeds:
                    # provider 0 of every ensemble is the single provider (same model, scheme and key)
                    schemes = list(config.mix_schemes) if scheme == MIX else [scheme]
                    specs = make_ensemble(n, config.models, schemes, seed, salt=pi)
                    key = config.key(arm=arm, rule=rule, scheme=scheme, n=n, prompt_id=prompt.id, seed=seed,
                                     providers=specs_text(specs))
                    aggregate = MEAN if rule == NO_RULE else rule
                    out.append(Job(key, rule_job, (specs, prompt.text, mode, config, seed, aggregate)))
    return out


def rule_job(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
             aggregate: str) -> JobOutput:
    """A job: one text generated under ``aggregate``, each provider's z and its perplexities.

    ``generation_job`` does the work (the rule reaches the engine and the store key as
    its ``aggregate`` override); every row gains ``ppl_mean``, the mean of the text's
    perplexities under the base models that scored at least one token.
    """
    out = generation_job(specs, prompt, mode, config, seed, scorers=config.models, aggregate=aggregate)
    rows = [{**row, "ppl_mean": mean_perplexity(row, config.models)} for row in out.rows]
    return JobOutput(rows=rows, generations=out.generations)


def mean_perplexity(row: dict, scorers: Sequence[str]) -> float:
    values = [float(row[f"ppl_{m}"]) for m in dict.fromkeys(scorers)
              if row.get(f"scored_tokens_{m}", 0) and math.isfinite(float(row[f"ppl_{m}"]))]
    return sum(values) / len(values) if values else float("nan")


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """Per (arm, rule, scheme, n): z over every (text, provider) pair, perplexity over texts, vs the mean rule."""
    scorers = list(dict.fromkeys(config.models))
    cols = [*BY, "rows", "z_mean", "z_sd", "z_ci_low", "z_ci_high", "detected_rate", "texts", "ppl",
            *[f"ppl_{m}" for m in scorers], "single_z", "z_minus_mean", "ppl_ratio_to_mean", "beats_mean",
            "beats_mean_every_scheme"]
    if rows.empty or "z" not in rows:
        return pd.DataFrame(columns=cols)
    if "provider_scheme" in rows:  # a mixed ensemble is read per provider scheme
        mixed = rows["scheme"] == MIX
        rows = rows.assign(scheme=rows["scheme"].where(~mixed, MIX + "/" + rows["provider_scheme"].astype(str)))
    # per-text fields (texts, perplexity) once per (text, reported scheme): a mixed text counts under each
    per_text = rows.assign(job=rows["job"].astype(str) + "|" + rows["scheme"].astype(str))
    z = group_summary(rows, BY, "z").rename(columns={
        "count": "rows", "mean": "z_mean", "sd": "z_sd", "ci_low": "z_ci_low", "ci_high": "z_ci_high"})
    detected = rows.groupby(BY, sort=False).agg(
        detected_rate=("detected", lambda s: float(as_bool(s).mean()))).reset_index()
    texts = first_per_job(per_text).groupby(BY, sort=False).agg(texts=("job", "size"),
                                                            ppl=("ppl_mean", "mean")).reset_index()
    summary = z.merge(detected, on=BY).merge(texts, on=BY)
    per_scorer = perplexity_long(per_text, scorers, BY)
    for m in scorers:
        part = per_scorer[per_scorer["scorer"] == m].groupby(BY, sort=False)["ppl"].mean()
        part = part.rename(f"ppl_{m}").reset_index()
        summary = summary.merge(part, on=BY, how="left") if len(part) else summary.assign(**{f"ppl_{m}": math.nan})
    # the references of each scheme: the single provider's z and the mean rule's z and perplexity
    scheme = summary["scheme"]
    single = summary[summary["arm"] == SINGLE].set_index("scheme")
    mean = summary[(summary["arm"] == WASH) & (summary["rule"] == MEAN)].set_index("scheme")
    summary["single_z"] = scheme.map(single["z_mean"])
    summary["z_minus_mean"] = summary["z_mean"] - scheme.map(mean["z_mean"])
    summary["ppl_ratio_to_mean"] = summary["ppl"] / scheme.map(mean["ppl"])
    is_wash = summary["arm"] == WASH
    beats = summary["z_minus_mean"] < 0
    summary["beats_mean"] = beats.where(is_wash & summary["z_minus_mean"].notna())
    every = {}
    for rule, part in summary[is_wash].groupby("rule", sort=False):
        covered = set(part["scheme"]) >= set(mean.index) and part["z_minus_mean"].notna().all()
        every[rule] = bool(covered and (part["z_minus_mean"] < 0).all()) if len(mean) else None
    summary["beats_mean_every_scheme"] = summary["rule"].map(every).where(is_wash)
    return summary[cols]


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec | None:
    """z against perplexity per scheme: each rule family a curve over increasing xi."""
    parsed = config.parsed_rules()

    def _xi(rule: str) -> float:
        return float(getattr(parsed[rule], "xi", 0.0))

    families: dict[str, list[str]] = {}
    for rule, obj in parsed.items():
        families.setdefault(obj.name, []).append(rule)
    panels = []
    for scheme in dict.fromkeys(summary["scheme"]):
        part = summary[summary["scheme"] == scheme]
        if part.empty:
            continue
        hlines = [(config.z_threshold, f"z = {config.z_threshold:g}")]
        single = part[part["arm"] == SINGLE]["z_mean"]
        if len(single) and math.isfinite(single.iloc[0]):
            hlines.insert(0, (float(single.iloc[0]), f"single provider z = {single.iloc[0]:.1f}"))
        panel = Panel(f"{scheme} (N = {config.n})", "perplexity (mean over base models)",
                      "provider z (mean, 95% CI)", hlines=hlines)
        wash = part[part["arm"] == WASH].set_index("rule")
        for family, rules in families.items():
            rules = sorted((r for r in rules if r in wash.index), key=_xi)
            if not rules:
                continue
            s = wash.loc[rules]
            xis = [f"{_xi(r):g}" for r in rules]
            name = family if family in (MEAN, "median") else f"{family} xi={','.join(xis)}"
            panel.series.append(Series(name, s["ppl"].tolist(), s["z_mean"].tolist(),
                                       (s["z_mean"] - s["z_ci_low"]).tolist(), (s["z_ci_high"] - s["z_mean"]).tolist()))
        control = part[part["arm"] == UNWATERMARKED]
        if len(control):
            panel.series.append(Series("unwatermarked (mean)", control["ppl"].tolist(), control["z_mean"].tolist(),
                                       (control["z_mean"] - control["z_ci_low"]).tolist(),
                                       (control["z_ci_high"] - control["z_mean"]).tolist()))
        panels.append(panel)
    if not panels:
        return None
    return FigureSpec(f"Aggregation rules: provider z against perplexity ({config.tokens} new tokens, "
                      f"mixed base models {', '.join(config.models)})", panels)
