"""A class on the app: N students click through the five Lesson steps at once (a script, not a test).

    python -m tools.class_load --out docs/class-load.json          # 30 students, the real models: run it alone
    python -m tools.class_load --pace live --students 30            # the same class computing every step live
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.class_load --students 3 \\
        --recordings runs/lesson-tiny                               # quick check (recordings of the tiny models)

It starts ``app.py`` on a free localhost port (``--recordings``, ``--tokens-per-s`` and
``--queue-size`` passed on as ``WASH_LESSON_RECORDINGS``, ``WASH_LESSON_TOKENS_PER_S`` and
``WASH_APP_QUEUE_SIZE``), waits for the preload, then runs ``--students`` threads, each with
its own ``gradio_client.Client``. Every student clicks step 1, 2, ... 5 as the page does: the
step's load (``/lesson_load_N``, with ``--pace``), then the run it announces, the recorded
one (``/lesson_replay_N``) or the live one (``/lesson_run_N``). With ``--together`` (the
default) the students wait for each other before each step, so the whole class clicks the
same step at the same moment. A click's times run from the load's request: to the first
update holding a token (the identification's answer, for step 5) and to the run's end.
A sampler reads the resident memory of the app and every process under it once a second.

The report (one JSON object, printed and written to ``--out``): the command, date, machine,
``uptime`` and load average at the start, the settings; for each step and over all, the
clicks replayed and run live and the seconds to the first token and to done (median, p95,
max); failures (with their errors); memory (start, peak, end, MB); and whether the goal held
(p95 to the first token within 1 s, p95 to done within 15 s, nothing failed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.latency import app_env, free_port, ready_app
from tools.soak import _named_if_outside, _tree_rss_mb, emit
from wash.core.provenance import command_line, load_average, uptime_line

#: The goal a class's replayed lesson is held to (seconds, 95th percentile).
GOAL_FIRST_TOKEN_S, GOAL_DONE_S = 1.0, 15.0


@dataclass
class Clicks:
    """What the students saw; one lock guards it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: (step, how: "replay" or "live", seconds to the first token, seconds to done)
    times: list[tuple[int, str, float, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _has_token(value) -> bool:
    """Whether a HighlightedText value (the text output) holds a token."""
    return bool(value) and (not isinstance(value, dict) or bool(value.get("value")))


def click(client, number: int, pace: str) -> tuple[str, float, float]:
    """One student's click on step ``number``: (replay or live, seconds to first token, seconds to done)."""
    from wash.content.lesson import STEPS
    from wash.ui.lesson import OUTPUTS

    started = time.perf_counter()
    loaded = client.predict(pace, api_name=f"/lesson_load_{number}")
    # the API answers the load's component outputs (its layout and state outputs left out): the line saying
    # which run the click shows is the one that starts with its bold name
    source = next((v for v in loaded if isinstance(v, str) and v.startswith(("**Recorded run**", "**Live run**"))),
                  None)
    if source is None:
        raise RuntimeError(f"step {number}: the load did not say which run follows: {loaded!r:.300}")
    how = "replay" if source.startswith("**Recorded run**") else "live"
    endpoint = f"/lesson_replay_{number}" if how == "replay" else f"/lesson_run_{number}"
    job = client.submit(pace, api_name=endpoint) if how == "replay" else client.submit(api_name=endpoint)
    first = None
    identify = STEPS[number - 1].identify
    for update in job:
        if first is None and (identify or _has_token(update[OUTPUTS.index("text")])):
            first = time.perf_counter() - started
    job.result()  # raises the app's error, if any
    done = time.perf_counter() - started
    if first is None and identify:  # one answer, not a stream: its first "token" is the whole of it
        first = done
    if first is None:
        raise RuntimeError(f"step {number}: no token came back")
    return how, first, done


def student(url: str, k: int, args: argparse.Namespace, barrier: threading.Barrier | None, clicks: Clicks) -> None:
    from tools.app_client import app_client
    from wash.content.lesson import STEPS

    client = app_client(url)
    for number in range(1, len(STEPS) + 1):
        if barrier is not None:
            barrier.wait()
        try:
            how, first, done = click(client, number, args.pace)
            with clicks.lock:
                clicks.times.append((number, how, first, done))
        except Exception as err:  # noqa: BLE001 - reported, never raised
            with clicks.lock:
                clicks.failures.append(f"student {k}, step {number}: {type(err).__name__}: {str(err)[:200]}")
        if args.think:
            time.sleep(args.think)


def quantiles(values: list[float]) -> dict | None:
    """Median, 95th percentile (nearest rank) and max, in seconds."""
    if not values:
        return None
    ordered = sorted(values)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"median": round(statistics.median(ordered), 3), "p95": round(p95, 3), "max": round(ordered[-1], 3)}


def summarise(times: list[tuple[int, str, float, float]]) -> dict:
    """Per step and over all: clicks replayed and live, seconds to first token and to done."""
    def part(rows: list) -> dict:
        return {"replayed": sum(how == "replay" for _, how, _, _ in rows),
                "live": sum(how == "live" for _, how, _, _ in rows),
                "first_token_s": quantiles([f for *_, f, _ in rows]), "done_s": quantiles([d for *_, d in rows])}
    steps = sorted({n for n, *_ in times})
    return {"steps": {str(n): part([t for t in times if t[0] == n]) for n in steps}, "all": part(times)}


def run_class(args: argparse.Namespace, argv: list[str]) -> dict:
    from wash.experiments import machine_description
    from wash.ui.settings import app_models

    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = app_env(port)
    for name, value in (("WASH_LESSON_RECORDINGS", args.recordings), ("WASH_LESSON_TOKENS_PER_S", args.tokens_per_s),
                        ("WASH_APP_QUEUE_SIZE", args.queue_size)):
        if value:
            env[name] = str(Path(value).resolve()) if name == "WASH_LESSON_RECORDINGS" else str(value)
    uptime_before, load_before = uptime_line(), load_average()
    memory: list[float] = []
    clicks = Clicks()
    with ready_app(env, args.timeout, "wash-class-app-") as (proc, log, ready_s):
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                memory.append(round(_tree_rss_mb(proc.pid)[0], 1))
                stop.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        barrier = threading.Barrier(args.students) if args.together else None
        class_start = time.monotonic()
        students = [threading.Thread(target=student, args=(url, k, args, barrier, clicks), daemon=True)
                    for k in range(args.students)]
        for t in students:
            t.start()
        for t in students:
            t.join(timeout=args.class_timeout)
        elapsed = time.monotonic() - class_start
        stop.set()
        sampler.join(timeout=5)
        alive = proc.poll() is None
    print(f"app log: {log}", file=sys.stderr)
    summary = summarise(clicks.times)
    overall = summary["all"]
    expected = args.students * 5
    failed = len(clicks.failures) + max(0, expected - len(clicks.times) - len(clicks.failures))
    first, done = overall["first_token_s"], overall["done_s"]
    return {
        "command": command_line(["python", "-m", "tools.class_load", *map(_named_if_outside, argv)]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(), "cpu_count": os.cpu_count(),
        "uptime_before": uptime_before, "load_average_start": load_before, "uptime_after": uptime_line(),
        "models": app_models(), "students": args.students, "pace": args.pace, "together": args.together,
        "tokens_per_s": args.tokens_per_s or "8 (default)", "queue_size": args.queue_size or "64 (default)",
        "concurrency_limit": os.environ.get("WASH_APP_CONCURRENCY", "2 (default)"),
        "start_to_ready_s": round(ready_s, 1), "elapsed_s": round(elapsed, 1),
        "clicks": expected, "clicks_ok": len(clicks.times), "failed": failed, "failures": clicks.failures[:20],
        **summary,
        "rss_mb": {"start": memory[0] if memory else None, "peak": max(memory) if memory else None,
                   "end": memory[-1] if memory else None},
        "app_alive_at_end": alive,
        "goal": {"first_token_p95_s": GOAL_FIRST_TOKEN_S, "done_p95_s": GOAL_DONE_S,
                 "met": bool(first and done and first["p95"] <= GOAL_FIRST_TOKEN_S and done["p95"] <= GOAL_DONE_S
                             and failed == 0)},
    }


def main(argv: list[str] | None = None) -> int:
    from wash.ui.replay import LIVE, PACES, READING

    parser = argparse.ArgumentParser(prog="python -m tools.class_load", description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--pace", choices=PACES, default=READING,
                        help=f"the Lesson's pace control for every click ({LIVE!r}: every step computed live)")
    parser.add_argument("--together", action=argparse.BooleanOptionalAction, default=True,
                        help="students wait for each other before each step (default: yes)")
    parser.add_argument("--think", type=float, default=0.0, help="seconds a student waits after each step")
    parser.add_argument("--tokens-per-s", type=float, default=0.0, help="the app's reading speed (0: its default)")
    parser.add_argument("--queue-size", type=int, default=0, help="the app's queue bound (0: its default)")
    parser.add_argument("--recordings", default="", help="the app's recordings folder (default: assets/lesson)")
    parser.add_argument("--port", type=int, default=0, help="the app's port (0: a free one)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed for start-up")
    parser.add_argument("--class-timeout", type=float, default=3600, help="seconds allowed for the class")
    parser.add_argument("--out", type=Path)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    report = run_class(args, argv)
    emit(report, args.out)
    return 0 if report["failed"] == 0 and report["app_alive_at_end"] else 1


if __name__ == "__main__":
    sys.exit(main())
