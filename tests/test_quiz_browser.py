"""The Quiz tab in Debian's headless Chromium, on the tiny models.

The app is the one served in this process (``served_tiny_app``); its quiz reads the recordings
folder at each request, so the test records two questions on the tiny models into tmp_path and
points the folder there, leaving the third unrecorded. A student opens the tab, answers question 1,
sees the reveal (systems, detection table, z traces) and the class tally count the answer once;
question 3 says it has no recording and takes no answer; the teacher's reset empties the tally.
"""

from __future__ import annotations

import pytest

from wash.content.quiz import QUESTIONS, key, letters
from wash.ui import quiz

pytestmark = pytest.mark.browser
TINY = ["tiny-smollm2", "tiny-gemma3"]

_TRACES = ("(i) => { const gd = document.querySelector(`#quiz-plot-${i} .js-plotly-plot`);"
           " return gd && gd.data ? gd.data.map(t => t.name) : []; }")


def _text(page, elem_id: str) -> str:
    return " ".join(page.locator(f"#{elem_id}").inner_text().split())


def _tally_row(page, number: int) -> list[str]:
    """Question ``number``'s row of the tally table, cell by cell."""
    return [c.strip() for c in page.locator("#quiz-tally tr").nth(number).locator("td").all_inner_texts()]


def test_browser_quiz_answer_reveal_tally_and_reset(served_tiny_app, browser, tmp_path, monkeypatch):
    for number in (1, 2):
        quiz.write(quiz.record(number, TINY), tmp_path)
    monkeypatch.delenv("WASH_QUIZ_RECORDINGS", raising=False)
    monkeypatch.delenv("WASH_QUIZ_TEACHER_CODE", raising=False)
    monkeypatch.setattr(quiz, "RECORDINGS", tmp_path)  # the served app runs in this process
    quiz.TALLY.reset()
    shown = quiz.texts(1, quiz.load(1))

    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(60_000)
    page.goto(served_tiny_app[0], wait_until="load")
    page.wait_for_selector("#generate-btn")
    page.get_by_role("tab", name="Quiz").click()
    page.wait_for_function("() => document.querySelector('#quiz-source').innerText.includes('Texts recorded')")
    assert QUESTIONS[0].prompt() in _text(page, "quiz-prompt")
    for i, t in enumerate(shown):
        assert page.locator(f"#quiz-text-{i} textarea").input_value() == t.result.text
    assert _tally_row(page, 1)[:4] == ["1", "0", "0", "0"]

    for letter in sorted(key(1)):
        page.locator("#quiz-picks").get_by_label(letter, exact=True).check()
    page.click("#quiz-submit")
    page.wait_for_function("() => document.querySelector('#quiz-reveal').innerText.startsWith('Right')")
    reveal = _text(page, "quiz-reveal")
    for t in shown:
        assert f"Text {t.letter}: {QUESTIONS[0].system(t.mode)}" in reveal
    detection = _text(page, "quiz-detection")
    assert all(f"{t.letter}: {t.mode}" in detection for t in shown)
    for i, t in enumerate(shown):
        page.wait_for_function(f"() => ({_TRACES})({i}).length === {len(t.labels)}")
        assert page.evaluate(_TRACES, i) == t.labels
    assert _tally_row(page, 1) == ["1", "1", "1", "0", *(("1" if x in key(1) else "0") for x in letters(1))]

    page.locator("#quiz-picks").get_by_label(letters(1)[0], exact=True).click()  # a second try, after the reveal
    page.click("#quiz-submit")
    page.wait_for_function("() => document.querySelector('#quiz-reveal').innerText.startsWith('Not quite')")
    assert _tally_row(page, 1)[:4] == ["1", "1", "1", "0"]  # this session's first answer only

    page.locator("#quiz-question").get_by_label("Question 3", exact=True).check()
    page.wait_for_function("() => document.querySelector('#quiz-source').innerText.includes('cannot be shown')")
    assert "question 3 has no recorded run" in _text(page, "quiz-source") and quiz.COMMAND in _text(page, "quiz-source")
    assert page.locator("#quiz-submit").is_disabled() and not page.locator("#quiz-text-0").is_visible()
    assert not page.locator("#quiz-plot-0").is_visible() and _text(page, "quiz-reveal") == ""

    assert "anyone on this page can reset it" in _text(page, "quiz-code")
    page.click("#quiz-reset")
    page.wait_for_function("() => document.querySelector('#quiz-reset-note').innerText.startsWith('Reset')")
    assert _tally_row(page, 1)[:4] == ["1", "0", "0", "0"] and quiz.TALLY.counts() == {}
    page.close()
