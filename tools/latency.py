"""Measure the app's start-up and click-to-first-token latency (a script, not a test).

    python -m tools.latency                     # the real models, the user's model cache
    python -m tools.latency --fresh             # an empty WASH_CACHE_DIR: a first-ever start
    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.latency --repeats 3   # quick check
    python -m tools.latency --repeats 0 --identify 3   # the Identify tab's "fast" probe, 3 times

It starts ``app.py`` in a subprocess on a free localhost port, polls the app's
``/status`` API endpoint until the model preload reports ready (``start_to_ready_s`` is
measured from the process start; every answer is kept in ``status_polls``), then times
``/generate`` for the default preset (the page's defaults: paper preset, first example
prompt, seed 0) through ``gradio_client``: the seconds from the submit to the first
streamed update whose text holds a token (``click_to_first_token_s``), several times. It
prints one JSON object and stops the app. With ``--identify K`` it also times
``/identify`` K times (the Identify tab as it opens: the default preset's providers, all
three systems, the ``fast`` probe), from the submit to the answer. Numbers depend on the
machine and its load.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from wash.core.provenance import command_line, cpu_description, load_average, portable_text

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _client(url: str, deadline: float, proc: subprocess.Popen, log: Path):
    """A gradio_client.Client once the server answers (the models may still be loading)."""
    from tools.app_client import app_client

    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"app exited with {proc.returncode}:\n{_tail(log)}")
        try:
            return app_client(url)
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"app not answering on {url}:\n{_tail(log)}") from None
            time.sleep(0.25)


def _tail(log: Path, n: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def wait_ready(client, deadline: float, poll_s: float = 0.25, answers: list | None = None) -> dict:
    """Poll ``/status`` until the preload has ended; its last answer (each answer is also appended
    to ``answers`` when given).

    A poll the app does not answer within the client's timeout (5 s) is sent again until
    ``deadline``: a process loading its models on a busy machine can be that slow to answer
    (the soak script's test, in a fresh-clone CI run on 2026-11-28)."""
    import httpx

    while True:
        try:
            status = client.predict(api_name="/status")
        except httpx.TimeoutException:
            if time.monotonic() > deadline:
                raise
            continue
        if answers is not None:
            answers.append(status)
        if status["done"]:
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"models not ready in time: {status['messages'][-3:]}")
        time.sleep(poll_s)


def default_request(models: list[str]) -> tuple:
    """The /generate inputs of the page as it opens (the default preset)."""
    from wash.content.presets import preset_names
    from wash.ui.providers import HEADERS, preset_rows
    from wash.ui.texts import example_prompts

    rows, mode = preset_rows(preset_names()[0], models)
    table = {"headers": HEADERS, "data": rows, "metadata": None}
    return table, example_prompts(1)[0], mode


def click_to_first_token(client, table: dict, prompt: str, mode: str, max_new: int, seed: int,
                         forwards: str) -> tuple[float, str]:
    """Seconds from submitting /generate to the first update holding a token; the final status."""
    from wash.ui.handlers import GENERATE_OUTPUTS

    out_status, out_text = GENERATE_OUTPUTS.index("status"), GENERATE_OUTPUTS.index("text")
    started = time.perf_counter()
    job = client.submit(table, prompt, max_new, 1.0, seed, mode, "off", forwards, api_name="/generate")
    first = None
    for update in job:
        if first is None and update[out_text]:
            first = time.perf_counter() - started
    outputs = job.outputs()
    status = outputs[-1][out_status] if outputs else ""
    if first is None:
        raise RuntimeError(f"no token came back (status: {status!r})")
    return first, status


def identify_seconds(client, table: dict) -> tuple[float, list]:
    """Seconds from submitting /identify (every system, the fast probe) to its answer; its table rows."""
    from wash.ui.identify import SYSTEMS

    started = time.perf_counter()
    _plot, frame, _summary = client.predict(table, list(SYSTEMS), "fast", api_name="/identify")
    return time.perf_counter() - started, frame["data"]


def app_env(port: int) -> dict:
    """The environment ``app.py`` runs under in the scripts that drive it: local port, no analytics, hub off."""
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1",
               GRADIO_ANALYTICS_ENABLED="False", TRANSFORMERS_VERBOSITY="error")
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


@contextlib.contextmanager
def ready_app(env: dict, timeout: float, prefix: str) -> Iterator[tuple[subprocess.Popen, Path, float]]:
    """``app.py`` under ``env`` (its own session, its output in a temporary log named ``prefix``...):
    (process, log, seconds from start to ready) once its preload is done; stopped on leaving."""
    port = env["GRADIO_SERVER_PORT"]
    fd, log_name = tempfile.mkstemp(prefix=prefix, suffix=".log")
    os.close(fd)
    log = Path(log_name)
    with open(log, "w") as log_file:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log_file,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            client = _client(f"http://127.0.0.1:{port}", started + timeout, proc, log)
            status = wait_ready(client, started + timeout)
            if not status["ready"]:
                raise RuntimeError(f"the app's preload failed: {status['error']}")
            yield proc, log, time.monotonic() - started
        finally:
            stop_app(proc)


def stop_app(proc: subprocess.Popen) -> None:
    """Stop the app and everything it started (it runs in its own session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def measure(args: argparse.Namespace, argv: list[str]) -> dict:
    """The report of one run with ``args`` (parsed from ``argv``, which the report records)."""
    from wash.ui.settings import app_models

    models = app_models()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = app_env(port)
    cache = None
    if args.fresh:
        cache = tempfile.TemporaryDirectory(prefix="wash-fresh-cache-")
        env["WASH_CACHE_DIR"] = cache.name
    fd, log_name = tempfile.mkstemp(prefix="wash-latency-app-", suffix=".log")
    os.close(fd)
    log = Path(log_name)
    print(f"the app's log: {log}", file=sys.stderr)  # scratch: not part of the report
    command = [sys.executable, "app.py"]
    with open(log, "w") as log_file:
        started = time.monotonic()
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = started + args.timeout
            client = _client(url, deadline, proc, log)
            answering_s = time.monotonic() - started
            polls: list[dict] = []
            status = wait_ready(client, deadline, answers=polls)
            ready_s = time.monotonic() - started
            if not status["ready"]:
                raise RuntimeError(f"the app's preload failed: {status['error']}")
            table, prompt, mode = default_request(models)
            samples, statuses = [], []
            for i in range(args.repeats):
                first, final = click_to_first_token(client, table, prompt, mode, args.max_new_tokens,
                                                    args.seed + i if args.vary_seed else args.seed,
                                                    args.forwards)
                samples.append(round(first, 3))
                statuses.append(final)
            identify, identify_rows = [], []
            for _ in range(args.identify):
                seconds, rows = identify_seconds(client, table)
                identify.append(round(seconds, 1))
                identify_rows.append(rows)
        finally:
            stop_app(proc)
            if cache is not None:
                cache.cleanup()
    names = {cache.name: "$WASH_CACHE_DIR"} if cache else {}  # the app's model cache, named as the setting
    return {
        "command": command_line(["python", "-m", "tools.latency", *argv]),
        "env": {k: os.environ[k] for k in ("WASH_APP_MODELS", "WASH_CACHE_DIR", "WASH_APP_CONCURRENCY")
                if k in os.environ},
        "app_command": command_line(command),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "models": models,
        "fresh_cache": bool(args.fresh),
        "preset": {"table": table["data"], "mode": mode, "prompt": prompt, "forwards": args.forwards,
                   "max_new_tokens": args.max_new_tokens},
        "server_answering_s": round(answering_s, 3),
        "start_to_ready_s": round(ready_s, 3),
        "app_reported_preload_s": status["elapsed_s"],
        "app_loaded": status["loaded"],
        # what /status said at each poll until the preload ended: seconds into it, ready, error, its last line
        "status_polls": [{"elapsed_s": p["elapsed_s"], "ready": p["ready"], "error": p["error"],
                          "last_message": portable_text(p["messages"][-1], names) if p["messages"] else None}
                         for p in polls],
        # the app's own log lines
        "preload_messages": [portable_text(m, names) for m in status["messages"]],
        "click_to_first_token_s": ({"median": round(statistics.median(samples), 3), "samples": samples}
                                   if samples else None),
        "identify_fast_s": ({"median": round(statistics.median(identify), 1), "samples": identify,
                             "tables": identify_rows} if identify else None),
        "final_status": statuses[-1] if statuses else None,
        "machine": cpu_description(),
        "cpu_count": os.cpu_count(),
        "load_average": load_average(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true",
                        help="point WASH_CACHE_DIR at an empty temporary directory (a first-ever start, "
                             "which dequantises the GGUF files)")
    parser.add_argument("--repeats", type=int, default=5, help="generations timed (default 5)")
    parser.add_argument("--identify", type=int, default=0,
                        help="times /identify (all three systems, the fast probe) is timed (default 0)")
    parser.add_argument("--max-new-tokens", type=int, default=2,
                        help="tokens per timed generation (default 2; only the first is timed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vary-seed", action="store_true", help="seed + i for repeat i")
    parser.add_argument("--forwards", choices=("eager", "lazy"), default="eager")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed for start-up")
    argv = list(sys.argv[1:] if argv is None else argv)
    print(json.dumps(measure(parser.parse_args(argv), argv), ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
