"""Command line: ``python -m wash generate|detect|bench|experiment|report|space``.

Bad input of any kind ends in one line on stderr naming the problem and the
accepted values, and exit code 2; never a traceback. A member lost during a run
(``--backend ray``: its actor died or stopped answering) ends in one line naming
the model, and exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import wash.baselines  # noqa: F401  (registers the baseline modes)
from wash.engine import ProviderSpec, add_backend_arguments, add_generate_arguments, command_line, from_command_line
# command_line is re-exported: callers of the CLI have always found it here
from wash.core.errors import MemberError, WashInputError
from wash.detection import DEFAULT_STATISTIC, STATISTICS, FPR_CALIBRATED, Z_THRESHOLD

def _progress(message: str) -> None:
    print(f"[wash] {message}", file=sys.stderr, flush=True)


def _specs(values: Sequence[str] | None) -> list[ProviderSpec]:
    return [ProviderSpec.parse(v) for v in (values or [])]


def cmd_generate(args: argparse.Namespace) -> int:
    from wash.api import generate

    config = from_command_line(args)
    config.validate()
    _progress(f"serving profile: {config.profile} (temperature {config.temperature}, "
              f"top-k {config.top_k or 'off'}, top-p {config.top_p})")
    result = generate(config, on_load=lambda event: _progress(event.message))
    if args.json:
        print(json.dumps(result_json(result), ensure_ascii=False))
        return 0
    print(result.prompt + result.marked_text())
    print()
    r = result.routing
    rule = "" if config.rule.is_mean else f" aggregate={config.aggregate}"
    print(f"mode={result.mode}{rule} profile={config.profile} forwards={config.forwards} seed={result.seed} "
          f"tokens={r.tokens} "
          f"finish={result.finish_reason} routed={r.routed_token_fraction:.1%} (spans {r.routed_spans}, "
          f"mean length {r.mean_routed_span_length:.2f})  {result.timing.per_token_ms:.0f} ms/token")
    _print_detection(result.detection)
    return 0


def result_json(result) -> dict:
    """The CLI's JSON: the run result plus the per-provider detection and timing."""
    d = result.to_dict()
    d["tokens"] = [{"text": t.text, "routed": t.routed, "span_id": t.span_id, "specialists": t.specialists,
                    "chosen": t.chosen, "entropy": t.entropy} for t in result.tokens]
    return d


def _print_detection(rows) -> None:
    print(f"{'provider':34} {'z':>8} {'p':>10} {'scored':>7}  verdict")
    for d in rows:
        verdict = "DETECTED" if d.detected else "not detected"
        print(f"{d.provider:34} {d.z:8.2f} {d.p:10.2e} {d.tokens_scored:7d}  {verdict}")


def cmd_detect(args: argparse.Namespace) -> int:
    """Score a text with each provider's detector.

    ``--run`` takes the text, providers and model set from a run JSON; ``--text`` /
    ``--file``, ``--provider`` and ``--models`` override its parts. The model set
    (the generation's, by default the providers' own models) is the union
    vocabulary coordinated providers hash in, so their z does not depend on which
    providers this call happens to name.
    """
    from wash.detection import detect_text, parse_models, read_run
    from wash.engine import check_model_name, build_providers

    run = read_run(args.run) if args.run is not None else None
    specs = _specs(args.provider) or (run.specs if run else [])
    if not specs:
        raise WashInputError("no provider given (add --provider MODEL:SCHEME:KEY, or --run FILE)")
    if args.file is not None:
        try:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as err:
            raise WashInputError(f"cannot read {args.file}: {err.strerror}") from None
    elif args.text is not None:
        text = args.text
    elif run is not None:
        text = run.text
    else:
        raise WashInputError("give the text to score with --text, --file or --run")
    if not text.strip():
        raise WashInputError("the text to score is empty")
    models = parse_models(args.models) if args.models is not None else (run.models if run else [])
    for name in models:
        check_model_name(name)
    if any(s.coordinated for s in specs):
        union = list(dict.fromkeys(models + [s.model for s in specs]))
        _progress(f"coordinated providers hash in the union vocabulary of: {', '.join(union)}"
                  + ("" if models else " (the providers' own models; pass --models or --run for the "
                                       "generation's model set)"))
    providers = build_providers(specs, union_models=models, progress=_progress, backend=args.backend).providers
    if args.statistic != "sum":
        _progress(f"statistic {args.statistic}: each provider's model re-reads the text (one forward per "
                  f"text and model); p from its null draws, flagged at p < {FPR_CALIBRATED:g}")
    rows = detect_text(providers, text, args.z_threshold, statistic=args.statistic)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows]))
    else:
        _print_detection(rows)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m wash", description=(
        "WASH: average several independently watermarked LLMs and watch the watermarks wash out."))
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="generate text with an ensemble of watermarked providers")
    add_generate_arguments(g)
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.set_defaults(func=cmd_generate)

    d = sub.add_parser("detect", help="score a text with each provider's own detector")
    d.add_argument("--provider", action="append", metavar="SPEC",
                   help="MODEL:SCHEME:KEY[:param=value,...], repeat for each provider (default: the --run's)")
    src = d.add_mutually_exclusive_group()
    src.add_argument("--text")
    src.add_argument("--file")
    d.add_argument("--run", metavar="FILE",
                   help="a run JSON (generate --json, or the app's download): its text, providers and "
                        "model set, unless --text/--file, --provider or --models say otherwise")
    d.add_argument("--models", metavar="M1,M2",
                   help="the generation's base models: coordinated providers hash in their union "
                        "vocabulary (default: the --run's, else the providers' own models)")
    d.add_argument("--z-threshold", type=float, default=Z_THRESHOLD)
    d.add_argument("--statistic", choices=list(STATISTICS), default=DEFAULT_STATISTIC,
                   help="the test each provider runs: " + "; ".join(f"{s.name}: {s.summary}"
                                                                 for s in STATISTICS.values())
                        + ". Statistics other than sum re-read the text with each provider's model (one "
                          "forward per text and model), get p from 1,000 simulated null draws and flag at "
                          f"p < {FPR_CALIBRATED:g}; a scheme a statistic does not cover keeps its sum")
    d.add_argument("--json", action="store_true")
    add_backend_arguments(d)
    d.set_defaults(func=cmd_detect)

    try:
        from wash.bench.models import add_parser as add_bench
        add_bench(sub)
    except ImportError:
        pass
    try:
        from wash.experiments import add_parser as add_experiment
        add_experiment(sub)
    except ImportError:
        pass
    from wash.reporting import add_parser as add_report
    add_report(sub)
    from wash.publish.space import add_parser as add_space
    add_space(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except WashInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except MemberError as err:  # a model served elsewhere died or went silent: not bad input
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
