"""``python -m wash experiment NAME``: run, resume or re-summarise one experiment.

Settings come from the experiment's preset (``--preset full`` by default, ``quick``
for a run of minutes, ``tiny`` for the random test models; ``--quick`` and ``--tiny``
are short for them), then the common options (``--forwards eager|lazy`` among them:
each experiment has its own default, named in its docstring; ``--profile`` for the
serving settings; ``--aggregate`` for a robust aggregation rule, which switches the
default forwards to eager), then ``--set field=value`` for anything experiment-specific
(``--show`` lists the fields and the number of jobs without running anything). Bad
input ends in one line and exit code 2, like the rest of the CLI.

Outputs go to ``runs/NAME`` (``runs/NAME-PRESET``) by default, a scratch folder git
ignores; results worth keeping are written to (or copied into) ``results/NAME``,
which is committed (see results/README.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from wash.engine import describe_rules, DEFAULT_PROFILE, FORWARDS, MAX_NEW_TOKENS_ENGINE, PROFILES
from wash.core.errors import WashInputError
from wash.experiments.registry import EXPERIMENTS, load
from wash.experiments.ensembles import LINEUPS, scheme_variant
from wash.core.provenance import command_line


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "experiment", help="run one of the paper's experiments (resumable CSV + figures)",
        description="Experiments: " + "; ".join(f"{k}: {v}" for k, v in EXPERIMENTS.items()))
    p.add_argument("name", choices=list(EXPERIMENTS))
    preset = p.add_mutually_exclusive_group()
    preset.add_argument("--preset",
                        help="full (default): the paper's sizes; quick: minutes on 2 CPU cores; "
                             "tiny: the tiny random test models (seconds); an experiment may offer more "
                             "(its Config.PRESETS: tpr's long, the 800-token texts)")
    preset.add_argument("--quick", action="store_true", help="same as --preset quick")
    preset.add_argument("--tiny", action="store_true", help="same as --preset tiny")
    p.add_argument("--out", type=Path,
                   help="output directory (default runs/NAME or runs/NAME-PRESET: scratch, git-ignored). "
                        "Write results worth keeping to results/NAME, the committed folder "
                        "(results/README.md)")
    p.add_argument("--models", nargs="+", help="base models; the first is the fixed/instruct model")
    p.add_argument("--prompts", type=int, help="number of prompts (interleaved across domains)")
    p.add_argument("--tokens", type=int, help="new tokens per generation")
    p.add_argument("--seeds", type=int, nargs="+", help="generation seeds (each draws new keys)")
    p.add_argument("--schemes", nargs="+", help="watermark schemes, each optionally with parameters joined by +, "
                                                        "e.g. kgw aar:form=soft its-edit:permutation=shared")
    p.add_argument("--forwards", choices=FORWARDS,
                   help="eager: every model's forward each step, token drawn from the average; lazy: one "
                        "uniformly picked provider draws it (same law, one forward). Default: the "
                        "experiment's own (lazy where only the texts are read, eager for cost)")
    p.add_argument("--aggregate", metavar="RULE[:xi=X]",
                   help="aggregation rule of every generation (default mean, the paper's): "
                        + describe_rules() + ". A rule other than mean runs eager forwards "
                        "(an explicit --forwards lazy is refused)")
    p.add_argument("--profile", choices=tuple(PROFILES),
                   help="serving profile of every provider (default %s): " % DEFAULT_PROFILE + "; ".join(
                       f"{q.name}: {q.description}" for q in PROFILES.values()))
    p.add_argument("--lineup", choices=LINEUPS,
                   help="how the ensembles are watermarked (decay, tpr, identify): independent (default; "
                        "every provider its own watermark and key) or anchor (provider 1 alone, the others "
                        "the same base models unwatermarked: the WASH release's attack)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any other config field, e.g. --set n_values=1,3,5 (repeatable)")
    p.add_argument("--workers", type=int, default=1,
                   help="processes running the jobs (default 1; 2 on a 2-core CPU: about 1.8x the "
                        "throughput); this process alone writes the outputs. With more than one, each worker "
                        "runs its models' forwards one after the other on cores/K torch threads instead of in "
                        "the parallel pool")
    p.add_argument("--show", action="store_true", help="print the resolved config and job count, run nothing")
    p.add_argument("--partial", action="store_true",
                   help="run nothing: summarise the jobs of this plan already in --out (figure, summary and "
                        "meta say how many of the plan's jobs they cover)")
    p.set_defaults(func=cmd_experiment)
    return p


def _parse_value(field: dataclasses.Field, default: Any, text: str) -> Any:
    """Parse ``text`` as the type of ``default`` (tuples: comma-separated items)."""
    type_text = str(field.type)
    if isinstance(default, tuple) or type_text.startswith("tuple"):
        items = [t.strip() for t in text.split(",") if t.strip()]
        sample = default[0] if default else ("" if "str" in type_text else 0.0 if "float" in type_text else 0)
        return tuple(_scalar(sample, t, field.name) for t in items)
    return _scalar(default, text, field.name)


def _scalar(sample: Any, text: str, name: str) -> Any:
    try:
        if isinstance(sample, bool):
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return text.lower() in ("true", "1", "yes")
        if isinstance(sample, int):
            return int(text)
        if isinstance(sample, float):
            return float(text)
        if isinstance(sample, Path):
            return Path(text)
    except ValueError:
        raise WashInputError(f"setting '{name}': cannot read '{text}' as {type(sample).__name__}") from None
    return text


def build_config(args: argparse.Namespace):
    module = load(args.name)
    cls = module.Config
    preset = "quick" if args.quick else "tiny" if args.tiny else (args.preset or "full")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    defaults = {**{f.name: f.default for f in fields.values()}, **cls.PRESETS.get(preset, {})}
    overrides: dict[str, Any] = {
        "models": tuple(args.models) if args.models else None, "prompts": args.prompts, "tokens": args.tokens,
        "seeds": tuple(args.seeds) if args.seeds else None, "schemes": tuple(args.schemes) if args.schemes else None,
        "forwards": getattr(args, "forwards", None), "profile": getattr(args, "profile", None),
        "aggregate": getattr(args, "aggregate", None), "lineup": getattr(args, "lineup", None),
    }
    for item in args.set:
        if "=" not in item:
            raise WashInputError(f"--set '{item}' is not of the form FIELD=VALUE")
        name, value = (s.strip() for s in item.split("=", 1))
        if name not in fields or name in ("preset", "out"):
            accepted = ", ".join(n for n in fields if n not in ("preset", "out"))
            raise WashInputError(f"unknown setting '{name}' for experiment {args.name} (accepted: {accepted})")
        overrides[name] = _parse_value(fields[name], defaults[name], value)
    suffix = "" if preset == "full" else f"-{preset}"
    overrides["out"] = args.out or Path("runs") / f"{args.name}{suffix}"
    config = cls.from_preset(preset, **overrides)
    if overrides.get("aggregate") is not None:
        rule = config.rule  # the engine config's parse
        # recorded canonically; a robust rule switches the default forwards to eager
        eager = {} if rule.is_mean or overrides.get("forwards") is not None else {"forwards": "eager"}
        config = dataclasses.replace(config, aggregate=str(rule), **eager)
    validate(config)
    return module, config


def validate(config) -> None:
    """Check models, schemes and sizes up front: one clear line instead of a failure mid-run.

    The settings of the generations (length, forwards, rule, serving) are checked by the
    engine's own ``GenerationConfig.validate``, on each config the experiment generates under.
    """
    from wash.engine import check_model_name
    from wash.watermarks import scheme_class

    for m in config.models:
        check_model_name(m)
    for s in config.schemes:
        if s != "mix":
            name, params = scheme_variant(s)
            scheme_class(name).parse_params(dict(params))
    if config.lineup not in type(config).LINEUPS:
        raise WashInputError(f"line-up '{config.lineup}' is not offered by this experiment "
                             f"(accepted: {', '.join(type(config).LINEUPS)})")
    if config.prompts < 1:
        raise WashInputError(f"--prompts must be at least 1, got {config.prompts}")
    if not config.seeds:
        raise WashInputError("give at least one seed")
    for name, generation in config.generations().items():
        try:
            generation.validate(inputs=False, max_tokens=MAX_NEW_TOKENS_ENGINE)
        except WashInputError as err:
            raise (WashInputError(f"{name}: {err}") if name else err) from None


def cmd_experiment(args: argparse.Namespace) -> int:
    from wash.experiments.driver import execute

    try:
        module, config = build_config(args)
    except WashInputError:
        raise
    except (ValueError, KeyError) as err:  # str() of a KeyError quotes its message
        raise WashInputError(str(err.args[0]) if err.args else str(err)) from None
    if args.show:
        jobs = module.jobs(config)
        print(json.dumps({**config.to_dict(), "jobs": len({j.id for j in jobs})}, indent=2))
        return 0
    command = command_line(["python", "-m", "wash", *sys.argv[1:]]) if sys.argv[1:] else None
    if not 1 <= args.workers <= 64:
        raise WashInputError(f"--workers must be from 1 to 64, got {args.workers}")
    out = execute(module, config, command=command, workers=args.workers, partial=args.partial)
    done = out.meta.get("jobs_done", out.jobs_total)
    print(f"[wash] {module.NAME}: {out.jobs_run} of {out.jobs_total} jobs run now ({out.elapsed_s:.0f} s)"
          + (f"; the summary covers the {done} done" if done < out.jobs_total else "")
          + f"; outputs in {out.out_dir}", file=sys.stderr)
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 30, "display.precision", 3):
        print(out.summary.to_string(index=False))
    for kind, path in {"runs": out.runs_csv, "summary": out.summary_csv, **out.figures}.items():
        print(f"{kind}: {path}", file=sys.stderr)
    return 0
