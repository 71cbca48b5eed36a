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
