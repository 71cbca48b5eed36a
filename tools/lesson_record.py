"""Record every Lesson step's run for the page to replay (``wash.ui.replay``).

    python -m tools.lesson_record                      # the app's models (default smollm2, gemma3) -> assets/lesson/
    python -m tools.lesson_record --steps 2,3          # some steps only
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.lesson_record --out runs/lesson-tiny

Each step runs once, live, with the inputs its click sends on the app's models
(``wash.ui.lesson.step_inputs``) and its fixed seed, through the same code a click
runs (``wash.ui.run.drive``, the Identify tab's probe); its file keeps every event with
the engine's fingerprint, and ``made`` (date, machine, command, seconds). A change to
the engine's source makes the page run the steps live until they are recorded again
(``tests/test_lesson_replay.py`` says so).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
import time
from pathlib import Path

from tools.latency import ROOT


def made(prog: str, argv: list[str], seconds: float) -> dict:
    """A recording's ``made``: when, on what machine, by which command, in how many seconds."""
    from wash.core.provenance import cpuinfo

    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{cpuinfo('model name') or 'unknown CPU'}, {os.cpu_count()} cores",
            "command": shlex.join(["python", "-m", prog, *argv]), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    from wash.content.lesson import STEPS
    from wash.ui import replay
    from wash.ui.lesson import step_inputs
    from wash.ui.settings import app_models

    parser = argparse.ArgumentParser(prog="python -m tools.lesson_record", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="", help="the steps to record, e.g. 2,3 (default: every step)")
    parser.add_argument("--out", default="", help="folder written (default: assets/lesson; relative to the repo root)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    out = (Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out) if args.out else replay.RECORDINGS
    models = app_models()
    numbers = [int(n) for n in args.steps.split(",") if n.strip()] or range(1, len(STEPS) + 1)
    for number in numbers:
        s = STEPS[number - 1]
        started = time.perf_counter()
        rec = replay.record(number, s.kind, step_inputs(s, models), models)
        seconds = round(time.perf_counter() - started, 1)
        rec["made"] = made("tools.lesson_record", argv, seconds)
        file = replay.write(rec, out)
        print(f"step {number} ({s.kind}): {seconds} s, {file.stat().st_size:,} bytes -> "
              f"{file.relative_to(ROOT) if file.is_relative_to(ROOT) else file.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
