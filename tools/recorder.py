"""The recorders' one command line and loop: ``lesson_record``, ``quiz_record`` and ``preset_record``.

Each records numbered items (the Lesson's steps, the Quiz's questions, the offline presets)
live on the app's models and writes one file per item, with ``made`` (date, machine,
command, seconds); only what an item is and how it is recorded and written differ.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from tools.latency import ROOT


def made(prog: str, argv: list[str], seconds: float) -> dict:
    """A recording's ``made``: when, on what machine, by which command, in how many seconds."""
    from wash.core.provenance import cpuinfo

    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{cpuinfo('model name') or 'unknown CPU'}, {os.cpu_count()} cores",
            "command": shlex.join(["python", "-m", prog, *argv]), "seconds": seconds}


@dataclass(frozen=True)
class Recorder:
    """One recorder: its module, the option naming its items, and how an item is recorded and written."""

    #: ``tools.NAME``, as ``python -m`` takes it.
    prog: str
    description: str
    #: The option choosing items (``--steps``), and an example value for its help.
    option: str
    example: str
    #: The folder written by default (shown relative to the repository root).
    default_out: Path
    #: How many items there are (numbered from 1).
    count: int
    #: Item number and the app's models -> its recording.
    record: Callable[[int, list[str]], dict]
    #: A recording and a folder -> the file written.
    write: Callable[[dict, Path], Path]
    #: Item number and its recording -> how the progress line names it.
    label: Callable[[int, dict], str]

    def main(self, argv: Sequence[str] | None = None) -> int:
        from wash.ui.settings import app_models

        default = self.default_out.relative_to(ROOT) if self.default_out.is_relative_to(ROOT) else self.default_out
        parser = argparse.ArgumentParser(prog=f"python -m {self.prog}", description=self.description)
        parser.add_argument(self.option, default="", dest="items",
                            help=f"the ones to record, e.g. {self.example} (default: every one)")
        parser.add_argument("--out", default="",
                            help=f"folder written (default: {default}; relative to the repo root)")
        argv = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
        out = (Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out) if args.out else self.default_out
        numbers = [int(n) for n in args.items.split(",") if n.strip()] or range(1, self.count + 1)
        if any(not 1 <= n <= self.count for n in numbers):
            parser.error(f"{self.option} takes numbers from 1 to {self.count}")
        models = app_models()
        for number in numbers:
            started = time.perf_counter()
            rec = self.record(number, models)
            rec["made"] = made(self.prog, argv, round(time.perf_counter() - started, 1))
            file = self.write(rec, out)
            print(f"{self.label(number, rec)}: {rec['made']['seconds']} s, {file.stat().st_size:,} bytes -> "
                  f"{file.relative_to(ROOT) if file.is_relative_to(ROOT) else file.name}", flush=True)
        return 0
