"""Event handlers: widget values in, widget updates out, engine errors as gr.Error.

Each handler is a thin translation between Gradio and the pure helpers of
``wash.ui``; ``app.py`` only places widgets and connects them to these. Bad input
of any kind (``WashInputError``, from the app's checks or from the engine) is
re-raised as ``gr.Error`` with the same message, which Gradio shows in the page
while the server keeps serving.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Collection, Iterator

import gradio as gr
from gradio.components.plot import PlotData

from wash.engine import PROFILES, command_line, profile_name, ProviderDetection
from wash.core.errors import WashInputError
from wash.ui.preload import Preload
from wash.content.presets import DEMO_TOKENS, description as preset_description, preset
from wash.ui import identify as identify_ui, plots, results, tables, texts, tokens
from wash.ui.detect import detect, result_models, tokens_note
from wash.ui.providers import add_row, build_config, preset_rows, remove_last_row
from wash.ui.run import (SINGLE, UNMARKED, WASH, RunRecord, RunView, StopRegistry, Streams,
                         comparison_streams, drive, session_of, preload_markdown)
from wash.ui.settings import release_free_memory
from wash.ui.theory import simulate, summary

log = logging.getLogger("wash.app")
STOPS = StopRegistry()


def _as_gr_error(err: Exception) -> gr.Error:
    if isinstance(err, WashInputError):
        return gr.Error(str(err), title="Invalid input", print_exception=False)
    log.exception("unexpected error in the app")
    return gr.Error(f"internal error ({type(err).__name__}): {err}")


def reports_errors(fn: Callable) -> Callable:
    """Turn WashInputError (and any crash) into a visible gr.Error."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except Exception as err:  # noqa: BLE001 - shown to the user, logged with traceback
            raise _as_gr_error(err) from err
    return wrapper


# -- providers table ----------------------------------------------------------------
def make_preset_handler(name: str, models: list[str]) -> Callable[[], tuple]:
    """A preset button: providers, mode, aggregation rule, length, and the preset's description."""
    @reports_errors
    def apply() -> tuple:
        rows, mode = preset_rows(name, models)
        return rows, mode, preset(name).aggregate, DEMO_TOKENS, preset_description(name, models)
    return apply


@reports_errors
def add_provider(table: Any, model: str, scheme: str, key: Any, params: str, coordinated: bool) -> list:
    return add_row(table, model, scheme, key, params, coordinated)


@reports_errors
def remove_provider(table: Any) -> list:
    return remove_last_row(table)


# -- generation ---------------------------------------------------------------------
#: What the Generate handler updates, by name. The app maps the names to its
#: components in this order, which is also the order of /generate's API answer (outputs added later come
#: last, so API callers' positions from before they existed still hold).
GENERATE_OUTPUTS = ("status", "text", "single_text", "zplot", "dist", "step", "info", "detection", "routing",
                    "json", "csv", "plain", "state", "evidence_provider", "evidence", "evidence_note",
                    "unmarked_text")
#: Every output: what a handler builds unless told the page shows fewer.
ALL_OUTPUTS = frozenset(GENERATE_OUTPUTS)


def _only(shown: Collection[str], makers: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """The outputs named in ``shown``, each built only then: a page that hides an output (the Lesson shows
    six of the Generate tab's) pays nothing for it, on every redraw of every student's run."""
    return {name: make() for name, make in makers.items() if name in shown}


def _plot_outputs(record: RunRecord, shown: Collection[str] = ALL_OUTPUTS) -> dict[str, Any]:
    """z chart; with a token, its distribution, the step slider and the token's description."""
    steps = record.steps[WASH]
    single = record.steps[SINGLE] if record.compare else None
    expect = len(record.labels) if record.compare == SINGLE else None
    unmarked = record.steps[UNMARKED] if record.unmarked else None
    makers: dict[str, Callable[[], Any]] = {
        "zplot": lambda: plots.z_figure(record.labels, steps, single, record.single_label, expect_n=expect,
                                        unmarked_steps=unmarked)}
    if steps:
        last = steps[-1]
        makers.update(dist=lambda: plots.distribution_figure(last, record.labels, record.lazy),
                      step=lambda: gr.update(minimum=1, maximum=max(2, len(steps)), value=len(steps),
                                             interactive=True),
                      info=lambda: tokens.describe_step(last, record.labels, record.lazy))
    return _only(shown, makers)


def _evidence(record: RunRecord | None, label: str | None) -> tuple[list, str]:
    """One provider's per-token evidence on the final WASH text, and what it shows."""
    rows = list(record.results[WASH].detection) if record is not None and record.results[WASH] else []
    chosen = next((r for r in rows if r.provider == label), rows[0] if rows else None)
    if chosen is None:
        return [], ""
    return tokens.score_segments(chosen.tokens, chosen.per_token, chosen.token_null), tokens.evidence_note(chosen)


def _final_outputs(record: RunRecord, shown: Collection[str] = ALL_OUTPUTS) -> dict[str, Any]:
    """Detection table, routing stats, downloads, plain text, and provider 1's per-token evidence."""
    result, single, unmarked = record.results[WASH], record.results[SINGLE], record.results[UNMARKED]
    frame = functools.cache(lambda: tables.combined_detection(result, single, unmarked))
    labels = [d.provider for d in result.detection]
    evidence = functools.cache(lambda: _evidence(record, labels[0] if labels else None))
    return _only(shown, {
        "detection": frame,
        "routing": lambda: tables.routing_markdown(result, single, record.first_token_s, unmarked),
        "json": lambda: gr.update(value=tables.write_run_json(record.to_json()), interactive=True),
        "csv": lambda: gr.update(value=tables.write_csv(frame()), interactive=True),
        "plain": lambda: result.text,
        "evidence_provider": lambda: gr.update(choices=labels, value=labels[0] if labels else None,
                                               interactive=bool(labels)),
        "evidence": lambda: evidence()[0], "evidence_note": lambda: evidence()[1]})


def _view_outputs(view: RunView, shown: Collection[str] = ALL_OUTPUTS) -> dict[str, Any]:
    record = view.record
    makers: dict[str, Callable[[], Any]] = {"text": lambda: tokens.highlight_segments(record.steps[WASH])}
    if record.compare:
        makers["single_text"] = lambda: tokens.highlight_segments(record.steps[SINGLE])
    if record.unmarked:
        makers["unmarked_text"] = lambda: tokens.highlight_segments(record.steps[UNMARKED])
    out = {"status": view.status, **_only(shown, makers), "state": record}
    if view.refresh:
        out.update(_plot_outputs(record, shown))
    if view.finished and record.finished:
        out.update(_final_outputs(record, shown))
    return out


@functools.lru_cache(maxsize=256)
def empty_z_plot(labels: tuple[str, ...]) -> PlotData:
    """The z chart of a run with these providers before its first token, serialised once per set of labels.

    Why: every run's first update carries it, and thirty students starting one Lesson step at once would
    build the same plotly figure thirty times (about 5 ms each on a 2-core CPU) before their first token.
    Gradio's ``gr.Plot`` sends a ``PlotData`` as it is; the chart depends on ``labels`` alone."""
    return PlotData(type="plotly", plot=plots.z_figure(labels, []).to_json())


@functools.lru_cache(maxsize=64)
def hint_plot(message: str) -> PlotData:
    """``plots.empty_figure(message)`` serialised once (``empty_z_plot`` says why)."""
    return PlotData(type="plotly", plot=plots.empty_figure(message).to_json())


def _reset_outputs(record: RunRecord, shown: Collection[str] = ALL_OUTPUTS) -> dict[str, Any]:
    """The first update of a run: clear everything the previous run left."""
    colours = tokens.colour_map(plots.PALETTE, len(record.labels))
    out = _only(shown, {
        "text": lambda: gr.update(value=[], color_map=colours),
        "single_text": lambda: gr.update(value=[], color_map=colours),
        "unmarked_text": lambda: gr.update(value=[], color_map=colours),
        "zplot": lambda: empty_z_plot(tuple(record.labels)),
        "dist": lambda: hint_plot("waiting for the first token…"),
        "step": lambda: gr.update(minimum=1, maximum=2, value=1, interactive=False), "info": lambda: "",
        "detection": tables.empty_detection_frame, "routing": lambda: "",
        "json": lambda: gr.update(value=None, interactive=False),
        "csv": lambda: gr.update(value=None, interactive=False), "plain": lambda: "",
        "evidence_provider": lambda: gr.update(choices=[], value=None, interactive=False),
        "evidence": lambda: [], "evidence_note": lambda: ""})
    return {"status": "**Starting…**", **out, "state": record}


def show_evidence(record: RunRecord | None, label: str) -> tuple[list, str]:
    """The evidence view for another provider of the last run."""
    return _evidence(record, label)


def make_generate(preload: Preload | None, streams: Streams | None = None,
                  shown: Collection[str] = ALL_OUTPUTS) -> Callable[..., Iterator[dict[str, Any]]]:
    """The Generate handler; a click while ``preload`` still runs waits for it, visibly.

    It yields ``{output name: update}`` dicts (names in ``GENERATE_OUTPUTS``); an
    output a dict leaves out keeps its value. ``streams`` (a recorded run's events,
    ``wash.ui.replay``) replaces the engine's: the page draws them exactly as a live run.
    ``shown``: the outputs the page has (the status line and the run's state always come); the
    others are never built.
    """
    def generate(table: Any, prompt: str, max_new_tokens: Any, temperature: Any, seed: Any, mode: str,
                 compare: str | bool = "off", forwards: str = "eager", top_k: Any = 0, top_p: Any = 1.0,
                 aggregate: Any = "mean", request: gr.Request = None) -> Iterator[dict[str, Any]]:
        """Stream one generation (two with the comparison switch) into the Generate tab."""
        try:
            config = build_config(table, prompt, max_new_tokens, temperature, seed, mode, forwards=forwards,
                                  top_k=top_k, top_p=top_p, aggregate=aggregate)
        except WashInputError as err:
            raise _as_gr_error(err) from err
        session = session_of(request)
        stop = STOPS.start(session)
        views = drive(config, compare, stop, preload=preload, streams=streams)
        try:
            first = True
            for view in views:
                if STOPS.superseded(stop):  # a newer run of this session owns the page: draw nothing more
                    return
                if first:
                    yield _reset_outputs(view.record, shown)
                    first = False
                yield _view_outputs(view, shown)
        except gr.Error:
            raise
        except Exception as err:  # noqa: BLE001
            raise _as_gr_error(err) from err
        finally:
            views.close()
            STOPS.finish(session, stop)
            release_free_memory()
    return generate


def make_model_status(preload: Preload | None) -> tuple[Callable[[], tuple[str, Any]], Callable[[], dict]]:
    """The page's model status line (with its timer's state) and the API's ``status`` endpoint."""
    def page() -> tuple[str, Any]:
        return preload_markdown(preload), gr.Timer(active=preload is not None and not preload.done)

    def status() -> dict:
        """Where the app's model preload stands: ready, done, error, elapsed_s, messages."""
        if preload is None:
            return {"models": [], "loaded": [], "started": False, "done": True, "ready": True, "error": None,
                    "elapsed_s": 0.0, "messages": []}
        return preload.to_dict()
    return page, status


def reproduce_line(table: Any, prompt: str, max_new_tokens: Any, temperature: Any, seed: Any, mode: str,
                   compare: str | bool = "off", forwards: str = "eager", top_k: Any = 0, top_p: Any = 1.0,
                   aggregate: Any = "mean") -> str:
    """The CLI call that makes the same WASH text as the Generate click (empty on bad input)."""
    try:
        config = build_config(table, prompt, max_new_tokens, temperature, seed, mode, forwards=forwards,
                              top_k=top_k, top_p=top_p, aggregate=aggregate)
    except WashInputError:
        return ""
    return command_line(config)


def apply_profile(name: str) -> tuple[Any, Any, Any]:
    """Set temperature, top-k and top-p to a serving profile's (``custom`` leaves them)."""
    if name not in PROFILES:
        return gr.skip(), gr.skip(), gr.skip()
    p = PROFILES[name]
    return p.temperature, p.top_k, p.top_p


def match_profile(temperature: Any, top_k: Any, top_p: Any) -> str:
    """The profile the serving controls now match, or ``custom``."""
    try:
        return profile_name(float(temperature), int(float(top_k)), float(top_p))
    except (TypeError, ValueError):
        return "custom"


def describe_mode(mode: str, forwards: str) -> str:
    return texts.mode_info(mode, forwards)


def stop(request: gr.Request) -> None:
    session = session_of(request)
    if STOPS.stop(session):
        gr.Info("Stopping after the current token…")


def step_view(record: RunRecord | None, number: int) -> tuple[Any, str]:
    """Token ``number`` (1-based) of the run's text: its distributions figure and its description."""
    if record is None or not record.steps[WASH]:
        raise WashInputError("generate some text first")
    steps = record.steps[WASH]
    index = min(max(int(number) - 1, 0), len(steps) - 1)
    step = steps[index]
    return (plots.distribution_figure(step, record.labels, record.lazy),
            tokens.describe_step(step, record.labels, record.lazy))


@reports_errors
def select_token(record: RunRecord | None, evt: gr.SelectData) -> tuple[Any, Any, str]:
    """Clicking a token: jump the step slider there and show its distribution."""
    number = token_number(evt)
    fig, info = step_view(record, number)
    return gr.update(value=number), fig, info


def token_number(evt: gr.SelectData) -> int:
    """The clicked token of a highlighted text, 1-based (the step slider's numbering)."""
    return (evt.index if isinstance(evt.index, int) else int(evt.index[0])) + 1


@reports_errors
def show_step(record: RunRecord | None, number: float) -> tuple[Any, str]:
    return step_view(record, int(number))


def toggle_compare(compare: str | bool) -> tuple[Any, Any]:
    """Show the comparison texts the switch asks for: provider 1 alone (or a baseline), the unwatermarked."""
    streams = comparison_streams(compare)
    return gr.update(visible=SINGLE in streams), gr.update(visible=UNMARKED in streams)


def send_to_detect(text: str, table: Any, record: RunRecord | None = None) -> tuple[str, Any, Any, Any]:
    """Text, providers and the generation's model set (coordinated providers' union) to Detect."""
    if not text:
        gr.Warning("Nothing to send yet: generate some text first.")
    models = result_models(record.results[WASH]) if record is not None else []
    return text or "", table, models if models else gr.skip(), gr.Tabs(selected="detect")


# -- detect -------------------------------------------------------------------------
def _detect_highlight(rows: list[ProviderDetection], label: str | None) -> list:
    chosen = next((r for r in rows if r.provider == label), rows[0] if rows else None)
    if chosen is None:
        return []
    return tokens.score_segments(chosen.tokens, chosen.per_token, chosen.token_null)


@reports_errors
def run_detect(text: str, table: Any, threshold: float,
               models: Any = None, statistic: str = "sum") -> tuple[Any, Any, list, list[ProviderDetection]]:
    rows = detect(text, table, threshold, models=models, statistic=statistic or "sum")
    frame = tables.detection_frame(rows, run="pasted text", threshold=float(threshold)).drop(columns="run")
    labels = [r.provider for r in rows]
    return (frame, gr.update(choices=labels, value=labels[0] if labels else None),
            _detect_highlight(rows, labels[0] if labels else None), rows)


def choose_detect_provider(rows: list[ProviderDetection] | None, label: str) -> list:
    return _detect_highlight(rows or [], label)


def show_tokens_needed(rows: list[ProviderDetection] | None) -> str:
    """The tokens-for-80% lines under the verdicts, from the scored rows (their statistic and providers
    travel with them), so they answer the click that scored them whatever the widgets say since."""
    return tokens_note(rows or [])


# -- theory -------------------------------------------------------------------------
@reports_errors
def run_theory(vocab_size: float, xi: float, max_n: float, trials: float,
               kinds: list[str]) -> tuple[Any, str]:
    result = simulate(vocab_size=int(vocab_size), xi=float(xi), max_n=int(max_n), trials=int(trials),
                      kinds=tuple(kinds or ()))
    bands = {k: (result.low[k], result.high[k]) for k in result.mean}
    fig = plots.theory_figure(result.ns, result.mean, bands, result.reference,
                              "theorem shape: c·(√(log|V|/N) + η²)")
    return fig, summary(result)


# -- results ------------------------------------------------------------------------
def show_results(scheme: str, lineup: str, profile: str) -> tuple:
    """The Results tab for one selection of scheme, line-up and serving profile (cached per selection)."""
    return results.view(scheme, lineup, profile).outputs()


# -- identify -----------------------------------------------------------------------
@reports_errors
def run_identify(table: Any, systems: list[str], probe: str,
                 progress: gr.Progress = gr.Progress()) -> tuple[Any, Any, str]:
    """Water-Probe identification of the chosen systems, calibrated against their nulls: figure, table, verdicts."""
    results = identify_ui.run_identify(table, systems, probe,
                                       progress=lambda fraction, what: progress(fraction, desc=what))
    return identify_ui.figure(results), identify_ui.results_frame(results), identify_ui.summary(results)
