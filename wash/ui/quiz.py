"""The Quiz tab's handlers: a question's texts from its recorded runs, the reveal, and the class tally.

Why recordings: a question's two or three texts are fixed (seeded) runs of the engine, so a
class of thirty needs them computed once, not thirty times. ``tools/quiz_record.py`` runs each
question's systems through the same code a Generate click runs (``replay.record_generate``)
and keeps one file per question under ``RECORDINGS``, with the inputs, the app's models and
the engine's fingerprint, as the Lesson's recordings do (``wash.ui.replay``). Showing a
question, grading an answer and drawing the reveal read that file only: no model, no GPU,
no generation slot, so every Quiz event runs at once for every student
(``concurrency_limit=None`` in ``app.py``). A question whose file is missing, or was made
for other models or by another engine, is not shown: the page says why and names the
command that records it.

The reveal draws each text's detection with the app's one verdict rule (z above
``Z_THRESHOLD``, as every detector's ``detected`` says) through the Generate tab's own
table and z-trace figure (``tables.detection_frame``, ``plots.z_figure``).

The class tally (``TALLY``) lives in the app's process, shared by every session and kept
under a lock: per question, the answers, how many were right, and how often each text was
ticked. A session's first answer to a question counts, later ones are graded but not
counted again, so a student who retries after the reveal does not inflate "right". The
teacher resets it; with ``WASH_QUIZ_TEACHER_CODE`` set, the reset asks for that code.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from wash.content.quiz import LETTERS, QUESTIONS, Grade, grade, letters, mode_of, question, watermarked
from wash.core import env
from wash.core.version import ROOT, code_version
from wash.detection import Z_THRESHOLD
from wash.engine import DEFAULT_PROFILE, PROFILES, FinishedEvent, RunResult, StepEvent, event_from_dict
from wash.reporting import md_table
from wash.ui import plots, replay, tables
from wash.ui.providers import preset_rows
from wash.ui.run import OFF, WASH as RUN_STREAM

#: Where the recordings are kept (unless ``WASH_QUIZ_RECORDINGS`` says): one ``q-N.json.gz`` per question.
RECORDINGS = ROOT / "assets" / "quiz"
#: A question recording's kind (``replay.why_not`` checks it, with the engine's fingerprint).
KIND = "quiz"
#: The command that makes the recordings, as the page names it.
COMMAND = "python -m tools.quiz_record"


# -- recordings ---------------------------------------------------------------------------------------
def path(number: int, root: Path | None = None) -> Path:
    """Question ``number``'s recording under ``root`` (default: ``WASH_QUIZ_RECORDINGS``, else ``RECORDINGS``)."""
    return (root or env.quiz_recordings(ROOT) or RECORDINGS) / f"q-{number}.json.gz"


def text_inputs(number: int, mode: str, models: Sequence[str]) -> list:
    """The Generate handler's positional inputs (``app.py``'s order) for question ``number``'s text of
    ``mode``: the preset's providers, the question's prompt, tokens and seed, the default serving profile."""
    q = question(number)
    serving = PROFILES[DEFAULT_PROFILE]
    rows, _ = preset_rows(q.preset, models)
    return [rows, q.prompt(), q.tokens, serving.temperature, q.seed, mode, OFF, "eager", serving.top_k,
            serving.top_p, q.aggregate]


def inputs(number: int, models: Sequence[str]) -> list[list]:
    """Every text's inputs, in the question's order of modes (not the shuffled letters)."""
    return [text_inputs(number, mode, models) for mode in question(number).modes]


def record(number: int, models: Sequence[str]) -> dict:
    """Question ``number``'s recording: each text's run on ``models`` (every event), its inputs and the code."""
    q = question(number)
    texts = [{"mode": mode, **replay.record_generate(i, models)} for mode, i in zip(q.modes, inputs(number, models))]
    return {"format": replay.FORMAT, "kind": KIND, "question": int(number), "models": list(models),
            "inputs": replay.plain(inputs(number, models)), "code": {**code_version(), **replay.fingerprint(KIND)},
            "texts": texts}


def write(rec: dict, root: Path | None = None) -> Path:
    """Write ``rec`` as its question's file."""
    return replay.save(rec, path(rec["question"], root))


def load(number: int, root: Path | None = None) -> dict | None:
    """Question ``number``'s recording, or ``None`` where there is none."""
    return replay.read(path(number, root))


def recorded(number: int, models: Sequence[str]) -> tuple[dict | None, str | None]:
    """Question ``number``'s recording and, where it cannot stand for this engine's runs here, why not."""
    rec = load(number)
    return rec, replay.why_not(rec, KIND, inputs(number, models), subject=f"question {number}")


@dataclass(frozen=True)
class Text:
    """One recorded text of a question, under its letter."""

    letter: str
    mode: str
    system: str
    short: str
    steps: list[StepEvent]
    result: RunResult

    @property
    def labels(self) -> list[str]:
        return [p["label"] for p in self.result.providers]


def texts(number: int, rec: dict) -> list[Text]:
    """The recording's texts in letter order (A, B, C)."""
    q = question(number)
    by_mode = {t["mode"]: t for t in rec["texts"]}
    out = []
    for letter in letters(number):
        mode = mode_of(number, letter)
        events = [event_from_dict(d) for d in by_mode[mode]["events"][RUN_STREAM]]
        finished = next(e for e in events if isinstance(e, FinishedEvent))
        out.append(Text(letter, mode, q.system(mode), q.short(mode), [e for e in events if isinstance(e, StepEvent)],
                        finished.result))
    return out


# -- the class tally ------------------------------------------------------------------------------------
@dataclass
class Count:
    """One question's tally: answers counted, how many were right, how often each letter was ticked."""

    answers: int = 0
    right: int = 0
    ticked: dict[str, int] = field(default_factory=dict)

    @property
    def wrong(self) -> int:
        return self.answers - self.right


class Tally:
    """The class's answers per question, in this process, shared by every session (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[int, Count] = {}
        self._answered: set[tuple[str, int]] = set()

    def add(self, answer: Grade, session: str | None = None) -> bool:
        """Count ``answer``; a session's later answers to the same question are not counted (``False``)."""
        with self._lock:
            if session is not None:
                if (session, answer.number) in self._answered:
                    return False
                self._answered.add((session, answer.number))
            count = self._counts.setdefault(answer.number, Count())
            count.answers += 1
            count.right += int(answer.right)
            for letter in answer.ticked:
                count.ticked[letter] = count.ticked.get(letter, 0) + 1
            return True

    def counts(self) -> dict[int, Count]:
        """A copy of every question's count."""
        with self._lock:
            return {n: Count(c.answers, c.right, dict(c.ticked)) for n, c in self._counts.items()}

    def reset(self) -> None:
        """Empty the tally, and let every session answer again."""
        with self._lock:
            self._counts.clear()
            self._answered.clear()


#: The app's one tally (one per process: a class shares one app).
TALLY = Tally()


def tally_markdown(tally: Tally | None = None) -> str:
    """Every question's tally as a table (a question nobody answered shows zeros)."""
    counts = (tally or TALLY).counts()
    rows = []
    for number in range(1, len(QUESTIONS) + 1):
        c = counts.get(number, Count())
        shown = letters(number)
        rows.append([str(number), str(c.answers), str(c.right), str(c.wrong),
                     *(str(c.ticked.get(x, 0)) if x in shown else "–" for x in LETTERS)])
    return "\n".join(["**Class tally** (each student's first answer per question)", "",
                      *md_table(["question", "answers", "right", "wrong", *(f"ticked {x}" for x in LETTERS)],
                                rows)])


def reset_label() -> str:
    """What the reset button's guard is, in words."""
    if env.quiz_teacher_code():
        return "Teacher: type the teacher code, then reset the class tally."
    return (f"Teacher: reset the class tally. No teacher code is set (`{env.QUIZ_TEACHER_CODE.name}`), so "
            "anyone on this page can reset it.")


def reset(code: str | None = None) -> tuple[str, str]:
    """Empty the tally when the teacher code matches (or none is set); the tally and what happened."""
    expected = env.quiz_teacher_code()
    if expected and not hmac.compare_digest((code or "").encode("utf-8"), expected.encode("utf-8")):
        return tally_markdown(), "**Not reset**: that is not the teacher code."
    TALLY.reset()
    return tally_markdown(), "**Reset**: the class tally is empty."


# -- the page ------------------------------------------------------------------------------------------
#: What choosing a question sets (names of the Quiz's widgets, in this order).
LOAD_OUTPUTS = ("prompt", "source", *(f"text_{i}" for i in range(len(LETTERS))), "picks", "submit", "reveal",
                "detection", *(f"plot_{i}" for i in range(len(LETTERS))), "tally")
#: What a submitted answer sets (names of the Quiz's widgets, in this order).
SUBMIT_OUTPUTS = ("reveal", "detection", *(f"plot_{i}" for i in range(len(LETTERS))), "tally")


def _source(number: int, rec: dict | None, why: str | None) -> str:
    if why is not None:
        return (f"**Question {number} cannot be shown here**: {why}. Its texts are recorded runs of the engine; "
                f"record them with `{COMMAND}` on the app's models.")
    made = rec.get("made", {})
    return (f"Texts recorded with the question's seed on {', '.join(rec['models'])} by engine {rec['code']['engine']}"
            f"{' on ' + made['date'][:10] if made.get('date') else ''}; a live run of the same settings gives "
            "the same texts.")


def make_question(models: Sequence[str]) -> Callable[..., tuple]:
    """Choosing a question: its prompt, its texts under their letters (or why there are none), an empty answer,
    the reveal cleared, and the tally."""
    def load(number: Any = 1) -> tuple:
        number = int(number)
        q = question(number)
        rec, why = recorded(number, models)
        shown = texts(number, rec) if why is None else []
        boxes = [gr.update(value=shown[i].result.text if i < len(shown) else "", visible=i < len(shown),
                           label=f"Text {LETTERS[i]}") for i in range(len(LETTERS))]
        prompt = (f"**Question {number} of {len(QUESTIONS)}.** Each text continues this prompt with {q.tokens} new "
                  f"tokens:\n\n> {q.prompt()}")
        return (prompt, _source(number, rec, why), *boxes,
                gr.update(choices=list(letters(number)) if why is None else [], value=[], interactive=why is None),
                gr.update(interactive=why is None), "", gr.update(value=tables.empty_detection_frame(), visible=False),
                *(gr.update(value=None, visible=False) for _ in LETTERS), tally_markdown())
    return load


def _detectors(text: Text) -> str:
    """What the text's detectors say: which flag it (z above the line), else the highest z."""
    found = [d for d in text.result.detection if d.detected]
    if found:
        return "detected by " + ", ".join(f"{d.provider} (z {d.z:.1f})" for d in found)
    top = max(text.result.detection, key=lambda d: d.z, default=None)
    where = f"; highest: {top.provider}, z {top.z:.1f}" if top is not None else ""
    return f"no detector reaches z = {Z_THRESHOLD:g}{where}"


def _text_line(text: Text, answer: Grade) -> str:
    marked = watermarked(text.mode)
    call = "you ticked it" if text.letter in answer.ticked else "you left it unticked"
    verdict = "right" if answer.letter_right(text.letter) else "wrong"
    found = any(d.detected for d in text.result.detection)
    note = (" Its watermark is there, but no detector finds it in this text." if marked and not found else
            " A detector flags it though no watermark was applied: a false positive." if found and not marked else "")
    return (f"* **Text {text.letter}**: {text.system}. {'Watermarked' if marked else 'Not watermarked'}; {call}: "
            f"**{verdict}**. Detectors: {_detectors(text)}.{note}")


def reveal_markdown(answer: Grade, shown: Sequence[Text]) -> str:
    """The answer's verdict, then each text's system, whether the student's call on it was right, and its detectors."""
    ticked = ", ".join(sorted(answer.ticked)) or "none"
    key = ", ".join(sorted(answer.key)) or "none"
    head = ("**Right**" if answer.right else "**Not quite**") + f": you ticked {ticked}; the watermarked texts are {key}."
    return "\n".join([head, "", *(_text_line(t, answer) for t in shown), "",
                      "The verdicts are each detector's on the finished text, re-tokenised with its own tokenizer as "
                      "a third party would run it; the traces below are the same detectors live, on the tokens as "
                      "they were drawn, so their last point can differ from the table's z."])


def z_trace(text: Text) -> go.Figure:
    """The text's z traces, one per detector, drawn as the Generate tab draws them."""
    fig = plots.z_figure(text.labels, text.steps)
    fig.update_layout(title_text=f"Text {text.letter} ({text.short}): each detector's z-score as it was written")
    return fig


def detection_frame(shown: Sequence[Text]) -> pd.DataFrame:
    """Every text's detection table, one block per text (its ``run`` column names the text and its mode)."""
    return pd.concat([tables.detection_frame(t.result.detection, run=f"{t.letter}: {t.mode}") for t in shown],
                     ignore_index=True)


def make_submit(models: Sequence[str]) -> Callable[..., tuple]:
    """Submitting an answer: graded against the key, counted in the tally (once per session and question),
    and the reveal: each text's system, its detectors' verdicts and z, and its z traces."""
    def submit(number: Any, ticked: Sequence[str] | None, request: gr.Request = None) -> tuple:
        number = int(number)
        rec, why = recorded(number, models)
        if why is not None:
            raise gr.Error(f"question {number} cannot be answered here: {why}", print_exception=False)
        answer = grade(number, ticked or [])
        TALLY.add(answer, getattr(request, "session_hash", None))  # no session (a script): each counts
        shown = texts(number, rec)
        figures = [gr.update(value=z_trace(shown[i]), visible=True) if i < len(shown) else
                   gr.update(value=None, visible=False) for i in range(len(LETTERS))]
        return (reveal_markdown(answer, shown), gr.update(value=detection_frame(shown), visible=True), *figures,
                tally_markdown())
    return submit
