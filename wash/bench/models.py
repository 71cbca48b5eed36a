"""Speed and memory benchmark of the WASH loop (``python -m wash bench``).

What it measures, all in ONE run so ratios are comparable on a noisy machine:

* each base model's plain decode latency (KV cache, one forward per token, no
  watermark, no averaging); the slowest one is the floor for an eager ensemble
  whose models run side by side (``parallel.py``);
* ``wash`` mode, eager forwards, over the two models with N = 2, 3, 5 providers
  (KGW on every provider); providers on one base model share its forward pass, so
  N = 5 should cost about what N = 2 costs;
* ``lazy``: the same with lazy forwards (one provider's model per step); its step
  times are bimodal (a cheap model's step or the other's, plus catch-ups), so
  compare means, against the expectation from the providers' model mix;
* the ensemble with the whole context re-fed every step and the models run one
  after the other (mixing methods without KV caches), at the longest length;
* the same WASH runs split into model forward time and everything else (averaging,
  watermarks, sampling, routing, re-synchronisation), measured inside the same steps
  so the ratio holds even on a loaded machine;
* peak resident memory of a process that only loads the two models, against one
  that also runs WASH with N = 5 (separate child processes, ``ru_maxrss``).

Latencies are medians (or means, for lazy) over decoded tokens, then medians over
``--rounds`` interleaved repeats. The re-encode reference and memory run once.

``--dummy SHAPE@TOKENIZER ...`` measures dummy members at any shape and on any device
instead (``wash.bench.shapes``: the GPU run of docs/BENCHMARKS.md).

``--compare-backends`` measures instead the plain decodes and WASH at N = 2, 3, 5 on
local members and on Ray actors, back to back within each round, and reports Ray's
overhead per step (``compare_backends``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from datetime import datetime, timezone

import torch

from wash.engine.config import add_backend_arguments
from wash.engine.settings import PROFILES
from wash.engine.parallel import settings as forward_settings
from wash.core.provenance import command_line, load_average
from wash.bench.timing import PROMPT, _machine, _median_of, plain_decode_ms, wash_ms

def providers_for(n: int, models: tuple[str, str]) -> list[str]:
    return [f"{models[i % 2]}:kgw:{1000 + i}" for i in range(n)]


def _child_rss(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def peak_rss_mb(models: tuple[str, str], tokens: int) -> dict:
    load = (f"import resource\nfrom wash.engine.models import load_model\n"
            f"[load_model(m) for m in {list(models)!r}]\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    run = (f"import resource\nfrom wash.bench.models import wash_ms, providers_for\n"
           f"wash_ms(providers_for(5, {tuple(models)!r}), {tokens})\n"
           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    base, wash = _child_rss(load), _child_rss(run)
    return {"models_loaded_mb": base, "wash_n5_mb": wash, "ratio": wash / base}


def run_bench(models: tuple[str, str], tokens: int, reencode_tokens: int, rounds: int = 3,
              backend: str = "local") -> dict:
    """Every latency is measured ``rounds`` times, interleaved (plain decodes, then each N eager
    and lazy, then again), and reported as the median over rounds: on a shared machine one
    model's speed drifts by 10-15% within minutes, and interleaving spreads that drift over
    every number alike, so the ratios are taken between numbers measured side by side.

    ``backend`` (``NAME[:param=value,...]``, ``backends.py``): ``ray`` runs every member in its Ray
    actor (plain decodes too); the memory comparison is measured only where the models are in this
    process (``Backend.in_process``)."""
    from wash.engine.backends import parse_backend

    parsed = parse_backend(backend)
    parsed.members(list(models))  # loaded (or their actors started) before any timing
    name = parsed.name
    report: dict = {"command": command_line(["python", "-m", "wash", *sys.argv[1:]]),
                    "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "machine": _machine(),
                    "models": list(models), "tokens": tokens, "rounds": rounds, "backend": name,
                    # Quote only runs that started on an idle machine (load average well below 1).
                    "load_average_at_start": load_average(),
                    "forwards": forward_settings()}
    plain_rounds: dict[str, list[float]] = {m: [] for m in models}
    eager_rounds: dict[str, list[dict]] = {str(n): [] for n in (2, 3, 5)}
    lazy_rounds: dict[str, list[dict]] = {str(n): [] for n in (2, 3, 5)}
    for r in range(rounds):
        for m in models:
            plain_rounds[m].append(plain_decode_ms(m, tokens, backend))
        for n in (2, 3, 5):
            specs = providers_for(n, models)
            eager_rounds[str(n)].append(wash_ms(specs, tokens, seed=r, backend=backend))
            lazy_rounds[str(n)].append(wash_ms(specs, tokens, forwards="lazy", seed=r, backend=backend))
        print(f"[bench] round {r + 1}/{rounds}: plain " +
              ", ".join(f"{m} {plain_rounds[m][-1]:.1f}" for m in models) + "; " +
              "; ".join(f"N={n} eager {eager_rounds[str(n)][-1]['median_token_ms']:.1f} "
                        f"lazy {lazy_rounds[str(n)][-1]['mean_token_ms']:.1f}" for n in (2, 3, 5)),
              file=sys.stderr)
    plain = {m: statistics.median(v) for m, v in plain_rounds.items()}
    report["plain_decode_ms"] = plain
    report["plain_decode_ms_rounds"] = plain_rounds
    report["sum_plain_ms"] = sum(plain.values())
    slowest = max(plain.values())
    report["slowest_plain_ms"] = slowest
    report["wash"], report["lazy"] = {}, {}
    for n in (2, 3, 5):
        specs = providers_for(n, models)
        r = _median_of(eager_rounds[str(n)])
        r["overhead_vs_sum"] = r["median_token_ms"] / report["sum_plain_ms"] - 1
        r["median_vs_slowest"] = r["median_token_ms"] / slowest
        # The same ratio within each round (numbers measured a minute apart), then its median:
        # steadier than the ratio of medians when the machine's speed drifts between rounds.
        r["median_vs_slowest_per_round"] = [e["median_token_ms"] / max(plain_rounds[m][i] for m in models)
                                            for i, e in enumerate(eager_rounds[str(n)])]
        report["wash"][str(n)] = r
        lz = _median_of(lazy_rounds[str(n)])
        # Each lazy step computes logits for one uniformly picked provider's model: the mean of
        # their plain decodes is what lazy would cost if the other models' catch-ups were free.
        lz["expected_from_mix_ms"] = statistics.mean(plain[s.split(":")[0]] for s in specs)
        lz["mean_vs_slowest"] = lz["mean_token_ms"] / slowest
        lz["mean_vs_slowest_per_round"] = [e["mean_token_ms"] / max(plain_rounds[m][i] for m in models)
                                           for i, e in enumerate(lazy_rounds[str(n)])]
        report["lazy"][str(n)] = lz
    report["n5_vs_n2"] = report["wash"]["5"]["median_token_ms"] / report["wash"]["2"]["median_token_ms"]
    cached = wash_ms(providers_for(3, models), reencode_tokens, backend=backend)
    slow = wash_ms(providers_for(3, models), reencode_tokens, reencode=True, backend=backend)
    report["reencode"] = {"tokens": reencode_tokens, "kv_cache_mean_ms": cached["mean_token_ms"],
                          "reencode_mean_ms": slow["mean_token_ms"],
                          "speedup": slow["mean_token_ms"] / cached["mean_token_ms"]}
    report["memory"] = peak_rss_mb(models, min(tokens, 32)) if parsed.in_process else None
    report["targets"] = {
        "eager_n3_median_vs_slowest<=1.15": report["wash"]["3"]["median_vs_slowest"] <= 1.15,
        "lazy_n3_mean_vs_slowest<=0.9": report["lazy"]["3"]["mean_vs_slowest"] <= 0.9,
        "eager_n5_vs_n2<=1.05": report["n5_vs_n2"] <= 1.05,
        "reencode_speedup>=5": report["reencode"]["speedup"] >= 5,
        "memory_ratio<=1.1": report["memory"]["ratio"] <= 1.1 if report["memory"] else None,
    }
    return report


#: The paper's serving profile's top-k, under which an actor sends only the rows it can keep.
TOP_K = PROFILES["paper"].top_k


def _median_diff(local: list[float], other: list[float]) -> float:
    return statistics.median(b - a for a, b in zip(local, other))


def compare_backends(models: tuple[str, str], tokens: int, rounds: int = 3, other: str = "ray") -> dict:
    """Local members and another backend's (``other``, e.g. ``ray`` or ``compiled``) side by side in one
    process, interleaved per measurement; the report's keys carry the other backend's name.

    Each round measures every model's plain decode and WASH at N = 2, 3, 5, eager and
    lazy, once on each backend back to back, so a machine's drift hits both alike.
    The other backend's overhead is the per-round difference of the two, then its median:
    for ``ray``, what a step pays for its round trips to the actors (the text is the same
    on both); for ``compiled``, what its static cache and compiled step save (a negative
    overhead) or cost.

    The same is measured under the paper's serving profile (top-k 10, ``TOP_K``) for
    the plain decodes and N = 3: there a Ray actor sends only the rows top-k can keep
    (``sampling.ServedRows``), so the difference to the whole-row numbers is what
    shipping the full 49k-262k row cost.
    """
    from wash.engine.backends import backend_text, parse_backend

    name = parse_backend(other).name
    #: Each side's name in the report, and the backend it runs on (the other: as given).
    spelt = {"local": "local", name: other}
    for spec in spelt.values():
        parse_backend(spec).members(list(models))
    backends = tuple(spelt)
    plain: dict = {b: {m: [] for m in models} for b in backends}
    steps: dict = {b: {f: {str(n): [] for n in (2, 3, 5)} for f in ("eager", "lazy")} for b in backends}
    plain_k: dict = {b: {m: [] for m in models} for b in backends}
    steps_k: dict = {b: {f: [] for f in ("eager", "lazy")} for b in backends}
    started = load_average()
    for r in range(rounds):
        for m in models:
            for b in backends:
                plain[b][m].append(plain_decode_ms(m, tokens, spelt[b]))
            for b in backends:
                plain_k[b][m].append(plain_decode_ms(m, tokens, spelt[b], top_k=TOP_K))
        for n in (2, 3, 5):
            specs = providers_for(n, models)
            for forwards in ("eager", "lazy"):
                for b in backends:
                    steps[b][forwards][str(n)].append(wash_ms(specs, tokens, forwards=forwards, seed=r,
                                                                   backend=spelt[b]))
        for forwards in ("eager", "lazy"):
            for b in backends:
                steps_k[b][forwards].append(wash_ms(providers_for(3, models), tokens, forwards=forwards, seed=r,
                                                    backend=spelt[b], top_k=TOP_K))
        print(f"[bench] round {r + 1}/{rounds}: " + "; ".join(
            f"N={n} eager local {steps['local']['eager'][str(n)][-1]['median_token_ms']:.1f} "
            f"{name} {steps[name]['eager'][str(n)][-1]['median_token_ms']:.1f}" for n in (2, 3, 5)),
            file=sys.stderr)

    def pair(local: list[float], theirs: list[float], rounds_too: bool = False) -> dict:
        row = {"local_ms": statistics.median(local), f"{name}_ms": statistics.median(theirs),
               f"{name}_overhead_ms": _median_diff(local, theirs)}
        return {**row, "local_ms_rounds": local, f"{name}_ms_rounds": theirs} if rounds_too else row

    # Eager steps are steady: their median. Lazy steps are bimodal (one model or the other): their mean.
    key = {"eager": "median_token_ms", "lazy": "mean_token_ms"}
    table = [{"forwards": forwards, "n": n, "statistic": key[forwards],
              **pair([x[key[forwards]] for x in steps["local"][forwards][str(n)]],
                     [x[key[forwards]] for x in steps[name][forwards][str(n)]], rounds_too=True)}
             for forwards in ("eager", "lazy") for n in (2, 3, 5)]
    plain_table = [{"model": m, **pair(plain["local"][m], plain[name][m])} for m in models]
    top_k_table = [{"what": f"plain {m}", **pair(plain_k["local"][m], plain_k[name][m])} for m in models]
    top_k_table += [{"what": f"WASH N=3 {forwards}", "statistic": key[forwards],
                     **pair([x[key[forwards]] for x in steps_k["local"][forwards]],
                            [x[key[forwards]] for x in steps_k[name][forwards]], rounds_too=True)}
                    for forwards in ("eager", "lazy")]
    n3 = next(row for row in table if row["forwards"] == "eager" and row["n"] == 3)
    return {"command": command_line(["python", "-m", "wash", *sys.argv[1:]]),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": _machine(), "backend": backend_text(other),
            "models": list(models), "tokens": tokens, "rounds": rounds, "load_average_at_start": started,
            "forwards_settings": forward_settings(), "plain_decode": plain_table, "wash": table,
            "top_k": TOP_K, "top_k_rows_shipped": top_k_table,
            "targets": {f"{name}_eager_n3_overhead_ms<=3": n3[f"{name}_overhead_ms"] <= 3}}


def cmd_bench(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    from wash.engine.backends import backend_text, parse_backend

    backend = parse_backend(args.backend)  # a bad --backend or $WASH_BACKEND: one line, exit 2
    if args.dummy:
        from wash.engine.models import parse_dtype
        from wash.bench.shapes import run_shape_bench

        # the dummy members are built in this process: local unless --backend names another (compiled)
        report = run_shape_bench(args.dummy, args.tokens, args.rounds, args.device, parse_dtype(args.dtype),
                                 args.out, backend=backend_text(backend) if args.backend else "local")
        print(json.dumps(report, indent=2))
        return 0
    if args.compare_backends:
        # --backend names what to compare with local (default ray; e.g. ray:address=HOST:PORT, compiled)
        report = compare_backends(tuple(args.models), args.tokens, args.rounds,
                                  backend_text(backend) if args.backend else "ray")
    else:
        report = run_bench(tuple(args.models), args.tokens, args.reencode_tokens, args.rounds,
                           backend_text(backend))
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="per-token latency and memory of WASH against plain decoding")
    b.add_argument("--models", nargs=2, default=["smollm2", "gemma3"])
    b.add_argument("--tokens", type=int, default=64)
    b.add_argument("--reencode-tokens", type=int, default=256)
    b.add_argument("--rounds", type=int, default=3, help="interleaved repeats of every latency (medians)")
    b.add_argument("--threads", type=int, help="torch threads (default: torch's choice, one per core)")
    b.add_argument("--out", help="also write the JSON report here")
    add_backend_arguments(b)
    b.add_argument("--compare-backends", action="store_true",
                   help="local members and another backend's side by side in one run, interleaved: ms/token "
                        "of plain decodes and WASH at N = 2, 3, 5 (eager and lazy) on each and the other's "
                        "overhead per step; --backend names the other (default ray; ray:address=HOST:PORT, "
                        "compiled)")
    b.add_argument("--dummy", nargs="+", metavar="SHAPE@TOKENIZER",
                   help="measure dummy members instead (random weights at a published shape, e.g. "
                        "llama-3.1-8b@smollm2 mistral-7b@gemma3 qwen2.5-7b@smollm2; wash/bench/shapes.py): "
                        "plain decodes, WASH eager and lazy at N = 2, 3, N = 3 on the first member, the "
                        "averaging's share of a step and GPU memory")
    b.add_argument("--device", help="with --dummy: where the members run (cpu, cuda, cuda:1; default: a GPU "
                                    "when there is one)")
    b.add_argument("--dtype", default="auto", help="with --dummy: bfloat16, float16, float32 or auto "
                                                   "(bf16 on a GPU, float32 on the CPU)")
    b.set_defaults(func=cmd_bench)

