"""The class load script runs against the app as it is today, on the tiny models, and reports what it claims.

``python -m tools.class_load`` clicks the Lesson's steps through their API endpoints (load, then
the recorded or the live run the load announces); a change to those endpoints or their outputs can
break it silently. Three students here, with recordings of the tiny models made by
``tools.lesson_record``; the 30-student run on the real models is the lead's, on an idle machine.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_class_script_replays_every_step_for_three_students_and_reports_times_and_memory(tmp_path, monkeypatch,
                                                                                        capsys):
    from tools.class_load import main
    from tools.lesson_record import main as record

    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2,tiny-gemma3")
    recordings = tmp_path / "recordings"
    assert record(["--out", str(recordings)]) == 0
    out = tmp_path / "class.json"
    assert main(["--students", "3", "--tokens-per-s", "40", "--recordings", str(recordings), "--timeout", "300",
                 "--class-timeout", "600", "--out", str(out)]) == 0, capsys.readouterr().out[-3000:]
    report = json.loads(out.read_text())
    assert report["clicks"] == report["clicks_ok"] == 15 and report["failed"] == 0 and not report["failures"]
    assert report["all"]["replayed"] == 15 and report["all"]["live"] == 0
    assert set(report["steps"]) == {"1", "2", "3", "4", "5"}
    for part in (report["all"]["first_token_s"], report["all"]["done_s"]):
        assert 0 < part["median"] <= part["p95"] <= part["max"]
    assert report["all"]["first_token_s"]["max"] <= report["all"]["done_s"]["max"]
    assert report["steps"]["2"]["done_s"]["median"] >= 79 / 40  # paced: 80 tokens at 40 tokens/s
    assert report["rss_mb"]["peak"] >= report["rss_mb"]["start"] > 0 and report["app_alive_at_end"]
    assert "load average" in report["uptime_before"] and report["load_average_start"]
    assert report["goal"]["first_token_p95_s"] == 1.0 and report["goal"]["done_p95_s"] == 15.0
    assert str(ROOT) not in out.read_text() and str(tmp_path) not in out.read_text()  # no machine path


def test_quantiles_are_nearest_rank():
    from tools.class_load import quantiles

    assert quantiles([]) is None
    assert quantiles([float(v) for v in range(1, 101)]) == {"median": 50.5, "p95": 95.0, "max": 100.0}
    assert quantiles([3.0]) == {"median": 3.0, "p95": 3.0, "max": 3.0}
