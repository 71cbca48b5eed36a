"""WASH demo app: lay out the tabs and connect widgets to ``wash.ui.handlers``.

Run ``python app.py`` (or ``make run``): the server listens on 0.0.0.0:7860 unless
``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT`` (or a platform's ``PORT``) say otherwise. ``WASH_APP_MODELS``
picks the offered models (default: the real offline smollm2 and gemma3),
``WASH_APP_CONCURRENCY`` how many generations run at once (default 2),
``WASH_MALLOC_ARENAS`` a cap on glibc's malloc arenas (default: none). Models start
loading in a background thread before the server starts (the page shows the
progress, the ``status`` API endpoint reports it), load once per process and are
shared by every session; everything a session shows is kept in its own ``gr.State``.

No engine logic lives here: every handler is in ``wash/ui/handlers.py`` and every
figure, table and simulation in the other ``wash/ui`` modules.
"""

from __future__ import annotations

import functools
from typing import Callable

import gradio as gr

from wash.ui import gpu  # first: on ZeroGPU its import imports spaces, before torch (wash/ui/gpu.py)
from wash.core import env
from wash.engine import DEFAULT_PROFILE, FORWARDS, MAX_NEW_TOKENS_CAP, MAX_TOP_K, PROFILES, mode_names, RULES
from wash.ui.preload import Preload
from wash.content.presets import DEMO_TOKENS, description as preset_description, preset_names
from wash.detection import Z_THRESHOLD
from wash.reporting import glossary_lines
from wash.ui import handlers, plots, results, sessions, tables, texts
from wash.ui import lesson as lesson_ui
from wash.content.lesson import INTRO as LESSON_INTRO, STEPS as LESSON_STEPS
from wash.ui import preset_runs
from wash.ui import quiz as quiz_ui
from wash.content.quiz import INTRO as QUIZ_INTRO, LETTERS as QUIZ_LETTERS, QUESTIONS as QUIZ_QUESTIONS
from wash.ui.providers import HEADERS, preset_rows
from wash.ui.identify import NULL_RUNS as IDENTIFY_NULL_RUNS, PROBES as IDENTIFY_PROBES, SYSTEMS as IDENTIFY_SYSTEMS
from wash.ui.detect import STATISTIC_NOTE, statistic_choices
from wash.ui.run import COMPARISONS, preload_markdown, start_preload
from wash.ui.replay import PACES as REPLAY_PACES
from wash.ui.settings import app_models, concurrency_limit, limit_malloc_arenas, queue_size
from wash.ui.theory import KINDS, MAX_N, MAX_VOCAB
from wash.ui.tokens import colour_map
from wash.watermarks import scheme_names

#: Generate and the Lesson's steps share one concurrency limit: both are generations.
GENERATION = "generation"
#: The aggregation rules the dropdown offers, with their parameters' defaults.
RULE_CHOICES = [str(rule()) for rule in RULES.values()]

CSS = """
#wash-text, #single-text { min-height: 120px; }
#status { min-height: 2.2em; }
#model-status { min-height: 1.6em; }
"""


def _providers_table(rows: list[list[str]], elem_id: str, label: str) -> gr.Dataframe:
    return gr.Dataframe(value=rows, headers=HEADERS, datatype="str", type="array", column_count=4,
                        interactive=True, label=label, elem_id=elem_id, wrap=True)


def _profiles_info() -> str:
    """One line on what each serving profile sets."""
    def part(p) -> str:
        return f"{p.name}: temperature {p.temperature:g}, " + (f"top-k {p.top_k}" if p.top_k else "no truncation")
    return "; ".join(part(p) for p in PROFILES.values()) + " (paper: as the paper's release serves)"


def _generate_tab(models: list[str], preload: Preload | None) -> dict:
    """Widgets of the Generate tab, returned by name for wiring."""
    w: dict = {}
    w["models"] = gr.Markdown(preload_markdown(preload), elem_id="model-status")
    w["timer"] = gr.Timer(1.0, active=preload is not None and not preload.done)
    first_rows, _ = preset_rows(preset_names()[0], models)
    with gr.Row():
        with gr.Column(scale=3):
            gr.Markdown("**Presets**")
            with gr.Row():
                w["presets"] = [gr.Button(name, size="sm", elem_id=f"preset-{i}")
                                for i, name in enumerate(preset_names(models))]
            w["preset_info"] = gr.Markdown(preset_description(preset_names()[0], models), elem_id="preset-info")
            w["table"] = _providers_table(first_rows, "providers",
                                          "Providers: one row each (model, scheme, integer key, "
                                          "optional name=value params; coordinated=true for the control)")
            with gr.Row():
                w["new_model"] = gr.Dropdown(models, value=models[0], label="model", allow_custom_value=True,
                                             min_width=120)
                w["new_scheme"] = gr.Dropdown(scheme_names(), value="kgw", label="scheme", min_width=120)
                w["new_key"] = gr.Textbox("12345", label="key (integer)", min_width=100)
                w["new_params"] = gr.Textbox("", label="params", placeholder="delta=2.0", min_width=100)
                w["new_coord"] = gr.Checkbox(False, label="coordinated", min_width=80)
            with gr.Row():
                w["add"] = gr.Button("Add provider", size="sm", elem_id="add-provider")
                w["remove"] = gr.Button("Remove last", size="sm", elem_id="remove-provider")
        with gr.Column(scale=2):
            w["prompt"] = gr.Textbox(label="Prompt", lines=3, elem_id="prompt", value=preset_runs.prompt())
            gr.Examples([[t] for t in texts.example_prompts(10)], inputs=[w["prompt"]],
                        label="Example prompts", examples_per_page=5)
            with gr.Row():
                w["max_new"] = gr.Slider(1, MAX_NEW_TOKENS_CAP, value=DEMO_TOKENS, step=1, label="max new tokens",
                                         elem_id="max-new-tokens")
                w["profile"] = gr.Radio(list(PROFILES) + ["custom"], value=DEFAULT_PROFILE,
                                        label="serving profile", elem_id="profile", info=_profiles_info())
            with gr.Row():
                start = PROFILES[DEFAULT_PROFILE]
                w["temperature"] = gr.Slider(0.0, 2.0, value=start.temperature, step=0.05, label="temperature",
                                             elem_id="temperature")
                w["top_k"] = gr.Number(start.top_k, precision=None, minimum=0, maximum=MAX_TOP_K, step=1,
                                       label="top-k (0 = off)", elem_id="top-k", min_width=80)
                w["top_p"] = gr.Slider(0.01, 1.0, value=start.top_p, step=0.01, label="top-p", elem_id="top-p")
            with gr.Row():
                w["seed"] = gr.Number(preset_runs.SEED, precision=None, step=1, label="seed", elem_id="seed",
                                      min_width=80)
                w["mode"] = gr.Radio(list(mode_names()), value="wash", label="mode", elem_id="mode")
                w["forwards"] = gr.Radio(list(FORWARDS), value=preset_runs.FORWARDS, label="forwards",
                                         elem_id="forwards",
                                         min_width=120)
            w["mode_info"] = gr.Markdown(texts.mode_info("wash", "eager"), elem_id="mode-info")
            w["aggregate"] = gr.Dropdown(RULE_CHOICES, value="mean", allow_custom_value=True,
                                         label="aggregation rule (WASH modes, eager forwards)",
                                         info="mean is the paper's WASH; the others are robust centres we "
                                              "tried (docs/RESULTS.md): none beats the mean on every scheme",
                                         elem_id="aggregate")
            w["compare"] = gr.Radio(list(COMPARISONS), value=preset_runs.COMPARE, elem_id="compare",
                                    label="compare with (same prompt and seed): provider 1 alone (single), "
                                          "the same providers with every watermark off (unwatermarked), "
                                          "both, or one of the paper's baselines (docs/BASELINES.md)")
            w["pace"] = gr.Radio(list(REPLAY_PACES), value=REPLAY_PACES[0], elem_id="generate-pace",
                                 label="a preset at the tab's other defaults shows its recorded run (made "
                                       "with the same seed; a live run gives the same), or computes it live")
            with gr.Row():
                w["go"] = gr.Button("Generate", variant="primary", elem_id="generate-btn")
                w["stop"] = gr.Button("Stop", variant="stop", elem_id="stop-btn")
    # a Generate click sets one of these two states to a fresh value; the change starts the replay or live run
    w["replay_go"], w["live_go"] = gr.State(None), gr.State(None)
    w["source"] = gr.Markdown("", elem_id="generate-source")
    w["status"] = gr.Markdown("", label="status", elem_id="status")
    with gr.Row():
        with gr.Column():
            cmap = colour_map(plots.PALETTE, 8)
            w["text"] = gr.HighlightedText(label="WASH output (coloured: routed spans; click a token)",
                                           color_map=cmap, show_legend=True, combine_adjacent=False,
                                           elem_id="wash-text", interactive=False)
            w["single_text"] = gr.HighlightedText(label="comparison run (P1 alone, or the chosen baseline)",
                                                  color_map=cmap,
                                                  show_legend=False, elem_id="single-text",
                                                  interactive=False, visible=False)
            w["unmarked_text"] = gr.HighlightedText(
                label="comparison run: the same providers, every watermark off", color_map=cmap,
                show_legend=False, elem_id="unmarked-text", interactive=False, visible=False)
        with gr.Column():
            w["zplot"] = gr.Plot(plots.empty_figure("the live z-scores appear here"), label="Live detection",
                                 show_label=False, elem_id="z-plot")
            w["z_score"] = gr.Markdown(texts.z_score_markdown(), elem_id="z-score")
            w["z_why"] = gr.Markdown(texts.Z_WHY, elem_id="z-why")
    with gr.Row():
        with gr.Column():
            w["step"] = gr.Slider(1, 2, value=1, step=1, label="token (step) for the distribution view",
                                  interactive=False, elem_id="step-slider")
            w["info"] = gr.Markdown("", label="token details", elem_id="token-info")
        with gr.Column():
            w["dist"] = gr.Plot(plots.empty_figure("pick a token to see its distributions"),
                                label="Per-token distributions", show_label=False, elem_id="dist-plot")
    w["detection"] = gr.Dataframe(tables.empty_detection_frame(), label="Detection on the final text",
                                  interactive=False, elem_id="detection-table")
    with gr.Accordion("Which tokens still carry a watermark? (per-token evidence)", open=True):
        w["evidence_provider"] = gr.Dropdown([], value=None, label="colour the final text by this provider's "
                                             "detector", interactive=False, elem_id="evidence-provider")
        w["evidence"] = gr.HighlightedText(label="per-token evidence (red: for the watermark, purple: against)",
                                           show_legend=False, combine_adjacent=False, interactive=False,
                                           elem_id="evidence-text")
        w["evidence_note"] = gr.Markdown("", elem_id="evidence-note")
    w["routing"] = gr.Markdown("", label="routing and speed", elem_id="routing")
    w["reproduce"] = gr.Textbox("", label="Reproduce the WASH text with this command", lines=1, max_lines=4,
                                buttons=["copy"], interactive=False, elem_id="reproduce")
    with gr.Row():
        w["json"] = gr.DownloadButton("Download run (JSON)", interactive=False, elem_id="download-json")
        w["csv"] = gr.DownloadButton("Download table (CSV)", interactive=False, elem_id="download-csv")
        w["to_detect"] = gr.Button("Send text to Detect", elem_id="send-to-detect")
    with gr.Accordion("Plain text", open=False):
        w["plain"] = gr.Textbox(label="generated text", lines=4, buttons=["copy"], elem_id="plain-text")
    w["state"] = gr.State(None)
    return w


def _lesson_tab(models: list[str]) -> dict:
    """Widgets of the Lesson tab: one button per step, the step's card, and the results it runs into."""
    w: dict = {}
    gr.Markdown(LESSON_INTRO, elem_id="lesson-intro")
    with gr.Row():
        w["steps"] = [gr.Button(f"{n}. {s.title}", size="sm", elem_id=f"lesson-step-{n}")
                      for n, s in enumerate(LESSON_STEPS, start=1)]
    w["card"] = gr.Markdown(lesson_ui.card(1, models), elem_id="lesson-card")
    w["table"] = gr.Dataframe(value=lesson_ui.table(LESSON_STEPS[0], models), headers=HEADERS, datatype="str",
                              type="array", interactive=False, label="this step's providers",
                              elem_id="lesson-providers")
    with gr.Row():
        w["pace"] = gr.Radio(list(REPLAY_PACES), value=REPLAY_PACES[0], elem_id="lesson-pace",
                             label="each step shows its recorded run (made with the step's seed; a live run gives "
                                   "the same), or computes it live")
        w["try"] = gr.Button("Try this step yourself (opens it in its tab)", size="sm", elem_id="lesson-try")
        w["stop"] = gr.Button("Stop", variant="stop", size="sm", elem_id="lesson-stop")
    w["number"] = gr.State(1)
    # a step button sets one of its two go states to a fresh value; the change starts its replay or live run
    w["replay_go"] = [gr.State(None) for _ in LESSON_STEPS]
    w["live_go"] = [gr.State(None) for _ in LESSON_STEPS]
    w["source"] = gr.Markdown("", elem_id="lesson-source")
    w["status"] = gr.Markdown("", elem_id="lesson-status")
    w["look_for"] = gr.Markdown(lesson_ui.LOOK_FOR_WAIT, elem_id="lesson-look-for")
    w["state"] = gr.State(None)  # the run a click on a token reads (steps with the distribution view)
    cmap = colour_map(plots.PALETTE, 8)
    with gr.Column(visible=True) as w["generation"]:
        with gr.Row():
            with gr.Column():
                w["text"] = gr.HighlightedText(label="WASH output (coloured: routed spans)", color_map=cmap,
                                               show_legend=True, combine_adjacent=False, interactive=False,
                                               elem_id="lesson-text")
                w["single_text"] = gr.HighlightedText(label="provider 1 alone, same prompt and seed", color_map=cmap,
                                                      show_legend=False, interactive=False, visible=False,
                                                      elem_id="lesson-single-text")
                w["unmarked_text"] = gr.HighlightedText(
                    label="unwatermarked: the same providers, every watermark off, same prompt and seed "
                          "(grey lines in the chart)",
                    color_map=cmap, show_legend=False, interactive=False, visible=False,
                    elem_id="lesson-unmarked-text")
            with gr.Column():
                w["zplot"] = gr.Plot(plots.empty_figure("click a step: the live z-scores appear here"),
                                     show_label=False, elem_id="lesson-z-plot")
                gr.Markdown(texts.z_score_markdown(), elem_id="lesson-z-score")
                with gr.Accordion("Words used here", open=False, elem_id="lesson-glossary"):
                    # the README's and the handout's glossary, one text (wash/reporting/glossary.py)
                    gr.Markdown("\n".join(glossary_lines()))
        with gr.Row(visible=LESSON_STEPS[0].distributions) as w["averaging"]:
            # the Generate tab's distribution view (wash.ui.handlers.step_view), for a clicked token
            w["info"] = gr.Markdown("", elem_id="lesson-token-info")
            w["dist"] = gr.Plot(plots.empty_figure(lesson_ui.DIST_HINT), show_label=False,
                                elem_id="lesson-dist-plot")
        w["detection"] = gr.Dataframe(tables.empty_detection_frame(), label="Detection on the final text",
                                      interactive=False, elem_id="lesson-detection")
    with gr.Column(visible=False) as w["identification"]:
        w["identify_plot"] = gr.Plot(show_label=False, elem_id="lesson-identify-plot")
        w["identify_table"] = gr.Dataframe(label="identification per system", interactive=False,
                                           elem_id="lesson-identify-table")
        w["identify_summary"] = gr.Markdown("", elem_id="lesson-identify-summary")
    return w


def _quiz_tab(models: list[str]) -> dict:
    """Widgets of the Quiz tab: the question, its texts, the answer, the reveal and the class tally."""
    w: dict = {}
    gr.Markdown(QUIZ_INTRO, elem_id="quiz-intro")
    w["question"] = gr.Radio([(f"Question {n}", n) for n in range(1, len(QUIZ_QUESTIONS) + 1)], value=1,
                             label="question", elem_id="quiz-question")
    # opening the tab loads the chosen question (its recording is read then, not when the app starts)
    w["prompt"] = gr.Markdown("", elem_id="quiz-prompt")
    w["source"] = gr.Markdown("", elem_id="quiz-source")
    for i, letter in enumerate(QUIZ_LETTERS):
        w[f"text_{i}"] = gr.Textbox(label=f"Text {letter}", lines=4, interactive=False, visible=False,
                                    elem_id=f"quiz-text-{i}")
    w["picks"] = gr.CheckboxGroup([], value=[], label="Which texts were made by watermarked providers? Tick every "
                                  "one you think was (none is a possible answer).", elem_id="quiz-picks")
    w["submit"] = gr.Button("Submit", variant="primary", interactive=False, elem_id="quiz-submit")
    w["reveal"] = gr.Markdown("", elem_id="quiz-reveal")
    w["detection"] = gr.Dataframe(tables.empty_detection_frame(), label="Each text's detectors", interactive=False,
                                  visible=False, elem_id="quiz-detection")
    for i in range(len(QUIZ_LETTERS)):  # one under the other: five providers' legend needs the width
        w[f"plot_{i}"] = gr.Plot(show_label=False, visible=False, elem_id=f"quiz-plot-{i}")
    w["tally"] = gr.Markdown(quiz_ui.tally_markdown(), elem_id="quiz-tally")
    with gr.Row():
        w["refresh"] = gr.Button("Refresh the tally", size="sm", elem_id="quiz-refresh")
        w["code"] = gr.Textbox("", label=quiz_ui.reset_label(), type="password", elem_id="quiz-code")
        w["reset"] = gr.Button("Reset tally", variant="stop", size="sm", elem_id="quiz-reset")
    w["reset_note"] = gr.Markdown("", elem_id="quiz-reset-note")
    return w


def _detect_tab(models: list[str]) -> dict:
    w: dict = {}
    rows, _ = preset_rows(preset_names()[0], models)
    gr.Markdown("Score any text with chosen providers' own detectors (each re-tokenises it with its "
                "own tokenizer). Coordinated providers hash in the union vocabulary of the generation's "
                "models: name them below (Send text to Detect fills them in), whichever providers you test.")
    w["text"] = gr.Textbox(label="Text to score", lines=6, elem_id="detect-text")
    w["table"] = _providers_table(rows, "detect-providers", "Providers to test")
    w["models"] = gr.Dropdown(models, value=[], multiselect=True, allow_custom_value=True,
                              label="Models of the generation (coordinated providers' union vocabulary; "
                                    "empty: the providers' own models)", elem_id="detect-models")
    with gr.Row():
        w["threshold"] = gr.Number(Z_THRESHOLD, label="z threshold", elem_id="detect-threshold")
        w["statistic"] = gr.Dropdown(statistic_choices(), value="sum", label="Statistic",
                                     elem_id="detect-statistic")
        w["go"] = gr.Button("Score", variant="primary", elem_id="detect-btn")
    gr.Markdown(STATISTIC_NOTE)
    w["result"] = gr.Dataframe(label="Verdicts", interactive=False, elem_id="detect-table")
    w["tokens_needed"] = gr.Markdown("", elem_id="detect-tokens-needed")
    w["provider"] = gr.Dropdown([], label="colour the tokens by this provider's detector",
                                elem_id="detect-provider")
    w["tokens"] = gr.HighlightedText(label="Per-token detector scores (red: for the watermark, purple: against)",
                                     show_legend=True, elem_id="detect-tokens", interactive=False)
    w["rows"] = gr.State([])
    return w


def _identify_tab(models: list[str]) -> dict:
    w: dict = {}
    rows, _ = preset_rows(preset_names()[0], models)
    gr.Markdown("**Is this model watermarked?** Per-text detection needs a provider's key; Water-Probe "
                "identification (v1, forced contexts) needs none: it asks a system for the next entry of a "
                "list under two crafted prompts and measures (S) how much its token rankings after the same "
                "prefix agree between them. The verdict is calibrated: the same base models without watermarks "
                f"are probed {IDENTIFY_NULL_RUNS} times more, and a system is called watermarked when its p "
                "against those runs is below 5%. Water-Probe's own z (bands at 4 and 10) is shown beside it "
                "for comparison with the paper's Table 1, which very probably reports it.")
    w["table"] = _providers_table(rows, "identify-providers", "Providers (the WASH ensemble is all of them)")
    with gr.Row():
        w["systems"] = gr.CheckboxGroup(list(IDENTIFY_SYSTEMS), value=list(IDENTIFY_SYSTEMS),
                                        label="systems to probe", elem_id="identify-systems")
        w["probe"] = gr.Radio(list(IDENTIFY_PROBES), value="fast", label="probe size", elem_id="identify-probe",
                              info="fast: 20 contexts x 200 samples x 3 runs; standard: 50 x 400 x 3; the null: 50 runs of the same size")
    w["go"] = gr.Button("Identify", variant="primary", elem_id="identify-btn")
    w["plot"] = gr.Plot(label="identification", show_label=False, elem_id="identify-plot")
    w["result"] = gr.Dataframe(label="identification per system", interactive=False, elem_id="identify-table")
    w["summary"] = gr.Markdown("", elem_id="identify-summary")
    return w


def _results_tab() -> dict:
    """The committed results: selectors, then each headline question's status, figure, sentence and table.

    The first view is computed here, once per process (``results.view`` is cached), so opening
    the tab costs the browser only the drawing."""
    w: dict = {}
    first = results.view()
    options = results.choices(results.load())
    gr.Markdown(results.intro_markdown())
    with gr.Row():
        for name, label in zip(results.SELECTORS, ("scheme", "line-up", "serving profile")):
            w[name] = gr.Dropdown(options[name], value=results.ALL, label=label, elem_id=f"results-{name}",
                                  min_width=160)
    for question, key, caption in (("Is this text watermarked?", "detection", results.DETECTION_CAPTION),
                                   ("Is this model watermarked?", "identification", results.IDENTIFICATION_CAPTION)):
        gr.Markdown(f"### {question}")
        w[f"{key}_status"] = gr.Markdown(getattr(first, f"{key}_status"), elem_id=f"results-{key}-status")
        w[f"{key}_figure"] = gr.Plot(getattr(first, f"{key}_figure"), show_label=False,
                                     elem_id=f"results-{key}-plot")
        w[f"{key}_sentence"] = gr.Markdown(getattr(first, f"{key}_sentence"), elem_id=f"results-{key}-sentence")
        w[f"{key}_table"] = gr.Dataframe(getattr(first, f"{key}_table"), interactive=False, wrap=True,
                                         label=caption, elem_id=f"results-{key}-table",
                                         column_widths=getattr(results, f"{key.upper()}_WIDTHS"))
    gr.Markdown(f"### {results.SEE_THROUGH_TITLE}")
    w["see_through_figure"] = gr.Plot(results.see_through_figure(), show_label=False,
                                      elem_id="results-see-through-plot")
    w["see_through"] = gr.Markdown(results.see_through_markdown(), elem_id="results-see-through")
    w["see_through_length_figure"] = gr.Plot(results.see_through_length_figure(), show_label=False,
                                             elem_id="results-see-through-length-plot")
    return w


def _theory_tab() -> dict:
    w: dict = {}
    gr.Markdown(texts.theory_markdown())
    with gr.Row():
        w["vocab"] = gr.Slider(10, MAX_VOCAB, value=5000, step=10, label="vocabulary size |V|")
        w["xi"] = gr.Slider(0.05, 1.0, value=0.5, step=0.05, label="perturbation size ξ")
        w["max_n"] = gr.Slider(2, MAX_N, value=MAX_N, step=1, label="largest N")
        w["trials"] = gr.Slider(1, 20, value=6, step=1, label="trials")
    w["kinds"] = gr.CheckboxGroup(list(KINDS), value=list(KINDS), label="perturbations")
    w["go"] = gr.Button("Simulate", variant="primary", elem_id="theory-btn")
    w["plot"] = gr.Plot(label="Theorem 1, simulated", show_label=False, elem_id="theory-plot")
    w["summary"] = gr.Markdown(label="simulation summary", elem_id="theory-summary")
    return w


def _by_component(handler: Callable, widgets: dict, demo: gr.Blocks) -> Callable:
    """The engine-side handler yields updates by output name; Gradio wants them by component.

    Once the run ends, the component copies Gradio left in the session are dropped
    (``wash.ui.sessions`` says why)."""
    @functools.wraps(handler)  # keeps the signature Gradio reads (gr.Request injection included)
    def by_component(*args, **kwargs):
        try:
            for update in handler(*args, **kwargs):
                yield {widgets[name]: value for name, value in update.items()}
        finally:
            request = kwargs.get("request") or next((a for a in args if isinstance(a, gr.Request)), None)
            sessions.tidy_session(demo, getattr(request, "session_hash", None))
    return by_component


def _wire_generate(demo: gr.Blocks, g: dict, d: dict, tabs: gr.Tabs, models: list[str],
                   preload: Preload | None) -> None:
    for button, name in zip(g["presets"], preset_names(models)):
        button.click(handlers.make_preset_handler(name, models), None,
                     [g["table"], g["mode"], g["aggregate"], g["max_new"], g["preset_info"]],
                     api_visibility="undocumented")
    g["add"].click(handlers.add_provider, [g["table"], g["new_model"], g["new_scheme"], g["new_key"],
                                           g["new_params"], g["new_coord"]], g["table"],
                   api_visibility="undocumented")
    g["remove"].click(handlers.remove_provider, g["table"], g["table"], api_visibility="undocumented")
    g["compare"].change(handlers.toggle_compare, g["compare"], [g["single_text"], g["unmarked_text"]],
                        api_visibility="undocumented")
    outputs = [g[name] for name in handlers.GENERATE_OUTPUTS]
    # Inputs added later (forwards, then top-k and top-p, then the aggregation rule) come
    # last, so API callers' positional order from before they existed still holds.
    inputs = [g["table"], g["prompt"], g["max_new"], g["temperature"], g["seed"], g["mode"],
              g["compare"], g["forwards"], g["top_k"], g["top_p"], g["aggregate"]]
    generate = gpu.on_gpu(handlers.make_generate(preload), gpu.generate_seconds, preload)
    # a click first decides (at once, queued so the page hears of the state it changes): a preset's
    # recorded run when the inputs are its own, else the live run
    g["go"].click(preset_runs.make_route(models), inputs + [g["pace"]],
                  [g["source"], g["replay_go"], g["live_go"]], concurrency_limit=None, show_progress="hidden",
                  api_visibility="undocumented")
    g["live_go"].change(_by_component(generate, g, demo), inputs, outputs, api_name="generate",
                        concurrency_id=GENERATION,  # shared with the Lesson's runs: one limit on generations
                        # the queue position and elapsed time show on the status line only, so a user
                        # waiting behind others sees where they stand without the page greying out
                        show_progress="minimal", show_progress_on=[g["status"]])
    # a replay needs no model, no GPU and no generation slot: it waits for nobody
    g["replay_go"].change(_by_component(preset_runs.make_replay(models), g, demo), inputs + [g["pace"]],
                          outputs, concurrency_limit=None, show_progress="minimal",
                          show_progress_on=[g["status"]],
                          api_name="generate_replay", api_visibility="undocumented")
    g["go"].click(handlers.reproduce_line, inputs, g["reproduce"], queue=False, api_visibility="undocumented")
    serving = [g["temperature"], g["top_k"], g["top_p"]]
    g["profile"].input(handlers.apply_profile, g["profile"], serving, queue=False, api_visibility="undocumented")
    for control in serving:
        control.input(handlers.match_profile, serving, g["profile"], queue=False, api_visibility="undocumented")
    for radio in (g["mode"], g["forwards"]):
        radio.change(handlers.describe_mode, [g["mode"], g["forwards"]], g["mode_info"], queue=False,
                     api_visibility="undocumented")
    g["stop"].click(handlers.stop, None, None, queue=False, api_name="stop")
    g["evidence_provider"].input(handlers.show_evidence, [g["state"], g["evidence_provider"]],
                                 [g["evidence"], g["evidence_note"]], api_visibility="undocumented")
    g["text"].select(handlers.select_token, g["state"], [g["step"], g["dist"], g["info"]],
                     api_visibility="undocumented")
    g["step"].input(handlers.show_step, [g["state"], g["step"]], [g["dist"], g["info"]],
                    trigger_mode="always_last", api_visibility="undocumented")
    g["to_detect"].click(handlers.send_to_detect, [g["plain"], g["table"], g["state"]],
                         [d["text"], d["table"], d["models"], tabs],
                         api_visibility="undocumented")


def _wire_lesson(demo: gr.Blocks, les: dict, g: dict, i: dict, tabs: gr.Tabs, models: list[str],
                 preload: Preload | None) -> None:
    """Each step button sets its card at once, then runs through the Generate (or Identify) handler."""
    runs = []
    for number, button in enumerate(les["steps"], start=1):
        button.click(lesson_ui.make_load(number, models), les["pace"],
                     [les[n] for n in lesson_ui.LOAD_OUTPUTS] + [les["replay_go"][number - 1],
                                                                 les["live_go"][number - 1]],
                     # queued (the page learns of a changed state only from a queued event), never waiting
                     concurrency_limit=None, show_progress="hidden", api_name=f"lesson_load_{number}",
                     api_visibility="undocumented")
        replay, live = les["replay_go"][number - 1].change, les["live_go"][number - 1].change
        run = gpu.on_gpu(lesson_ui.make_run(number, models, preload), lesson_ui.run_seconds(number, models),
                         preload)
        recorded = lesson_ui.make_replay(number, models)
        # a replay needs no model, no GPU and no generation slot: it waits for nobody
        if LESSON_STEPS[number - 1].identify:
            runs.append(replay(recorded, les["pace"], [les[n] for n in lesson_ui.IDENTIFY_OUTPUTS],
                               concurrency_limit=None, show_progress_on=[les["identify_summary"]],
                               api_name=f"lesson_replay_{number}", api_visibility="undocumented"))
            runs.append(live(run, None, [les[n] for n in lesson_ui.IDENTIFY_OUTPUTS],
                             show_progress_on=[les["identify_summary"]], api_name=f"lesson_run_{number}",
                             api_visibility="undocumented"))
        else:
            shown = [les[n] for n in lesson_ui.outputs(number)]
            runs.append(replay(_by_component(recorded, les, demo), les["pace"], shown,
                               concurrency_limit=None, show_progress="minimal", show_progress_on=[les["status"]],
                               api_name=f"lesson_replay_{number}", api_visibility="undocumented"))
            runs.append(live(_by_component(run, les, demo), None, shown,
                             show_progress="minimal", show_progress_on=[les["status"]],
                             concurrency_id=GENERATION, api_name=f"lesson_run_{number}",
                             api_visibility="undocumented"))
    for button in les["steps"]:  # a new step ends the one still running
        button.click(None, None, None, cancels=runs, queue=False, api_visibility="undocumented")
    les["stop"].click(handlers.stop, None, None, queue=False, api_name="lesson_stop", api_visibility="undocumented")
    les["text"].select(lesson_ui.select_token, les["state"], [les["dist"], les["info"]],
                       api_visibility="undocumented")
    les["try"].click(functools.partial(lesson_ui.try_it, models=models), les["number"],
                   [g[n] for n in lesson_ui.TRY_OUTPUTS] + [i["table"], tabs], api_name="lesson_try",
                   api_visibility="undocumented")


def _wire_quiz(q: dict, tab: gr.Tab, models: list[str]) -> None:
    """The quiz reads recordings only (no model, no GPU): every event runs at once, outside the generation slot."""
    load = [q[n] for n in quiz_ui.LOAD_OUTPUTS]
    opened = quiz_ui.make_question(models)
    q["question"].change(opened, q["question"], load, concurrency_limit=None, api_name="quiz_question",
                         api_visibility="undocumented")
    tab.select(opened, q["question"], load, concurrency_limit=None, api_visibility="undocumented")
    q["submit"].click(quiz_ui.make_submit(models), [q["question"], q["picks"]],
                      [q[n] for n in quiz_ui.SUBMIT_OUTPUTS], concurrency_limit=None, api_name="quiz_submit",
                      api_visibility="undocumented")
    q["refresh"].click(quiz_ui.tally_markdown, None, q["tally"], concurrency_limit=None,
                       api_visibility="undocumented")
    q["reset"].click(quiz_ui.reset, q["code"], [q["tally"], q["reset_note"]], concurrency_limit=None,
                     api_name="quiz_reset", api_visibility="undocumented")


def _wire_detect(d: dict, preload: Preload | None) -> None:
    # models comes last so API callers' positional order from before it existed still holds.
    inputs = [d["text"], d["table"], d["threshold"], d["models"], d["statistic"]]
    scored = d["go"].click(gpu.on_gpu(handlers.run_detect, gpu.detect_seconds, preload), inputs,
                           [d["result"], d["provider"], d["tokens"], d["rows"]], api_name="detect")
    # a step of its own (no model), so /detect's outputs stay as they were
    scored.success(handlers.show_tokens_needed, d["rows"], d["tokens_needed"], api_visibility="undocumented")
    d["provider"].input(handlers.choose_detect_provider, [d["rows"], d["provider"]], d["tokens"],
                        api_visibility="undocumented")


def build_demo(preload: Preload | None = None) -> gr.Blocks:
    """The app; ``preload`` is the model loading it reports and waits for (started here if None)."""
    models = app_models()
    if preload is None:
        preload = start_preload(models, echo=_log_preload, forward=not gpu.zero_gpu())
    # delete_cache: hourly, Gradio deletes the download files it copied that are older than ours
    with gr.Blocks(title="WASH: what averaging watermarked LLMs washes out",
                   delete_cache=(3600, tables.KEEP_DOWNLOADS_S)) as demo:
        gr.Markdown("# WASH: averaging watermarked LLMs washes some watermarks out\n"
                    "Several providers, each a model with its own watermark and secret key, are averaged "
                    "token by token. Watch each provider's detector lose its signal, and see which "
                    "watermarks survive and why: keyed point-mass draws fade slowly, and probing the "
                    "model still finds several.")
        with gr.Tabs(selected="generate") as tabs:
            with gr.Tab("Generate", id="generate"):
                g = _generate_tab(models, preload)
            with gr.Tab("Lesson", id="lesson"):
                lesson = _lesson_tab(models)
            with gr.Tab("Quiz", id="quiz") as quiz_tab:
                quiz = _quiz_tab(models)
            with gr.Tab("Detect", id="detect"):
                d = _detect_tab(models)
            with gr.Tab("Identify", id="identify"):
                i = _identify_tab(models)
            with gr.Tab("Results", id="results"):
                r = _results_tab()
            with gr.Tab("Theory", id="theory"):
                t = _theory_tab()
            with gr.Tab("About", id="about"):
                gr.Markdown(texts.about_markdown())
                with gr.Accordion("Schemes, modes and forwards", open=False):
                    gr.Markdown(texts.reference_markdown())
        _wire_generate(demo, g, d, tabs, models, preload)
        _wire_detect(d, preload)
        i["go"].click(gpu.on_gpu(handlers.run_identify, gpu.identify_seconds, preload),
                      [i["table"], i["systems"], i["probe"]],
                      [i["plot"], i["result"], i["summary"]], api_name="identify")
        _wire_lesson(demo, lesson, g, i, tabs, models, preload)
        _wire_quiz(quiz, quiz_tab, models)
        for name in results.SELECTORS:
            r[name].change(handlers.show_results, [r[n] for n in results.SELECTORS],
                           [r[n] for n in results.OUTPUTS], queue=False, api_visibility="undocumented")
        page_status, api_status = handlers.make_model_status(preload)
        g["timer"].tick(page_status, None, [g["models"], g["timer"]], queue=False,
                        api_visibility="undocumented")
        demo.load(page_status, None, [g["models"], g["timer"]], queue=False, api_visibility="undocumented")
        gr.api(api_status, api_name="status", queue=False)
        theory_inputs = [t["vocab"], t["xi"], t["max_n"], t["trials"], t["kinds"]]
        t["go"].click(handlers.run_theory, theory_inputs, [t["plot"], t["summary"]], api_name="theory")
        demo.load(handlers.run_theory, theory_inputs, [t["plot"], t["summary"]],
                  api_visibility="undocumented")
    # bounded: past a class's worth of waiting requests Gradio answers "queue is full" at once
    demo.queue(default_concurrency_limit=concurrency_limit(), max_size=queue_size())
    return demo


def _log_preload(message: str) -> None:
    print(f"[models] {message}", flush=True)


def main() -> None:
    limit_malloc_arenas()  # opt-in, before any thread allocates (wash/ui/settings.py says why)
    preload = start_preload(app_models(), echo=_log_preload, start=False,
                            forward=not gpu.zero_gpu())
    demo = build_demo(preload)
    # Loading starts as soon as the server answers, not before: ``launch`` checks that localhost
    # answers with one HEAD request of at most 3 s (gradio.networking.url_ok) and, if not, stops
    # with "When localhost is not accessible, a shareable link must be created". A model load
    # running in this process meanwhile (GIL-bound weight loading, torch threads on every core)
    # held that request past 3 s on a busy machine. The server starts in a second or two, so the
    # first click still finds the models loading or ready.
    demo.launch(server_name=env.server_name(), server_port=env.server_port(), css=CSS,
                ssr_mode=False, show_error=True, state_session_capacity=sessions.SESSION_CAPACITY,
                prevent_thread_lock=True)
    preload.start()
    demo.block_thread()


if __name__ == "__main__":
    main()
