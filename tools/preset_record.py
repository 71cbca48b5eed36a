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

import sys

from tools.recorder import Recorder


def main(argv: list[str] | None = None) -> int:
    from wash.ui import preset_runs

    names = preset_runs.recorded_names()
    return Recorder(
        "tools.preset_record", __doc__.split("\n\n")[0], "--presets", "1,7", preset_runs.RECORDINGS, len(names),
        record=lambda n, models: preset_runs.record(names[n - 1], models), write=preset_runs.write,
        label=lambda n, rec: f"preset {n} ({names[n - 1]})").main(argv)


if __name__ == "__main__":
    sys.exit(main())
