"""The Lesson tab's handlers: a step's card, and its click run through the Generate or Identify handler.

A step (``wash.lesson.Step``) becomes exactly the inputs the Generate tab would
send (providers table, the first example prompt, its tokens and seed, the default
serving profile, eager forwards, its comparison) and runs through
``handlers.make_generate``, the same generator the Generate button uses: the
engine's event stream, the preload wait, Stop and the throttled redraws come with
it. The Lesson shows a subset of its outputs (``OUTPUTS``). The identification
step runs ``handlers.run_identify`` with the Identify tab's systems and fast probe.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Sequence

import gradio as gr

from wash.engine import DEFAULT_PROFILE, PROFILES
from wash.lesson import IDENTIFY_SYSTEMS, OFF, STEPS, Step, measured, step
from wash.ui import handlers, texts
from wash.ui.preload import Preload

#: The Generate handler's outputs the Lesson shows (names of ``handlers.GENERATE_OUTPUTS``).
OUTPUTS = ("status", "text", "single_text", "zplot", "detection")
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


def card(number: int, models: Sequence[str]) -> str:
    """The step's card: title, what it sets up, what to look for, the question, and what was measured."""
    s = step(number)
    return "\n\n".join([
        f"### Step {number} of {len(STEPS)}: {s.title}",
        s.preset.why,
        f"*{s.setup(models)}*",
        f"**What to look for.** {s.look_for}",
        f"**Question for the class.** {s.question}",
        measured(number, models=models),
    ])


#: What a step button sets at once, before its run (names of the Lesson's widgets, in this order).
LOAD_OUTPUTS = ("card", "table", "generation", "identification", "single_text", "number", "status")
#: What the identification step's run sets (names of the Lesson's widgets, in this order).
IDENTIFY_OUTPUTS = ("identify_plot", "identify_table", "identify_summary", "status")
#: What "try it yourself" sets in the Generate tab (names of its widgets, in this order); the
#: Identify tab's providers table and the selected tab follow them.
TRY_OUTPUTS = ("table", "prompt", "max_new", "seed", "mode", "compare", "aggregate", "profile", "temperature",
               "top_k", "top_p", "forwards")


def make_load(number: int, models: Sequence[str]) -> Callable[[], tuple]:
    """A step button's first, instant part: its card and providers, which result panel shows."""
    s = step(number)

    def load() -> tuple:
        doing = "probing the systems" if s.identify else "starting"
        return (card(number, models), table(s, models), gr.update(visible=not s.identify),
                gr.update(visible=s.identify), gr.update(visible=s.compare != OFF), number,
                f"**Step {number}**: {doing}…")
    return load


def make_run(number: int, models: Sequence[str], preload: Preload | None) -> Callable[..., Any]:
    """A step's run: a generator of Generate updates (by name), or the Identify handler's answer."""
    s = step(number)
    if s.identify:
        def identify(progress: gr.Progress = gr.Progress()) -> tuple[Any, Any, str, str]:
            """Water-Probe on the step's providers: every system of the Identify tab, its fast probe."""
            started = time.perf_counter()
            plot, frame, summary = handlers.run_identify(table(s, models), list(IDENTIFY_SYSTEMS), PROBE,
                                                         progress=progress)
            done = f"**Done**: {len(IDENTIFY_SYSTEMS)} systems probed in {time.perf_counter() - started:.0f} s."
            return plot, frame, summary, done
        return identify

    generate = handlers.make_generate(preload)

    def run(request: gr.Request = None) -> Iterator[dict[str, Any]]:
        """The step's generation through the Generate handler, keeping the outputs the Lesson shows."""
        for update in generate(*generate_inputs(s, models), request=request):
            yield {name: value for name, value in update.items() if name in OUTPUTS}
    return run


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
