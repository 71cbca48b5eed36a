"""Record every offline preset's run for the Generate tab to replay (``wash.ui.preset_runs``).

    python -m tools.preset_record                  # the app's models (default smollm2, gemma3)
    python -m tools.preset_record --presets 1,7    # some presets only (numbered in the Generate tab's order)
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.preset_record --out runs/presets-tiny

Each preset the offline models run (``preset_runs.recorded_names``) runs once, live, with the
inputs a click on it and then on Generate send in a fresh tab (``preset_runs.inputs``: its
providers, mode, rule and 200 tokens; the default prompt, seed 0, serving profile, eager
forwards, no comparison), through the same code (``wash.ui.replay.record_generate``); its file
keeps every event with the engine's fingerprint, and ``made`` (date, machine, command, seconds).
A change to the engine's source makes Generate run the presets live until they are recorded
again (``tests/test_presets_replay.py`` says so for the committed files).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tools.latency import ROOT
from tools.lesson_record import made


def main(argv: list[str] | None = None) -> int:
    from wash.ui import preset_runs
    from wash.ui.settings import app_models

    parser = argparse.ArgumentParser(prog="python -m tools.preset_record",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="", help="the presets to record, e.g. 1,7 (default: every one)")
    parser.add_argument("--out", default="",
                        help="folder written (default: assets/presets; relative to the repo root)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    out = ((Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out) if args.out
           else preset_runs.RECORDINGS)
    models = app_models()
    names = preset_runs.recorded_names()
    numbers = [int(n) for n in args.presets.split(",") if n.strip()] or range(1, len(names) + 1)
    if any(not 1 <= n <= len(names) for n in numbers):
        parser.error(f"--presets takes numbers from 1 to {len(names)}")
    for number in numbers:
        name = names[number - 1]
        started = time.perf_counter()
        rec = preset_runs.record(name, models)
        rec["made"] = made("tools.preset_record", argv, round(time.perf_counter() - started, 1))
        file = preset_runs.write(rec, out)
        print(f"preset {number} ({name}): {rec['made']['seconds']} s, {file.stat().st_size:,} bytes -> "
              f"{file.relative_to(ROOT) if file.is_relative_to(ROOT) else file.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
