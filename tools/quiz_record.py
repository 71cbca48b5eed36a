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

import sys

from tools.recorder import Recorder


def main(argv: list[str] | None = None) -> int:
    from wash.content.quiz import QUESTIONS
    from wash.ui import quiz

    return Recorder(
        "tools.quiz_record", __doc__.split("\n\n")[0], "--questions", "1,3", quiz.RECORDINGS, len(QUESTIONS),
        record=quiz.record, write=quiz.write,
        label=lambda n, rec: f"question {n} ({len(rec['texts'])} texts)").main(argv)


if __name__ == "__main__":
    sys.exit(main())
