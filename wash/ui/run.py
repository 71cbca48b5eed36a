"""Driving a generation for the app: preload, worker thread, stop flag, throttled views.

The app loads its models ahead of the first click (``start_preload``: a
``wash.ui.preload.Preload`` thread, then a warm-up that builds the union vocabulary
and runs the default preset for one token, so the first click costs one step).
A click during that load waits for it, relaying its progress to the status line.

The engine's ``generate_stream`` blocks while models load and while each token is
computed. Running it in a worker thread lets the app's handler keep talking to
the browser: it relays model-loading progress as it happens (``on_load``), ticks
an elapsed timer during long loads, and stays responsive to Stop. With the
comparison switch on, the same worker advances a second stream (provider 1
alone, mode ``single``, same prompt and seed) one event at a time alongside the
first.

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
from typing import Callable, Iterator, Sequence

import wash.baselines  # noqa: F401  (registers the baseline modes)
from wash.engine import (MODE_TABLE, GenerationConfig, FinishedEvent, LoadEvent, ResyncEvent, RunResult,
                         StepEvent, Progress)
from wash.core.errors import WashInputError
from wash.ui.preload import Preload
from wash.ui.settings import missing_markdown, missing_models

WASH, SINGLE, UNMARKED = "wash", "single", "unwatermarked"
SINGLE_LABEL_SUFFIX = " alone (single mode)"
#: What the comparison switch can run beside the chosen mode: nothing, provider 1 alone, the same
#: providers with every watermark off (``unwatermarked``), both of these, or one of the paper's
#: baselines (``wash.baselines``), on the same prompt and seed.
OFF = "off"
BOTH = f"{SINGLE}+{UNMARKED}"
COMPARISONS = (OFF, SINGLE, UNMARKED, BOTH, *(m.name for m in MODE_TABLE.values() if m.baseline))


def comparison_streams(value: object) -> dict[str, str]:
    """The comparison runs a switch value asks for: {stream name: its mode}, empty for none.

    Why two streams and not a list of any length: the page has two places for a comparison
    text. The ``single`` stream holds provider 1 alone or a baseline (the dashed z line); the
    ``unwatermarked`` stream holds the same providers with every watermark off, whose
    detectors' z show what text without a watermark scores (near 0). ``True``/``False``
    (older API callers) mean single/off."""
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("", OFF)):
        return {}
    if value is True:
        return {SINGLE: SINGLE}
    name = str(value).strip().lower()
    if name not in COMPARISONS:
        raise WashInputError(f"unknown comparison '{value}' (accepted: {', '.join(COMPARISONS)})")
    modes = name.split("+")
    return {(UNMARKED if mode == UNMARKED else SINGLE): mode for mode in modes}


def comparison_mode(value: object) -> str | None:
    """The mode of the ``single`` stream's comparison run (provider 1 alone or a baseline), or ``None``."""
    return comparison_streams(value).get(SINGLE)


#: Queue tags of the worker besides the stream names.
_PRELOAD, _PRELOAD_DONE, _ERROR, _DONE = "preload", "preload-done", "error", "done"


class Throttle:
    """Says when to redraw: every ``every_tokens`` tokens or ``every_seconds``, whichever first,
    but never so often that redrawing takes more than ``share`` of the time.

    A redraw (building the plots and sending them) can cost more than a token: left
    alone it would run after every token and halve the decoding rate. ``drawn()``,
    called once the consumer is back from a redraw, records its cost; the next one
    waits at least ``cost * (1 - share) / share`` seconds.
    """

    def __init__(self, every_tokens: int = 4, every_seconds: float = 0.25, share: float = 0.25,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.every_tokens = every_tokens
        self.every_seconds = every_seconds
        self.share = share
        self.clock = clock
        self.count = 0
        self.last = clock()
        self.gap = 0.0

    def tick(self) -> bool:
        self.count += 1
        now = self.clock()
        due = self.count >= self.every_tokens or now - self.last >= self.every_seconds
        if due and now - self.last >= self.gap:
            self.count, self.last = 0, now
            return True
        return False

    def drawn(self) -> None:
        """The redraw ``tick`` asked for is done: the next waits in proportion to its cost."""
        now = self.clock()
        self.gap = (now - self.last) * (1 - self.share) / self.share
        self.last = now


def session_of(request: object) -> str:
    """The browser session a request comes from (its tab): runs, stops and supersession are per session."""
    return getattr(request, "session_hash", None) or "anonymous"


class StopRegistry:
    """One stop flag per browser session (``gr.Request.session_hash``): one run per session."""

    def __init__(self) -> None:
        self._flags: dict[str, threading.Event] = {}
        self._superseded: set[int] = set()  # ids of the flags of runs a newer run replaced, until they finish
        self._lock = threading.Lock()

    def start(self, session: str) -> threading.Event:
        """A fresh flag for a new run of this session (a previous Stop must not leak).

        A run of the session still going is told to stop and is marked superseded
        (``superseded``): a new Generate, or a new lesson step, ends the run before it,
        which then draws nothing more. Gradio's ``cancels=`` alone does not: the
        cancelled generator may still finish its text and draw its last update over the
        new run's."""
        with self._lock:
            previous = self._flags.get(session)
            flag = self._flags[session] = threading.Event()
            if previous is not None:
                self._superseded.add(id(previous))
        if previous is not None:
            previous.set()
        return flag

    def supersede(self, session: str) -> None:
        """End the session's running run now, before its successor starts.

        A lesson step's card lands at its click, while the new run may still wait for
        a generation slot; the old run must not draw its last status under the new card."""
        with self._lock:
            previous = self._flags.pop(session, None)
            if previous is not None:
                self._superseded.add(id(previous))
        if previous is not None:
            previous.set()

    def superseded(self, flag: threading.Event) -> bool:
        """Whether a newer run of the same session has started since ``flag``'s run did."""
        with self._lock:
            return id(flag) in self._superseded

    def finish(self, session: str, flag: threading.Event) -> None:
        """The run that ``flag`` belongs to has ended: forget it (one flag per session would pile up)."""
        with self._lock:
            self._superseded.discard(id(flag))
            if self._flags.get(session) is flag:
                del self._flags[session]

    def __contains__(self, session: str) -> bool:
        return session in self._flags

    def stop(self, session: str) -> bool:
        with self._lock:
            flag = self._flags.get(session)
        if flag is None:
            return False
        flag.set()
        return True


# -- loading ahead of the first click -------------------------------------------------
def warm_up(models: Sequence[str], say: Progress, forward: bool = True) -> None:
    """What a first generation would otherwise pay once the models are loaded.

    Builds the union vocabulary of the default preset's models and each model's
    own (single mode, one-model presets, the Detect tab), then runs that preset for
    one token so every model has run a first forward (the slowest of all). Not that
    forward on ZeroGPU (``forward=False``): this process has no GPU there, and what
    it warms would not reach the worker ``spaces.GPU`` forks for each call.
    """
    from wash.api import generate
    from wash.engine import load_model, align, model_vocab
    from wash.content.presets import preset_names
    from wash.ui.providers import build_config, preset_rows
    from wash.ui.texts import example_prompts

    rows, mode = preset_rows(preset_names()[0], list(models))
    config = build_config(rows, example_prompts(1)[0], 1, 1.0, 0, mode, list(models))
    names = list(dict.fromkeys(s.model for s in config.active_providers()))
    say(f"building the union vocabulary of {' + '.join(names)} (once per process)")
    align([model_vocab(load_model(n)) for n in names])
    for name in dict.fromkeys(models):
        if [name] != names:
            say(f"building the vocabulary index of {name} alone")
            align([model_vocab(load_model(name))])
    if forward:
        say("warming up: one token of the default preset")
        generate(config)


def start_preload(models: Sequence[str], echo: Progress | None = None, start: bool = True,
                  forward: bool = True) -> Preload:
    """Start loading (and warming up) the app's models in a background thread; the default models
    this machine cannot load are named (``settings.missing_models``), on the page and to ``echo``.
    ``start=False`` returns it unstarted, for a caller that must start it later (``app.main``);
    ``forward=False`` leaves out the warm-up's forward (``warm_up``: ZeroGPU)."""
    names = list(dict.fromkeys(models))
    missing = missing_models()
    for name, why in missing.items() if echo is not None else ():
        echo(f"{name}: not offered here: {why}")
    preload = Preload(names, then=lambda say: warm_up(names, say, forward), echo=echo, missing=missing)
    return preload.start() if start else preload


def preload_markdown(preload: Preload | None) -> str:
    """The page's model status line, then a line for each model missing here."""
    missing = "" if preload is None else missing_markdown(preload.missing)
    return _loading_markdown(preload) + (f"  \n{missing}" if missing else "")


def _loading_markdown(preload: Preload | None) -> str:
    if preload is None or not preload.started:
        return "Models load on the first click."
    models = ", ".join(preload.names)
    if preload.ready:
        return f"**Models ready in {preload.elapsed_s:.1f} s** ({models})."
    if preload.done:
        return (f"**Loading the models failed** after {preload.elapsed_s:.0f} s: "
                f"{preload.last_message.rstrip('.')}. Generate will try again and report the error.")
    loaded = len(preload.loaded())
    return (f"**Loading models** ({loaded}/{len(preload.names)} loaded, {preload.elapsed_s:.0f} s; "
            f"a first-ever start dequantises the GGUF files, a minute or more): "
            f"{preload.last_message or 'starting'}  \n"
            f"You can click Generate now: it waits for the models.")


# -- one run ----------------------------------------------------------------------------
@dataclass
class RunRecord:
    """Everything one run produced, as the engine's own events (kept in the session's gr.State)."""

    settings: dict
    labels: list[str]
    #: The comparison runs beside it: {stream name (``single``, ``unwatermarked``): its mode}.
    comparisons: dict[str, str] = field(default_factory=dict)
    events: dict[str, list] = field(default_factory=lambda: {WASH: [], SINGLE: [], UNMARKED: []})
    steps: dict[str, list[StepEvent]] = field(default_factory=lambda: {WASH: [], SINGLE: [], UNMARKED: []})
    results: dict[str, RunResult | None] = field(default_factory=lambda: {WASH: None, SINGLE: None,
                                                                          UNMARKED: None})
    load_messages: list[str] = field(default_factory=list)
    #: Seconds from the click to the first committed token (model loading included).
    first_token_s: float | None = None
    #: True while the run waits for the app's preload; then the seconds it waited.
    waiting_for_preload: bool = False
    preload_wait_s: float | None = None

    @classmethod
    def start(cls, config: GenerationConfig, compare: object) -> "RunRecord":
        """``compare``: the streams ``comparison_streams`` gives, or a switch value it reads."""
        comparisons = compare if isinstance(compare, dict) else comparison_streams(compare)
        settings = {k: v for k, v in dataclasses.asdict(config).items() if k != "providers"}
        settings["providers"] = [str(s) for s in config.providers]
        settings["compare_with"] = "+".join(comparisons.values()) or OFF
        return cls(settings=settings, labels=[s.label(i) for i, s in enumerate(config.active_providers())],
                   comparisons=dict(comparisons))

    @property
    def compare(self) -> str | None:
        """The ``single`` stream's mode (provider 1 alone or a baseline), or ``None`` without one."""
        return self.comparisons.get(SINGLE)

    @property
    def unmarked(self) -> bool:
        """Whether the same providers ran beside it with every watermark off."""
        return UNMARKED in self.comparisons

    @property
    def single_label(self) -> str:
        """The comparison run's name in the chart and tables: whose z its trace shows."""
        p1 = self.labels[0].split(" ", 1)[0]
        if self.compare in (None, SINGLE):
            return p1 + SINGLE_LABEL_SUFFIX
        return f"{p1} under {self.compare}"

    @property
    def lazy(self) -> bool:
        return self.settings.get("forwards") == "lazy"

    def add(self, stream: str, event: LoadEvent | StepEvent | ResyncEvent | FinishedEvent) -> None:
        if isinstance(event, LoadEvent):
            if event.message not in self.load_messages:
                self.load_messages.append(event.message)
            return
        self.events[stream].append(event)
        if isinstance(event, StepEvent):
            self.steps[stream].append(event)
        elif isinstance(event, FinishedEvent):
            self.results[stream] = event.result

    @property
    def finished(self) -> bool:
        return all(self.results[name] is not None for name in (WASH, *self.comparisons))

    def to_json(self) -> dict:
        """The download: settings, provider labels, every event of each stream, as plain JSON."""
        out = {"settings": self.settings, "providers": self.labels, "load_messages": self.load_messages,
               "first_token_s": self.first_token_s, "preload_wait_s": self.preload_wait_s,
               "events": [e.to_dict() for e in self.events[WASH]]}
        if self.compare:
            out["single_events"] = [e.to_dict() for e in self.events[SINGLE]]
        if self.unmarked:
            out["unwatermarked_events"] = [e.to_dict() for e in self.events[UNMARKED]]
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
    return comparison_config(config, SINGLE)


def comparison_config(config: GenerationConfig, mode: str) -> GenerationConfig:
    """The comparison run: ``mode`` on the same providers, prompt, seed and serving settings.

    A baseline runs with its paper's defaults and the mean (its own decoding has no
    aggregation rule), provider 1 alone with the mean (one distribution is its own average); the engine validates it, so a De-mark comparison on a scheme
    it cannot attack fails with the engine's own one-line error, before anything runs.
    """
    spec = MODE_TABLE[mode]
    providers = list(config.providers[:1] if spec.first_provider_only else config.providers)
    # provider 1 alone has nothing to aggregate; a baseline decodes its own way
    extra = dict(aggregate="mean", baseline_options="") if spec.baseline else dict(aggregate="mean")
    out = dataclasses.replace(config, mode=mode, providers=providers, **extra)
    out.validate()
    return out


def lockstep(streams: dict[str, Iterator]) -> Iterator[tuple[str, object]]:
    """Round-robin over several event streams until all are exhausted."""
    active = dict(streams)
    while active:
        for name in list(active):
            try:
                yield name, next(active[name])
            except StopIteration:
                del active[name]


def _wait_for_preload(preload: Preload, stop: threading.Event, out: queue.Queue,
                      poll_seconds: float = 0.2) -> None:
    """Relay the preload's progress (from its latest message on) until it ends or Stop."""
    seen = max(0, len(preload.messages_from(0)) - 1)
    while True:
        ended = preload.wait(poll_seconds)
        for message in preload.messages_from(seen):
            out.put((_PRELOAD, LoadEvent(message)))
            seen += 1
        if ended or stop.is_set():
            out.put((_PRELOAD_DONE, None))
            return


#: Opens a run's event streams: (config, comparison streams {name: mode}, stop flag, load relay) ->
#: {stream name: its events}. ``live_streams`` runs the engine; a recorded run (``wash.ui.replay``)
#: hands back the events it recorded, so both are drawn by the same code.
Streams = Callable[[GenerationConfig, dict[str, str], threading.Event, Callable[[LoadEvent], None]],
                   dict[str, Iterator]]


def live_streams(config: GenerationConfig, comparisons: dict[str, str], stop: threading.Event,
                 relay: Callable[[LoadEvent], None]) -> dict[str, Iterator]:
    """The engine's own streams: the run, and each comparison beside it."""
    from wash.api import stream as generate_stream

    streams = {WASH: generate_stream(config, should_stop=stop.is_set, on_load=relay)}
    for name, mode in comparisons.items():
        streams[name] = generate_stream(comparison_config(config, mode), should_stop=stop.is_set,
                                        on_load=relay)
    return streams


def _worker(config: GenerationConfig, compare: dict[str, str], stop: threading.Event, out: queue.Queue,
            preload: Preload | None, streams: Streams | None = None) -> None:
    try:
        if streams is None and preload is not None and preload.started and not preload.done:
            # Not a second load: the models are loading already; wait for them visibly.
            _wait_for_preload(preload, stop, out)
            if stop.is_set():
                return
        # A failed preload is not fatal here: loading again reports the error properly.
        def relay(event: LoadEvent) -> None:
            out.put((WASH, event))

        for name, event in lockstep((streams or live_streams)(config, compare, stop, relay)):
            out.put((name, event))
    except BaseException as exc:  # handed to the consumer, which reports it
        out.put((_ERROR, exc))
    finally:
        out.put((_DONE, None))


def _status(record: RunRecord, config: GenerationConfig, started: float, stop: threading.Event,
            ended: bool = False) -> str:
    elapsed = time.perf_counter() - started
    n = len(record.steps[WASH])
    if record.finished:
        result = record.results[WASH]
        total = result.timing.total_s
        tps = n / total if total > 0 else 0.0
        how = "Stopped" if result.finish_reason == "stopped" else "Done"
        return f"**{how}**: {n} tokens, {tps:.2f} tokens/s (finish: {result.finish_reason})."
    if ended:
        return "**Stopped** while the models were loading: nothing was generated."
    if stop.is_set():
        return f"**Stopping** after the current step… ({elapsed:.0f} s)"
    if n == 0:
        last = record.load_messages[-1] if record.load_messages else "starting"
        if record.waiting_for_preload:
            return (f"**Waiting for the models** the app is loading ({elapsed:.0f} s; a first-ever start "
                    f"dequantises the GGUF files, a minute or more): {last}")
        return (f"**Loading models** ({elapsed:.0f} s; a first load takes about a minute on a CPU): "
                f"{last}")
    return f"**Generating**: token {n} / {config.max_new_tokens} ({elapsed:.0f} s)"


def drive(config: GenerationConfig, compare: str | bool | None, stop: threading.Event,
          throttle: Throttle | None = None, poll_seconds: float = 0.5,
          preload: Preload | None = None, streams: Streams | None = None) -> Iterator[RunView]:
    """Run a generation in a worker thread and yield a view after every event, or after every
    batch of events that arrived while the page was drawing the last view.

    Why batches: a page that falls behind (thirty students replaying at once on two cores, or a
    slow browser) would otherwise be sent one stale view per token and fall further behind;
    drawing what has arrived in one view keeps it at most one view behind the run.

    ``streams`` replaces the engine's (``live_streams``) with other events of the same
    kinds, such as a recorded run; those need no models, so they never wait for ``preload``.

    While ``preload`` (the app's model loading) is still running, the worker first
    waits for it and the views show its progress. Re-raises the worker's exception
    (``WashInputError`` for bad input found late, e.g. a prompt longer than a
    model's context). Closing this generator early (browser gone, request
    cancelled) sets ``stop`` so the worker ends too.
    """
    # the same run twice shows nothing
    compare = {name: mode for name, mode in comparison_streams(compare).items() if mode != config.mode}
    for mode in compare.values():
        comparison_config(config, mode)  # a comparison that cannot run fails before anything starts
    record = RunRecord.start(config, compare)
    throttle = throttle or Throttle()
    out: queue.Queue = queue.Queue()
    started = time.perf_counter()
    thread = threading.Thread(target=_worker, args=(config, compare, stop, out, preload, streams), daemon=True,
                              name="wash-generation")
    thread.start()
    try:
        done = False
        while not done:
            try:
                batch = [out.get(timeout=poll_seconds)]
            except queue.Empty:
                if not record.finished:  # once every run has finished, only the final view may say so
                    yield RunView(_status(record, config, started, stop), record)
                continue
            while batch[-1][0] not in (_DONE, _ERROR):  # what else arrived while the last view was drawn
                try:
                    batch.append(out.get_nowait())
                except queue.Empty:
                    break
            show = refresh = False
            for stream, event in batch:
                if stream == _DONE:
                    done = True
                    break
                if stream == _ERROR:
                    raise event
                if stream == _PRELOAD_DONE:
                    record.waiting_for_preload = False
                    record.preload_wait_s = time.perf_counter() - started
                    continue
                if stream == _PRELOAD:
                    record.waiting_for_preload = True
                    stream = WASH
                record.add(stream, event)
                if record.first_token_s is None and isinstance(event, StepEvent):
                    record.first_token_s = time.perf_counter() - started
                refresh = (isinstance(event, StepEvent) and stream == WASH and throttle.tick()) or refresh
                show = show or not isinstance(event, (ResyncEvent, FinishedEvent))
            if show and not record.finished:  # the final view, with the results, follows
                yield RunView(_status(record, config, started, stop), record, refresh=refresh)
                if refresh:
                    throttle.drawn()  # the consumer is back: that was the redraw's cost
        yield RunView(_status(record, config, started, stop, ended=True), record, refresh=True, finished=True)
    finally:
        stop.set()
