"""Time each Lesson step from its click to "Done" in a real browser, and measure its z over several seeds.

    python -m tools.lesson_time --out docs/bench-lesson.json    # the real models: 13 minutes on 2 shared cores
    python -m tools.lesson_time --append --rounds 1 --seeds ""         # one more timing round, same file
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.lesson_time --seeds 0 --out runs/lesson-tiny.json

It starts ``app.py`` on a free localhost port, opens the page in Debian's headless
Chromium (Playwright, ``/usr/bin/chromium``), waits for "Models ready", opens the
Lesson tab and, in each round, clicks the steps in order: the seconds from a step's
click to its status line saying Done (the step's card with its question checked on
the way, and its "what to look for", shown once the run is done) are the step's
time. ``uptime`` is recorded before and after
each round: the machine may be shared. Then it runs every generation step over
``--seeds`` through the app's ``/generate`` API with the step's own inputs
(``wash.ui.lesson.generate_inputs``, the seed changed) and records each provider's
final z (provider 1 alone's as ``P1 kgw alone``, each detector's on the unwatermarked
text beside it as ``P1 kgw unwatermarked``), and the identification step's verdicts
through ``/identify``: the numbers
``wash.content.lesson.measured`` quotes on the page. A round's ``date`` is when its run wrote the file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.latency import ROOT, app_env, free_port, stop_app, wait_ready
from tools.preset_tour import CHROMIUM, open_page
from wash.core.provenance import cpuinfo, uptime_line

#: Chromium's flags here (the internet is closed: no background networking).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]
_STATUS = "document.querySelector('#lesson-status')"
_CARD = "document.querySelector('#lesson-card')"
_LOOK_FOR = "document.querySelector('#lesson-look-for')"


def open_lesson(page) -> None:
    page.get_by_role("tab", name="Lesson").click()
    page.wait_for_selector("#lesson-step-1")


def click_step(page, number: int, timeout_s: float) -> tuple[float, str]:
    """Click step ``number``; the seconds until its status line says Done, and that line.

    The step's card (its question, to predict) and a fresh status line land together,
    before its run starts, so the Done waited for is this step's, not the previous one's.
    Its "what to look for" lands with Done: checked then, and to be absent from the card."""
    from wash.content.lesson import STEPS

    step = STEPS[number - 1]
    started = time.perf_counter()
    page.click(f"#lesson-step-{number}")
    page.wait_for_function(f"(n) => {_CARD}.innerText.includes('Step ' + n + ' of')", arg=number,
                           timeout=timeout_s * 1000)
    page.wait_for_function(f"() => /^(Done|Stopped)/.test({_STATUS}.innerText.trim())", timeout=timeout_s * 1000)
    seconds = time.perf_counter() - started
    card = " ".join(page.locator("#lesson-card").inner_text().split())
    if step.question[:60] not in card or step.look_for[:60] in card:
        raise RuntimeError(f"step {number}'s card lacks its question or gives the outcome away: "
                           f"{card[:300]!r}")
    status = page.locator("#lesson-status").inner_text().strip()
    if status.startswith("Done"):
        try:  # the same update as Done: a moment for the page to draw it
            page.wait_for_function(f"(t) => {_LOOK_FOR}.innerText.replace(/\\s+/g, ' ').includes(t)",
                                   arg=step.look_for[:60], timeout=10_000)
        except Exception as err:  # noqa: BLE001 - said as the script's own error, with what the page shows
            shown = page.locator("#lesson-look-for").inner_text()
            raise RuntimeError(f"step {number} is done without 'what to look for': {shown[:300]!r}") from err
    return seconds, status


def walk(page, timeout_s: float, numbers: list[int] | None = None) -> list[dict]:
    """Every step (or ``numbers``) in order, as a class would click them: seconds and final status each."""
    from wash.content.lesson import STEPS

    out = []
    for number in numbers or range(1, len(STEPS) + 1):
        seconds, status = click_step(page, number, timeout_s)
        out.append({"step": number, "seconds": round(seconds, 2), "status": status.splitlines()[0]})
        print(f"step {number}: {seconds:.1f} s ({status.splitlines()[0]})", flush=True)
    return out


def _short(label: str) -> str:
    """``P1 smollm2/kgw#101`` -> ``P1 kgw``: the page's z ranges name provider and scheme only."""
    number, rest = label.split(" ", 1)
    return f"{number} {rest.split('/', 1)[-1].split('#', 1)[0]}"


def z_over_seeds(client, number: int, models: list[str], seeds: list[int]) -> tuple[dict[str, list[float]], list]:
    """Each provider's final z (and each comparison run's) for every seed, through ``/generate``; seconds
    per run."""
    from wash.content.lesson import ALONE, STEPS, UNMARKED, UNMARKED_LINE
    from wash.ui.handlers import GENERATE_OUTPUTS
    from wash.ui.lesson import generate_inputs
    from wash.ui.providers import HEADERS

    inputs = list(generate_inputs(STEPS[number - 1], models))
    inputs[0] = {"headers": HEADERS, "data": inputs[0], "metadata": None}
    z: dict[str, list[float]] = {}
    seconds = []
    for seed in seeds:
        inputs[4] = seed
        started = time.perf_counter()
        answer = client.predict(*inputs, api_name="/generate")
        seconds.append(round(time.perf_counter() - started, 2))
        frame = answer[GENERATE_OUTPUTS.index("detection")]
        column = {name: i for i, name in enumerate(frame["headers"])}
        for row in frame["data"]:
            run = row[column["run"]]
            suffix = "" if run == inputs[5] else UNMARKED_LINE if run == UNMARKED else ALONE
            label = _short(row[column["provider"]]) + suffix
            z.setdefault(label, []).append(float(row[column["z"]]))
    return z, seconds


def identify_verdicts(client, number: int, models: list[str]) -> dict[str, str]:
    """The identification step's answer through ``/identify``: each system's verdict, p and Water-Probe z."""
    from wash.content.lesson import IDENTIFY_SYSTEMS, STEPS
    from wash.ui.lesson import PROBE, table
    from wash.ui.providers import HEADERS

    rows = {"headers": HEADERS, "data": table(STEPS[number - 1], models), "metadata": None}
    _plot, frame, _summary = client.predict(rows, list(IDENTIFY_SYSTEMS), PROBE, api_name="/identify")
    column = {name: i for i, name in enumerate(frame["headers"])}
    return {row[column["system"]]: f"{row[column['verdict']]} (p {row[column['p']]}, Water-Probe z "
                                   f"{row[column['Water-Probe z (band)']]})" for row in frame["data"]}


def measure(args: argparse.Namespace) -> dict:
    from tools.app_client import app_client
    from playwright.sync_api import sync_playwright

    from wash.content.lesson import STEPS
    from wash.ui.settings import app_models

    models = app_models()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    proc, url = None, args.url
    if not url:
        log = Path(tempfile.mkstemp(prefix="wash-lesson-app-", suffix=".log")[1])
        port = args.port or free_port()
        url = f"http://127.0.0.1:{port}"
        with open(log, "w") as log_file:
            proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=app_env(port), stdout=log_file,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    rounds, z, api_s, verdicts = [], {}, {}, {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = open_page(browser, url, time.monotonic() + args.timeout)
            page.set_default_timeout(60_000)
            page.wait_for_function("() => /Models ready in/.test(document.querySelector('#model-status')"
                                   ".innerText)", timeout=args.timeout * 1000)
            open_lesson(page)
            for _ in range(args.rounds):
                before = uptime_line()
                steps = walk(page, args.step_timeout, [int(n) for n in args.steps.split(",") if n.strip()])
                rounds.append({"uptime_before": before, "uptime_after": uptime_line(), "steps": steps})
            browser.close()
        client = app_client(url)
        wait_ready(client, time.monotonic() + args.timeout)
        for number, step in enumerate(STEPS, start=1):
            if step.identify:
                verdicts[number] = identify_verdicts(client, number, models)
            elif seeds:
                z[number], api_s[number] = z_over_seeds(client, number, models, seeds)
                print(f"step {number} z: {z[number]}", flush=True)
    finally:
        if proc is not None:
            stop_app(proc)
    return {"rounds": rounds, "z": z, "api_s": api_s, "verdicts": verdicts, "seeds": seeds, "models": models}


def report(args: argparse.Namespace, measured: dict, previous: dict | None, argv: list[str]) -> dict:
    """The JSON written: settings, machine, every round's times and uptime, each step's numbers; the
    command is ``argv``'s."""
    from wash.content.lesson import CLICK_BUDGET_S, STEPS
    from wash.ui.texts import example_prompts

    rounds = (previous or {}).get("rounds", []) + [
        dict(r, date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")) for r in measured["rounds"]]
    old = {e["step"]: e for e in (previous or {}).get("steps", [])}
    steps = []
    for number, step in enumerate(STEPS, start=1):
        entry = {"step": number, "title": step.title, "kind": step.kind, "tokens": step.tokens, "seed": step.seed,
                 "compare": step.compare,
                 "click_s": [s["seconds"] for r in rounds for s in r["steps"] if s["step"] == number]}
        if number in measured["z"]:
            entry.update(seeds=measured["seeds"], z=measured["z"][number], api_s=measured["api_s"][number])
        elif number in measured["verdicts"]:
            entry["identify"] = measured["verdicts"][number]
        else:  # an appended timing round keeps the numbers measured before
            entry.update({k: v for k, v in old.get(number, {}).items() if k in ("seeds", "z", "api_s", "identify")})
        steps.append(entry)
    models = measured["models"]
    run = {"command": command(argv), "env": {k: os.environ[k] for k in ("WASH_APP_MODELS",) if k in os.environ},
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "rounds": len(measured["rounds"]),
           "seeds": measured["seeds"], "machine": f"{cpuinfo('model name') or 'unknown CPU'}, {os.cpu_count()} cores"}
    return {
        "runs": (previous or {}).get("runs", []) + [run],
        "machine": f"{cpuinfo('model name') or 'unknown CPU'}, {os.cpu_count()} cores",
        "models": models,
        "models_text": " + ".join(dict.fromkeys(models)),
        "prompt": example_prompts(1)[0],
        "budget_s": CLICK_BUDGET_S,
        "rounds": rounds,
        "steps": steps,
    }


def command(argv: list[str]) -> str:
    """This run's command line, without ``--port`` (which changes nothing measured)."""
    args = list(argv)
    if "--port" in args:
        at = args.index("--port")
        del args[at:at + 2]
    return shlex.join(["python", "-m", "tools.lesson_time", *args])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.lesson_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/bench-lesson.json", help="JSON written (relative to the repo root)")
    parser.add_argument("--rounds", type=int, default=2, help="walks through every step, timed (default 2)")
    parser.add_argument("--steps", default="",
                        help="the steps a round walks, e.g. 1,4 (default: every step; a quick check of the script)")
    parser.add_argument("--seeds", default="0,1,2,3,4",
                        help="seeds each generation step runs over through /generate (empty: none)")
    parser.add_argument("--append", action="store_true",
                        help="add the rounds to --out's, keeping its numbers where this run measures none")
    parser.add_argument("--port", type=int, default=0, help="the app's port (default: a free one)")
    parser.add_argument("--url", default="",
                        help="time an app already running there instead of starting one (it must serve the "
                             "models $WASH_APP_MODELS names)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed for start-up")
    parser.add_argument("--step-timeout", type=float, default=300.0, help="seconds allowed for one step")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    previous = json.loads(out.read_text()) if args.append and out.exists() else None
    data = report(args, measure(args), previous, argv)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({s["step"]: s["click_s"] for s in data["steps"]}))


if __name__ == "__main__":
    main()
