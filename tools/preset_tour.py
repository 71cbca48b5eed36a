"""Click every preset in a real browser, over several seeds, and record the z the page shows.

    python -m tools.preset_tour --seeds 0,1,2 --out results/presets-browser

The page's preset descriptions quote ``experiment presets``, which runs the same
line-ups through the engine. This script checks that claim the way a newcomer
would meet it: it starts ``app.py``, opens the page in Debian's headless Chromium
(Playwright, ``/usr/bin/chromium``), and for each preset and seed clicks the
preset, sets the seed, switches the comparison to "provider 1 alone" (WASH
presets), clicks Generate, waits for "Done" and reads the final detection table
off the page. It writes ``tour_runs.csv`` (one row per run and provider) and
``tour_summary.csv`` (the z range per preset, run and provider), and, when
``results/presets/presets_runs.csv`` holds the same seeds, the largest difference
between the page's z and the engine run's (the page rounds z to 3 decimals).

A script, not a test: on the real models it takes about 20 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from wash.core.provenance import command_line, cpu_description, load_average
from tools.latency import ROOT, app_env, free_port, stop_app

CHROMIUM = "/usr/bin/chromium"
#: The run names the detection table uses for the comparison run and the engine CSV's conditions.
CONDITIONS = {"single (P1 alone)": "alone"}
ENGINE_RUNS = ROOT / "results" / "presets" / "presets_runs.csv"

#: gr.Dataframe renders its rows as a virtualised grid of divs (the only <table> is a hidden sizing copy).
_ROWS_JS = """() => Array.from(document.querySelectorAll('#detection-table .virtual-row'))
  .map(row => Array.from(row.querySelectorAll('[role=gridcell]')).map(cell => cell.innerText.trim()))
  .filter(cells => cells.length > 1)"""
_HEAD_JS = """() => Array.from(document.querySelectorAll('#detection-table table thead th'))
  .map(th => th.innerText.trim())"""


def start_app(log: Path, port: int = 0) -> tuple[subprocess.Popen, str]:
    """``app.py`` on ``port`` (0: any free one), its output in ``log``; the process and its URL."""
    port = port or free_port()
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=app_env(port), stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}"


def open_page(browser, url: str, deadline: float, viewport: dict | None = None):
    """A page on the app once it answers (retried until ``deadline``, a ``time.monotonic()`` value)."""
    while True:
        page = browser.new_page(viewport=viewport or {"width": 1400, "height": 1800})
        try:
            page.goto(url, wait_until="load")
            page.wait_for_selector("#generate-btn", timeout=30_000)
            return page
        except Exception:  # noqa: BLE001 - the server is not answering yet
            page.close()  # one renderer per try otherwise, all of them left running
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def detection_rows(page) -> list[dict]:
    """The final detection table as the page shows it."""
    head = page.evaluate(_HEAD_JS)
    rows = page.evaluate(_ROWS_JS)
    if not rows or any(len(cells) != len(head) for cells in rows):
        raise RuntimeError(f"cannot read the detection table: header {head}, rows {rows}")
    return [dict(zip(head, cells)) for cells in rows]


def set_number(page, elem_id: str, value: int) -> None:
    """Type ``value`` into the number box of Gradio component ``elem_id`` (a Number or a Slider)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def apply_preset(page, index: int, timeout_ms: int = 60_000) -> None:
    """Click preset ``index`` on the Generate tab and return once the page shows its answer.

    Why not a fixed wait: the answer sets the table, mode, rule and length at once, and on a busy
    machine it can land after a value set just after the click and undo it (a 6-token test run
    then generated the preset's 200 tokens), or after a click on Generate, which then runs the
    table that was there before. The length box is first set to a value no preset sets, so
    seeing the presets' length there means the answer is in."""
    from wash.content.presets import DEMO_TOKENS

    set_number(page, "max-new-tokens", DEMO_TOKENS - 1)
    page.click(f"#preset-{index}")
    page.wait_for_function("(v) => document.querySelector('#max-new-tokens input[type=number]').value === v",
                           arg=str(DEMO_TOKENS), timeout=timeout_ms)


def run_preset(page, index: int, seed: int, timeout_s: float) -> tuple[list[dict], str, float]:
    apply_preset(page, index, int(timeout_s * 1000))
    set_number(page, "seed", seed)
    page.locator("#compare input[value=single]").check()
    before = page.locator("#status").inner_text().strip()
    started = time.monotonic()
    page.click("#generate-btn")
    # finished: the status line says Done or Stopped and is not the previous run's line
    page.wait_for_function("(before) => { const s = document.querySelector('#status');"
                           " const t = s ? s.innerText.trim() : '';"
                           " return /^(Done|Stopped)/.test(t) && t !== before; }", arg=before,
                           timeout=timeout_s * 1000)
    status = page.locator("#status").inner_text().strip()
    return detection_rows(page), status, time.monotonic() - started


def compare_with_engine(runs: pd.DataFrame, path: Path = ENGINE_RUNS) -> dict | None:
    """Largest |z_page - z_engine| over the (preset, seed, condition, provider, model) both hold."""
    if not path.exists():
        return None
    engine = pd.read_csv(path, usecols=["preset", "condition", "seed", "provider", "provider_model", "z"])
    engine = engine.rename(columns={"provider_model": "model"})
    # the model column keeps a tour on the tiny models from being compared with real-model rows
    merged = runs.merge(engine, on=["preset", "condition", "seed", "provider", "model"],
                        suffixes=("_page", "_engine"))
    if merged.empty:
        return {"matched": 0}
    diff = (merged["z_page"] - merged["z_engine"]).abs()
    return {"matched": int(len(merged)), "of": int(len(runs)), "max_abs_diff": float(diff.max()),
            "worst": merged.loc[diff.idxmax(), ["preset", "seed", "condition", "provider"]].to_dict()}


def tour(args: argparse.Namespace) -> dict:
    from playwright.sync_api import sync_playwright

    from wash.content.presets import preset_names
    from wash.ui.settings import app_models

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = preset_names(app_models())  # the app's buttons: the presets its models can run
    chosen = [int(i) for i in args.presets.split(",")] if args.presets else list(range(len(names)))
    seeds = [int(s) for s in args.seeds.split(",")]
    log = Path(tempfile.mkstemp(prefix="wash-tour-app-", suffix=".log")[1])
    print(f"the app's log: {log}", file=sys.stderr)  # scratch: not part of the meta
    proc, url = start_app(log)
    records, runs_meta = [], []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-dev-shm-usage"])
            page = open_page(browser, url, time.monotonic() + args.timeout)
            page.set_default_timeout(60_000)
            page.wait_for_function("() => /Models ready in/.test(document.querySelector('#model-status')"
                                   ".innerText)", timeout=args.timeout * 1000)
            for index in chosen:
                for seed in seeds:
                    rows, status, seconds = run_preset(page, index, seed, args.timeout)
                    runs_meta.append({"preset": names[index], "seed": seed, "status": status,
                                      "seconds": round(seconds, 1)})
                    print(f"{names[index]} seed {seed}: {status.splitlines()[0]} ({seconds:.0f} s)", flush=True)
                    for row in rows:
                        run = row.get("run", "")
                        provider = int(row["provider"].split()[0].lstrip("P")) - 1
                        records.append({"preset": names[index], "seed": seed,
                                        "condition": CONDITIONS.get(run, "preset"), "run": run,
                                        "provider": provider, "label": row["provider"], "model": row["model"],
                                        "scheme": row["scheme"], "z": float(row["z"]),
                                        "tokens_scored": int(row["tokens scored"])})
            browser.close()
    finally:
        stop_app(proc)
    runs = pd.DataFrame.from_records(records)
    runs.to_csv(out / "tour_runs.csv", index=False)
    summary = (runs.groupby(["preset", "condition", "provider", "scheme"], sort=False)["z"]
               .agg(["count", "min", "max", "mean"]).reset_index())
    summary.to_csv(out / "tour_summary.csv", index=False)
    meta = {
        "command": command_line(["python", "-m", "tools.preset_tour", *sys.argv[1:]]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "env": {k: os.environ[k] for k in ("WASH_APP_MODELS",) if k in os.environ},
        "browser": CHROMIUM, "seeds": seeds, "runs": runs_meta,
        "engine_comparison": compare_with_engine(runs),
        "machine": cpu_description(), "load_average": load_average(),
    }
    (out / "tour_meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False))
    return meta


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.preset_tour", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--presets", default="", help="comma-separated preset indices (default: all)")
    parser.add_argument("--out", default="runs/presets-browser", help="output folder")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per run and for start-up")
    args = parser.parse_args(argv)
    meta = tour(args)
    print(json.dumps({k: meta[k] for k in ("date", "engine_comparison")}, indent=1))
    print(pd.read_csv(Path(args.out) / "tour_summary.csv").to_string(index=False))


if __name__ == "__main__":
    main()
