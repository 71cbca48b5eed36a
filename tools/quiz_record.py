"""Record every Quiz question's texts for the page to show (``wash.ui.quiz``).

    python -m tools.quiz_record                        # the app's models (default smollm2, gemma3) -> assets/quiz/
    python -m tools.quiz_record --questions 1,3        # some questions only
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.quiz_record --out runs/quiz-tiny

Each question's texts run once, live, with the inputs a Generate click would send on the
app's models (``wash.ui.quiz.text_inputs``: the question's preset, prompt, tokens, seed and
each text's mode), through the same code (``wash.ui.replay.record_generate``); its file keeps
every event with the engine's fingerprint, and ``made`` (date, machine, command, seconds). A
change to the engine's source makes the page refuse the question, naming this command, until
it is recorded again (``tests/test_quiz.py`` says so for the committed files).
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


def main(argv: list[str] | None = None) -> int:
    from wash.content.quiz import QUESTIONS
    from wash.core.provenance import cpuinfo
    from wash.ui import quiz
    from wash.ui.settings import app_models

    parser = argparse.ArgumentParser(prog="python -m tools.quiz_record", description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", default="", help="the questions to record, e.g. 1,3 (default: every one)")
    parser.add_argument("--out", default="", help="folder written (default: assets/quiz; relative to the repo root)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    out = (Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out) if args.out else quiz.RECORDINGS
    models = app_models()
    numbers = [int(n) for n in args.questions.split(",") if n.strip()] or range(1, len(QUESTIONS) + 1)
    machine = f"{cpuinfo('model name') or 'unknown CPU'}, {os.cpu_count()} cores"
    for number in numbers:
        started = time.perf_counter()
        rec = quiz.record(number, models)
        seconds = round(time.perf_counter() - started, 1)
        rec["made"] = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine,
                       "command": shlex.join(["python", "-m", "tools.quiz_record", *argv]), "seconds": seconds}
        file = quiz.write(rec, out)
        print(f"question {number} ({len(rec['texts'])} texts): {seconds} s, {file.stat().st_size:,} bytes -> "
              f"{file.relative_to(ROOT) if file.is_relative_to(ROOT) else file.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
