"""Take the README's screenshot and one per tab from the real app, so that none can go stale.

    python -m tools.screenshots                                   # real models: writes into the repository
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.screenshots --out-dir out/shots   # quick check

It starts ``app.py`` (the models of ``--models``, else of ``WASH_APP_MODELS``, else the
app's default: the real offline models), opens the page in Debian's headless Chromium
(Playwright, ``/usr/bin/chromium``), waits for "Models ready", and then:

1. on the Generate tab, clicks a preset (``--preset``, default the paper setting: two model
   families, whose tokenizers differ, so the text can have routed spans), sets the prompt,
   length, seed and serving profile, turns the comparison to "provider 1 alone" (so the z
   chart has the single-model trace and its z / N), clicks Generate, waits for "Done" and
   clicks the first routed token (its distribution and origin). The default prompt and
   seed were chosen because their 64 tokens hold routed spans on the real models: in
   English the two tokenizers agree on most words, and most runs route none or one
   (docs/SCREENSHOTS.md).
   It writes the README's screenshot (``assets/screenshot.png``: the run's output, from
   the status line to the detection table) and ``docs/figures/tab-generate.png``
   (the whole tab), then sends the text to Detect;
2. enumerates the page's top-level tabs (``role=tab`` in the first tab list), so a tab
   added later gets its picture without a change here, and for each one clicks it, runs
   its representative action if it has one (Lesson: run step 4; Detect: score the generated text; Identify:
   probe every system with the fast probe; Theory: the simulation the page runs at
   load), waits until nothing is pending and every figure is drawn, and writes
   ``docs/figures/tab-<label>.png`` (the whole tab).

Inputs are fixed (preset, prompt, seed, length, profile), so a re-run after a UI change
shows the same run. Images wider or heavier than needed bloat the repository: the
viewport is 1280 wide, and a PNG over ``--max-kb`` is re-saved with a 256-colour
palette. It prints one JSON object (files, sizes, the run's status lines, seconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Callable

from tools.latency import ROOT, stop_app
from tools.preset_tour import CHROMIUM, apply_preset, open_page, set_number, start_app

#: Without the background-networking flags Chromium keeps trying to reach the (closed) internet.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
#: Where the pictures go, relative to ``--out-dir`` (the repository root by default).
README_SHOT = Path("assets") / "screenshot.png"
FIGURES = Path("docs") / "figures"
GENERATE_TAB = "Generate"

#: Every plotly figure in the visible tab drawn, and nothing pending (Gradio's progress overlays).
_SETTLED_JS = """() => {
  const panel = Array.from(document.querySelectorAll('[role=tabpanel]')).find(p => p.offsetParent !== null);
  if (!panel) return false;
  if (panel.querySelector('.pending, .progress-text, .eta-bar, .meta-text-center')) return false;
  return Array.from(panel.querySelectorAll('.js-plotly-plot'))
    .every(gd => gd.data && gd.querySelector('svg.main-svg'));
}"""
_FINISHED_JS = """(before) => { const s = document.querySelector('#status');
  const t = s ? s.innerText.trim() : ''; return /^(Done|Stopped)/.test(t) && t !== before; }"""
_PLOT_DRAWN_JS = """([id, count]) => { const gd = document.querySelector('#' + id + ' .js-plotly-plot');
  return !!gd && !!gd.data && gd.data.length >= count && !!gd.querySelector('svg.main-svg'); }"""


def tab_filename(label: str) -> str:
    """``tab-<label>.png``: the label in ASCII (accents dropped), lower-cased, other runs one hyphen."""
    ascii_label = unicodedata.normalize("NFKD", label).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_label.lower()).strip("-")
    if not slug:
        raise ValueError(f"tab label {label!r} has no letter or digit to name a file by")
    return f"tab-{slug}.png"


def tab_files(labels: list[str]) -> dict[str, str]:
    """Each tab's file name; two tabs that would share one are refused, not overwritten."""
    names = {label: tab_filename(label) for label in labels}
    if len(set(names.values())) < len(labels):
        raise ValueError(f"tabs {labels} do not give distinct file names: {sorted(names.values())}")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.screenshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT,
                        help=f"root the pictures go under: {README_SHOT} and {FIGURES}/tab-*.png "
                             "(default: the repository)")
    parser.add_argument("--models", default="",
                        help="comma-separated models the app offers "
                             "(default: $WASH_APP_MODELS, else the app's)")
    parser.add_argument("--preset", type=int, default=0,
                        help="index of the preset to run (default 0: the paper setting, two model families)")
    parser.add_argument("--prompt", type=int, default=1,
                        help="index of the page's example prompt to run (default 1: the tenancy agreement; "
                             "0 is the one the page opens with)")
    parser.add_argument("--seed", type=int, default=2, help="seed of the run (default 2)")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens of the run (default 64)")
    parser.add_argument("--profile", choices=("open", "paper"), default="open", help="serving profile")
    parser.add_argument("--probe", choices=("fast", "standard"), default="fast",
                        help="the Identify tab's probe (default fast)")
    parser.add_argument("--skip", action="append", default=[], metavar="TAB",
                        help="a tab pictured as it opens, without its action (repeatable; e.g. Identify, "
                             "whose probe takes about a minute on 2 cores)")
    parser.add_argument("--width", type=int, default=1280, help="viewport width in pixels (default 1280)")
    parser.add_argument("--max-kb", type=int, default=400,
                        help="a PNG heavier than this is re-saved with a 256-colour palette (default 400)")
    parser.add_argument("--port", type=int, default=0, help="port of the app (default: any free one)")
    parser.add_argument("--url", default="",
                        help="picture an app already running there instead of starting one (its models are "
                             "its own: --models and --port are then unused)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds allowed for the start-up and for each action (default 900)")
    args = parser.parse_args(argv)
    if args.tokens < 1 or args.prompt < 0 or args.preset < 0:
        parser.error("--tokens must be at least 1, --prompt and --preset at least 0")
    return args


def top_level_tabs(page) -> list[str]:
    """The labels of the page's top-level tabs, in page order (the first tab list holds them)."""
    more = page.locator("button[aria-label='More tabs']")
    if more.count() and more.first.is_visible():
        raise RuntimeError("some tabs sit in the overflow menu at this width: raise --width")
    labels = [t.strip() for t in page.locator("[role=tablist]").first.get_by_role("tab").all_inner_texts()]
    if GENERATE_TAB not in labels:
        raise RuntimeError(f"no {GENERATE_TAB} tab among {labels}")
    return labels


def save_png(page, path: Path, max_kb: int, **screenshot) -> dict:
    """The whole page (or ``clip`` of it) to ``path``, re-saved with a palette when over ``max_kb``."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)  # no hover highlight in the picture
    page.screenshot(path=str(path), full_page=True, **screenshot)
    palette = path.stat().st_size > max_kb * 1024
    with Image.open(path) as image:
        size = image.size
        if palette:
            image.convert("RGB").quantize(256).save(path, optimize=True)
    return {"kb": round(path.stat().st_size / 1024), "pixels": list(size), "palette": palette}


def settle(page, timeout_s: float) -> None:
    page.wait_for_function(_SETTLED_JS, timeout=timeout_s * 1000)
    page.wait_for_timeout(600)  # plotly's transitions and Gradio's fade-ins end before the picture


def run_generate(page, args: argparse.Namespace) -> dict:
    """Generate: preset, prompt, length, seed, profile and comparison set, Generate, a token clicked."""
    from wash.ui.texts import example_prompts

    apply_preset(page, args.preset, args.timeout * 1000)  # its table, mode and length land before ours are set
    prompts = example_prompts(args.prompt + 1)
    if args.prompt >= len(prompts):
        raise RuntimeError(f"--prompt {args.prompt}: the page offers {len(prompts)} example prompts")
    page.locator("#prompt textarea").fill(prompts[args.prompt])
    for elem_id, value in (("max-new-tokens", args.tokens), ("seed", args.seed)):
        set_number(page, elem_id, value)
    page.locator(f"#profile input[value={args.profile}]").check()
    page.locator("#compare input[value=single]").check()
    page.wait_for_timeout(300)
    before = page.locator("#status").inner_text().strip()
    started = time.monotonic()
    page.click("#generate-btn")
    page.wait_for_function(_FINISHED_JS, arg=before, timeout=args.timeout * 1000)
    seconds = time.monotonic() - started
    status = page.locator("#status").inner_text().strip()
    if not status.startswith("Done"):
        raise RuntimeError(f"the run did not finish: {status}")
    # the first routed token's distribution (Gradio marks a labelled segment "highlighted"), else mid-text's
    routed, tokens = page.locator("#wash-text .token.highlighted"), page.locator("#wash-text .token")
    (routed.first if routed.count() else tokens.nth(tokens.count() // 2)).click()
    page.wait_for_function("() => /Token \\d+/.test(document.querySelector('#token-info').innerText)")
    page.wait_for_function(_PLOT_DRAWN_JS, arg=["z-plot", 1])
    return {"status": status.splitlines()[0], "routing": page.locator("#routing").inner_text().strip(),
            "seconds": round(seconds, 1)}


def readme_clip(page) -> dict:
    """The run's output: from the status line to the bottom of the detection table, the page's width."""
    top, bottom = page.evaluate("""() => ['#status', '#detection-table'].map(sel => {
      const r = document.querySelector(sel).getBoundingClientRect();
      return [r.top + window.scrollY, r.bottom + window.scrollY]; })""")
    return {"x": 0, "y": max(top[0] - 12, 0), "width": page.viewport_size["width"],
            "height": bottom[1] - top[0] + 24}


def score_in_detect(page, args: argparse.Namespace) -> None:
    """Detect: score the generated text (sent from Generate) with the run's providers."""
    if not page.locator("#detect-text textarea").input_value().strip():
        raise RuntimeError("the Detect tab has no text: the Generate run did not send it")
    page.click("#detect-btn")
    page.wait_for_function("() => /P1 /.test(document.querySelector('#detect-table').innerText)"
                           " && document.querySelectorAll('#detect-tokens .token').length > 0",
                           timeout=args.timeout * 1000)


def probe_in_identify(page, args: argparse.Namespace) -> None:
    """Identify: every system with the chosen probe, until each has a verdict and the figure is drawn."""
    page.locator(f"#identify-probe input[value={args.probe}]").check()
    page.click("#identify-btn")
    page.wait_for_function("() => { const t = document.querySelector('#identify-summary').innerText;"
                           " return /(watermarked|no evidence)/.test(t) && !/probing/.test(t); }",
                           timeout=args.timeout * 1000)
    page.wait_for_function("() => { const gd = document.querySelector('#identify-plot .js-plotly-plot');"
                           " return gd && gd.data && gd.data.some(t => t.type === 'bar'); }",
                           timeout=args.timeout * 1000)


def theory_drawn(page, args: argparse.Namespace) -> None:
    """Theory: the simulation the page runs at load (its default settings), drawn."""
    page.wait_for_function(_PLOT_DRAWN_JS, arg=["theory-plot", 2], timeout=args.timeout * 1000)


def lesson_step(page, args: argparse.Namespace) -> None:
    """Lesson: step 4 (the survivor), run until its status says Done and its z chart is drawn."""
    page.click("#lesson-step-4")
    page.wait_for_function("() => /^Done/.test(document.querySelector('#lesson-status').innerText.trim())",
                           timeout=args.timeout * 1000)
    page.wait_for_function(_PLOT_DRAWN_JS, arg=["lesson-z-plot", 2], timeout=args.timeout * 1000)


#: A tab's representative action, by label; a tab not named here is pictured as it opens.
ACTIONS: dict[str, Callable] = {"Lesson": lesson_step, "Detect": score_in_detect, "Identify": probe_in_identify,
                                "Theory": theory_drawn}


def take(args: argparse.Namespace, argv: list[str]) -> dict:
    """Every picture, from the app at ``args.url`` or one started here; the report records ``argv``."""
    from playwright.sync_api import sync_playwright

    if args.models:
        os.environ["WASH_APP_MODELS"] = args.models  # the app's environment (tools.latency.app_env) copies it
    started = time.monotonic()
    proc, url, log_name = None, args.url, None
    if not url:
        fd, log_name = tempfile.mkstemp(prefix="wash-screenshots-app-", suffix=".log")
        os.close(fd)
        proc, url = start_app(Path(log_name), args.port)
    files, seconds = {}, {}

    def shoot(page, name: Path, **screenshot) -> None:
        files[name.as_posix()] = save_png(page, args.out_dir / name, args.max_kb, **screenshot)

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = open_page(browser, url, started + args.timeout,
                             viewport={"width": args.width, "height": 900})
            page.set_default_timeout(60_000)
            page.wait_for_function("() => /Models ready in/.test(document.querySelector('#model-status')"
                                   ".innerText)", timeout=args.timeout * 1000)
            seconds["ready"] = round(time.monotonic() - started, 1)
            labels = top_level_tabs(page)
            names = tab_files(labels)
            run = run_generate(page, args)
            settle(page, args.timeout)
            shoot(page, README_SHOT, clip=readme_clip(page))
            shoot(page, FIGURES / names[GENERATE_TAB])
            page.click("#send-to-detect")
            page.wait_for_selector("#detect-btn", state="visible")
            for label in labels:
                if label == GENERATE_TAB:
                    continue
                tab_started = time.monotonic()
                page.locator("[role=tablist]").first.get_by_role("tab", name=label, exact=True).click()
                if label in ACTIONS and label not in args.skip:
                    ACTIONS[label](page, args)
                settle(page, args.timeout)
                shoot(page, FIGURES / names[label])
                seconds[label] = round(time.monotonic() - tab_started, 1)
            browser.close()
    finally:
        if proc is not None:
            stop_app(proc)
    return {
        "command": shlex.join([Path(sys.executable).name, "-m", "tools.screenshots", *argv]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "models": os.environ.get("WASH_APP_MODELS", "(the app's default)"),
        "tabs": labels, "files": files, "generate": run, "seconds": seconds,
        "load_average": list(os.getloadavg()), "app_log": log_name,
    }


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    print(json.dumps(take(parse_args(argv), argv), indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
