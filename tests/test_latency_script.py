"""The app latency benchmark script runs against the app as it is today.

``python -m tools.latency`` talks to the app's API positionally, so a change to
``/generate``'s or ``/identify``'s inputs can break it silently (it once sent
``False`` for the comparison after the page had stopped accepting booleans). This
runs it end to end on the tiny models; the real-model figures are in
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_latency_script_times_a_click_and_the_identify_tab_on_the_tiny_models():
    env = dict(os.environ, WASH_APP_MODELS="tiny-smollm2,tiny-gemma3")
    done = subprocess.run([sys.executable, "-m", "tools.latency", "--repeats", "2", "--identify", "1",
                           "--timeout", "300"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    clicks = report["click_to_first_token_s"]
    assert len(clicks["samples"]) == 2 and all(s > 0 for s in clicks["samples"])
    assert "error" not in (report["final_status"] or "").lower(), report["final_status"]
    identify = report["identify_fast_s"]
    assert len(identify["samples"]) == 1 and identify["samples"][0] > 0
    systems = [row[0] for row in identify["tables"][0]]
    assert systems == ["provider 1 alone", "WASH ensemble", "unwatermarked models"]
    assert report["start_to_ready_s"] >= report["server_answering_s"] > 0
