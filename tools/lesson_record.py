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

import sys

from tools.recorder import Recorder


def main(argv: list[str] | None = None) -> int:
    from wash.content.lesson import STEPS
    from wash.ui import replay
    from wash.ui.lesson import step_inputs

    return Recorder(
        "tools.lesson_record", __doc__.split("\n\n")[0], "--steps", "2,3", replay.RECORDINGS, len(STEPS),
        record=lambda n, models: replay.record(n, STEPS[n - 1].kind, step_inputs(STEPS[n - 1], models), models),
        write=replay.write, label=lambda n, rec: f"step {n} ({rec['kind']})").main(argv)


if __name__ == "__main__":
    sys.exit(main())
