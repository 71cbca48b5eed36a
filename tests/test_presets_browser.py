"""A preset's recorded run in Debian's headless Chromium, on the tiny models (``served_tiny_app``).

A click on the single-model preset and then on Generate replays its recording (made here on the tiny
models, read from a temporary folder): the status says it is the recorded run; with the pace at
*live* the same click computes it afresh and draws the same text; a changed seed is no preset's
run and goes live without a word on recordings.
"""

from __future__ import annotations

import pytest

from tools.preset_tour import apply_preset, set_number
from wash.content.presets import DEMO_TOKENS
from wash.ui import preset_runs, replay

pytestmark = pytest.mark.browser
TINY = ["tiny-smollm2", "tiny-gemma3"]
NAME = "Single watermarked model"
RUN_TIMEOUT_MS = 240_000


def _generate(page) -> tuple[str, str, list[str]]:
    """Click Generate and wait for a Done (or Stopped) other than the last run's: the status, the source line
    (which run it shows) and the text's tokens."""
    before = page.locator("#status").inner_text().strip()
    page.click("#generate-btn")
    page.wait_for_function("(before) => { const s = document.querySelector('#status').innerText.trim();"
                           " return s !== before && /^(Done|Stopped)/.test(s); }", arg=before,
                           timeout=RUN_TIMEOUT_MS)
    status, source = (page.locator(f"#{e}").inner_text().strip() for e in ("status", "generate-source"))
    return status, source, page.locator("#wash-text .token").all_inner_texts()


def test_browser_a_preset_replays_its_recorded_run_and_live_computes_the_same(served_tiny_app, browser,
                                                                            tmp_path, monkeypatch):
    preset_runs.write(preset_runs.record(NAME, TINY), tmp_path)
    monkeypatch.setattr(preset_runs, "RECORDINGS", tmp_path)  # the served app runs in this process
    monkeypatch.setenv("WASH_LESSON_TOKENS_PER_S", "100")  # reading speed, quicker: 200 tokens in 2 s
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(60_000)
    page.goto(served_tiny_app[0], wait_until="load")
    page.wait_for_selector("#generate-btn")
    assert page.locator("#generate-pace").get_by_label(replay.READING, exact=True).is_checked()
    apply_preset(page, preset_runs.recorded_names().index(NAME))
    status, source, replayed = _generate(page)
    assert status.startswith(f"Done: {DEMO_TOKENS} tokens, replayed from the recorded run"), status
    assert source.startswith("Recorded run (replayed at 100 tokens/s): computed with the preset's seed")
    assert len(replayed) > DEMO_TOKENS / 2
    assert "P1 " in page.locator("#detection-table").inner_text()
    page.locator("#generate-pace").get_by_label(replay.LIVE, exact=True).check()
    status, source, live = _generate(page)
    assert status.startswith(f"Done: {DEMO_TOKENS} tokens") and "replayed" not in status, status
    assert source.startswith("Live run: computed now with the preset's seed")
    assert live == replayed  # the recording is the engine's run: live makes the same text, token for token
    page.locator("#generate-pace").get_by_label(replay.AT_ONCE, exact=True).check()
    set_number(page, "seed", 1)
    status, source, other = _generate(page)
    assert "replayed" not in status and source == "" and other != replayed  # no preset's: live, no line
    page.close()
