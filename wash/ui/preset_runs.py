"""Recorded preset runs: what a preset click followed by Generate computes, made once and replayed.

Why: a preset's run at the Generate tab's defaults is seeded, so every visitor who clicks a
preset and then Generate would compute the same 200 tokens again, a generation slot each.
Its recording is of the Lesson's kind (``wash.ui.replay``: every event of the run, the
inputs, the app's models, the engine's fingerprint), one ``NAME.json.gz`` per offline preset
(``recorded_names``: the GPU presets' models are not the offline ones) under ``RECORDINGS``.

A Generate click first goes to ``make_route`` (no model, no slot): when the tab's inputs
equal a recording's inputs (``inputs``: the preset's providers, mode, rule and length as its
click sets them; the prompt, seed, serving profile, forwards and comparison as the tab opens
with them) and the recording stands for a live run here (``replay.why_not``: same inputs on
the same models, the running engine), the run replays it (``make_replay``) at the pace the
tab's radio asks (``replay.PACES``), and the page says so with the Lesson's line
(``replay.source_line``). Any other inputs, or the radio at *live*, run live as before.
``python -m tools.preset_record`` makes the recordings.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import gradio as gr

from wash.content.presets import DEMO_TOKENS, preset, preset_names
from wash.core import env
from wash.core.version import ROOT, code_version
from wash.engine import DEFAULT_PROFILE, OFFLINE_DEFAULTS, PROFILES
from wash.ui import handlers, replay, texts
from wash.ui.lesson import replay_status
from wash.ui.providers import normalise_rows, preset_rows
from wash.ui.run import OFF

#: Where the recordings are kept: one ``NAME.json.gz`` per recorded preset (``slug``).
RECORDINGS = ROOT / "assets" / "presets"
#: A preset recording's kind (``replay.why_not`` checks it, with the engine's fingerprint).
KIND = "preset"
#: The command that makes the recordings.
COMMAND = "python -m tools.preset_record"
#: The Generate tab's values a preset click leaves as they are (``app.py`` opens the tab with them).
SEED, FORWARDS, COMPARE = 0, "eager", OFF
#: What the route's line says a replay or a live run is of (the Lesson's line, for a preset).
SUBJECT = "the preset"


def prompt() -> str:
    """The prompt the Generate tab opens with."""
    return texts.example_prompts(1)[0]


def recorded_names() -> list[str]:
    """The presets that have recordings: those the default offline models run (not the GPU ones)."""
    return preset_names(OFFLINE_DEFAULTS)


def slug(name: str) -> str:
    """A file name for preset ``name``: its words in lower case, joined by hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def path(name: str, root: Path | None = None) -> Path:
    """Preset ``name``'s recording under ``root`` (default ``RECORDINGS``)."""
    return (root or RECORDINGS) / f"{slug(name)}.json.gz"


def inputs(name: str, models: Sequence[str]) -> list:
    """The Generate handler's positional inputs (``app.py``'s order) after a click on preset ``name`` in a
    fresh tab: what the click sets (``handlers.make_preset_handler``), the rest as the tab opens."""
    rows, mode = preset_rows(name, models)
    serving = PROFILES[DEFAULT_PROFILE]
    return [rows, prompt(), DEMO_TOKENS, serving.temperature, SEED, mode, COMPARE, FORWARDS, serving.top_k,
            serving.top_p, preset(name).aggregate]


def record(name: str, models: Sequence[str]) -> dict:
    """Preset ``name``'s recording: its run on ``models`` (every event), its inputs and the code."""
    values = inputs(name, models)
    return {"format": replay.FORMAT, "kind": KIND, "preset": name, "models": list(models),
            "inputs": replay.plain(values), "code": {**code_version(), **replay.fingerprint(KIND)},
            **replay.record_generate(values, models)}


def write(rec: dict, root: Path | None = None) -> Path:
    """Write ``rec`` as its preset's file."""
    return replay.save(rec, path(rec["preset"], root))


def load(name: str, root: Path | None = None) -> dict | None:
    """Preset ``name``'s recording, or ``None`` where there is none."""
    return replay.read(path(name, root))


def canonical(values: Sequence[Any]) -> list:
    """The Generate inputs with the providers table as the app reads it (rows of four strings, blank rows
    dropped), so a table sent with integer keys or a trailing blank row still matches."""
    table, *rest = values
    return replay.plain([[r for r in normalise_rows(table) if any(r)], *rest])


def matching(values: Sequence[Any], models: Sequence[str]) -> str | None:
    """The recorded preset whose inputs ``values`` equal, or ``None`` (any other inputs run live)."""
    try:
        given = canonical(values)
    except (TypeError, ValueError):
        return None
    return next((name for name in recorded_names() if given == replay.plain(inputs(name, models))), None)


def replayable(values: Sequence[Any], models: Sequence[str]) -> tuple[str | None, dict | None, str | None]:
    """The preset ``values`` are the inputs of, its recording, and why that cannot stand for a live run here
    (``None``: it can; no preset: nothing to replay)."""
    name = matching(values, models)
    if name is None:
        return None, None, "these inputs are no preset's"
    rec = load(name)
    return name, rec, why_not_here(rec, name, models)


def why_not_here(rec: dict | None, name: str, models: Sequence[str]) -> str | None:
    """Why ``rec`` cannot stand for preset ``name``'s live run on ``models`` (``None``: it can)."""
    return replay.why_not(rec, KIND, inputs(name, models), subject="this preset")


def make_route(models: Sequence[str]) -> Callable[..., tuple[str, Any, Any]]:
    """A Generate click's first, instant part: the line saying which run follows and why, and a fresh value
    for one of two go states, whose change starts the replay or the live run (the Lesson's ``make_load``)."""
    def route(table: Any, prompt_text: str, max_new_tokens: Any, temperature: Any, seed: Any, mode: str,
              compare: Any = OFF, forwards: str = FORWARDS, top_k: Any = 0, top_p: Any = 1.0,
              aggregate: Any = "mean", pace: str = replay.READING) -> tuple[str, Any, Any]:
        values = [table, prompt_text, max_new_tokens, temperature, seed, mode, compare, forwards, top_k,
                  top_p, aggregate]
        name, rec, why = replayable(values, models)
        replaying, line = (False, "") if name is None else replay.source_line(rec, why, pace, SUBJECT)
        go = time.monotonic_ns()
        return line, (go if replaying else gr.skip()), (gr.skip() if replaying else go)
    return route


def make_replay(models: Sequence[str]) -> Callable[..., Iterator[dict[str, Any]]]:
    """A preset's recorded run, drawn by the Generate handler as its live run would be (updates by name);
    refused with the reason where no recording stands for the inputs."""
    def run(table: Any, prompt_text: str, max_new_tokens: Any, temperature: Any, seed: Any, mode: str,
            compare: Any = OFF, forwards: str = FORWARDS, top_k: Any = 0, top_p: Any = 1.0,
            aggregate: Any = "mean", pace: str = replay.READING,
            request: gr.Request = None) -> Iterator[dict[str, Any]]:
        values = [table, prompt_text, max_new_tokens, temperature, seed, mode, compare, forwards, top_k,
                  top_p, aggregate]
        _, rec, why = replayable(values, models)
        if why is not None or pace == replay.LIVE:
            raise gr.Error(f"this run is computed live: {why or 'live was chosen'}", print_exception=False)
        tokens_per_s = 0.0 if pace == replay.AT_ONCE else env.lesson_tokens_per_s()
        total = int(rec["settings"]["max_new_tokens"])
        generate = handlers.make_generate(None, streams=replay.streams(rec, tokens_per_s))
        for update in generate(*values, request=request):
            if "status" in update:
                status = replay_status(str(update["status"]), update.get("state"), total)
                update = {**update, "status": status}
            yield update
    return run
