"""What this app instance offers, read from the environment once per call.

``WASH_APP_MODELS`` (comma-separated, e.g. ``tiny-smollm2,tiny-gemma3``) replaces
the model choices so tests and small machines can use fast models; by default
the app offers the two real offline models, those of them that can load here: a
Space installs its requirements.txt alone, which cannot install SmolLM2's package,
and without the hub the app then serves Gemma-3-270M alone and its page names the
missing model and why (``missing_models``). Where a GPU and the hub are present it also offers
the larger hub-only models (``catalog.HUB_MODELS``, ``hub_models_offered``); elsewhere they are
not listed, and asking for one is refused with why (``hub_model_reason``). A model outside the choices is
refused with a message naming them, except hub ids or directories when
``WASH_ALLOW_EXTERNAL_MODELS`` allows them (the engine's own rule).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from wash.core import env
from wash.core.errors import WashInputError
from wash.engine import (missing_reason, ALLOW_EXTERNAL_ENV, CATALOG, HUB_MODELS, OFFLINE_DEFAULTS,
                         check_model_name, external_allowed, hub_reason)

APP_MODELS_ENV = env.APP_MODELS.name
CONCURRENCY_ENV = env.APP_CONCURRENCY.name
MALLOC_ARENAS_ENV = env.MALLOC_ARENAS.name
MALLOC_TRIM_ENV = env.MALLOC_TRIM.name
#: glibc's ``mallopt`` parameter for the most malloc arenas (``M_ARENA_MAX`` in malloc.h).
_M_ARENA_MAX = -8
#: Longest prompt the app accepts before even tokenising it (the engine then checks
#: each model's context window in tokens).
MAX_PROMPT_CHARS = 2000
#: Longest text the Detect tab scores.
MAX_DETECT_CHARS = 20000


def app_models() -> list[str]:
    """The model names offered in the providers table, in display order."""
    names = env.app_models()
    if not names:
        missing = missing_models()
        # none loadable: offer them all, so the first load reports what to install
        offline = [n for n in OFFLINE_DEFAULTS if n not in missing] or list(OFFLINE_DEFAULTS)
        return offline + hub_models_offered()
    for name in names:
        check_model_name(name)  # raises WashInputError for an unknown name at start-up
    return list(dict.fromkeys(names))


def missing_models() -> dict[str, str]:
    """The default models this machine cannot load, each with why (``cache.missing_reason``).

    Empty when ``WASH_APP_MODELS`` names the models: a model asked for by name is
    offered, and its load fails with the same reason if it cannot load."""
    if env.app_models():
        return {}
    reasons = {name: missing_reason(name) for name in OFFLINE_DEFAULTS}
    return {name: why for name, why in reasons.items() if why}


def gpu_present() -> bool:
    """Whether this app's models run on a GPU: CUDA in this process, or a ZeroGPU Space
    (``SPACES_ZERO_GPU``, whose ``spaces.GPU`` calls get the GPU; ``wash.ui.gpu`` decides that, but it
    imports this module, so the variable is read here)."""
    import torch

    return torch.cuda.is_available() or env.on_zero_gpu()


def hub_model_reason(name: str, gpu: bool | None = None) -> str | None:
    """Why the app does not offer hub-only model ``name`` here, in one sentence; None when it does.

    It offers one where a GPU is present (``needs_gpu``: at 0.5-2B parameters a CPU Space serves seconds
    per token) and its hub copy can be had (``cache.hub_reason``). ``gpu``: whether a GPU is present
    (``gpu_present`` when None)."""
    entry = CATALOG[name]
    gpu = gpu_present() if gpu is None else gpu
    parts = []
    if entry.needs_gpu and not gpu:
        parts.append("the app offers it only with a GPU, and this machine has none")
    why = hub_reason(name)
    parts += [f"it loads from the model hub alone, and {why}"] if why else []
    return f"{entry.title}: {'; '.join(parts)}." if parts else None


def hub_models_offered(gpu: bool | None = None) -> list[str]:
    """The hub-only models the app offers after the offline ones: those ``hub_model_reason`` lets through."""
    return [name for name in HUB_MODELS if hub_model_reason(name, gpu) is None]


def missing_markdown(missing: dict[str, str]) -> str:
    """The page's line naming each model the app cannot serve here, and why (empty when none)."""
    return "  \n".join(f"**{CATALOG[name].title} (`{name}`) is not offered here:** {why}"
                        for name, why in missing.items())


def check_app_model(name: str, choices: list[str] | None = None) -> str:
    """Accept a model the app offers (or an allowed external one), else say which are."""
    choices = app_models() if choices is None else choices
    if name in choices:
        return name
    if name not in CATALOG and external_allowed():
        return check_model_name(name, allow_external=True)
    why = hub_model_reason(name) if name in HUB_MODELS else missing_models().get(name)
    if why:
        raise WashInputError(f"model '{name}' is not offered here: {why}")
    hint = "" if external_allowed() else f" (hub ids need {ALLOW_EXTERNAL_ENV}=1)"
    raise WashInputError(f"unknown model '{name}' (this app offers: {', '.join(choices)}){hint}")


def concurrency_limit() -> int:
    """How many generations run at once (each event listener gets this many slots)."""
    return env.app_concurrency()


def queue_size() -> int:
    """How many requests the queue holds waiting: a class's worth, and a bound, so a crowd gets a clear
    "queue is full" instead of a wait nobody sees the end of."""
    return env.app_queue_size()


def limit_malloc_arenas() -> int | None:
    """Cap glibc's malloc arenas for this process at ``WASH_MALLOC_ARENAS`` (unset or 0: glibc's default).

    Why it is offered: the server runs each request on whichever worker thread is free,
    and glibc gives every thread that allocates an arena of its own (up to 8 per core),
    each keeping freed memory; a memory-tight host may want fewer. Why it is off by
    default: in two 10-minute soaks of 16 clients (docs/BENCHMARKS.md, "Soak"), glibc's
    default grew 4.0% after warm-up and two arenas 3.0%, both under the 5% bar, while
    the capped run delivered 17% fewer tokens/s; one run each settles neither
    difference. Call it before any thread starts. Returns the cap set, or ``None``.
    """
    arenas = env.malloc_arenas()
    libc = _glibc()
    if arenas <= 0 or libc is None:  # not glibc: nothing to cap
        return None
    return arenas if libc.mallopt(_M_ARENA_MAX, arenas) == 1 else None


def release_free_memory() -> bool:
    """Hand the free pages inside glibc's heaps back to the system (``malloc_trim(0)``); ``WASH_MALLOC_TRIM=0`` turns it off.

    Why: a generation allocates and frees many vocabulary-sized tensors (1 MB for
    Gemma-3) on whichever server threads run it, among longer-lived ones (the keyed
    draws the watermarks cache), and glibc keeps each heap's freed memory resident
    for reuse, trimming only what lies at a heap's top. In a 15-minute soak the
    memory in use in the heaps stayed near 360 MB while the free memory they held
    grew from 150 to 313 MB; in 30-minute soaks the app held 2,714 MB resident at the
    end with this call and 2,966 MB without (docs/soak-local-30min*.json). Called
    after each Generate run; on the real models one call took 6 to 11 ms and gave
    back 37 to 97 MB. Returns True when memory was released.
    """
    libc = _glibc()
    if libc is None or not env.malloc_trim():
        return False
    return bool(libc.malloc_trim(0))


@lru_cache(maxsize=1)
def _glibc() -> Any:
    """The C library when it is glibc (it has ``malloc_trim``), else None."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - glibc's, absent elsewhere (musl, macOS)
    except (OSError, AttributeError):
        return None
    return libc
