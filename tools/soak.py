"""Soak the app: many API clients for minutes, bad inputs mixed in (a script, not a test).

    python -m tools.soak --clients 16 --seconds 1800 --out docs/soak-local-30min.json   # the memory check
    python -m tools.soak --backend local --clients 16 --seconds 600 --out docs/soak-local.json
    python -m tools.soak --backend ray   --clients 16 --seconds 600 --out docs/soak-ray.json
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.soak --clients 4 --seconds 30   # quick check

It starts ``app.py`` (``WASH_BACKEND`` set to ``--backend``) on a free localhost port,
waits for the preload, then runs ``--clients`` threads, each with its own
``gradio_client.Client``, until ``--seconds`` have passed. Each client sends the
page's default preset (``--max-new-tokens`` tokens, a fresh seed per request); every
``--bad-every``-th request of a client is instead one of ``BAD_INPUTS``, which must
be refused with an error naming what is wrong. A sampler reads the resident memory
of the app and every process it started (Ray's actors included) once a second: all
of it (``VmRSS``) and its anonymous part (``RssAnon``: heaps and tensors, without the
pages of the model files the process maps, which the kernel may drop and reload).

The report (one JSON object, printed and written to ``--out``): the machine and its
``uptime`` before and after, requests sent, ok, failed (with their errors), bad inputs
refused by name, tokens delivered and tokens per second over the whole soak, request
latency quantiles, and memory: at the end of warm-up (the first ``--warmup`` seconds)
and at the end with the growth between, and the growth over the last ``--window``
seconds of the soak (``last_window``: from one sample to the other, and the trend
fitted to every sample in it), which says whether memory still rises once warm. Samples
every 30 s give ``[seconds, resident MB, anonymous MB, requests ok so far]``. Paths
in the report are relative to the repository. The numbers depend on the machine and
its load: run it alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from wash.core.provenance import command_line, load_average, uptime_line
from tools.latency import app_env, default_request, free_port, ready_app

#: Seconds between two memory samples the report lists.
SAMPLE_EVERY_S = 30

#: (what is wrong, changes to a good request, words the refusal must contain).
BAD_INPUTS: list[tuple[str, dict, str]] = [
    ("empty prompt", {"prompt": ""}, "the prompt is empty"),
    ("no provider", {"rows": []}, "no provider given"),
    ("key not an integer", {"key": "seven"}, "not an integer"),
    ("unknown model", {"model": "no-such-model"}, "unknown model 'no-such-model'"),
    ("too many tokens", {"max_new": 401}, "400"),
    ("prompt too long", {"prompt": "long " * 1000}, "the prompt is too long"),
    ("unknown scheme", {"scheme": "no-such-scheme"}, "no-such-scheme"),
    ("scheme parameter out of range", {"params": "gamma=2"}, "gamma"),
]


@dataclass
class Tally:
    """What the clients saw; one lock guards it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ok: int = 0
    tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    not_refused: list[str] = field(default_factory=list)


def _tree_rss_mb(pid: int) -> tuple[float, float]:
    """Resident memory of ``pid`` and every process under it, in MB: all of it, and its anonymous part."""
    import psutil

    from tools.arena_growth import rss_anon_mb

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return float("nan"), float("nan")
    total, anon = 0.0, 0.0
    for p in procs:
        try:
            total += p.memory_info().rss / 2**20
            anon += rss_anon_mb(p.pid)
        except (psutil.NoSuchProcess, FileNotFoundError, ProcessLookupError):
            pass
    return total, anon


def _named_if_outside(arg: str) -> str:
    """A path outside the repository (a scratch ``--out``) recorded by its name alone: a committed
    report holds no path of the machine it ran on; paths inside the repository ``command_line`` keeps."""
    portable = command_line([arg])
    return Path(arg).name if os.path.isabs(portable.strip("'")) else arg


def memory_summary(memory: list[tuple[float, float, float, int]], warmup: float, window: float,
                   until: float) -> dict:
    """Growth from warm-up to the end, and over the ``window`` seconds up to ``until`` (the soak's end,
    before the requests still queued then have drained), from ``(s, rss, anon, ok)`` samples."""
    def at(t: float) -> tuple[float, float]:
        before = [(m, a) for s, m, a, _ in memory if s <= t]
        return before[-1] if before else (float("nan"), float("nan"))

    def pct(a: float, b: float) -> float | None:
        return round(100 * (b - a) / a, 2) if a == a and b == b and a else None

    nan = float("nan")
    end_s, end, end_anon = memory[-1][:3] if memory else (nan, nan, nan)
    warm, warm_anon = at(warmup)
    def trend(column: int) -> float | None:
        """Least-squares slope over the window's samples, times its length: the rise a single sample's
        swing (a run's tensors alive or just freed) does not decide."""
        points = [(m[0], m[column]) for m in memory if from_s <= m[0] <= to_s and m[column] == m[column]]
        if len(points) < 2:
            return None
        mean_t = sum(t for t, _ in points) / len(points)
        mean_y = sum(y for _, y in points) / len(points)
        spread = sum((t - mean_t) ** 2 for t, _ in points)
        slope = sum((t - mean_t) * (y - mean_y) for t, y in points) / spread if spread else 0.0
        return round(slope * (to_s - from_s), 1)

    to_s = min(until, end_s) if memory else nan
    from_s = max(to_s - window, 0.0) if memory else nan
    (was, was_anon), (now, now_anon) = at(from_s), at(to_s)
    rise, rise_anon = trend(1), trend(2)
    return {"after_warmup": warm, "end": end, "warmup_s": warmup, "growth_pct": pct(warm, end),
            "anon_after_warmup": warm_anon, "anon_end": end_anon, "anon_growth_pct": pct(warm_anon, end_anon),
            "last_window": {"seconds": window, "from_s": from_s, "to_s": to_s, "from": was, "to": now,
                            "growth_mb": round(now - was, 1), "growth_pct": pct(was, now),
                            "anon_from": was_anon, "anon_to": now_anon,
                            "anon_growth_mb": round(now_anon - was_anon, 1),
                            "anon_growth_pct": pct(was_anon, now_anon),
                            "trend_mb": rise, "trend_pct": pct(was, was + rise) if rise is not None else None,
                            "anon_trend_mb": rise_anon,
                            "anon_trend_pct": pct(was_anon, was_anon + rise_anon) if rise_anon is not None else None},
            "samples_every_30s": [list(m) for m in memory if int(m[0]) % SAMPLE_EVERY_S == 0]}


def _bad_request(table: dict, prompt: str, max_new: int, change: dict) -> tuple[dict, str, int]:
    rows = [list(r) for r in table["data"]]
    if "rows" in change:
        rows = change["rows"]
    for column, name in ((0, "model"), (1, "scheme"), (2, "key"), (3, "params")):
        if name in change:
            rows[0][column] = change[name]
    return {**table, "data": rows}, change.get("prompt", prompt), change.get("max_new", max_new)


def _tokens(status: str) -> int:
    """The token count the app's final status line states (0 if it states none)."""
    match = re.search(r"(\d+) tokens?", status or "")
    return int(match.group(1)) if match else 0


def client_loop(url: str, k: int, deadline: float, args: argparse.Namespace, table: dict, prompt: str,
                mode: str, tally: Tally) -> None:
    from tools.app_client import app_client
    from gradio_client.exceptions import AppError

    from wash.ui.handlers import GENERATE_OUTPUTS

    out_status = GENERATE_OUTPUTS.index("status")
    client = app_client(url)
    rng = random.Random(k)
    i = 0
    while time.monotonic() < deadline:
        i += 1
        if args.bad_every and i % args.bad_every == 0:
            what, change, words = BAD_INPUTS[(k + i // args.bad_every) % len(BAD_INPUTS)]
            bad_table, bad_prompt, bad_max = _bad_request(table, prompt, args.max_new_tokens, change)
            try:
                client.predict(bad_table, bad_prompt, bad_max, 1.0, 0, mode, "off", args.forwards,
                               api_name="/generate")
                with tally.lock:
                    tally.not_refused.append(f"{what}: accepted")
            except AppError as err:
                with tally.lock:
                    if words in str(err):
                        tally.refused[what] = tally.refused.get(what, 0) + 1
                    else:
                        tally.not_refused.append(f"{what}: {str(err)[:200]}")
            except Exception as err:  # noqa: BLE001 - a transport failure is a failed request
                with tally.lock:
                    tally.failures.append(f"client {k} ({what}): {type(err).__name__}: {str(err)[:200]}")
            continue
        started = time.perf_counter()
        try:
            outputs = client.predict(table, prompt, args.max_new_tokens, 1.0, rng.randrange(10**6), mode,
                                     "off", args.forwards, api_name="/generate")
            seconds = time.perf_counter() - started
            status = outputs[out_status]
            with tally.lock:
                tally.ok += 1
                tally.tokens += _tokens(status)
                tally.latencies.append(seconds)
        except Exception as err:  # noqa: BLE001 - reported, never raised
            with tally.lock:
                tally.failures.append(f"client {k}: {type(err).__name__}: {str(err)[:200]}")


def soak(args: argparse.Namespace, argv: list[str]) -> dict:
    from wash.experiments import machine_description
    from wash.ui.settings import app_models

    models = app_models()
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    uptime_before = uptime_line()
    env = dict(app_env(port), WASH_BACKEND=args.backend)
    memory: list[tuple[float, float, float, int]] = []
    tally = Tally()
    with ready_app(env, args.timeout, "wash-soak-app-") as (proc, log, ready_s):
        table, prompt, mode = default_request(models)
        soak_start = time.monotonic()
        deadline = soak_start + args.seconds
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                rss, anon = _tree_rss_mb(proc.pid)
                memory.append((round(time.monotonic() - soak_start, 1), round(rss, 1), round(anon, 1), tally.ok))
                stop.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        clients = [threading.Thread(target=client_loop, args=(url, k, deadline, args, table, prompt, mode,
                                                              tally), daemon=True)
                   for k in range(args.clients)]
        for t in clients:
            t.start()
        for t in clients:
            t.join(timeout=args.seconds + args.timeout)
        elapsed = time.monotonic() - soak_start
        stop.set()
        sampler.join(timeout=5)
        alive = proc.poll() is None

    print(f"app log: {log}", file=sys.stderr)
    lat = sorted(tally.latencies)
    return {
        "command": command_line(["python", "-m", "tools.soak", *map(_named_if_outside, argv)]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(), "uptime_before": uptime_before, "uptime_after": uptime_line(),
        "backend": args.backend, "models": models, "clients": args.clients, "seconds": args.seconds,
        "concurrency_limit": os.environ.get("WASH_APP_CONCURRENCY", "2 (default)"),
        "malloc_arenas": os.environ.get("WASH_MALLOC_ARENAS", "glibc default"),
        "malloc_trim": os.environ.get("WASH_MALLOC_TRIM", "1 (default: after each run)"),
        "preset": {"table": table["data"], "mode": mode, "max_new_tokens": args.max_new_tokens,
                   "forwards": args.forwards},
        "start_to_ready_s": round(ready_s, 1),
        "requests_ok": tally.ok, "requests_failed": len(tally.failures), "failures": tally.failures[:20],
        "bad_inputs_refused_by_name": sum(tally.refused.values()), "refused": tally.refused,
        "bad_inputs_not_refused_by_name": tally.not_refused[:20],
        "tokens": tally.tokens, "elapsed_s": round(elapsed, 1),
        "tokens_per_s": round(tally.tokens / elapsed, 2) if elapsed else None,
        "latency_s": ({"median": round(statistics.median(lat), 2), "p90": round(lat[int(0.9 * (len(lat) - 1))], 2),
                       "max": round(lat[-1], 2)} if lat else None),
        "rss_mb": memory_summary(memory, args.warmup, args.window, args.seconds),
        "app_alive_at_end": alive,
        "cpu_count": os.cpu_count(),
        "load_average_end": load_average(),
    }


def emit(report: dict, out: Path | None) -> None:
    """Print the report as JSON, and write it to ``out`` when given."""
    text = json.dumps(report, indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="local", metavar="NAME[:param=value,...]")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--warmup", type=float, default=60, help="seconds before the memory baseline")
    parser.add_argument("--window", type=float, default=600,
                        help="seconds at the end over which the report's last_window growth is taken")
    parser.add_argument("--port", type=int, default=0, help="the app's port (0: a free one)")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--forwards", choices=["eager", "lazy"], default="eager")
    parser.add_argument("--bad-every", type=int, default=6, help="every K-th request of a client is bad (0: none)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed for start-up")
    parser.add_argument("--out", type=Path)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    report = soak(args, argv)
    emit(report, args.out)
    ok = (report["requests_failed"] == 0 and not report["bad_inputs_not_refused_by_name"]
          and report["app_alive_at_end"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
