"""The presets' recorded runs: a fresh run repeats a recording, a Generate click with a preset's inputs (as
its click leaves a fresh tab) replays it and draws what the live run draws, any other inputs run live, and
the committed recordings, once made, are of the offline presets on the real models by the running engine.

The committed recordings (assets/presets/) are of the real models, 200 tokens a preset
(``python -m tools.preset_record``); here the same recording code runs on the tiny models for
two presets (the paper setting: two tokenizers, routing; the single watermarked model: another
mode), since every preset's 200 tokens twice would add minutes to the suite on 2 cores.
"""

from __future__ import annotations

import pandas as pd
import pytest

from wash.content.presets import PRESETS, DEMO_TOKENS, preset
from wash.engine.catalog import OFFLINE_DEFAULTS
from wash.ui import handlers, preset_runs, replay

TINY = ["tiny-smollm2", "tiny-gemma3"]
REAL = list(OFFLINE_DEFAULTS)
#: The committed recordings' total size, at most (bytes), as the Lesson's (seven presets, 200 tokens each).
SIZE_BUDGET = 1_000_000
#: The presets recorded here: the first (three providers over two tokenizers) and the single one.
PAPER, SINGLE = preset_runs.recorded_names()[0], "Single watermarked model"


@pytest.fixture(scope="module")
def tiny_recordings() -> dict[str, dict]:
    return {name: preset_runs.record(name, TINY) for name in (PAPER, SINGLE)}


@pytest.fixture
def recordings(tiny_recordings, tmp_path, monkeypatch):
    """The tiny recordings where the app reads them, and the tiny models as the app's."""
    monkeypatch.setattr(preset_runs, "RECORDINGS", tmp_path)
    monkeypatch.setenv("WASH_APP_MODELS", ",".join(TINY))
    for rec in tiny_recordings.values():
        preset_runs.write(rec, tmp_path)
    return tmp_path


def test_the_recorded_presets_are_the_offline_ones_each_in_its_own_file():
    offline = [p.name for p in PRESETS if not p.models]
    assert preset_runs.recorded_names() == offline and SINGLE in offline
    files = {preset_runs.path(name).name for name in offline}
    assert len(files) == len(offline) and all(f.endswith(".json.gz") for f in files)
    assert preset_runs.path(PAPER).parent == preset_runs.RECORDINGS


def test_the_inputs_are_what_a_preset_click_leaves_in_a_fresh_tab(monkeypatch):
    """The Generate tab as app.py builds it, then a preset's click: Generate sends the recorded inputs."""
    import app
    from wash.ui.preload import Preload

    monkeypatch.setenv("WASH_APP_MODELS", ",".join(TINY))
    demo = app.build_demo(Preload([]))
    value = {b.elem_id: b.value for b in demo.blocks.values()
             if getattr(b, "elem_id", None) and hasattr(b, "value")}
    for name in preset_runs.recorded_names():
        rows, mode, aggregate, tokens, _ = handlers.make_preset_handler(name, TINY)()
        sent = [rows, value["prompt"], tokens, value["temperature"], value["seed"], mode, value["compare"],
                value["forwards"], value["top-k"], value["top-p"], aggregate]
        assert replay.plain(sent) == replay.plain(preset_runs.inputs(name, TINY)), name
    assert value["generate-pace"] == replay.READING  # a matching click replays unless live is chosen


@pytest.mark.parametrize("name", [PAPER, SINGLE])
def test_a_fresh_run_reproduces_the_recording_token_for_token(tiny_recordings, name):
    rec = tiny_recordings[name]
    fresh = preset_runs.record(name, TINY)
    assert replay.comparable(fresh["events"]) == replay.comparable(rec["events"])
    assert replay.why_not(rec, preset_runs.KIND, preset_runs.inputs(name, TINY)) is None
    assert rec["settings"]["mode"] == preset(name).mode and set(rec["events"]) == {"wash"}
    assert len([e for e in rec["events"]["wash"] if e["event"] == "step"]) == DEMO_TOKENS


def _last(updates) -> dict:
    out: dict = {}
    for update in updates:
        out.update(update)
    return out


def test_a_replay_draws_what_the_live_run_draws(recordings):
    values = preset_runs.inputs(PAPER, TINY)
    live = _last(handlers.make_generate(None)(*values))
    replayed = _last(preset_runs.make_replay(TINY)(*values, pace=replay.AT_ONCE))
    assert replayed["text"] == live["text"] and replayed["plain"] == live["plain"] and live["plain"]
    pd.testing.assert_frame_equal(replayed["detection"], live["detection"])
    assert [list(t.y) for t in replayed["zplot"].data] == [list(t.y) for t in live["zplot"].data]
    assert replayed["status"].startswith(f"**Done**: {DEMO_TOKENS} tokens, replayed from the recorded run")
    assert not live["status"].startswith("**Done**: 200 tokens, replayed")
    for number in (1, 57, DEMO_TOKENS):  # the distribution view of a clicked token
        fig_live, info_live = handlers.step_view(live["state"], number)
        fig_replayed, info_replayed = handlers.step_view(replayed["state"], number)
        assert info_replayed == info_live and fig_replayed.to_dict() == fig_live.to_dict()
    with pytest.raises(Exception, match="computed live: live was chosen"):
        next(preset_runs.make_replay(TINY)(*values, pace=replay.LIVE))
    changed = [*values[:4], 1, *values[5:]]
    with pytest.raises(Exception, match="computed live: these inputs are no preset's"):
        next(preset_runs.make_replay(TINY)(*changed, pace=replay.AT_ONCE))


def _route(values, pace=replay.READING, models=TINY) -> tuple[bool, str]:
    line, go_replay, go_live = preset_runs.make_route(models)(*values, pace=pace)
    assert isinstance(go_replay, int) != isinstance(go_live, int)  # exactly one run follows
    return isinstance(go_replay, int), line


def test_the_route_replays_a_presets_own_inputs_only_and_says_why(recordings, tiny_recordings):
    values = preset_runs.inputs(SINGLE, TINY)
    replaying, line = _route(values)
    engine = tiny_recordings[SINGLE]["code"]["engine"]
    assert replaying and line.startswith("**Recorded run** (replayed at 8 tokens/s): computed with the "
                                         f"preset's seed by engine {engine}")
    assert _route(values, replay.AT_ONCE)[1].startswith("**Recorded run** (replayed at once)")
    assert _route(values, replay.LIVE) == (False, "**Live run**: computed now with the preset's seed; the "
                                                  "recorded run gives the same result.")
    api_table = {"headers": ["model", "scheme", "key", "params"],
                 "data": [[m, s, float(k), p] for m, s, k, p in values[0]] + [["", "", "", ""]]}
    assert _route([api_table, *values[1:]])[0]  # the API's table, a blank row: the same inputs
    for at, other in ((1, values[1] + " again"), (2, 199), (4, 1), (6, "single"), (8, 5)):
        assert _route([*values[:at], other, *values[at + 1:]]) == (False, ""), at  # live, no line
    preset_runs.path(SINGLE).unlink()
    assert _route(values) == (False, "**Live run**: this preset has no recorded run, so the preset is "
                                     "computed now.")
    stale = dict(tiny_recordings[PAPER], code=dict(tiny_recordings[PAPER]["code"], engine="000000000000"))
    preset_runs.write(stale, recordings)
    replaying, line = _route(preset_runs.inputs(PAPER, TINY))
    assert not replaying and "made by another engine (engine 000000000000" in line
    replaying, line = _route(preset_runs.inputs(PAPER, REAL), models=REAL)
    assert not replaying and "made for other settings or models (tiny-smollm2, tiny-gemma3)" in line


def test_the_recorder_writes_a_presets_file(tmp_path, monkeypatch):
    from tools.preset_record import main

    monkeypatch.setenv("WASH_APP_MODELS", ",".join(TINY))
    number = preset_runs.recorded_names().index(SINGLE) + 1
    assert main(["--presets", str(number), "--out", str(tmp_path)]) == 0
    rec = preset_runs.load(SINGLE, tmp_path)
    assert rec["made"]["command"] == f"python -m tools.preset_record --presets {number} --out {tmp_path}"
    assert rec["models"] == TINY and preset_runs.why_not_here(rec, SINGLE, TINY) is None
    assert [p.name for p in tmp_path.iterdir()] == [preset_runs.path(SINGLE).name]
    with pytest.raises(SystemExit):
        main(["--presets", "0", "--out", str(tmp_path)])


def test_the_committed_recordings_are_the_presets_on_the_real_models_by_the_running_engine():
    """An engine change needs the recordings made again (Generate runs the presets live until then)."""
    from wash.core.version import ROOT
    from wash.publish.space import space_files

    if not any(preset_runs.RECORDINGS.glob("*.json.gz")):
        pytest.skip(f"no preset recordings committed yet ({preset_runs.COMMAND})")
    files = space_files()
    stale = []
    for name in preset_runs.recorded_names():
        rec = preset_runs.load(name)
        assert rec is not None, f"no recording of the preset '{name}': {preset_runs.COMMAND}"
        assert rec["models"] == REAL and rec["preset"] == name
        why = preset_runs.why_not_here(rec, name, REAL)
        if why is not None:
            stale.append(f"{name}: {why}")
        assert preset_runs.path(name).relative_to(ROOT).as_posix() in files  # the Space replays it too
    assert not stale, "; ".join(stale) + f" ({preset_runs.COMMAND})"
    assert sum(p.stat().st_size for p in preset_runs.RECORDINGS.glob("*.json.gz")) <= SIZE_BUDGET
