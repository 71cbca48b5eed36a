"""Watermark schemes: one module per scheme, all registered by name here.

A provider names its scheme (``kgw``, ``aar``...) and gets an instance of the
registered class, built with its key, its token-space size and any
``name=value`` overrides of the scheme's published defaults.
"""

from __future__ import annotations

import importlib

from wash.errors import WashInputError
from wash.watermarks.base import Detection, Detector, WatermarkScheme

SCHEMES: dict[str, type[WatermarkScheme]] = {}


def register(cls: type[WatermarkScheme]) -> type[WatermarkScheme]:
    """Class decorator: make a scheme available under ``cls.name``."""
    if cls.name in SCHEMES:
        raise RuntimeError(f"scheme '{cls.name}' registered twice")
    SCHEMES[cls.name] = cls
    return cls


def scheme_names() -> list[str]:
    return list(SCHEMES)


def scheme_class(name: str) -> type[WatermarkScheme]:
    try:
        return SCHEMES[name.lower()]
    except KeyError:
        raise WashInputError(
            f"unknown watermark scheme '{name}' (accepted: {', '.join(SCHEMES)})"
        ) from None


def build_scheme(
    name: str, key: int, vocab_size: int, params: dict[str, str] | None = None
) -> WatermarkScheme:
    cls = scheme_class(name)
    return cls(key=key, vocab_size=vocab_size, params=cls.parse_params(params or {}))


# Each module registers its class on import; the order here is the order users see.
_MODULES = (
    "none",
    # green-list family
    "kgw", "biased_kgw", "unigram", "waterbag", "dipmark",
    # sampling family
    "aar", "its_edit", "exp_edit", "synthid",
)
for _name in _MODULES:
    importlib.import_module(f"wash.watermarks.{_name}")

__all__ = ["Detection", "Detector", "WatermarkScheme", "SCHEMES", "register", "scheme_names",
           "scheme_class", "build_scheme"]
