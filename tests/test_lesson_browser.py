"""The Lesson tab in Debian's headless Chromium, on the tiny models.

The app is the one served in this process for the whole run (``served_tiny_app`` in
conftest.py) with the tiny models. One test
walks every step in order, as a class would, with the same code ``tools/lesson_time.py``
times on the real models (``walk``): each click shows the step's card (its question, not
its outcome), loads its providers, runs, and ends with Done, its "what to look for" shown
with it; then it checks what each step drew: beside its text the unwatermarked one with its
detectors' grey lines and rows, and in step 2 the per-token distribution view of a clicked
token. Another clicks a step while the previous one runs (the new step ends the old run,
whose "what to look for" stays hidden meanwhile) and opens a step in the Generate tab.
"""

from __future__ import annotations

import pytest

from tools.lesson_time import open_lesson, walk
from wash.content.lesson import STEPS
from wash.ui.lesson import LOOK_FOR_WAIT, TRY_OUTPUTS
from wash.ui.plots import UNMARKED_LEGEND
from wash.ui.run import comparison_streams

pytestmark = pytest.mark.browser
STEP_TIMEOUT_S = 240.0

_TRACES = ("() => { const gd = document.querySelector('#lesson-z-plot .js-plotly-plot');"
           " return gd && gd.data ? gd.data.map(t => t.name) : []; }")
_DIST = ("() => { const gd = document.querySelector('#lesson-dist-plot .js-plotly-plot');"
         " return gd && gd.data ? gd.data.map(t => t.name) : []; }")


def _traces(s) -> int:
    """The z chart's lines for a step: its providers, P1 alone and alone / N, each detector on the unwatermarked
    text."""
    beside = comparison_streams(s.compare)
    n = len(s.preset.rows)
    return n + (2 if "single" in beside else 0) + (n if "unwatermarked" in beside else 0)


@pytest.fixture
def lesson_url(served_tiny_app) -> str:
    return served_tiny_app[0]


def _page(browser, url: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(60_000)
    page.goto(url, wait_until="load")
    page.wait_for_selector("#generate-btn")
    open_lesson(page)
    return page


def _rows(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id}").inner_text()


def test_browser_lesson_walks_every_step_with_its_card_providers_and_results(lesson_url, browser):
    page = _page(browser, lesson_url)
    assert "A lesson in five steps" in page.locator("#lesson-intro").inner_text()
    assert "What is a z-score?" in page.locator("#lesson-z-score").inner_text()
    assert "What is a z-score?" in page.locator("#z-score").text_content()  # beside the Generate tab's chart too
    page.locator("#lesson-glossary").get_by_text("Words used here").click()  # the glossary beside the chart
    page.wait_for_function("() => document.querySelector('#lesson-glossary').innerText.includes('false positive')")
    seen = []
    for number, s in enumerate(STEPS, start=1):
        (result,) = walk(page, STEP_TIMEOUT_S, [number])
        assert result["status"].startswith("Done"), result
        card = " ".join(page.locator("#lesson-card").inner_text().split())
        assert s.question in card and f"Step {number} of {len(STEPS)}" in card and s.look_for[:60] not in card
        assert s.look_for[:60] in " ".join(page.locator("#lesson-look-for").inner_text().split())
        providers = _rows(page, "lesson-providers")
        assert all(f"{scheme}" in providers and str(key) in providers for _, scheme, key, _ in s.preset.rows)
        if s.identify:
            page.wait_for_function("() => document.querySelector('#lesson-identify-table').innerText"
                                   ".includes('WASH ensemble')")
            summary = page.locator("#lesson-identify-summary").inner_text()
            assert all(system in summary for system in ("provider 1 alone", "WASH ensemble", "unwatermarked"))
            assert not page.locator("#lesson-z-plot").is_visible()
        else:
            assert f"{s.tokens} tokens" in result["status"]
            page.wait_for_function(f"() => ({_TRACES})().length === {_traces(s)}")
            names = page.evaluate(_TRACES)
            n = len(s.preset.rows)
            assert names.count(UNMARKED_LEGEND) == n  # each detector on the unwatermarked text
            if "single" in s.compare:
                assert f"expected for P1: alone / {n}" in names
            assert page.locator("#lesson-single-text").is_visible() == ("single" in s.compare)
            unmarked = page.locator("#lesson-unmarked-text")
            assert unmarked.is_visible() and unmarked.locator(".token").count() > 0
            detection = _rows(page, "lesson-detection")
            assert all(f"P{i + 1} " in detection for i in range(n)) and "unwatermarked" in detection
            assert page.locator("#lesson-dist-plot").is_visible() == s.distributions
            if s.distributions:
                _check_distribution_view(page, n)
        seen.append(number)
    assert seen == list(range(1, len(STEPS) + 1))
    page.close()


def _check_distribution_view(page, n: int) -> None:
    """A click on token 3 of the step's text: every provider's distribution, the average and the consensus."""
    page.locator("#lesson-text .token").nth(2).click()
    page.wait_for_function("() => document.querySelector('#lesson-token-info').innerText.includes('Token 3')")
    page.wait_for_function(f"() => ({_DIST})().length === {n + 2}")
    names = page.evaluate(_DIST)
    assert [name.split(":")[0] for name in names[:n]] == [f"p{i + 1}" for i in range(n)]
    assert names[n:] == ["p̄ (average)", "p* (consensus)"]


def test_browser_a_new_step_ends_the_running_one_and_try_it_opens_generate(lesson_url, browser):
    page = _page(browser, lesson_url)
    page.click("#lesson-step-2")
    # predict first: while it runs, the question is on the card and what to look for is not on the page
    # (read in the same instant as the status: the tiny models may finish the run a moment later)
    while_running = page.wait_for_function(
        "() => /^Generating/.test(document.querySelector('#lesson-status').innerText.trim()) && "
        "[document.querySelector('#lesson-card').innerText, document.querySelector('#lesson-look-for').innerText]")
    card, look_for = while_running.json_value()
    assert STEPS[1].question in " ".join(card.split())
    assert look_for.strip() == LOOK_FOR_WAIT.replace("*", "")
    (result,) = walk(page, STEP_TIMEOUT_S, [3])  # clicked mid-run: step 3 runs and finishes
    assert result["status"].startswith(f"Done: {STEPS[2].tokens} tokens")
    expect = _traces(STEPS[2])  # five providers, P1 alone, alone / 5, five detectors on the unmarked text
    page.wait_for_function(f"() => ({_TRACES})().length === {expect}")
    page.wait_for_timeout(1500)  # step 2's run, cancelled, must not draw over step 3's
    assert page.locator("#lesson-status").inner_text().strip() == result["status"]
    assert len(page.evaluate(_TRACES)) == expect and "P5 " in _rows(page, "lesson-detection")
    assert STEPS[2].look_for[:60] in " ".join(page.locator("#lesson-look-for").inner_text().split())
    assert "max_new" in TRY_OUTPUTS
    page.click("#lesson-try")
    page.wait_for_function("() => document.querySelector('#providers').innerText.includes('505')")
    assert page.locator("#max-new-tokens input[type=number]").input_value() == str(STEPS[2].tokens)
    assert page.locator(f"#compare input[value='{STEPS[2].compare}']").is_checked()
    # the comparison's texts show once the radio's own change event has run (a second round trip)
    page.wait_for_selector("#single-text", state="visible")
    page.wait_for_selector("#unmarked-text", state="visible")
    page.close()


def test_browser_a_step_replays_its_recorded_run_and_live_computes_the_same(lesson_url, browser, tmp_path,
                                                                          monkeypatch):
    from wash.ui import replay
    from wash.ui.lesson import step_inputs

    tiny = ["tiny-smollm2", "tiny-gemma3"]
    for number in (1, 5):
        s = STEPS[number - 1]
        replay.write(replay.record(number, s.kind, step_inputs(s, tiny), tiny), tmp_path)
    monkeypatch.setattr(replay, "RECORDINGS", tmp_path)  # the served app runs in this process
    page = _page(browser, lesson_url)
    (result,) = walk(page, STEP_TIMEOUT_S, [1])
    assert result["status"].startswith(f"Done: {STEPS[0].tokens} tokens, replayed from the recorded run"), result
    assert page.locator("#lesson-source").inner_text().startswith("Recorded run")
    page.wait_for_function(f"() => ({_TRACES})().length === {_traces(STEPS[0])}")
    replayed = page.locator("#lesson-text").inner_text()
    unmarked = page.locator("#lesson-unmarked-text").inner_text()
    page.locator("#lesson-pace").get_by_label(replay.LIVE, exact=True).check()
    (result,) = walk(page, STEP_TIMEOUT_S, [1])
    assert result["status"].startswith(f"Done: {STEPS[0].tokens} tokens") and "replayed" not in result["status"]
    assert page.locator("#lesson-source").inner_text().startswith("Live run")
    assert page.locator("#lesson-text").inner_text() == replayed
    assert page.locator("#lesson-unmarked-text").inner_text() == unmarked  # the recording keeps every stream
    page.locator("#lesson-pace").get_by_label(replay.AT_ONCE, exact=True).check()
    (result,) = walk(page, STEP_TIMEOUT_S, [5])
    assert "from the recorded probe" in result["status"]
    page.wait_for_function("() => document.querySelector('#lesson-identify-table').innerText"
                           ".includes('WASH ensemble')")
    (result,) = walk(page, STEP_TIMEOUT_S, [2])  # no recording of step 2 here: it runs live, and says why
    assert "this step has no recorded run" in page.locator("#lesson-source").inner_text()
    page.close()
