"""The blind quiz: its answer key follows the modes, its reveal is the recorded runs' detection, its tally
counts a class's answers under concurrent submits, and a question without a usable recording says why.

The recordings here are made on the tiny models into tmp_path with the code ``tools/quiz_record.py``
runs (``wash.ui.quiz.record``), as tests/test_lesson_replay.py does for the Lesson; the committed
recordings (assets/quiz/) are of the real models and are checked against the questions' inputs and the
engine's fingerprint.
"""

from __future__ import annotations

import threading
from collections import Counter

import gradio as gr
import pytest

from wash.content import quiz as content
from wash.content.quiz import LETTERS, QUESTIONS, grade, key, letters, mode_of, order, watermarked
from wash.core.errors import WashInputError
from wash.detection import Z_THRESHOLD
from wash.engine.catalog import OFFLINE_DEFAULTS
from wash.ui import quiz, replay, tables

TINY = ["tiny-smollm2", "tiny-gemma3"]
REAL = list(OFFLINE_DEFAULTS)
#: The committed recordings' total size, at most (bytes).
SIZE_BUDGET = 1_000_000


@pytest.fixture(scope="module")
def tiny_quiz() -> dict[int, dict]:
    """Every question recorded on the tiny models, with the code the recorder runs."""
    return {n: quiz.record(n, TINY) for n in range(1, len(QUESTIONS) + 1)}


@pytest.fixture
def recordings(tmp_path, monkeypatch, tiny_quiz):
    """The tiny recordings as the app's recordings folder."""
    monkeypatch.delenv("WASH_QUIZ_RECORDINGS", raising=False)
    monkeypatch.setattr(quiz, "RECORDINGS", tmp_path)
    for rec in tiny_quiz.values():
        quiz.write(rec, tmp_path)
    return tmp_path


def test_each_question_has_two_or_three_texts_and_the_key_is_the_watermarked_modes():
    assert len(QUESTIONS) >= 3
    seen_wash_n = set()
    for number, q in enumerate(QUESTIONS, start=1):
        shown = [mode_of(number, x) for x in letters(number)]
        assert sorted(shown) == sorted(q.modes) and 2 <= len(shown) <= 3
        assert key(number) == {x for x in letters(number) if mode_of(number, x) != content.UNWATERMARKED}
        if content.WASH in q.modes:
            seen_wash_n.add(q.n)
    assert watermarked(content.WASH) and watermarked(content.SINGLE) and not watermarked(content.UNWATERMARKED)
    assert seen_wash_n <= {3, 5} and seen_wash_n


def test_the_order_is_fixed_per_question_and_shuffled():
    orders = [order(n) for n in range(1, len(QUESTIONS) + 1)]
    assert orders == [order(n) for n in range(1, len(QUESTIONS) + 1)]  # every student, every call
    assert all(sorted(o) == list(range(len(o))) for o in orders)
    assert any(o != tuple(sorted(o)) for o in orders)
    firsts = {mode_of(n, "A") for n in range(1, len(QUESTIONS) + 1)}
    assert len(firsts) > 1, "the same kind of text under A in every question gives the letters away"


def test_a_question_is_refused_when_it_cannot_be_a_blind_quiz():
    with pytest.raises(WashInputError, match="two or three distinct texts"):
        content.Question("One model, 5 independent keys", (content.WASH,), "fic-01")
    with pytest.raises(WashInputError, match="3 or 5 providers"):
        content.Question("Single watermarked model", (content.UNWATERMARKED, content.WASH), "fic-01")
    with pytest.raises(WashInputError, match="unknown quiz question"):
        content.question(len(QUESTIONS) + 1)


def test_grading_is_right_only_for_exactly_the_watermarked_texts():
    for number in range(1, len(QUESTIONS) + 1):
        answer = key(number)
        assert grade(number, answer).right
        for letter in letters(number):
            flipped = answer ^ {letter}
            g = grade(number, flipped)
            assert not g.right and not g.letter_right(letter)
            assert all(g.letter_right(x) for x in letters(number) if x != letter)
    with pytest.raises(WashInputError, match="has no text C"):
        grade(2, ["C"])


def test_a_fresh_run_reproduces_a_question_token_for_token(tiny_quiz):
    number = len(QUESTIONS)
    fresh = quiz.record(number, TINY)
    assert replay.comparable(fresh["texts"]) == replay.comparable(tiny_quiz[number]["texts"])
    assert replay.why_not(tiny_quiz[number], quiz.KIND, quiz.inputs(number, TINY)) is None
    for text, mode in zip(tiny_quiz[number]["texts"], QUESTIONS[number - 1].modes):
        steps = [e for e in text["events"]["wash"] if e["event"] == "step"]
        assert text["mode"] == mode and len(steps) == QUESTIONS[number - 1].tokens
        assert text["settings"]["mode"] == mode and text["settings"]["seed"] == QUESTIONS[number - 1].seed


def test_the_reveal_is_the_recorded_detection_and_z_traces(tiny_quiz):
    for number, rec in tiny_quiz.items():
        q = QUESTIONS[number - 1]
        shown = quiz.texts(number, rec)
        assert [t.letter for t in shown] == list(letters(number))
        frame = quiz.detection_frame(shown)
        for t in shown:
            recorded = next(x for x in rec["texts"] if x["mode"] == t.mode)
            result = next(e for e in recorded["events"]["wash"] if e["event"] == "finished")["result"]
            assert t.result.text == result["text"]
            rows = frame[frame["run"] == f"{t.letter}: {t.mode}"]
            assert list(rows["provider"]) == [d["provider"] for d in result["detection"]]
            assert list(rows["z"]) == [round(d["z"], 3) for d in result["detection"]]
            assert list(rows[tables.DETECTED]) == ["yes" if d["z"] > Z_THRESHOLD else "no"
                                                   for d in result["detection"]]
            assert len(rows) == (1 if t.mode == content.SINGLE else q.n)  # provider 1 alone: its detector only
            fig = quiz.z_trace(t)
            assert [tr.name for tr in fig.data] == t.labels and t.letter in fig.layout.title.text
            assert list(fig.data[0].y) == [s.live_z[0] for s in t.steps]
        answer = grade(number, [])
        text = quiz.reveal_markdown(answer, shown)
        assert text.startswith("**Right**" if not key(number) else "**Not quite**")
        for t in shown:
            line = next(x for x in text.splitlines() if x.startswith(f"* **Text {t.letter}**"))
            assert q.system(t.mode) in line
            assert ("**right**" in line) == (not watermarked(t.mode))
            for d in t.result.detection:
                assert (f"{d.provider} (z {d.z:.1f})" in line) == d.detected


def test_the_tally_counts_concurrent_answers_once_per_session_and_resets():
    tally = quiz.Tally()
    right, wrong = grade(1, key(1)), grade(1, [])
    threads = [threading.Thread(target=lambda i=i: [tally.add(right if i % 2 else wrong, f"s{i}-{j}")
                                                    for j in range(200)]) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    count = tally.counts()[1]
    assert (count.answers, count.right, count.wrong) == (1600, 800, 800)
    assert count.ticked == dict(Counter({x: 800 for x in key(1)}))
    assert not tally.add(wrong, "s1-0") and tally.counts()[1].answers == 1600  # a session's second answer
    assert tally.add(wrong, None) and tally.add(wrong, None)  # no session (an API script): each counts
    tally.reset()
    assert tally.counts() == {} and tally.add(right, "s1-0")
    table = quiz.tally_markdown(tally)
    assert "| 1 | 1 | 1 | 0 |" in table and "| 2 | 0 | 0 | 0 |" in table


def test_the_reset_asks_for_the_teacher_code_when_one_is_set(monkeypatch):
    monkeypatch.setattr(quiz, "TALLY", quiz.Tally())
    quiz.TALLY.add(grade(1, []))
    monkeypatch.setenv("WASH_QUIZ_TEACHER_CODE", "owl")
    assert "teacher code" in quiz.reset_label()
    _, note = quiz.reset("mouse")
    assert note.startswith("**Not reset**") and quiz.TALLY.counts()[1].answers == 1
    _, note = quiz.reset("owl")
    assert note.startswith("**Reset**") and quiz.TALLY.counts() == {}
    monkeypatch.delenv("WASH_QUIZ_TEACHER_CODE")
    quiz.TALLY.add(grade(1, []))
    assert "anyone" in quiz.reset_label()
    table, note = quiz.reset("")
    assert note.startswith("**Reset**") and "| 1 | 0 | 0 | 0 |" in table


def test_the_page_shows_a_recorded_question_and_grades_and_counts_an_answer(recordings, monkeypatch):
    monkeypatch.setattr(quiz, "TALLY", quiz.Tally())
    view = dict(zip(quiz.LOAD_OUTPUTS, quiz.make_question(TINY)(1)))
    assert view["source"].startswith("Texts recorded with the question's seed on tiny-smollm2, tiny-gemma3")
    assert QUESTIONS[0].prompt() in view["prompt"]
    shown = quiz.texts(1, quiz.load(1))
    assert [view[f"text_{i}"]["value"] for i in range(3)] == [t.result.text for t in shown]
    assert view["picks"]["choices"] and view["submit"]["interactive"]
    out = dict(zip(quiz.SUBMIT_OUTPUTS, quiz.make_submit(TINY)(1, sorted(key(1)))))
    assert out["reveal"].startswith("**Right**") and out["plot_0"]["visible"]
    assert "| 1 | 1 | 1 | 0 |" in out["tally"]
    view = dict(zip(quiz.LOAD_OUTPUTS, quiz.make_question(TINY)(2)))  # two texts: the third box hides
    assert view["text_2"]["visible"] is False and len(view["picks"]["choices"]) == 2


def test_a_question_without_a_usable_recording_says_why_and_takes_no_answer(recordings, tiny_quiz, monkeypatch):
    quiz.path(3).unlink()
    view = dict(zip(quiz.LOAD_OUTPUTS, quiz.make_question(TINY)(3)))
    assert view["source"].startswith("**Question 3 cannot be shown here**: question 3 has no recorded run")
    assert quiz.COMMAND in view["source"] and view["submit"]["interactive"] is False
    assert not any(view[f"text_{i}"]["visible"] for i in range(len(LETTERS)))
    with pytest.raises(gr.Error, match="question 3 cannot be answered here"):
        quiz.make_submit(TINY)(3, [])
    stale = dict(tiny_quiz[1], code=dict(tiny_quiz[1]["code"], engine="000000000000"))
    quiz.write(stale, recordings)
    view = dict(zip(quiz.LOAD_OUTPUTS, quiz.make_question(TINY)(1)))
    assert "made by another engine (engine 000000000000" in view["source"]
    view = dict(zip(quiz.LOAD_OUTPUTS, quiz.make_question(REAL)(2)))
    assert "made for other settings or models (tiny-smollm2, tiny-gemma3)" in view["source"]


@pytest.mark.parametrize("number", range(1, len(QUESTIONS) + 1))
def test_the_committed_recordings_are_the_questions_on_the_real_models_by_the_running_engine(number):
    """An engine change needs the recordings made again (the page refuses the question until then)."""
    rec = replay.read(quiz.RECORDINGS / f"q-{number}.json.gz")
    assert rec is not None, f"no recording of question {number}: {quiz.COMMAND}"
    assert rec["models"] == REAL and rec["question"] == number
    why = replay.why_not(rec, quiz.KIND, quiz.inputs(number, REAL), subject=f"question {number}")
    assert why is None, f"{why} ({quiz.COMMAND})"
    assert sum(p.stat().st_size for p in quiz.RECORDINGS.glob("q-*.json.gz")) <= SIZE_BUDGET
