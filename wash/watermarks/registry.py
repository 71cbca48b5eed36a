"""The registry of watermark schemes: each scheme module registers its class here on import.

``wash.watermarks`` imports every scheme module (so every scheme is registered as
soon as the package is) and re-exports these names.
"""

from __future__ import annotations

from wash.errors import WashInputError
from wash.watermarks.base import WatermarkScheme

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
