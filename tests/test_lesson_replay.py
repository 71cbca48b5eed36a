"""The Lesson's recorded runs: a fresh run repeats each recording (every stream a step shows: its run, provider
1 alone, the unwatermarked text), a replay draws what the live run draws (its distribution view and its "what to
look for", revealed with Done, included), and the committed recordings are of the Lesson's steps, on its
models, by the running engine.

The committed recordings (assets/lesson/) are of the real models, whose five steps take minutes
on 2 cores (``python -m tools.lesson_record``); here the same recording code runs on the tiny
models, twice per step, and the committed files are checked against the steps' inputs and the
engine's fingerprint.
"""

from __future__ import annotations

import os
import threading
import time

import pandas as pd
import pytest
from gradio.components.plot import PlotData

from wash.engine import FinishedEvent, StepEvent, event_from_dict
from wash.engine.catalog import OFFLINE_DEFAULTS
from wash.content.lesson import STEPS
from wash.ui import handlers, plots
from wash.ui import identify as identify_ui
from wash.ui import lesson as lesson_ui
from wash.ui import replay
from wash.ui.run import comparison_streams

TINY = ["tiny-smollm2", "tiny-gemma3"]
REAL = list(OFFLINE_DEFAULTS)
#: The committed recordings' total size, at most (bytes).
SIZE_BUDGET = 1_000_000


@pytest.fixture(scope="module")
def tiny_recordings() -> dict[int, dict]:
    """Every step recorded on the tiny models, with the code the recorder runs."""
    return {n: replay.record(n, s.kind, lesson_ui.step_inputs(s, TINY), TINY) for n, s in enumerate(STEPS, start=1)}


@pytest.mark.parametrize("number", range(1, len(STEPS) + 1))
def test_a_fresh_run_reproduces_each_recording_token_for_token(tiny_recordings, number):
    s = STEPS[number - 1]
    rec = tiny_recordings[number]
    fresh = replay.record(number, s.kind, lesson_ui.step_inputs(s, TINY), TINY)
    key = "probed" if s.identify else "events"
    assert replay.comparable(fresh[key]) == replay.comparable(rec[key])
    assert replay.why_not(rec, s.kind, lesson_ui.step_inputs(s, TINY)) is None
    if not s.identify:
        steps = [e for e in rec["events"]["wash"] if e["event"] == "step"]
        assert len(steps) == s.tokens
        assert set(rec["events"]) == {"wash", *comparison_streams(s.compare)}  # every stream the step shows
        assert all(events[-1]["event"] == "finished" for events in rec["events"].values())


def test_events_come_back_from_their_dicts(tiny_recordings):
    rec = replay.plain(tiny_recordings[2])
    assert set(rec["events"]) == {"wash", "single", "unwatermarked"}
    for stream in rec["events"]:
        back = [event_from_dict(d) for d in rec["events"][stream]]
        again = [e.to_dict(with_tokens=True) if isinstance(e, FinishedEvent) else e.to_dict() for e in back]
        assert replay.plain(again) == rec["events"][stream]
    finished = event_from_dict(rec["events"]["wash"][-1])
    assert finished.result.detection[0].per_token and isinstance(finished.result.detection[0].token_null, tuple)
    with pytest.raises(ValueError, match="unknown event"):
        event_from_dict({"event": "nothing"})


def _last(updates) -> dict:
    out: dict = {}
    for update in updates:
        out.update(update)
    return out


def test_a_replay_draws_what_the_live_run_draws(tiny_recordings, tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "RECORDINGS", tmp_path)
    monkeypatch.setenv("WASH_APP_MODELS", ",".join(TINY))  # the live run's providers are the tiny models
    for number in (2, 5):
        replay.write(tiny_recordings[number], tmp_path)
    live_updates = list(lesson_ui.make_run(2, TINY, None)())
    replayed_updates = list(lesson_ui.make_replay(2, TINY)(replay.AT_ONCE))
    live, replayed = _last(live_updates), _last(replayed_updates)
    for name in ("text", "single_text", "unmarked_text"):
        assert replayed[name] == live[name] and live[name], name
    assert replayed["unmarked_text"] != replayed["text"]  # the watermarks changed the text
    pd.testing.assert_frame_equal(replayed["detection"], live["detection"])
    assert [t.name for t in replayed["zplot"].data] == [t.name for t in live["zplot"].data]
    assert [list(t.y) for t in replayed["zplot"].data] == [list(t.y) for t in live["zplot"].data]
    assert sum(t.name == plots.UNMARKED_LEGEND for t in live["zplot"].data) == len(STEPS[1].preset.rows)
    assert replayed["status"].startswith(f"**Done**: {STEPS[1].tokens} tokens, replayed")
    for updates in (live_updates, replayed_updates):  # "what to look for" lands with Done, in no other update
        assert all(("look_for" in u) == str(u.get("status", "")).startswith("**Done") for u in updates)
        assert updates[-1]["look_for"] == lesson_ui.reveal(2, TINY)
    assert sum("look_for" in u for u in live_updates) == 1  # a live run says Done once: at its end
    # the distribution view of step 2: a token of the replayed run shows what the live run's shows
    for number in (1, 17, STEPS[1].tokens):
        fig_live, info_live = handlers.step_view(live["state"], number)
        fig_replayed, info_replayed = handlers.step_view(replayed["state"], number)
        assert info_replayed == info_live and fig_replayed.to_dict() == fig_live.to_dict()
    plot, frame, summary, status, look_for = lesson_ui.make_replay(5, TINY)(replay.READING)
    assert look_for == lesson_ui.reveal(5, TINY)
    live_frame = lesson_ui.make_run(5, TINY, None)()[1]
    pd.testing.assert_frame_equal(frame.drop(columns="seconds"), live_frame.drop(columns="seconds"))
    assert "WASH ensemble" in summary and status.startswith("**Done**")


def test_the_load_says_which_run_a_click_shows_and_why(tiny_recordings, tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "RECORDINGS", tmp_path)
    load = lesson_ui.make_load(2, TINY)
    *_, line, go_replay, go_live = load(replay.READING)
    assert line.startswith("**Live run**: this step has no recorded run") and isinstance(go_live, int)
    replay.write(tiny_recordings[2], tmp_path)
    *_, line, go_replay, go_live = load(replay.READING)
    assert line.startswith("**Recorded run** (replayed at 8 tokens/s)") and isinstance(go_replay, int)
    *_, line, go_replay, go_live = load(replay.LIVE)
    assert line.startswith("**Live run**") and isinstance(go_live, int)
    stale = dict(tiny_recordings[2], code=dict(tiny_recordings[2]["code"], engine="000000000000"))
    replay.write(stale, tmp_path)
    *_, line, go_replay, go_live = load(replay.READING)
    assert "made by another engine (engine 000000000000" in line and isinstance(go_live, int)
    with pytest.raises(Exception, match="runs live here"):
        next(lesson_ui.make_replay(2, TINY)(replay.READING))
    assert "other settings or models" in replay.why_not(tiny_recordings[2], "generate",
                                                        lesson_ui.step_inputs(STEPS[1], REAL))


def test_a_replay_is_paced_and_stops():
    steps = [StepEvent(i, "x", 0, False, None, [], None, [], [], [], None, None, None, [], 0.0) for i in range(11)]
    started = time.monotonic()
    assert len(list(replay.paced(steps, 100.0, threading.Event()))) == 11
    assert 0.09 <= time.monotonic() - started < 1.0  # ten gaps of 10 ms
    stop = threading.Event()
    shown = []
    for event in replay.paced(steps, 100.0, stop):
        shown.append(event)
        stop.set()
    assert len(shown) == 1


@pytest.mark.parametrize("number", range(1, len(STEPS) + 1))
def test_the_committed_recordings_are_of_the_lessons_steps(number):
    s = STEPS[number - 1]
    rec = replay.load(number)
    assert rec is not None, f"no recording of step {number}: python -m tools.lesson_record"
    assert rec["models"] == REAL and rec["kind"] == s.kind and rec["step"] == number
    assert rec["inputs"] == replay.plain(lesson_ui.step_inputs(s, REAL))
    if not s.identify:
        assert rec["settings"]["seed"] == s.seed and rec["settings"]["max_new_tokens"] == s.tokens
        assert len([e for e in rec["events"]["wash"] if e["event"] == "step"]) == s.tokens
        assert set(rec["events"]) == {"wash", *comparison_streams(s.compare)}  # every stream the step shows


def test_the_committed_recordings_are_the_running_engines():
    """An engine change needs the recordings made again (the page runs the steps live until then)."""
    stale = [f"step {n}: {replay.why_not(replay.load(n), s.kind, lesson_ui.step_inputs(s, REAL))}"
             for n, s in enumerate(STEPS, start=1)
             if replay.why_not(replay.load(n), s.kind, lesson_ui.step_inputs(s, REAL)) is not None]
    assert not stale, "; ".join(stale) + " (python -m tools.lesson_record)"
    assert sum(replay.path(n).stat().st_size for n in range(1, len(STEPS) + 1)) <= SIZE_BUDGET


@pytest.mark.parametrize("number", [n for n, s in enumerate(STEPS, start=1) if "unwatermarked" in s.compare])
def test_the_unwatermarked_text_beside_a_step_is_the_engines_unwatermarked_run(tiny_recordings, number):
    """Same prompt and seed as the step, every watermark off (``wash.api`` directly); each detector scores it."""
    import wash.baselines  # noqa: F401  (the app's modes)
    from wash.api import generate
    from wash.ui.providers import build_config
    from wash.ui.run import comparison_config

    table, prompt, tokens, temperature, seed, mode, _compare, forwards, top_k, top_p, aggregate = \
        lesson_ui.generate_inputs(STEPS[number - 1], TINY)
    config = build_config(table, prompt, tokens, temperature, seed, mode, TINY, forwards=forwards, top_k=top_k,
                          top_p=top_p, aggregate=aggregate)
    direct = generate(comparison_config(config, "unwatermarked"))
    recorded = event_from_dict(tiny_recordings[number]["events"]["unwatermarked"][-1]).result
    assert recorded.mode == "unwatermarked" and recorded.text == direct.text
    assert [(d.provider, d.z) for d in recorded.detection] == [(d.provider, d.z) for d in direct.detection]
    assert len(recorded.detection) == len(STEPS[number - 1].preset.rows)


def _updates(number: int, rec: dict, shown=handlers.ALL_OUTPUTS) -> list[dict]:
    """Every update of step ``number``'s recorded run through the Generate handler, at once."""
    generate = handlers.make_generate(None, streams=replay.streams(rec, 0.0), shown=shown)
    return list(generate(*lesson_ui.generate_inputs(STEPS[number - 1], TINY)))


def test_a_lesson_run_builds_only_what_it_shows_and_shows_what_a_full_run_does(tiny_recordings, monkeypatch):
    """The Lesson's runs skip the Generate tab's outputs it has no place for (downloads, evidence, the slider,
    and the distribution view outside step 2), and what it shows is what the full handler draws."""
    monkeypatch.setenv("WASH_APP_MODELS", ",".join(TINY))
    for number in (1, 2):
        shown = lesson_ui.outputs(number)
        rec = tiny_recordings[number]
        full, lesson = _updates(number, rec), _updates(number, rec, shown)
        assert all(set(u) <= {*shown, "status", "state"} for u in lesson), number
        assert "json" in full[-1] and "json" not in lesson[-1] and ("dist" in lesson[0]) == (number == 2)
        full_last, lesson_last = _last(full), _last(lesson)
        for name in set(shown) & set(full_last) - {"detection", "zplot", "dist", "state"}:
            assert lesson_last[name] == full_last[name], (number, name)
        assert lesson_last["state"].steps == full_last["state"].steps  # what the distribution view reads
        pd.testing.assert_frame_equal(lesson_last["detection"], full_last["detection"])
        assert lesson_last["zplot"].to_json() == full_last["zplot"].to_json()


def test_the_first_chart_of_a_run_is_its_own_providers_drawn_once(tiny_recordings, monkeypatch):
    """The empty z chart every run starts with is serialised once per set of providers: steps with other
    providers get their own, each the chart a fresh figure gives."""
    monkeypatch.setenv("WASH_APP_MODELS", ",".join(TINY))
    firsts = {n: _updates(n, tiny_recordings[n], lesson_ui.outputs(n))[0] for n in (1, 2)}
    for number, first in firsts.items():
        labels = first["state"].labels
        assert first["zplot"] == PlotData(type="plotly", plot=plots.z_figure(labels, []).to_json())
        assert first["zplot"] is handlers.empty_z_plot(tuple(labels))  # drawn once, not per run
    assert len(firsts[1]["state"].labels) != len(firsts[2]["state"].labels)
    assert firsts[1]["zplot"] != firsts[2]["zplot"]
    assert handlers.hint_plot("a") == PlotData(type="plotly", plot=plots.empty_figure("a").to_json())
    assert handlers.hint_plot("a") != handlers.hint_plot("b")


def test_a_replayed_identification_is_its_recording_as_it_stands(tiny_recordings, tmp_path, monkeypatch):
    """The identification's views are kept per recorded answer: a re-made recording shows its own."""
    monkeypatch.setattr(replay, "RECORDINGS", tmp_path)
    rec = tiny_recordings[5]
    file = replay.write(rec, tmp_path)
    plot, frame, summary, *_ = lesson_ui.make_replay(5, TINY)(replay.READING)
    probed = replay.probed(rec)
    assert plot == PlotData(type="plotly", plot=identify_ui.figure(probed).to_json())
    pd.testing.assert_frame_equal(frame, identify_ui.results_frame(probed))
    assert summary == identify_ui.summary(probed)
    remade = dict(rec, probed=[dict(p, p=0.5, p_holm=0.5) for p in rec["probed"]])
    stamp = file.stat().st_mtime_ns
    replay.write(remade, tmp_path)
    os.utime(file, ns=(stamp + 10**9, stamp + 10**9))  # a later file, however coarse the clock
    plot2, frame2, summary2, *_ = lesson_ui.make_replay(5, TINY)(replay.READING)
    assert list(frame2["p"]) == ["0.5"] * len(probed) != list(frame["p"])
    pd.testing.assert_frame_equal(frame2, identify_ui.results_frame(replay.probed(remade)))
    assert plot2 == PlotData(type="plotly", plot=identify_ui.figure(replay.probed(remade)).to_json())
