"""TPR at 5% FPR per scheme: watermarked baseline, naive averaging and WASH (Tables 2, 6).

z-scores of different schemes are not comparable, so the paper reports the share
of texts a scheme's detector flags at a threshold that flags 5% of unwatermarked
texts. How that threshold is set decides whether the 5% is real:

* Held-out negatives. The negatives are unwatermarked generations (mode
  ``unwatermarked``: WASH with every watermark off, routing included) on prompts
  that are NOT the positives' (``held_out_prompts``: the prompt file minus the
  first ``prompts``), ``negative_seeds`` seeds each, for every model set the
  positives use (N = 1: ``models[0]`` alone; each N of ``n_values``: the same
  base-model cycle as ``make_ensemble``). A threshold fitted on the very texts it
  is then said to flag 5% of reports an in-sample FPR that is at most 5% by
  construction and says nothing about new texts; so the negatives are split by
  prompt into two halves (``stats.split_half_by_prompt``: alternate held-out
  prompts), the threshold comes from the calibration half (the order statistic
  ``stats.threshold_at_fpr``) and the FPR is measured on the other half
  (``fpr_check``, with its interval): where that is well above 5%, the threshold
  does not hold out. ``fpr_calibration`` is the in-sample FPR of the calibration
  half. A negative text is scored by the detectors of the scheme under test:
  negative number j of a model set gets the providers ``make_ensemble(n, models,
  [scheme], seed=seeds[(j // prompts) % len(seeds)], salt=j % prompts)``, the
  keys of the positives on prompt j mod ``prompts``, so every key the positives
  use is calibrated against. The text depends only on the base models, so it is
  generated once and re-scored from the generation store for every scheme.
* Per model set. The threshold is set per scheme and per model set: the
  negatives of N = 1 are SmolLM2 texts scored by SmolLM2 detectors, those of
  N = 3 and 5 are routed mixtures scored by detectors on both tokenizers, so the
  null need not be the same. (In the first paper-profile run, whose 30
  in-sample negatives per model set were on the positives' prompts, the null z
  of N = 1 and N = 5 could not be told apart, two-sample KS p >= 0.79 for every
  scheme; per-model-set thresholds assume nothing either way.)
* The text is the unit. A cell (scheme, mode, n) reports, per provider, texts
  flagged out of texts (``flagged``); its TPR is the mean over providers of the
  flagged share. The ``n`` detectors of an ensemble read the same text and texts
  on one prompt share its topic, so the 95% intervals come from a bootstrap over
  PROMPTS (``stats.prompt_bootstrap_interval``: percentile, fixed seed), not from
  a Wilson interval over ``n`` x texts "independent" trials, which was too narrow.
  The held-out FPR's interval is clustered by held-out prompt the same way.

Besides the calibrated TPR, the TPR and FPR at the nominal threshold z > 1.645 (a
5% one-sided test if the detector's null is exactly standard normal) are
reported: with few negatives the calibrated threshold is coarse (from 36 texts,
the 5% threshold is the second-largest score at N = 1).
``naive`` vs ``wash`` is the routing ablation (Table 6's detection column).

Forwards default to ``lazy`` (``--forwards eager`` to change): only the texts'
detection z is read, and a lazy step draws from the same law as the average.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pandas as pd

from wash.engine import ProviderSpec
from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import LINEUPS, make_ensemble, prompt_set, specs_text
from wash.experiments.generation import generation_job
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.detection import key_null, FPR_CALIBRATED
from wash.experiments.stats import (NOMINAL_Z_5PCT, HeldOutSplit, ScoredTexts, exact_interval, flagged_share,
                                    held_out_detection, key_null_detection, split_half_by_prompt)
from wash.content.prompts import Prompt, load_prompts
from wash.watermarks import paper_schemes, published_schemes

NAME = "tpr"
#: A folder's key-null scores (written by ``python -m wash.experiments.key_null_scores FOLDER --merge``).
KEY_NULL_FILE = "tpr_key_null.csv.gz"
UNWATERMARKED = "unwatermarked"
#: The ``role`` key field of a held-out negative's job (positives' keys have no role, as before).
NEGATIVE = "negative"
#: What the ``calibration`` column says about how each threshold was set.
CALIBRATION = "held-out half, per scheme and model set"
#: ... when it comes from the null over keys (``wash.detection.key_null``).
CALIBRATION_KEY_NULL = "null over keys: calibration-half texts x random keys, per scheme and model set"
#: How the "any provider flags" decision combines an ensemble's N per-provider p-values.
ANY_METHOD = "simes"
COLUMNS = ["scheme", "mode", "n", "condition", "tpr", "tpr_ci_low", "tpr_ci_high", "threshold", "calibration",
           "n_prompts", "n_pos", "n_neg", "n_cal", "n_check", "fpr_calibration", "fpr_check",
           "fpr_check_ci_low", "fpr_check_ci_high", "flagged", "tpr_nominal", "fpr_nominal", "mean_z_pos", "mean_z_neg",
           "n_null", "null_keys", "tpr_any", "tpr_any_ci_low", "tpr_any_ci_high", "fpr_any_check",
           "fpr_any_check_ci_low", "fpr_any_check_ci_high", "any_method", "null_ks_p", "null_ad_p"]


#: Every published scheme: the paper's Table 2 ones in its column order, then the others.
SCHEMES = paper_schemes(2) + tuple(s for s in published_schemes() if s not in paper_schemes(2))


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = SCHEMES
    n_values: tuple[int, ...] = (3, 5)
    modes: tuple[str, ...] = ("naive", "wash")
    fpr: float = FPR_CALIBRATED
    #: Generation seeds of each held-out negative prompt.
    negative_seeds: tuple[int, ...] = (0, 1)
    #: How many held-out prompts the negatives use, in file (interleaved) order; 0: all of them.
    negative_prompts: int = 0
    #: Only the texts' detection z is read, never the distributions: lazy.
    forwards: str = "lazy"
    #: Whether the single watermarked provider (N = 1) is a condition; the long-text run, which asks
    #: only how an ensemble's detection grows with length, leaves it out.
    baseline: bool = True
    #: Every text exactly ``tokens`` generated tokens long (end of text masked until then): TPR against
    #: length compares prefixes of one text set, which texts that stop early would thin out at the longer cuts.
    fixed_length: bool = False

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=48, schemes=("kgw", "aar"), n_values=(3, 5), negative_prompts=6,
                      negative_seeds=(0,)),
        # four held-out prompts: two per half, the fewest a prompt bootstrap can resample
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=2, tokens=4, schemes=("kgw",),
                     n_values=(2,), negative_prompts=4, negative_seeds=(0,)),
        # issue 59's long texts: how many tokens a provider needs to see through WASH
        "long": dict(prompts=30, tokens=800, schemes=("aar", "kgw", "synthid", "dipmark"), n_values=(5, 3),
                     modes=("wash",), negative_prompts=30, negative_seeds=(0,), baseline=False, fixed_length=True),
    }
    LINEUPS: ClassVar[tuple[str, ...]] = LINEUPS

    def __post_init__(self) -> None:
        if not self.negative_seeds:
            raise ValueError(f"experiment {NAME}: give at least one negative seed")
        if self.negative_prompts < 0:
            raise ValueError(f"experiment {NAME}: negative_prompts must be 0 (all) or more, "
                             f"got {self.negative_prompts}")
        if len(held_out_prompts(self)) < 2:
            raise ValueError(f"experiment {NAME}: {self.prompts} positive prompts leave fewer than two "
                             f"held-out prompts for the negatives (the prompt file has {len(load_prompts())})")

    def conditions(self) -> list[tuple[str, int]]:
        single = [("single", 1)] if self.baseline else []
        return single + [(m, n) for n in self.n_values for m in self.modes]

    def key(self, **params):
        """As ``ExperimentConfig.key``; a fixed-length run's keys say so (the others' stay as they were)."""
        fixed = {"fixed_length": True} if self.fixed_length else {}
        return super().key(**params, **fixed)

    def length_settings(self) -> dict[str, int]:
        """The engine settings a fixed length adds to every generation (none otherwise)."""
        return {"min_new_tokens": self.tokens} if self.fixed_length else {}

    def generations(self):
        return {"": self.generation(**self.length_settings())}

    def model_sets(self) -> list[int]:
        """The ensemble sizes the positives use (1 for ``single``): one negative set each."""
        return sorted({n for _, n in self.conditions()})


def held_out_prompts(config: Config) -> list[Prompt]:
    """The negatives' prompts: every prompt not among the positives', in the file's interleaved order."""
    positive = {p.id for p in prompt_set(config)}
    held = [p for p in load_prompts() if p.id not in positive]
    return held[:config.negative_prompts] if config.negative_prompts else held


def negative_split(config: Config) -> tuple[list[str], list[str]]:
    """Ids of the held-out prompts that calibrate the thresholds, and of those that check them."""
    return split_half_by_prompt([p.id for p in held_out_prompts(config)])


def negative_specs(config: Config, scheme: str, n: int, j: int) -> list[ProviderSpec]:
    """The detectors that score negative number ``j`` of model set ``n``: the keys of the positives'
    prompt ``j mod prompts`` (and, past every prompt, of the next positive seed)."""
    seed = config.seeds[(j // config.prompts) % len(config.seeds)]
    return make_ensemble(n, config.models, [scheme], seed, salt=j % config.prompts, lineup=config.lineup)


def jobs(config: Config) -> list[Job]:
    out = []
    for scheme in config.schemes:  # positives: keys as before the negatives were held out
        for mode, n in config.conditions():
            for pi, prompt in enumerate(prompt_set(config)):
                for seed in config.seeds:
                    specs = make_ensemble(n, config.models, [scheme], seed, salt=pi, lineup=config.lineup)
                    key = config.key(scheme=scheme, mode=mode, n=n, prompt_id=prompt.id, seed=seed,
                                     providers=specs_text(specs))
                    out.append(Job(key, generation_job, (specs, prompt.text, mode, config, seed),
                                   config.length_settings()))
    # negatives, scheme by scheme: the first scheme generates every text, the others re-score it
    negatives = [(prompt, seed) for prompt in held_out_prompts(config) for seed in config.negative_seeds]
    for scheme in config.schemes:
        for n in config.model_sets():
            for j, (prompt, seed) in enumerate(negatives):
                specs = negative_specs(config, scheme, n, j)
                key = config.key(scheme=scheme, mode=UNWATERMARKED, n=n, prompt_id=prompt.id, seed=seed,
                                 providers=specs_text(specs), role=NEGATIVE)
                out.append(Job(key, generation_job, (specs, prompt.text, UNWATERMARKED, config, seed),
                               config.length_settings()))
    return out


def read_key_null(config: Config) -> pd.DataFrame:
    """The folder's key-null scores (``key_null_scores.FILE``), or an empty frame where none were scored."""
    path = Path(config.out) / KEY_NULL_FILE
    return pd.read_csv(path) if path.exists() else pd.DataFrame(columns=key_null.COLUMNS)


def summarize(rows: pd.DataFrame, config: Config, key_nulls: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (scheme, mode, n): per-text TPR at the held-out threshold, its held-out FPR, and the
    "any provider flags" decision.

    Where the folder has key-null scores for the cell (``key_nulls``, default the folder's
    ``tpr_key_null.csv.gz``), the threshold is the (1 - fpr) quantile of those (at least
    ``key_null.MIN_NULL_SCORES``) and the check half's own-key scores give its FPR with a
    Clopper-Pearson interval (``stats.key_null_detection``); the "any provider" decision
    combines each text's per-provider rank p-values in its provider model's key-null
    (``key_null.any_provider_flags``, ``ANY_METHOD``), its TPR and check-half FPR
    counted per text with exact intervals. Elsewhere the threshold is the calibration
    half's own order statistic, as before (``calibration`` says which).
    """
    records = []
    if rows.empty or "z" not in rows:
        return pd.DataFrame(columns=COLUMNS)
    nulls = read_key_null(config) if key_nulls is None else key_nulls
    role = rows["role"] if "role" in rows else pd.Series(None, index=rows.index, dtype=object)
    negative_rows, positive_rows = rows[role.eq(NEGATIVE)], rows[~role.eq(NEGATIVE)]
    order = [p.id for p in held_out_prompts(config)]
    for scheme in config.schemes:
        for mode, n in config.conditions():
            pos = positive_rows[(positive_rows["scheme"] == scheme) & (positive_rows["mode"] == mode)
                                & (positive_rows["n"] == n)]
            neg = negative_rows[(negative_rows["scheme"] == scheme) & (negative_rows["n"] == n)]
            if pos.empty or neg.empty:
                continue
            negatives = ScoredTexts.from_rows(neg)
            split = HeldOutSplit.by_prompt(negatives, order)
            if not len(split.calibration):
                continue
            positives = ScoredTexts.from_rows(pos)
            cell = nulls[(nulls["scheme"] == scheme) & (nulls["n"] == n)]
            record = {"scheme": scheme, "mode": mode, "n": n, "condition": _label(mode, n),
                      "n_prompts": len(positives.prompts), "n_pos": len(positives.texts),
                      "n_neg": len(negatives.texts), "n_cal": len(split.calibration.texts),
                      "n_check": len(split.check.texts),
                      "tpr_nominal": flagged_share(positives, NOMINAL_Z_5PCT),
                      "fpr_nominal": flagged_share(negatives, NOMINAL_Z_5PCT),
                      "mean_z_pos": float(pos["z"].mean()), "mean_z_neg": float(neg["z"].mean())}
            if cell.empty:
                res = held_out_detection(positives, split, config.fpr)
                record.update(threshold=res.threshold, calibration=CALIBRATION, n_null=len(split.calibration),
                              fpr_calibration=res.fpr_calibration)
            else:
                null = ScoredTexts.from_rows(cell)
                res = key_null_detection(positives, null, split.check, config.fpr)
                match = key_null.match_fresh(null.z, split.check.z)
                record.update(threshold=res.threshold, calibration=CALIBRATION_KEY_NULL, n_null=res.n_null,
                              null_keys=int(cell["key"].nunique()), fpr_calibration=flagged_share(null, res.threshold),
                              null_ks_p=match.ks_p, null_ad_p=match.ad_p, any_method=ANY_METHOD,
                              **_any_provider(pos, neg[neg["prompt_id"].isin(split.check.prompts)], cell, config.fpr))
            record.update(tpr=res.tpr, tpr_ci_low=res.tpr_ci[0], tpr_ci_high=res.tpr_ci[1],
                          fpr_check=res.fpr_check, fpr_check_ci_low=res.fpr_check_ci[0],
                          fpr_check_ci_high=res.fpr_check_ci[1],
                          flagged=", ".join(f"{k}/{m}" for _, k, m in res.flagged))
            records.append(record)
    return pd.DataFrame(records, columns=COLUMNS)


def _any_provider(pos: pd.DataFrame, check: pd.DataFrame, cell: pd.DataFrame, alpha: float) -> dict:
    """TPR and check-half FPR of the "any provider flags" decision, per text, with exact intervals.

    Each provider slot's p-value is its rank in the key-null of its own base model
    (every slot of that model, all keys: a key-null does not depend on the slot)."""
    by_model = {m: g["z"].to_numpy(float) for m, g in cell.groupby("provider_model")}
    out = {}
    for name, rows in (("tpr_any", pos), ("fpr_any_check", check)):
        models = dict(zip(rows["provider"].astype(int), rows["provider_model"]))
        flags = key_null.any_provider_flags(rows["job"].astype(str), rows["provider"].astype(int), rows["z"],
                                            {k: by_model[m] for k, m in models.items()}, alpha, ANY_METHOD)
        k, m = sum(flags.values()), len(flags)
        low, high = exact_interval(k, m)
        out.update({name: k / m if m else float("nan"), f"{name}_ci_low": low, f"{name}_ci_high": high})
    return out


def _label(mode: str, n: int) -> str:
    return "watermarked (single)" if mode == "single" else f"{mode} N={n}"


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    """Per scheme: each condition's TPR, and the FPR each model set's threshold gives on the check half."""
    tpr = Panel(f"TPR, threshold at {config.fpr:.0%} FPR on a held-out calibration half (null over keys where "
                "scored)", "scheme", "TPR per text (95% CI, bootstrap over prompts; exact at 0 or 1)")
    for mode, n in config.conditions():
        s = summary[(summary["mode"] == mode) & (summary["n"] == n)]
        if len(s):
            tpr.series.append(Series(_label(mode, n), s["scheme"].tolist(), s["tpr"].tolist(),
                                     (s["tpr"] - s["tpr_ci_low"]).tolist(), (s["tpr_ci_high"] - s["tpr"]).tolist(),
                                     kind="bar"))
    fpr = Panel("FPR of that threshold on the held-out check half", "scheme",
                "FPR per text (95% CI)", hlines=[(config.fpr, f"{config.fpr:.0%}")])
    for n in config.model_sets():
        s = summary[summary["n"] == n].drop_duplicates("scheme")  # one threshold per (scheme, model set)
        if len(s):
            fpr.series.append(Series(f"negatives N={n}", s["scheme"].tolist(), s["fpr_check"].tolist(),
                                     (s["fpr_check"] - s["fpr_check_ci_low"]).tolist(),
                                     (s["fpr_check_ci_high"] - s["fpr_check"]).tolist(), kind="bar"))
    return FigureSpec(f"TPR at {config.fpr:.0%} FPR, held-out calibration ({config.tokens} new tokens, "
                      f"models {', '.join(config.models)})", [tpr, fpr])
