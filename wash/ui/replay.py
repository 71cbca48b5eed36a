"""Recorded Lesson runs: each step's run made once, with its fixed seed, and replayed through the page's drawing.

Why: every student of a class clicking a seeded step would compute the same text
again, 11 to 25 s a click on a 2-core CPU (``docs/bench-lesson.json``), two at a time.
A recording is the run's own event streams (the run's and each comparison's:
``wash.engine.events``' ``to_dict``, the detection's per-token scores kept) in one
gzip-compressed JSON file per step under ``RECORDINGS`` (a third of the plain JSON's size),
with the inputs the Lesson sends (providers table, prompt, tokens, seed, ...), the
app's models and the code that made it (``wash.core.version.code_version``, whose
``engine`` fingerprint hashes the engine's source). ``streams`` hands the events back
to ``handlers.make_generate`` at reading speed (or at once), which draws them as it
draws a live run's: same text, routed spans, z traces, distributions, detection.
The identification step's recording is its probed systems (``identify.Probed``),
drawn by the Identify tab's own figure, table and summary. The Quiz
(``wash.ui.quiz``) keeps its questions' runs in files of the same kind (``save``, ``read``), and
so does the Generate tab for its presets (``wash.ui.preset_runs``, with this line: ``source_line``).

A recording is replayed only when it was made for the step's inputs on the app's
models and by the running engine (``why_not``); otherwise the page says why and the
step runs live. ``python -m tools.lesson_record`` makes the recordings.
"""

from __future__ import annotations

import functools
import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import wash.detection
from wash.core import env
from wash.engine import FinishedEvent, GenerationConfig, LoadEvent, StepEvent, event_from_dict
from wash.ui import identify as identify_ui
from wash.ui.run import WASH, Streams, Throttle, drive
from wash.core.version import ROOT, code_version, engine_fingerprint, source_fingerprint

#: Where the recordings are kept (unless ``WASH_LESSON_RECORDINGS`` says): one ``step-N.json.gz`` per step.
RECORDINGS = ROOT / "assets" / "lesson"
#: The recordings' layout; a file of another format is not replayed.
FORMAT = 1
#: What the Lesson's pace control offers: a recorded run at reading speed, at once, or a fresh live run.
READING, AT_ONCE, LIVE = "recorded, at reading speed", "recorded, at once", "live"
PACES = (READING, AT_ONCE, LIVE)
#: Fields that say how long something took, not what it produced (left out when two runs are compared).
TIMING_FIELDS = ("elapsed_ms", "timing", "seconds", "forwards")


def path(number: int, root: Path | None = None) -> Path:
    """Step ``number``'s recording under ``root`` (default: ``WASH_LESSON_RECORDINGS``, else ``RECORDINGS``)."""
    return (root or env.lesson_recordings(ROOT) or RECORDINGS) / f"step-{number}.json.gz"


def save(rec: dict, file: Path) -> Path:
    """Write ``rec`` to ``file`` (the same bytes for the same recording: no time in the gzip header)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8")
    file.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return file


def write(rec: dict, root: Path | None = None) -> Path:
    """Write ``rec`` as its step's file."""
    return save(rec, path(rec["step"], root))


def _identify_sources() -> list[Path]:
    """What an identification's answer depends on beyond the engine: the probe and its statistics."""
    return sorted(Path(wash.detection.__file__).parent.glob("*.py")) + [Path(identify_ui.__file__)]


def fingerprint(kind: str) -> dict[str, str]:
    """The code a ``kind`` recording depends on: the engine, and for ``identify`` the probe too."""
    out = {"engine": engine_fingerprint()}
    if kind == "identify":
        out["identify"] = source_fingerprint(_identify_sources())
    return out


def plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists), so recorded and current inputs compare equal."""
    return json.loads(json.dumps(value, default=str))


def _dump(event: Any) -> dict:
    return event.to_dict(with_tokens=True) if isinstance(event, FinishedEvent) else event.to_dict()


def record_generate(inputs: Sequence[Any], models: Sequence[str]) -> dict:
    """Run the Generate handler's ``inputs`` live on ``models`` (no redraws) and keep every event of each stream."""
    from wash.ui.providers import build_config

    table, prompt, max_new, temperature, seed, mode, compare, forwards, top_k, top_p, aggregate = inputs
    config = build_config(table, prompt, max_new, temperature, seed, mode, list(models), forwards=forwards,
                          top_k=top_k, top_p=top_p, aggregate=aggregate)
    record = None
    for view in drive(config, compare, threading.Event(), throttle=Throttle(every_tokens=10**9, every_seconds=1e9)):
        record = view.record
    if record is None or not record.finished:
        raise RuntimeError("the run did not finish")
    events = {name: [_dump(e) for e in record.events[name]] for name in (WASH, *record.comparisons)}
    return {"settings": plain(record.settings), "events": events}


def record_identify(inputs: Sequence[Any], models: Sequence[str]) -> dict:
    """Run the identification's ``inputs`` (table, systems, probe) on ``models`` and keep every probed system."""
    table, systems, probe = inputs
    probed = identify_ui.run_identify(table, systems, probe, choices=list(models))
    return {"probed": [{"name": p.name, "result": p.result.to_dict(), "null": p.null, "p": p.p, "p_holm": p.p_holm}
                       for p in probed]}


def record(number: int, kind: str, inputs: Sequence[Any], models: Sequence[str]) -> dict:
    """Step ``number``'s recording: its inputs and models, the code, and what the run produced."""
    made = (record_generate if kind == "generate" else record_identify)(inputs, models)
    return {"format": FORMAT, "step": number, "kind": kind, "models": list(models), "inputs": plain(list(inputs)),
            "code": {**code_version(), **fingerprint(kind)}, **made}


@functools.lru_cache(maxsize=16)
def _read(file: Path, mtime: float) -> dict | None:
    try:
        return json.loads(gzip.decompress(file.read_bytes()).decode("utf-8"))
    except (OSError, ValueError, EOFError):
        return None


def read(file: Path) -> dict | None:
    """The recording in ``file``, or ``None`` where there is none (read once per file version)."""
    try:
        return _read(file, file.stat().st_mtime)
    except OSError:
        return None


def load(number: int, root: Path | None = None) -> dict | None:
    """Step ``number``'s recording, or ``None`` where there is none."""
    return read(path(number, root))


def why_not(rec: dict | None, kind: str, inputs: Sequence[Any], subject: str = "this step") -> str | None:
    """Why ``rec`` cannot stand for a live run of ``inputs`` (``None``: it can); ``subject`` names what was
    recorded (a Lesson step, a quiz question)."""
    if rec is None:
        return f"{subject} has no recorded run"
    if rec.get("format") != FORMAT or rec.get("kind") != kind:
        return f"{subject}'s recorded run is of another format"
    if rec.get("inputs") != plain(list(inputs)):
        return (f"{subject}'s recorded run was made for other settings or models "
                f"({', '.join(rec.get('models', [])) or 'unknown'})")
    code = rec.get("code", {})
    for part, now in fingerprint(kind).items():
        if code.get(part) != now:
            return (f"{subject}'s recorded run was made by another engine ({part} {code.get(part)}, "
                    f"this app runs {now})")
    return None


def source_line(rec: dict | None, why: str | None, pace: str, subject: str = "the step",
                answer: str | None = None) -> tuple[bool, str]:
    """Whether a click replays ``rec`` (``why``: ``why_not``'s answer for it), and the page's line saying
    which run it shows and why; ``subject`` names what was recorded, ``answer`` what a replay shows in
    place of a paced run (the identification's probe)."""
    if pace == LIVE:
        return False, (f"**Live run**: computed now with {subject}'s seed; the recorded run gives the "
                       "same result.")
    if why is not None:
        return False, f"**Live run**: {why}, so {subject} is computed now."
    made = rec.get("made", {})
    how = "at once" if pace == AT_ONCE else f"at {env.lesson_tokens_per_s():g} tokens/s"
    date = f" on {made['date'][:10]}" if made.get("date") else ""
    return True, (f"**Recorded run** ({answer or f'replayed {how}'}): computed with {subject}'s seed by "
                  f"engine {rec['code']['engine']}{date}; a live run gives the same. Choose *live* above to "
                  "compute it afresh.")


def events(rec: dict, stream: str = WASH) -> list:
    """The recorded events of one stream, as the engine's event objects."""
    return [event_from_dict(d) for d in rec.get("events", {}).get(stream, [])]


def paced(stream: Iterable[Any], tokens_per_s: float, stop: threading.Event,
          clock: Callable[[], float] = time.monotonic) -> Iterator[Any]:
    """``stream`` with its k-th token due k/``tokens_per_s`` seconds after the first (0: at once);
    ends early when ``stop`` is set."""
    start, k = None, 0
    for event in stream:
        if isinstance(event, StepEvent) and tokens_per_s > 0:
            if start is None:
                start = clock()
            else:
                k += 1
                wait = start + k / tokens_per_s - clock()
                if wait > 0 and stop.wait(wait):
                    return
        if stop.is_set():
            return
        yield event


def streams(rec: dict, tokens_per_s: float) -> Streams:
    """``rec``'s streams for ``drive``: the run paced at ``tokens_per_s``, each comparison beside it."""
    def opened(config: GenerationConfig, comparisons: dict[str, str], stop: threading.Event,
               relay: Callable[[LoadEvent], None]) -> dict[str, Iterator]:
        out = {WASH: paced(events(rec, WASH), tokens_per_s, stop)}
        for name in comparisons:
            out[name] = iter(events(rec, name))  # lockstep advances it with the paced run
        return out
    return opened


def probed(rec: dict) -> list[identify_ui.Probed]:
    """The recorded identification as the Identify tab's ``Probed`` systems."""
    from wash.detection import Identification

    return [identify_ui.Probed(p["name"], Identification(**p["result"]), p["null"], p["p"], p["p_holm"])
            for p in rec.get("probed", [])]


def comparable(value: Any) -> Any:
    """``value`` (a recording's events or probed systems) without ``TIMING_FIELDS``: what a rerun must repeat."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in TIMING_FIELDS}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value
