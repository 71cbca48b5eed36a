"""Every generation mode, registered once: its step strategy, summary, scope and parameters.

A mode is a ``decode.Strategy``: the four WASH modes (``ensemble.py``: ``wash``,
``naive``, ``single``, ``unwatermarked``), registered here, and the paper's baselines
(``wash.baselines``: ``toblend``, ``demark``, ``randomwalk``), which stand on the
engine and register themselves with ``@register`` when ``wash.baselines`` is imported,
as schemes do (``wash.watermarks.registry``). The engine imports no baseline; the ways
in (API, CLI, app, experiments) import ``wash.baselines``, and a mode nobody registered
is an unknown mode. ``STRATEGIES`` lists them in the order users see; ``MODE_TABLE``
(what the app, the CLI and the experiments read) is built from their class facts, and
``parse`` turns a mode name and its ``param=value,...`` options into the strategy a
generation runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from wash.engine.decode import Strategy
from wash.engine.ensemble import Naive, Single, Unwatermarked, Wash
from wash.core.errors import WashInputError
from wash.core.options import parse_params

#: Every registered mode's strategy by name, in the order users see (WASH's modes first).
STRATEGIES: dict[str, type[Strategy]] = {}


@dataclass(frozen=True)
class Mode:
    """How one generation mode runs, as the mode table shows it (a strategy's class facts)."""

    name: str
    #: Only the first provider takes part.
    first_provider_only: bool
    #: Providers perturb their distributions with their watermarks.
    watermark: bool
    #: A token missing from some vocabularies is finished by specialists (fluency-aware routing).
    routing: bool
    description: str
    #: A removal attack the paper compares WASH with, decoding its own way, with parameters.
    baseline: bool = False

    @classmethod
    def of(cls, strategy: type[Strategy]) -> "Mode":
        return cls(strategy.name, strategy.scope == "first", strategy.watermark, strategy.routing,
                   strategy.summary, strategy.baseline)


#: Every mode in one table, built from the registered strategies.
MODE_TABLE: dict[str, Mode] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make a strategy a mode under ``cls.name`` (in ``STRATEGIES`` and ``MODE_TABLE``)."""
    if not cls.name:
        raise ValueError(f"strategy {cls.__name__} has no name")
    if cls.name in STRATEGIES:
        raise RuntimeError(f"mode '{cls.name}' registered twice")
    STRATEGIES[cls.name] = cls
    MODE_TABLE[cls.name] = Mode.of(cls)
    return cls


for _strategy in (Wash, Naive, Single, Unwatermarked):
    register(_strategy)


def mode_names() -> tuple[str, ...]:
    """The registered modes' names, in the order users see."""
    return tuple(STRATEGIES)


def baseline_names() -> tuple[str, ...]:
    """The registered baselines' names."""
    return tuple(name for name, cls in STRATEGIES.items() if cls.baseline)


def unknown_mode(mode: str) -> WashInputError:
    """The one message for a mode nobody registered.

    Why the hint: the baselines stand above the engine and register on import, so code
    that drives the engine directly (not through the API, CLI, app or experiments) sees
    them only after ``import wash.baselines``."""
    hint = "" if baseline_names() else "; the paper's baselines register when wash.baselines is imported"
    return WashInputError(f"unknown mode '{mode}' (accepted: {', '.join(STRATEGIES)}{hint})")


def parse(mode: str, options: str = "") -> Strategy:
    """The strategy of ``mode`` with ``options`` (``param=value,...``) applied."""
    if mode not in STRATEGIES:
        raise unknown_mode(mode)
    cls = STRATEGIES[mode]
    return cls(**parse_params(cls, f"mode '{mode}'", options))
