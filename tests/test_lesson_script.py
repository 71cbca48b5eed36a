"""``tools/lesson_time.py`` runs against the app as it is today, end to end, on the tiny models.

It clicks the Lesson's steps in Chromium and calls ``/generate`` and ``/identify``
positionally, so a change to the page or to those inputs can break it silently.
One round that walks step 1 only, one seed; the real-model figures are in docs/bench-lesson.json.
Walking every step in the browser, with the same ``walk``, is ``test_lesson_browser.py``'s job (in
the shared app, without a second app process): here the walk is checked to be timed and recorded.
"""

from __future__ import annotations

import json

import pytest

from wash.content.lesson import STEPS, measured, unmarked_lines
from wash.ui.run import comparison_streams

pytestmark = pytest.mark.browser


def test_lesson_script_times_every_step_and_measures_z_on_the_tiny_models(tmp_path, served_tiny_app, capsys):
    # the script's main, in this process (its imports are this process's), against the app this test process
    # serves on the tiny models (``--url``): starting an app is test_app_live's
    from tools.lesson_time import main

    out = tmp_path / "lesson.json"
    main(["--url", served_tiny_app[0], "--rounds", "1", "--steps", "1", "--seeds", "0", "--out", str(out),
          "--timeout", "300"])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])  # each step's click times, printed
    data = json.loads(out.read_text())
    assert data["models"] == ["tiny-smollm2", "tiny-gemma3"] and len(data["rounds"]) == 1
    assert "load average" in data["rounds"][0]["uptime_before"] and "--out" in data["runs"][0]["command"]
    for entry, step in zip(data["steps"], STEPS):
        assert len(entry["click_s"]) == (entry["step"] == 1) and all(s > 0 for s in entry["click_s"])
        if step.identify:
            assert set(entry["identify"]) == {"provider 1 alone", "WASH ensemble", "unwatermarked models"}
        else:
            labels = [f"P{i + 1} {row[1]}" for i, row in enumerate(step.preset.rows)]
            assert list(entry["z"])[:len(labels)] == labels and all(len(v) == 1 for v in entry["z"].values())
            beside = comparison_streams(step.compare)
            assert ("single" in beside) == (f"P1 {step.preset.rows[0][1]} alone" in entry["z"])
            unmarked = [f"{label} unwatermarked" for label in labels] if "unwatermarked" in beside else []
            assert list(unmarked_lines(entry["z"])) == unmarked
    # the page's line reads this very file
    assert "This page serves" not in measured(1, out, ["tiny-smollm2", "tiny-gemma3"])
    assert "Click to done:" in measured(1, out)
