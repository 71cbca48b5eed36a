"""``NAME[:param=value,...]`` spellings: one parser for every plug-in with parameters.

Aggregation rules (``median-clip:xi=0.5``), modes (``toblend`` with ``block=8``) and
watermark schemes (``kgw``'s ``gamma=0.25``) are frozen dataclasses whose fields are
their parameters. Users write
them as text (CLI, app, experiment settings); this module turns ``param=value``
items into field values of the right type, with one-line ``WashInputError``
messages that name the plug-in, the parameter and what is accepted, and writes a
plug-in back as its canonical text (every parameter spelt out), which runs record.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from wash.core.errors import WashInputError

_CASTS = {"int": int, "float": float, "str": str, "bool": None}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Dialect:
    """How one family of plug-ins reads and words its parameters (each family keeps its users' messages).

    ``PLUGIN_PARAMS`` (aggregation rules, modes) reads ``4.0`` as the whole number 4 and
    says ``block='x' is not a whole number``; ``SCHEME_PARAMS`` (watermark schemes,
    ``ProviderSpec``'s ``:param=value`` part) wants ``4`` and says ``parameter
    'gamma' of scheme 'kgw' must be float, got 'x'``.
    """

    #: A whole float (``4.0``) is read as an integer.
    whole_floats: bool = True
    #: Unknown names list the accepted ones sorted (else in field order).
    sorted_accepted: bool = False
    #: Type errors read ``parameter 'P' of WHAT must be KIND, got 'V'``.
    must_be: bool = False

    def bad_value(self, what: str, key: str, value: str, kind: str) -> str:
        if self.must_be:
            return f"parameter '{key}' of {what} must be {kind}, got '{value}'"
        return f"{what}: {key}={value!r} is not " + {"bool": "true or false", "int": "a whole number",
                                                      "float": "a number"}[kind]


PLUGIN_PARAMS = Dialect()
SCHEME_PARAMS = Dialect(whole_floats=False, sorted_accepted=True, must_be=True)


def _field_kind(cls: type, name: str) -> str:
    hints = typing.get_type_hints(cls)
    kind = getattr(hints.get(name), "__name__", "str")
    return kind if kind in _CASTS else "str"


def _cast(kind: str, value: str, whole_floats: bool) -> Any:
    """``value`` as a ``kind``; ValueError when it is not one."""
    if kind == "bool":
        low = value.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(value)
    if kind == "int":
        if not whole_floats:
            return int(value)
        number = float(value)
        if not number.is_integer():
            raise ValueError(value)
        return int(number)
    return float(value) if kind == "float" else value


def parse_params(cls: type, what: str, items: str | Mapping[str, str],
                 aliases: Mapping[str, str] | None = None, dialect: Dialect = PLUGIN_PARAMS) -> dict[str, Any]:
    """``param=value,...`` (or a ``{param: value}`` mapping) as keyword arguments of dataclass ``cls``.

    The one parameter parser of the package: aggregation rules, modes and watermark
    schemes all read their parameters here. ``what`` names the plug-in in errors
    (``aggregate 'cap'``, ``mode 'toblend'``, ``scheme 'kgw'``); ``aliases`` maps a
    parameter's former name to its field; ``dialect`` how the family words errors.
    Each value is cast to its field's annotated type (int, float, bool, str); ranges
    are the dataclass's own ``__post_init__`` checks.
    """
    fields = [f.name for f in dataclasses.fields(cls)]
    if isinstance(items, str):
        pairs = []
        for item in (i for i in items.split(",") if i.strip()):
            if "=" not in item:
                raise WashInputError(f"{what}: parameter '{item.strip()}' is not of the form name=value")
            pairs.append(tuple(s.strip() for s in item.split("=", 1)))
    else:
        pairs = [(str(k), str(v)) for k, v in items.items()]
    aliases = aliases or {}
    given = {k for k, _ in pairs}
    values: dict[str, Any] = {}
    for key, value in pairs:
        name = aliases.get(key, key)
        if name != key and name in given:
            raise WashInputError(f"{what}: give '{name}' or its former name '{key}', not both")
        if name not in fields:
            accepted = ", ".join(sorted(fields) if dialect.sorted_accepted else fields) or "none"
            raise WashInputError(f"{what} has no parameter '{name}' (accepted: {accepted})")
        kind = _field_kind(cls, name)
        try:
            values[name] = _cast(kind, value, dialect.whole_floats)
        except (TypeError, ValueError):
            raise WashInputError(dialect.bad_value(what, name, value, kind)) from None
    return values


def params_text(obj: Any, names: Sequence[str] | None = None) -> str:
    """Every field of dataclass instance ``obj`` (or those in ``names``) as ``param=value,...``
    (numbers as ``repr``: 1.0 stays 1.0)."""
    def text(value: Any) -> str:
        return value if isinstance(value, str) else repr(value)

    return ",".join(f"{f.name}={text(getattr(obj, f.name))}" for f in dataclasses.fields(obj)
                    if names is None or f.name in names)


def check_range(what: str, param: str, value: float, lo: float, hi: float, whole: bool = True,
                note: str = "") -> None:
    """Refuse a parameter outside ``[lo, hi]`` (or not whole, or not finite) with a message naming it.

    Plug-ins call it from ``__post_init__`` so a bad value fails when the text is
    parsed, before any model loads."""
    number_ok = isinstance(value, (int, float)) and math.isfinite(value)
    if not number_ok or not lo <= value <= hi or (whole and int(value) != value):
        kind = "a whole number" if whole else "a number"
        raise WashInputError(f"{what}: {param} must be {kind} from {lo:g} to {hi:g}{note}, got {value}")
