"""Driving a generation for the app: worker thread, stop flag, throttled views.

The engine's ``generate_stream`` blocks while models load and while each token is
computed. Running it in a worker thread lets the app's handler keep talking to
the browser: it relays model-loading progress as it happens, ticks an elapsed
timer during long loads, and stays responsive to Stop. With the comparison
switch on, the same worker advances a second stream (provider 1 alone, mode
``single``, same prompt and seed) one event at a time alongside the first.

Stop is a ``threading.Event`` per browser session: the engine polls it through
``should_stop`` before every token, so a run stops within one step and still
finishes with its detection verdicts on the text so far.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from wash.config import GenerationConfig
from wash.events import FinishedEvent, LoadEvent, ResyncEvent, StepEvent

WASH, SINGLE = "wash", "single"
SINGLE_LABEL_SUFFIX = " alone (single mode)"


class Throttle:
    """Says when to redraw: every ``every_tokens`` tokens or ``every_seconds``, whichever first."""

    def __init__(self, every_tokens: int = 4, every_seconds: float = 0.25,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.every_tokens = every_tokens
        self.every_seconds = every_seconds
        self.clock = clock
        self.count = 0
        self.last = clock()

    def tick(self) -> bool:
        self.count += 1
        now = self.clock()
        if self.count >= self.every_tokens or now - self.last >= self.every_seconds:
            self.count, self.last = 0, now
            return True
        return False


class StopRegistry:
    """One stop flag per browser session (``gr.Request.session_hash``)."""

    def __init__(self) -> None:
        self._flags: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def start(self, session: str) -> threading.Event:
        """A fresh flag for a new run of this session (a previous Stop must not leak)."""
        with self._lock:
            flag = self._flags[session] = threading.Event()
            return flag

    def stop(self, session: str) -> bool:
        with self._lock:
            flag = self._flags.get(session)
        if flag is None:
            return False
        flag.set()
        return True


@dataclass
class RunRecord:
    """Everything one run produced, as plain JSON-ready data (kept in the session's gr.State)."""

    settings: dict
    labels: list[str]
    compare: bool
    events: dict[str, list[dict]] = field(default_factory=lambda: {WASH: [], SINGLE: []})
    steps: dict[str, list[dict]] = field(default_factory=lambda: {WASH: [], SINGLE: []})
    results: dict[str, dict | None] = field(default_factory=lambda: {WASH: None, SINGLE: None})
    load_messages: list[str] = field(default_factory=list)
    #: Seconds from the click to the first committed token (model loading included).
    first_token_s: float | None = None

    @classmethod
    def start(cls, config: GenerationConfig, compare: bool) -> "RunRecord":
        specs = config.providers[:1] if config.mode == "single" else config.providers
        settings = {k: v for k, v in dataclasses.asdict(config).items() if k not in ("providers", "extra")}
        settings["providers"] = [str(s) for s in config.providers]
        settings["compare_with_single"] = compare
        return cls(settings=settings, labels=[s.label(i) for i, s in enumerate(specs)], compare=compare)

    @property
    def single_label(self) -> str:
        return self.labels[0].split(" ", 1)[0] + SINGLE_LABEL_SUFFIX

    def add(self, stream: str, event: LoadEvent | StepEvent | ResyncEvent | FinishedEvent) -> None:
        if isinstance(event, LoadEvent):
            if event.message not in self.load_messages:
                self.load_messages.append(event.message)
            return
        self.events[stream].append(event.to_dict())
        if isinstance(event, StepEvent):
            self.steps[stream].append(event.to_dict())
        elif isinstance(event, FinishedEvent):
            self.results[stream] = event.to_dict()["result"]

    @property
    def finished(self) -> bool:
        return self.results[WASH] is not None and (not self.compare or self.results[SINGLE] is not None)

    def to_json(self) -> dict:
        """The download: settings, provider labels, every event of each stream."""
        out = {"settings": self.settings, "providers": self.labels, "load_messages": self.load_messages,
               "first_token_s": self.first_token_s, "events": self.events[WASH]}
        if self.compare:
            out["single_events"] = self.events[SINGLE]
        return out


@dataclass
class RunView:
    """What the handler shows after one event; ``refresh`` says the plots are due a redraw."""

    status: str
    record: RunRecord
    refresh: bool = False
    finished: bool = False


def single_config(config: GenerationConfig) -> GenerationConfig:
    """Provider 1 alone on the same prompt, seed and settings."""
    return dataclasses.replace(config, mode="single", providers=list(config.providers[:1]))


def lockstep(streams: dict[str, Iterator]) -> Iterator[tuple[str, object]]:
    """Round-robin over several event streams until all are exhausted."""
    active = dict(streams)
    while active:
        for name in list(active):
            try:
                yield name, next(active[name])
            except StopIteration:
                del active[name]


def _worker(config: GenerationConfig, compare: bool, stop: threading.Event, out: queue.Queue) -> None:
    from wash.ensemble import generate_stream
    from wash.models import load_model

    try:
        specs = config.providers[:1] if config.mode == "single" else config.providers
        for name in dict.fromkeys(s.model for s in specs):
            out.put((WASH, LoadEvent(f"loading model {name}")))
            load_model(name, progress=lambda m: out.put((WASH, LoadEvent(m))))
        streams = {WASH: generate_stream(config, should_stop=stop.is_set)}
        if compare:
            streams[SINGLE] = generate_stream(single_config(config), should_stop=stop.is_set)
        for name, event in lockstep(streams):
            out.put((name, event))
    except BaseException as exc:  # handed to the consumer, which reports it
        out.put(("error", exc))
    finally:
        out.put(("done", None))


def _status(record: RunRecord, config: GenerationConfig, started: float, stop: threading.Event) -> str:
    elapsed = time.perf_counter() - started
    n = len(record.steps[WASH])
    if record.finished:
        result = record.results[WASH]
        tps = n / result["timing"]["total_s"] if result["timing"]["total_s"] > 0 else 0.0
        how = "Stopped" if result["finish_reason"] == "stopped" else "Done"
        return f"**{how}**: {n} tokens, {tps:.2f} tokens/s (finish: {result['finish_reason']})."
    if stop.is_set():
        return f"**Stopping** after the current step… ({elapsed:.0f} s)"
    if n == 0:
        last = record.load_messages[-1] if record.load_messages else "starting"
        return (f"**Loading models** ({elapsed:.0f} s; a first load takes about a minute on a CPU): "
                f"{last}")
    return f"**Generating**: token {n} / {config.max_new_tokens} ({elapsed:.0f} s)"


def drive(config: GenerationConfig, compare: bool, stop: threading.Event,
          throttle: Throttle | None = None, poll_seconds: float = 0.5) -> Iterator[RunView]:
    """Run a generation in a worker thread and yield a view after every event.

    Re-raises the worker's exception (``WashInputError`` for bad input found late,
    e.g. a prompt longer than a model's context). Closing this generator early
    (browser gone, request cancelled) sets ``stop`` so the worker ends too.
    """
    compare = compare and config.mode != "single"
    record = RunRecord.start(config, compare)
    throttle = throttle or Throttle()
    out: queue.Queue = queue.Queue()
    started = time.perf_counter()
    thread = threading.Thread(target=_worker, args=(config, compare, stop, out), daemon=True,
                              name="wash-generation")
    thread.start()
    try:
        while True:
            try:
                stream, event = out.get(timeout=poll_seconds)
            except queue.Empty:
                yield RunView(_status(record, config, started, stop), record)
                continue
            if stream == "done":
                break
            if stream == "error":
                raise event
            record.add(stream, event)
            if record.first_token_s is None and isinstance(event, StepEvent):
                record.first_token_s = time.perf_counter() - started
            refresh = isinstance(event, StepEvent) and stream == WASH and throttle.tick()
            if not isinstance(event, (ResyncEvent, FinishedEvent)):
                yield RunView(_status(record, config, started, stop), record, refresh=refresh)
        yield RunView(_status(record, config, started, stop), record, refresh=True, finished=True)
    finally:
        stop.set()
