"""Does WASH cost quality? Perplexity and arithmetic accuracy per mode (paper Tables 3, 6).

Watermarks distort the distribution (the paper sees up to 10% lower accuracy);
WASH's averaging should recover the base distribution, and its routing should
keep words intact where naive averaging of mismatched vocabularies breaks them.
Two tasks, each under ``unwatermarked`` (models[0] alone), ``single`` (models[0]
watermarked), ``naive`` and ``wash`` (N providers):

* ``continuation``: continue the prompt set; perplexity of the continuation under
  EACH unwatermarked base model (a mixed ensemble's text is judged by both);
* ``arithmetic``: the project's integer word problems, answered by the instruct
  model (``arith_models``, SmolLM2-Instruct by default, with its chat template);
  correct when the last integer of the answer is the expected one. With one base
  model naive and WASH coincide (no vocabulary mismatch), so naive is skipped;
  pass two models in ``arith_models`` for the routing ablation (plain
  "Question/Answer" format then).

Forwards default to ``lazy`` (``--forwards eager`` to change): perplexities and
answers are computed from the texts alone, and a lazy step draws from the same
law as the average (the mean of the providers' distributions), so quality is
measured on identically distributed texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import pandas as pd

from wash.engine import ProviderSpec
from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, prompt_set, specs_text
from wash.experiments.generation import generate_run, generation_job, run_fields
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.experiments.scoring import as_bool, first_per_job, perplexity_long, repeated_ngram_share
from wash.experiments.stats import group_summary, median_interval, wilson_interval
from wash.content.prompts import ArithmeticProblem

NAME = "quality"
TASKS = ("continuation", "arithmetic")


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = ("kgw", "aar", "dipmark")
    n: int = 3
    modes: tuple[str, ...] = ("unwatermarked", "single", "naive", "wash")
    tasks: tuple[str, ...] = TASKS
    arith_problems: int = 50
    arith_models: tuple[str, ...] = ("smollm2",)
    arith_tokens: int = 96
    arith_temperature: float = 0.7
    #: Only the texts are read (perplexity, answers), never the distributions: lazy.
    forwards: str = "lazy"

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=2, tokens=48, schemes=("kgw",), arith_problems=6, arith_tokens=64),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4, schemes=("kgw",), n=2,
                     arith_problems=2, arith_models=("tiny-smollm2",), arith_tokens=6),
    }


def _specs(mode: str, scheme: str, models, config: Config, seed: int, salt: int):
    n = config.n if mode in ("naive", "wash") else 1
    if mode == "unwatermarked":
        # The baseline text is the same whatever scheme row it sits beside: give it
        # one key (the first scheme's), so the plan holds it once and the summary
        # does not count the same text once per scheme.
        scheme = config.schemes[0]
    return make_ensemble(n, models, [scheme], seed, salt)


def arithmetic_prompt(question: str, models) -> str:
    """The question in the instruct model's chat format, or a plain Q/A for mixed ensembles."""
    from wash.engine import load_model

    if len(set(models)) == 1:
        tok = load_model(models[0]).tokenizer
        if getattr(tok, "chat_template", None):
            return tok.apply_chat_template(
                [{"role": "user", "content": f"{question} Give the final answer as a number."}],
                tokenize=False, add_generation_prompt=True)
    return f"Question: {question}\nAnswer (a number):"


def jobs(config: Config) -> list[Job]:
    from wash.content.prompts import load_arithmetic

    out = []
    for scheme in config.schemes:
        for mode in config.modes:
            label = "none" if mode == "unwatermarked" else scheme
            for seed in config.seeds:
                if "continuation" in config.tasks:
                    for pi, prompt in enumerate(prompt_set(config)):
                        specs = _specs(mode, scheme, config.models, config, seed, pi)
                        key = config.key(task="continuation", scheme=label, mode=mode, item=prompt.id, seed=seed,
                                         providers=specs_text(specs))
                        out.append(Job(key, generation_job, (specs, prompt.text, mode, config, seed),
                                       {"scorers": config.models}))
                if "arithmetic" in config.tasks:
                    if mode == "naive" and len(set(config.arith_models)) == 1:
                        continue  # one vocabulary: naive averaging IS wash (same text), not run twice
                    for qi, problem in enumerate(load_arithmetic(limit=config.arith_problems)):
                        specs = _specs(mode, scheme, config.arith_models, config, seed, qi)
                        key = arithmetic_key(config, config.arith_tokens, config.arith_temperature, scheme=label,
                                             mode=mode, item=problem.id, seed=seed,
                                             providers=specs_text(specs))
                        args = (specs, problem, mode, config, seed, config.arith_tokens, config.arith_temperature,
                                config.arith_models)
                        out.append(Job(key, arithmetic_job, args))
    return out


def arithmetic_job(specs: Sequence[ProviderSpec], problem: ArithmeticProblem, mode: str,
                   config: ExperimentConfig, seed: int, tokens: int, temperature: float,
                   prompt_models: Sequence[str]) -> list[dict]:
    """A job: answer one word problem in ``mode``; one row with the answer and verdict.

    The prompt format follows ``prompt_models`` (the experiment's arithmetic
    ensemble), not ``specs``, so that every mode of one experiment sees the same prompt.
    The task's own ``temperature`` replaces the profile's; its top-k and top-p apply.
    """
    from wash.content.prompts import extract_last_integer

    prompt = arithmetic_prompt(problem.question, prompt_models)
    result = generate_run(specs, prompt, mode, config, seed, max_new_tokens=tokens, temperature=temperature)
    answer = extract_last_integer(result.text)
    return [{**run_fields(result), "expected": problem.answer, "answer": answer,
             "correct": answer == problem.answer}]


def arithmetic_key(config: ExperimentConfig, tokens: int, temperature: float, **params) -> dict:
    """The job key of an arithmetic answer: the task's own length and temperature replace the config's."""
    return {**config.key(task="arithmetic", **params), "tokens": tokens, "temperature": temperature}


def accuracy_summary(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Accuracy with its Wilson interval per group of ``by``."""
    records = []
    for keys, g in rows.groupby(by, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        k, n = int(as_bool(g["correct"]).sum()), len(g)
        lo, hi = wilson_interval(k, n)
        records.append({**dict(zip(by, keys)), "count": n, "accuracy": k / n, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(records, columns=[*by, "count", "accuracy", "ci_low", "ci_high"])


def _mean_and_median(frame: pd.DataFrame, by: list[str], column: str) -> pd.DataFrame:
    """``group_summary`` of ``column`` with its median over the group (and the median's
    bootstrap interval over texts, one text per prompt) beside the mean."""
    records = []
    for keys, group in frame.groupby(by, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        lo, hi = median_interval(group[column].to_numpy(dtype=float))
        records.append({**dict(zip(by, keys)), "median": float(group[column].median()),
                        "median_ci_low": lo, "median_ci_high": hi})
    medians = pd.DataFrame(records, columns=[*by, "median", "median_ci_low", "median_ci_high"])
    return group_summary(frame, by, column).merge(medians, on=by, how="left")


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """Long table: perplexity (mean and median over texts) per (scheme, mode, scorer), accuracy per (scheme, mode).

    Beside perplexity, each (scheme, mode) gets the share of repeated word 3-grams
    (scorer ``words``): a looping text has a low perplexity, and without this row a
    looping watermark would read as the most fluent one.
    """
    cols = ["task", "scheme", "mode", "scorer", "count", "value", "ci_low", "ci_high", "median", "median_ci_low",
            "median_ci_high", "metric"]
    parts = []
    if "task" in rows:
        cont = rows[rows["task"] == "continuation"]
        if len(cont):
            texts = perplexity_long(cont, config.models, ["scheme", "mode"])
            by = ["scheme", "mode", "scorer"]
            # perplexity is heavy-tailed (one short, broken text can double a mean): the median beside it
            ppl = _mean_and_median(texts, by, "ppl")
            parts.append(ppl.rename(columns={"mean": "value"}).assign(
                task="continuation", metric="perplexity (mean over texts)"))
            per_text = first_per_job(cont)
            per_text = per_text.assign(repeats=per_text["text"].fillna("").map(repeated_ngram_share))
            per_text = per_text.dropna(subset=["repeats"])
            if len(per_text):
                by = ["scheme", "mode"]
                reps = _mean_and_median(per_text, by, "repeats")
                parts.append(reps.rename(columns={"mean": "value"}).assign(
                    task="continuation", scorer="words", metric="repeated word 3-grams (share, mean over texts)"))
        arith = rows[rows["task"] == "arithmetic"]
        if len(arith):
            acc = accuracy_summary(arith, ["scheme", "mode"])
            parts.append(acc.rename(columns={"accuracy": "value"}).assign(
                task="arithmetic", scorer="exact integer", metric="accuracy"))
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat(parts, ignore_index=True)[cols]


def _bars_per_scheme(panel: Panel, rows: pd.DataFrame, modes: Sequence[str]) -> Panel:
    """One bar series per watermark scheme over ``modes``, the unwatermarked bar shared by all."""
    for scheme in [s for s in dict.fromkeys(rows["scheme"]) if s != "none"]:
        s = rows[(rows["scheme"] == scheme) | (rows["scheme"] == "none")]
        s = s.set_index("mode").reindex([m for m in modes if m in set(s["mode"])]).reset_index()
        panel.series.append(Series(scheme, s["mode"].tolist(), s["value"].tolist(),
                                   (s["value"] - s["ci_low"]).tolist(), (s["ci_high"] - s["value"]).tolist(),
                                   kind="bar"))
    return panel


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    panels = []
    cont = summary[summary["task"] == "continuation"]
    for scorer in dict.fromkeys(config.models):
        panel = _bars_per_scheme(Panel(f"continuation perplexity under {scorer}", "mode",
                                       "perplexity (mean, 95% CI)", log_y=True),
                                 cont[cont["scorer"] == scorer], config.modes)
        if panel.series:
            panels.append(panel)
    panel = _bars_per_scheme(Panel("repeated word 3-grams in the continuation", "mode", "share (mean, 95% CI)"),
                             cont[cont["scorer"] == "words"], config.modes)
    if panel.series:
        panels.append(panel)
    arith = summary[summary["task"] == "arithmetic"]
    if len(arith):
        panels.append(_bars_per_scheme(Panel(f"arithmetic accuracy ({', '.join(config.arith_models)})", "mode",
                                             "accuracy (Wilson 95% CI)"), arith, config.modes))
    return FigureSpec(f"Quality per mode (N = {config.n})", panels)
