"""``NAME[:param=value,...]`` spellings: one parser for every plug-in with parameters.

Aggregation rules (``median-clip:xi=0.5``) and baseline modes (``toblend`` with
``block=8``) are frozen dataclasses whose fields are their parameters. Users write
them as text (CLI, app, experiment settings); this module turns ``param=value``
items into field values of the right type, with one-line ``WashInputError``
messages that name the plug-in, the parameter and what is accepted, and writes a
plug-in back as its canonical text (every parameter spelt out), which runs record.
"""

from __future__ import annotations

import dataclasses
import typing
import math
from typing import Any

from wash.errors import WashInputError

_CASTS = {"int": int, "float": float, "str": str, "bool": None}


def _field_kind(cls: type, name: str) -> str:
    hints = typing.get_type_hints(cls)
    kind = getattr(hints.get(name), "__name__", "str")
    return kind if kind in _CASTS else "str"


def _cast(kind: str, what: str, key: str, value: str) -> Any:
    if kind == "bool":
        low = value.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise WashInputError(f"{what}: {key}={value!r} is not true or false")
    if kind == "int":
        try:
            number = float(value)
        except ValueError:
            raise WashInputError(f"{what}: {key}={value!r} is not a whole number") from None
        if not number.is_integer():
            raise WashInputError(f"{what}: {key}={value!r} is not a whole number")
        return int(number)
    if kind == "float":
        try:
            return float(value)
        except ValueError:
            raise WashInputError(f"{what}: {key}={value!r} is not a number") from None
    return value


def parse_params(cls: type, what: str, text: str) -> dict[str, Any]:
    """``param=value,...`` as keyword arguments of dataclass ``cls`` (``what`` names it in errors)."""
    fields = [f.name for f in dataclasses.fields(cls)]
    values: dict[str, Any] = {}
    for item in (i for i in str(text).split(",") if i.strip()):
        if "=" not in item:
            raise WashInputError(f"{what}: parameter '{item.strip()}' is not of the form name=value")
        key, value = (s.strip() for s in item.split("=", 1))
        if key not in fields:
            raise WashInputError(f"{what} has no parameter '{key}' (accepted: {', '.join(fields) or 'none'})")
        values[key] = _cast(_field_kind(cls, key), what, key, value)
    return values


def params_text(obj: Any) -> str:
    """Every field of dataclass instance ``obj`` as ``param=value,...`` (numbers as ``repr``: 1.0 stays 1.0)."""
    def text(value: Any) -> str:
        return value if isinstance(value, str) else repr(value)

    return ",".join(f"{f.name}={text(getattr(obj, f.name))}" for f in dataclasses.fields(obj))


def check_range(what: str, param: str, value: float, lo: float, hi: float, whole: bool = True,
                note: str = "") -> None:
    """Refuse a parameter outside ``[lo, hi]`` (or not whole, or not finite) with a message naming it.

    Plug-ins call it from ``__post_init__`` so a bad value fails when the text is
    parsed, before any model loads."""
    number_ok = isinstance(value, (int, float)) and math.isfinite(value)
    if not number_ok or not lo <= value <= hi or (whole and int(value) != value):
        kind = "a whole number" if whole else "a number"
        raise WashInputError(f"{what}: {param} must be {kind} from {lo:g} to {hi:g}{note}, got {value}")
