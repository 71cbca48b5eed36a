"""The Lesson tab's handlers: a step's card, and its click run through the Generate or Identify handler.

A step (``wash.content.lesson.Step``) becomes exactly the inputs the Generate tab would
send (providers table, the first example prompt, its tokens and seed, the default
serving profile, eager forwards, its comparison) and runs through
``handlers.make_generate``, the same generator the Generate button uses: the
engine's event stream, the preload wait, Stop and the throttled redraws come with
it. The Lesson shows a subset of its outputs (``outputs``): beside the text, the
comparison texts (provider 1 alone, the unwatermarked run), and in the step that
offers it the Generate tab's per-token distribution view (``select_token``). The
identification step runs ``handlers.run_identify`` with the Identify tab's systems
and fast probe.

Predict, then run: the card (``card``) asks the step's question before the run; its
"what to look for" and measured numbers (``reveal``) land with the status line's Done,
never before (``_with_reveal``).

A click replays the step's recorded run (``wash.ui.replay``) unless the pace control
says live or no recording stands for this step here: ``make_load`` decides, says on
the page which it is and why, and sets one of two states whose change starts the
replay (``make_replay``: no model, no generation slot) or the live run (``make_run``).
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any, Callable, Iterator, Sequence

import gradio as gr
import pandas as pd
from gradio.components.plot import PlotData

from wash.engine import DEFAULT_PROFILE, PROFILES
from wash.content.lesson import IDENTIFY_SYSTEMS, STEPS, Step, measured, step
from wash.core import env
from wash.ui import handlers, identify as identify_ui, replay, texts
from wash.ui.preload import Preload
from wash.ui.run import SINGLE, UNMARKED, comparison_streams, session_of

#: The Generate handler's outputs the Lesson shows (names of ``handlers.GENERATE_OUTPUTS``).
OUTPUTS = ("status", "text", "single_text", "unmarked_text", "zplot", "detection")
#: What a step with the distribution view shows too: the run (for a click on a token) and its view.
DISTRIBUTION_OUTPUTS = ("state", "dist", "info")
#: What the distribution panel shows before a click on a token.
DIST_HINT = "click a token of the text: each provider's distribution, the average and the consensus"
#: Where "what to look for" lands, before the run is done.
LOOK_FOR_WAIT = "*What to look for* shows here once the run is done: predict first."
#: The Identify tab's probe the identification step runs (about 11 s on 2 cores, docs/BENCHMARKS.md).
PROBE = "fast"


def table(s: Step, models: Sequence[str]) -> list[list[str]]:
    """The step's providers as rows of the providers table."""
    return [[m, scheme, str(key), params] for m, scheme, key, params in s.preset.resolved(models)]


def generate_inputs(s: Step, models: Sequence[str]) -> tuple:
    """The Generate handler's positional inputs for this step, in ``app.py``'s order."""
    serving = PROFILES[DEFAULT_PROFILE]
    return (table(s, models), texts.example_prompts(1)[0], s.tokens, serving.temperature, s.seed, s.preset.mode,
            s.compare, "eager", serving.top_k, serving.top_p, s.preset.aggregate)


def outputs(number: int) -> tuple[str, ...]:
    """The names a generation step's run updates: ``OUTPUTS``, the distribution view's where it has one."""
    return OUTPUTS + (DISTRIBUTION_OUTPUTS if step(number).distributions else ()) + ("look_for",)


def card(number: int, models: Sequence[str]) -> str:
    """The step's card before its run: title, what it sets up, and the question to predict (no outcome)."""
    s = step(number)
    return "\n\n".join([
        f"### Step {number} of {len(STEPS)}: {s.title}",
        s.preset.why,
        f"*{s.setup(models)}*",
        f"**Predict first, then run.** {s.question}",
    ])


def reveal(number: int, models: Sequence[str]) -> str:
    """What the card held back until the run is done: what to look for, and what was measured."""
    return "\n\n".join([f"**What to look for.** {step(number).look_for}", measured(number, models=models)])


def _with_reveal(update: dict[str, Any], number: int, models: Sequence[str]) -> dict[str, Any]:
    """``update`` with "what to look for" added when its status says Done: the two land together."""
    if str(update.get("status", "")).startswith("**Done"):
        return {**update, "look_for": reveal(number, models)}
    return update


#: What a step button sets at once, before its run (names of the Lesson's widgets, in this order); the step's
#: two go states (replay, live) follow them.
LOAD_OUTPUTS = ("card", "table", "generation", "identification", "single_text", "unmarked_text", "averaging",
                "state", "dist", "info", "look_for", "number", "status", "source")
#: What the identification step's run sets (names of the Lesson's widgets, in this order).
IDENTIFY_OUTPUTS = ("identify_plot", "identify_table", "identify_summary", "status", "look_for")
#: What "try it yourself" sets in the Generate tab (names of its widgets, in this order); the
#: Identify tab's providers table and the selected tab follow them.
TRY_OUTPUTS = ("table", "prompt", "max_new", "seed", "mode", "compare", "aggregate", "profile", "temperature",
               "top_k", "top_p", "forwards")


def step_inputs(s: Step, models: Sequence[str]) -> list:
    """What the step's run takes: the Generate handler's inputs, or the identification's (table, systems, probe)."""
    if s.identify:
        return [table(s, models), list(IDENTIFY_SYSTEMS), PROBE]
    return list(generate_inputs(s, models))


def replayable(number: int, models: Sequence[str]) -> tuple[dict | None, str | None]:
    """Step ``number``'s recording and, where it cannot stand for a live run here, why not."""
    s = step(number)
    rec = replay.load(number)
    return rec, replay.why_not(rec, s.kind, step_inputs(s, models))


def source_line(number: int, models: Sequence[str], pace: str) -> tuple[bool, str]:
    """Whether the click replays, and the page's line saying which run it shows and why."""
    rec, why = replayable(number, models)
    return replay.source_line(rec, why, pace, answer="its probe's answer" if step(number).identify else None)


def make_load(number: int, models: Sequence[str]) -> Callable[[str], tuple]:
    """A step button's first, instant part: its card and providers, which result panel shows, which run
    follows (replayed or live) and why; the last two values start that run (a fresh value of its go state).

    The step's recording is read here, once (``replay.read`` keeps it): the first student of a class to click
    the step would otherwise decompress and parse it while the others wait."""
    s = step(number)
    replayable(number, models)

    def load(pace: str = replay.READING, request: gr.Request = None) -> tuple:
        handlers.STOPS.supersede(session_of(request))
        replaying, line = source_line(number, models, pace)
        doing = ("replaying its recorded run" if replaying else
                 "probing the systems" if s.identify else "starting")
        go = time.monotonic_ns()
        beside = comparison_streams(s.compare)
        return (card(number, models), table(s, models), gr.update(visible=not s.identify),
                gr.update(visible=s.identify), gr.update(visible=SINGLE in beside, value=[]),
                gr.update(visible=UNMARKED in beside, value=[]), gr.update(visible=s.distributions), None,
                handlers.hint_plot(DIST_HINT), "", LOOK_FOR_WAIT, number, f"**Step {number}**: {doing}…",
                line, go if replaying else gr.skip(), gr.skip() if replaying else go)
    return load


def replay_status(status: str, record: Any, total: int) -> str:
    """The status line of a replayed run: which token it shows, or that it is done (or stopped)."""
    shown = len(record.steps["wash"]) if record is not None else 0
    if record is not None and record.finished:
        result = record.results["wash"]
        tps = shown / result.timing.total_s if result.timing.total_s > 0 else 0.0
        return (f"**Done**: {shown} tokens, replayed from the recorded run (computed live at {tps:.2f} tokens/s "
                f"when recorded; finish: {result.finish_reason}).")
    if status.startswith("**Stopped"):
        return f"**Stopped**: the replay ended at token {shown}."
    return f"**Replaying** the recorded run: token {shown} / {total}"


@functools.lru_cache(maxsize=8)
def identify_views(probed: str) -> tuple[PlotData, pd.DataFrame, str, int]:
    """A recorded identification's figure (serialised), table, summary and number of systems, drawn once per
    recorded answer (``probed``: its ``probed`` list as sorted JSON, the key and the content in one).

    Why: thirty students replaying the identification step would each draw the same plotly figure and
    table from the same recording. Keyed by the recorded answer itself, a cached view can stand only for
    that answer: another step's or a re-made recording's differs in its key."""
    systems = replay.probed({"probed": json.loads(probed)})
    return (PlotData(type="plotly", plot=identify_ui.figure(systems).to_json()),
            identify_ui.results_frame(systems), identify_ui.summary(systems), len(systems))


def make_replay(number: int, models: Sequence[str]) -> Callable[..., Any]:
    """A step's recorded run, drawn as its live run would be: a generator of the Lesson's updates (by name),
    or the identification's answer. Refused with the reason where the recording cannot stand for the step."""
    s = step(number)

    def usable(pace: str) -> dict:
        rec, why = replayable(number, models)
        if why is not None or pace == replay.LIVE:
            raise gr.Error(f"step {number} runs live here: {why or 'live was chosen'}", print_exception=False)
        return rec

    if s.identify:
        def identify(pace: str = replay.READING) -> tuple[Any, Any, str, str, str]:
            """The recorded identification, through the Identify tab's figure, table and summary."""
            plot, frame, summary, systems = identify_views(json.dumps(usable(pace)["probed"], sort_keys=True))
            return (plot, frame.copy(), summary, f"**Done**: {systems} systems, from the recorded probe.",
                    reveal(number, models))
        return identify

    def run(pace: str = replay.READING, request: gr.Request = None) -> Iterator[dict[str, Any]]:
        """The recorded events through the Generate handler, keeping the outputs the Lesson shows."""
        rec = usable(pace)
        tokens_per_s = 0.0 if pace == replay.AT_ONCE else env.lesson_tokens_per_s()
        shown = outputs(number)
        generate = handlers.make_generate(None, streams=replay.streams(rec, tokens_per_s), shown=shown)
        for update in generate(*generate_inputs(s, models), request=request):
            out = {name: value for name, value in update.items() if name in shown}
            if "status" in out:
                out["status"] = replay_status(str(out["status"]), update.get("state"), s.tokens)
            yield _with_reveal(out, number, models)
    return run


def make_run(number: int, models: Sequence[str], preload: Preload | None) -> Callable[..., Any]:
    """A step's run: a generator of Generate updates (by name), or the Identify handler's answer."""
    s = step(number)
    if s.identify:
        def identify(progress: gr.Progress = gr.Progress()) -> tuple[Any, Any, str, str, str]:
            """Water-Probe on the step's providers: every system of the Identify tab, its fast probe."""
            started = time.perf_counter()
            plot, frame, summary = handlers.run_identify(table(s, models), list(IDENTIFY_SYSTEMS), PROBE,
                                                         progress=progress)
            done = f"**Done**: {len(IDENTIFY_SYSTEMS)} systems probed in {time.perf_counter() - started:.0f} s."
            return plot, frame, summary, done, reveal(number, models)
        return identify

    shown = outputs(number)
    generate = handlers.make_generate(preload, shown=shown)

    def run(request: gr.Request = None) -> Iterator[dict[str, Any]]:
        """The step's generation through the Generate handler, keeping the outputs the Lesson shows."""
        for update in generate(*generate_inputs(s, models), request=request):
            out = {name: value for name, value in update.items() if name in shown}
            yield _with_reveal(out, number, models)
    return run


@handlers.reports_errors
def select_token(record: Any, evt: gr.SelectData) -> tuple[Any, Any]:
    """A click on a token of the step's text: the Generate tab's distribution view of that token
    (``handlers.step_view``). A step without the view keeps no run, and the click changes nothing."""
    if record is None:
        return gr.skip(), gr.skip()
    return handlers.step_view(record, handlers.token_number(evt))


def run_seconds(number: int, models: Sequence[str]) -> Callable[..., int]:
    """The GPU seconds the step's run asks ZeroGPU for (``wash.ui.gpu``): its run takes no inputs, so
    the duration is the Generate (or Identify) handler's for the inputs the step sends."""
    from wash.ui import gpu

    s = step(number)
    if s.identify:
        return lambda *_, **__: gpu.identify_seconds(table(s, models), list(IDENTIFY_SYSTEMS), PROBE)
    return lambda *_, **__: gpu.generate_seconds(*generate_inputs(s, models))


def try_it(number: Any, models: Sequence[str]) -> tuple:
    """The current step's settings in the Generate tab (``TRY_OUTPUTS``), or its providers in Identify's."""
    s = step(int(number))
    rows, prompt, tokens, temperature, seed, mode, compare, forwards, top_k, top_p, aggregate = \
        generate_inputs(s, models)
    if s.identify:
        return (gr.skip(),) * len(TRY_OUTPUTS) + (rows, gr.Tabs(selected="identify"))
    return (rows, prompt, tokens, seed, mode, compare, aggregate, DEFAULT_PROFILE, temperature, top_k, top_p,
            forwards, gr.skip(), gr.Tabs(selected="generate"))
