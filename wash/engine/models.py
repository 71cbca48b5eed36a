"""Base language models loaded for decoding: one copy per process, shared by every provider.

``load_model`` turns a catalog name (``wash.engine.catalog``) into a ``LoadedModel``,
from the dequantised cache (``wash.engine.cache``), the hub fallback, a directory or
a random model of a given shape around a real tokenizer (the tiny test models and the
benchmarks' dummy members, ``random_model``); ``load_tokenizer`` reads a tokenizer
without the weights where it can. Loading ahead of the first request is the UI's
business (``wash.ui.preload``).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from wash.engine.cache import (INSTALL, Progress, build_lock, cache_dir, cached_copy, complete, gguf_file,
                               gguf_parsed_once, hub_allowed, marker_ok, missing_reason, package_present,
                               tokenizer_pickle, write_marker)
from wash.engine import qwen_tokenizer
from wash.engine.catalog import (CATALOG, breaks_in_fp16, check_model_name, parse_dummy, read_shape,
                                 tokenizer_family)
from wash.core.errors import WashInputError

#: Extra end-of-text strings honoured besides the tokenizer's own EOS (chat and base ends).
_END_STRINGS = ("<|endoftext|>", "<|im_end|>", "<eos>", "<end_of_turn>", "</s>", "<|eot_id|>",
                "<|end_of_text|>")


@dataclass
class LoadedModel:
    """A base model ready for decoding, shared by every provider that names it."""

    name: str
    #: The weights; ``None`` in a process whose member runs elsewhere (``ray_members``: the
    #: tokenizer and the facts below stay here, the model in its actor).
    model: torch.nn.Module | None
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


#: The first CUDA compute capability with bf16 in hardware (Ampere). Below it (a T4 is 7.5)
#: ``torch.cuda.is_bf16_supported()`` may still say yes, through a slow emulation.
BF16_CAPABILITY = (8, 0)


def gpu_dtype(capability: tuple[int, int], breaks_in_fp16: bool = False) -> torch.dtype:
    """The dtype a model runs in on a GPU of ``capability``: bf16 where the GPU has it, else fp16,
    or fp32 for a model whose outputs fp16 breaks (``catalog.breaks_in_fp16``), never fp16 for it."""
    if tuple(capability) >= BF16_CAPABILITY:
        return torch.bfloat16
    return torch.float32 if breaks_in_fp16 else torch.float16


def resolve_device(index: int = 0, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
                   breaks_in_fp16: bool = False) -> tuple[torch.device, torch.dtype]:
    """CPU float32 here; on GPUs ``gpu_dtype`` of the GPU (``breaks_in_fp16``: the model's catalog fact),
    one GPU per model.

    ``device`` and ``dtype`` override the choice (a benchmark's ``--device`` and ``--dtype``);
    a bare ``cuda`` names the current GPU.
    """
    if device is not None:
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if dtype is None:
            dtype = gpu_dtype(torch.cuda.get_device_capability(device), breaks_in_fp16) \
                if device.type == "cuda" else torch.float32
        return device, dtype
    if torch.cuda.is_available():
        cuda = torch.device(f"cuda:{index % torch.cuda.device_count()}")
        return cuda, dtype or gpu_dtype(torch.cuda.get_device_capability(cuda), breaks_in_fp16)
    return torch.device("cpu"), dtype or torch.float32


#: ``--dtype`` spellings.
DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
          "float32": torch.float32, "fp32": torch.float32}


def parse_dtype(text: str | None) -> torch.dtype | None:
    """A ``--dtype`` value as a torch dtype (``None``: the device's default)."""
    if text is None or text == "auto":
        return None
    try:
        return DTYPES[text]
    except KeyError:
        raise WashInputError(f"unknown dtype '{text}' (accepted: auto, {', '.join(DTYPES)})") from None


# -- process-wide cache -------------------------------------------------------------
_LOADED: dict[str, LoadedModel] = {}
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def is_loaded(name: str) -> bool:
    """Whether ``name`` is in memory already (the app's preload reports which are)."""
    return name in _LOADED


def load_model(name: str, progress: Progress | None = None, device_index: int | None = None,
               allow_external: bool | None = None, device: str | torch.device | None = None,
               dtype: torch.dtype | None = None) -> LoadedModel:
    """Return the one in-memory copy of ``name``, loading it on first use (thread-safe).

    ``device`` / ``dtype`` override ``resolve_device``'s choice for that first load; later
    calls get the copy already loaded, wherever it is.
    """
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
            loaded = _load(name, say, index, device, dtype)
            loaded.load_seconds = time.perf_counter() - start
            say(f"{name}: ready in {loaded.load_seconds:.1f} s")
            _LOADED[name] = loaded
    return _LOADED[name]


def _load(name: str, say: Progress, device_index: int, device: str | torch.device | None = None,
          dtype: torch.dtype | None = None) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device, dtype = resolve_device(device_index, device, dtype, breaks_in_fp16(name))
    entry = CATALOG.get(name)
    dummy = parse_dummy(name)
    if dummy is not None or (entry is not None and entry.shape):
        shape = dummy.shape if dummy is not None else entry.shape
        tokenizer = load_tokenizer(tokenizer_family(name), say)
        say(f"{name}: random weights of shape {shape} on {device} in {str(dtype).removeprefix('torch.')}")
        model = random_model(shape, tokenizer, device, dtype)
    elif entry is not None and entry.hub_only:
        why = missing_reason(name)  # asked first: an unreachable hub costs a minute of retries otherwise
        if why is not None:
            raise WashInputError(f"model '{name}' cannot load here: {why}")
        tokenizer, model = _from_hub(name, entry.hub_fallback, say, dtype, device)
    elif entry is not None and entry.hub_fallback and not package_present(name) and hub_allowed():
        say(f"{name}: packaged GGUF not installed")
        tokenizer, model = _from_hub(name, entry.hub_fallback, say, dtype, device)
    elif entry is not None:
        directory = cached_copy(name, say)
        try:
            say(f"{name}: loading weights from {directory}")
            tokenizer = read_tokenizer(directory)
            model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype,
                                                         device_map={"": str(device)})
        except Exception as err:  # a copy that passed the size check but does not load
            say(f"{name}: cached copy does not load ({type(err).__name__}), rebuilding it")
            shutil.rmtree(directory, ignore_errors=True)
            directory = cached_copy(name, say)
            tokenizer = read_tokenizer(directory)
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


def _from_hub(name: str, hub: str, say: Progress, dtype: torch.dtype,
              device: torch.device) -> tuple[object, object]:
    """A catalog model's tokenizer and weights from its hub copy; a failed fetch is a one-line input error."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    say(f"{name}: loading {hub} from the hub")
    try:
        tokenizer = AutoTokenizer.from_pretrained(hub)
        model = AutoModelForCausalLM.from_pretrained(hub, dtype=dtype, device_map={"": str(device)})
    except OSError as err:  # no network, no hub, or the repository is gone
        install = f"Install the packaged model with `{INSTALL[name]}`, or give" if name in INSTALL else "Give"
        raise WashInputError(
            f"model '{name}': its hub copy {hub} could not be loaded ({type(err).__name__}: "
            f"{str(err).splitlines()[0]}). {install} the machine access to the model hub.") from None
    return tokenizer, model


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


_TOKENIZERS: dict[str, object] = {}


def load_tokenizer(name: str, progress: Progress | None = None) -> object:
    """The real tokenizer of a catalog model, without loading its weights when avoidable."""
    name = tokenizer_family(name)  # a tiny or dummy model uses its family's real tokenizer
    if name in _TOKENIZERS:
        return _TOKENIZERS[name]
    say = progress or (lambda _msg: None)
    directory = cache_dir() / "tokenizers" / name
    tokenizer = None
    if marker_ok(directory):
        try:
            tokenizer = read_tokenizer(directory)
        except (OSError, ValueError):
            tokenizer = None
    if tokenizer is None:
        with build_lock(directory):
            if marker_ok(directory):
                tokenizer = read_tokenizer(directory)
            else:
                shutil.rmtree(directory, ignore_errors=True)
                tokenizer = _source_tokenizer(name, say)
                tmp = directory.with_name(directory.name + ".partial")
                shutil.rmtree(tmp, ignore_errors=True)
                tokenizer.save_pretrained(tmp)
                write_marker(tmp)
                tmp.replace(directory)
    _TOKENIZERS[name] = tokenizer
    return tokenizer


def _source_tokenizer(name: str, say: Progress) -> object:
    """A catalog model's tokenizer from where it ships: its packaged GGUF, or for a ``hub_only`` model
    the tokenizer built offline from a package (Qwen2.5's, ``qwen_tokenizer``), else its hub copy."""
    from transformers import AutoTokenizer

    entry = CATALOG.get(name)
    if entry is None or not entry.hub_only:
        src_dir, src_file = gguf_file(name, say)
        say(f"{name}: reading the tokenizer from {src_file}")
        return AutoTokenizer.from_pretrained(src_dir, gguf_file=src_file)
    if name == qwen_tokenizer.CATALOG_NAME and qwen_tokenizer.ranks_file() is not None:
        say(f"{name}: building the tokenizer from {qwen_tokenizer.ranks_file()}")
        return qwen_tokenizer.build()
    why = missing_reason(name)
    if why is not None:
        offline = f" (offline: `{qwen_tokenizer.INSTALL}`)" if name == qwen_tokenizer.CATALOG_NAME else ""
        raise WashInputError(f"the tokenizer of '{name}' cannot load here{offline}: {why}")
    say(f"{name}: reading the tokenizer of {entry.hub_fallback} from the hub")
    return AutoTokenizer.from_pretrained(entry.hub_fallback)


def read_tokenizer(directory: Path) -> object:
    """``AutoTokenizer.from_pretrained(directory)`` for a cached (trusted) directory, through a pickle of it
    that the first load leaves beside the files.

    Why: transformers builds Gemma 3's tokenizer (262,144 entries) from its 33 MB ``tokenizer.json``
    with a Python JSON parse and a vocabulary rebuild, 2.6 s on a 2-core machine; the pickle of
    the built object loads in 1.1 s (the Rust tokenizer still parses its JSON), and every process
    that loads the model or its tokenizer pays that (the app's start, experiment workers, Ray actors,
    ``docs/BENCHMARKS.md``). The pickle's name carries the transformers and tokenizers versions
    (``cache.tokenizer_pickle``), so an upgrade reads the files again; a pickle that does not load
    is read past (and rewritten).
    It lives in the cache directory this process writes (``$WASH_CACHE_DIR``), beside the
    weights it also trusts; it is never listed in the directory's ``complete.json`` marker, and
    a rebuilt directory loses it.
    """
    import pickle

    from transformers import AutoTokenizer

    path = tokenizer_pickle(directory)
    try:
        with open(path, "rb") as handle:
            return pickle.load(handle)
    except Exception:  # noqa: BLE001 - none yet, or a truncated or foreign one: read the files
        pass
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        with open(tmp, "wb") as handle:
            pickle.dump(tokenizer, handle, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)  # atomic: a reader sees no pickle or a whole one
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        tmp.unlink(missing_ok=True)  # a read-only cache, a full disk: the files still serve
    return tokenizer


def prepare_cache(names: Sequence[str], say: Progress | None = None) -> dict[str, float]:
    """Build ahead what the first load of each catalog model in ``names`` would build (the cache's
    ``complete``), one spawned process per model at once; returns the seconds each took (none when
    all were complete).

    Why: on a new machine the first load dequantises the weights and parses the GGUF tokenizer:
    34.8 s for Gemma-3 and 16.5 s for SmolLM2, both at once, in a fresh-clone CI run on a 2-core
    machine (2026-11-29, ``docs/test-suite.json``). Done inside a run, the first test or request that loads a model pays it while
    every other process that needs the model waits on the build lock; done here, the two builds
    share the cores and nothing waits. A model whose package is missing raises its ``WashInputError``.
    """
    todo = [name for name in names if not complete(name)]
    if not todo:
        return {}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    say = say or (lambda _msg: None)
    say(f"building the model cache for {', '.join(todo)} in {cache_dir()}, one process each")
    took: dict[str, float] = {}
    with ProcessPoolExecutor(len(todo), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {name: pool.submit(_prepare_one, name) for name in todo}
        for name, future in futures.items():
            messages, took[name] = future.result()
            for message in messages:
                say(message)
            say(f"{name}: cached in {took[name]:.1f} s")
    return took


def _prepare_one(name: str) -> tuple[list[str], float]:
    """``prepare_cache``'s work for one model, in its own process: its progress lines and seconds."""
    start = time.perf_counter()
    messages: list[str] = []
    with gguf_parsed_once():  # the weights' copy and the tokenizer's files read one parse of the GGUF
        read_tokenizer(cached_copy(name, messages.append))  # the weights' copy, then its tokenizer's pickle
        load_tokenizer(name, messages.append)  # the tokenizer's own files
    directory = cache_dir() / "tokenizers" / name
    if not tokenizer_pickle(directory).is_file():
        read_tokenizer(directory)
    return messages, time.perf_counter() - start


#: Every random model is built from this seed: two builds of one shape on one device are identical.
RANDOM_MODEL_SEED = 1234


def random_model(shape: str, tokenizer: object, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """A seeded random model of ``shape`` (``catalog.read_shape``) around a real tokenizer.

    The vocabulary is the tokenizer's length (or the shape's ``vocab_size`` where that is wider: the
    logits of Qwen2.5-0.5B are 151,936 wide for 151,665 tokens) and its special ids are the tokenizer's.
    The weights are created where they will run, in the dtype they will run in (under
    ``torch.device(device)`` and ``from_config(dtype=...)``): an 8B shape in bf16 never
    passes through the CPU's memory. Random initialisation gives near-uniform logits;
    the output layer is scaled by 8 (a power of two: exact in any dtype) so that
    sampling is not pure noise.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(read_shape(shape)["config"])
    vocab_size = max(len(tokenizer), int(fields.pop("vocab_size", 0)))
    config = AutoConfig.for_model(fields.pop("model_type"), vocab_size=vocab_size,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, **fields)
    device = torch.device(device)
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda), torch.device(device):
        torch.manual_seed(RANDOM_MODEL_SEED)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(8.0)
    return model
