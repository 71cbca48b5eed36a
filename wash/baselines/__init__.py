"""The paper's baselines: other watermark-removal attacks, as generation modes beside WASH.

The paper judges WASH against three attacks (its Tables 1, 2, 3 and 5):

* ``toblend`` (Huang et al. 2024, ``toblend.py``): the providers take turns, each
  writing a fixed block of tokens from its own watermarked distribution, the
  context re-encoded at every switch;
* ``demark`` (Chen et al. 2024, ``demark.py``): probe provider 1 to estimate its
  green list and bias, then generate from its distribution with them undone (only
  for green-list schemes);
* ``randomwalk`` (Liu et al. 2024, ``randomwalk.py``): provider 1 writes the text,
  then spans of it are rewritten by a weaker unwatermarked model and kept only when
  a quality check accepts them.

Each is a mode of ``config.MODE_TABLE`` (``--mode toblend``) on the same engine:
``ensemble.generate_stream`` validates the config and loads the providers as for
every mode, then hands decoding to the baseline's ``decode``, which yields the same
event stream (``events.py``) and ends with a ``FinishedEvent`` whose ``RunResult``
carries the providers' real detectors on the final text, so the app, the CLI and
the experiments consume a baseline exactly as they consume WASH. A baseline's
parameters are the fields of its dataclass, written ``param=value,...`` in
``GenerationConfig.baseline_options`` (``--baseline-options block=8``); defaults
come from its paper, and each module's docstring says where from and what could
not be reproduced on two small CPU models. Its own costs (re-encoded ids, probing
queries, rewrite passes) go into ``RunResult.settings["baseline"]``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, Iterator

from wash.errors import WashInputError
from wash.options import params_text, parse_params

if TYPE_CHECKING:
    from wash.config import GenerationConfig
    from wash.ensemble import Event
    from wash.providers import ProviderSet


@dataclass(frozen=True)
class Baseline:
    """One removal attack as a generation mode; its parameters are the dataclass's fields."""

    name: ClassVar[str] = ""
    #: One line for help texts and the mode table.
    summary: ClassVar[str] = ""

    def decode(self, config: "GenerationConfig", pset: "ProviderSet", load_s: float,
               should_stop: Callable[[], bool]) -> Iterator["Event"]:
        """The generation's events after loading, ending with one ``FinishedEvent``."""
        raise NotImplementedError

    def __str__(self) -> str:
        return params_text(self)


#: The modules that define baselines, each registering its class on import.
MODULES = ("toblend", "demark", "randomwalk")
#: Every baseline by mode name; a module registers its class here with ``register``.
BASELINES: dict[str, type[Baseline]] = {}


def register(cls: type[Baseline]) -> type[Baseline]:
    """Class decorator: make ``cls`` the baseline of mode ``cls.name``."""
    BASELINES[cls.name] = cls
    return cls


def parse(mode: str, options: str = "") -> Baseline:
    """The baseline of ``mode`` with ``options`` (``param=value,...``) applied."""
    _load_all()
    if mode not in BASELINES:
        raise WashInputError(f"mode '{mode}' is not a baseline (baselines: {', '.join(BASELINES) or 'none'})")
    cls = BASELINES[mode]
    return cls(**parse_params(cls, f"mode '{mode}'", options))


def _load_all() -> None:
    """Import every baseline module so that each registers itself."""
    for module in MODULES:
        importlib.import_module(f"wash.baselines.{module}")
