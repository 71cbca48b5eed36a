"""``tools/lesson_time.py`` runs against the app as it is today, end to end, on the tiny models.

It clicks the Lesson's steps in Chromium and calls ``/generate`` and ``/identify``
positionally, so a change to the page or to those inputs can break it silently.
One round that walks step 1 only, one seed; the real-model figures are in docs/bench-lesson.json.
Walking every step in the browser, with the same ``walk``, is ``test_lesson_browser.py``'s job (in
the shared app, without a second app process): here the walk is checked to be timed and recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wash.lesson import STEPS, measured

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.browser


def test_lesson_script_times_every_step_and_measures_z_on_the_tiny_models(tmp_path, served_tiny_app):
    # against the app this test process serves on the tiny models (``--url``); starting an app is test_app_live's
    out = tmp_path / "lesson.json"
    env = dict(os.environ, WASH_APP_MODELS="tiny-smollm2,tiny-gemma3")
    done = subprocess.run([sys.executable, "-m", "tools.lesson_time", "--url", served_tiny_app[0], "--rounds", "1",
                           "--steps", "1", "--seeds", "0", "--out", str(out), "--timeout", "300"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
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
            assert (step.compare == "single") == (f"P1 {step.preset.rows[0][1]} alone" in entry["z"])
    # the page's line reads this very file
    assert "This page serves" not in measured(1, out, ["tiny-smollm2", "tiny-gemma3"])
    assert "Click to done:" in measured(1, out)
