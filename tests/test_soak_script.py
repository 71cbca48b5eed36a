"""The soak script runs against the app as it is today, and its memory statistic says what it claims.

``python -m tools.soak`` talks to ``/generate`` positionally and checks that each bad
input is refused by name; a change to either can break it silently. This runs a short
soak on the tiny models; the real-model soaks are in docs/soak-*.json.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_soak_script_serves_clients_refuses_bad_inputs_and_reports_memory(tmp_path, monkeypatch, capsys):
    # the script's main in this process; the app it soaks is its own ``python app.py``
    from tools.soak import main

    out = tmp_path / "soak.json"
    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2,tiny-gemma3")
    assert main(["--clients", "2", "--seconds", "10", "--warmup", "2", "--window", "5", "--bad-every", "2",
                 "--max-new-tokens", "4", "--timeout", "300", "--out", str(out)]) == 0, capsys.readouterr().out[-3000:]
    report = json.loads(out.read_text())
    assert report["requests_ok"] > 0 and report["requests_failed"] == 0
    assert report["bad_inputs_refused_by_name"] > 0 and not report["bad_inputs_not_refused_by_name"]
    window = report["rss_mb"]["last_window"]
    assert 9 <= window["to_s"] <= 10, window  # the soak's end, not the drain after it
    assert abs(window["from_s"] - (window["to_s"] - 5)) < 1e-9 and window["to"] > 0 and window["anon_to"] > 0
    assert report["uptime_before"] and "load average" in report["uptime_after"]
    assert str(ROOT) not in out.read_text() and str(tmp_path) not in out.read_text()  # no machine path


def test_the_last_window_is_taken_up_to_the_soaks_end():
    from tools.soak import memory_summary

    # (seconds, resident MB, anonymous MB, requests ok): +1 MB a second until 100 s, then flat
    samples = [(float(t), 1000.0 + min(t, 100), 500.0 + min(t, 100), t) for t in range(0, 161)]
    summary = memory_summary(samples, warmup=10, window=50, until=150)
    window = summary["last_window"]
    assert (window["from_s"], window["to_s"]) == (100, 150)
    assert window["growth_mb"] == 0 and window["growth_pct"] == 0 and window["anon_growth_mb"] == 0
    assert window["trend_mb"] == 0 and window["anon_trend_mb"] == 0
    assert summary["after_warmup"] == 1010 and summary["end"] == 1100
    early = memory_summary(samples, warmup=10, window=50, until=80)["last_window"]
    assert early["growth_mb"] == 50 and early["growth_pct"] == round(100 * 50 / 1030, 2)
    assert early["trend_mb"] == 50 and early["trend_pct"] == early["growth_pct"]
    # a swing of one sample moves the end-to-end figure, not the trend
    swung = samples[:150] + [(150.0, 1130.0, 530.0, 150)] + samples[151:]
    window = memory_summary(swung, warmup=10, window=50, until=150)["last_window"]
    assert window["growth_mb"] == 30 and abs(window["trend_mb"]) < 10
