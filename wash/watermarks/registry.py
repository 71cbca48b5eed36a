"""The registry of watermark schemes: each scheme module registers its class here on import.

``wash.watermarks`` imports every scheme module (so every scheme is registered as
soon as the package is) and re-exports these names.

Every list of schemes the reports and experiments use is read from here, off the
classes' facts (``WatermarkScheme.title``, ``published``, ``stateful``, ``form_param``,
``release_form``, ``paper_columns``, ``rank``), when it is asked for: a scheme
registered later is in every list it belongs to, and no name list outside
``wash/watermarks/`` restates a fact (``tests/test_scheme_facts.py``).
"""

from __future__ import annotations

from wash.core.errors import WashInputError
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


# -- the lists, derived from the classes' facts --------------------------------------------
def title(name: str) -> str:
    """A scheme's name in prose and tables; a name no scheme has (``mix``) is its own."""
    cls = SCHEMES.get(name)
    return cls.title if cls is not None else name


def published_schemes() -> tuple[str, ...]:
    """The published watermarks, in the registry's order: the experiments' ``all``."""
    return tuple(n for n, cls in SCHEMES.items() if cls.published)


def stateful_schemes() -> tuple[str, ...]:
    """The schemes whose generations each draw a state of their own."""
    return tuple(n for n, cls in SCHEMES.items() if cls.stateful)


def default_forms() -> dict[str, str]:
    """Each scheme with several forms, and the form its defaults serve."""
    return {n: cls.default_form() for n, cls in SCHEMES.items() if cls.form_param}


def form_params() -> tuple[str, ...]:
    """The parameter names that name a form (``form``, ``permutation``), once each."""
    return tuple(dict.fromkeys(cls.form_param for cls in SCHEMES.values() if cls.form_param))


def release_forms() -> dict[str, str]:
    """Each scheme the paper's release serves in another form than its default, and that form."""
    return {n: cls.release_form for n, cls in SCHEMES.items() if cls.release_form}


def paper_schemes(table: int) -> tuple[str, ...]:
    """The schemes the paper's Table ``table`` reports, in its column order."""
    cells = {n: cls.paper_columns[table] for n, cls in SCHEMES.items() if table in cls.paper_columns}
    return tuple(sorted(cells, key=cells.__getitem__))


def rank(name: str) -> tuple[int, str]:
    """The sort key of the project's tables (``sorted(names, key=rank)``); unknown names last, by name."""
    cls = SCHEMES.get(name)
    return (cls.rank if cls is not None else 99, name)
