"""The app latency benchmark script runs against the app as it is today.

``python -m tools.latency`` talks to the app's API positionally, so a change to
``/generate``'s or ``/identify``'s inputs can break it silently (it once sent
``False`` for the comparison after the page had stopped accepting booleans). This
runs it end to end on the tiny models; the real-model figures are in
docs/BENCHMARKS.md. The app it starts is also the suite's one fresh ``python app.py`` on the tiny
models: its report says what ``/status`` answered during the preload, which the test checks.
"""

from __future__ import annotations

import json

import pytest


def test_latency_script_times_a_click_and_the_identify_tab_on_the_tiny_models(monkeypatch, capsys):
    """The script's ``main`` in this process; the app it times is a fresh ``python app.py``, so the
    report also shows that process's preload as ``/status`` told it: loading, then ready, never back."""
    from tools.latency import main

    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2,tiny-gemma3")
    main(["--repeats", "2", "--identify", "1", "--timeout", "300"])
    report = json.loads(capsys.readouterr().out)
    assert report["command"] == "python -m tools.latency --repeats 2 --identify 1 --timeout 300"
    clicks = report["click_to_first_token_s"]
    assert len(clicks["samples"]) == 2 and all(s > 0 for s in clicks["samples"])
    assert "error" not in (report["final_status"] or "").lower(), report["final_status"]
    identify = report["identify_fast_s"]
    assert len(identify["samples"]) == 1 and identify["samples"][0] > 0
    systems = [row[0] for row in identify["tables"][0]]
    assert systems == ["provider 1 alone", "WASH ensemble", "unwatermarked models"]
    assert report["start_to_ready_s"] >= report["server_answering_s"] > 0
    # the preload, poll by poll
    polls = report["status_polls"]
    assert polls[-1]["ready"] and not any(p["ready"] for p in polls[:-1]), polls
    assert all(p["error"] is None and p["elapsed_s"] >= 0 for p in polls), polls
    assert report["app_loaded"] == ["tiny-smollm2", "tiny-gemma3"]
    messages = report["preload_messages"]
    assert "tiny-smollm2: loading" in messages
    assert any(m.startswith("tiny-gemma3: ready in") for m in messages)
    assert messages[-1] == "warming up: one token of the default preset"


class _ScriptedStatus:
    """A stand-in for gradio_client.Client's ``predict`` on ``/status``: it answers from a script,
    where an exception is raised as the client would raise it (a busy app that answers late cannot
    be made to time out on cue)."""

    def __init__(self, script: list) -> None:
        self.script, self.calls = list(script), 0

    def predict(self, api_name: str) -> dict:
        assert api_name == "/status"
        self.calls += 1
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_waiting_for_the_models_asks_again_after_a_poll_times_out():
    import time

    import httpx

    from tools.latency import wait_ready

    loading, ready = {"done": False, "messages": ["loading"]}, {"done": True, "ready": True}
    client = _ScriptedStatus([loading, httpx.ReadTimeout("timed out"), loading, ready])
    assert wait_ready(client, time.monotonic() + 60, poll_s=0) is ready and client.calls == 4
    late = _ScriptedStatus([httpx.ReadTimeout("timed out")])
    with pytest.raises(httpx.ReadTimeout):  # past the deadline a timeout ends the wait
        wait_ready(late, time.monotonic() - 1, poll_s=0)
    assert late.calls == 1
