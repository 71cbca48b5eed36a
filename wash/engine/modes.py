"""Every generation mode, registered once: its step strategy, summary, scope and parameters.

A mode is a ``decode.Strategy``: the four WASH modes (``ensemble.py``: ``wash``,
``naive``, ``single``, ``unwatermarked``) and the paper's baselines
(``wash.baselines``: ``toblend``, ``demark``, ``randomwalk``). ``STRATEGIES`` lists
them in the order users see; ``MODE_TABLE`` (what the app, the CLI and the
experiments read) is built from their class facts, and ``parse`` turns a mode name
and its ``param=value,...`` options into the strategy a generation runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from wash.baselines.demark import DeMark
from wash.baselines.randomwalk import RandomWalk
from wash.baselines.toblend import ToBlend
from wash.engine.decode import Strategy
from wash.engine.ensemble import Naive, Single, Unwatermarked, Wash
from wash.errors import WashInputError
from wash.engine.options import parse_params

#: Every mode's strategy by name, in the order users see.
STRATEGIES: dict[str, type[Strategy]] = {cls.name: cls for cls in (
    Wash, Naive, Single, Unwatermarked, ToBlend, DeMark, RandomWalk)}
MODES = tuple(STRATEGIES)
BASELINES = tuple(name for name, cls in STRATEGIES.items() if cls.baseline)


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
MODE_TABLE: dict[str, Mode] = {name: Mode.of(cls) for name, cls in STRATEGIES.items()}


def parse(mode: str, options: str = "") -> Strategy:
    """The strategy of ``mode`` with ``options`` (``param=value,...``) applied."""
    if mode not in STRATEGIES:
        raise WashInputError(f"unknown mode '{mode}' (accepted: {', '.join(MODES)})")
    cls = STRATEGIES[mode]
    return cls(**parse_params(cls, f"mode '{mode}'", options))
