"""Backends: where the members' models run, one registry line each.

A backend turns model names into members (``members.Member``); everything above the
members (serving, watermarks, averaging, routing, re-synchronisation, detection, the
baselines) runs in the calling process whatever the backend, on the members'
protocol alone. So the backend changes where the forwards run, not what is computed: it
is a machine setting, like ``WASH_PARALLEL_FORWARDS``, and stays out of a run's
command line and of the texts' store keys. ``local`` and ``ray`` give the same text bit for
bit; ``compiled`` runs other kernels, whose float sums may differ in the last bits (a
sample can then differ; docs/USAGE.md gives the measured difference).

Users name a backend as ``NAME[:param=value,...]`` (``local``,
``ray:address=10.0.0.5:6379``), the spelling of every other plug-in
(``wash.core.options``), parsed once into the backend's frozen dataclass. A new backend is
its module (a frozen dataclass with ``name``, ``members`` and ``member``) plus one
line in ``REGISTRY``. Modules are imported only when their backend is named, so an
optional dependency (Ray) is needed only by its backend.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable, ClassVar, Protocol, Sequence

from wash.core import env
from wash.engine.members import Member
from wash.core.errors import WashInputError
from wash.core.options import params_text, parse_params

Progress = Callable[[str], None]



@dataclasses.dataclass(frozen=True)
class Registered:
    """A registry line: how to reach the backend's class, and what ``--backend``'s help says of it.

    The summary lives here, not on the class, so listing the backends (``--help``) imports none of
    their modules (Ray's import alone costs seconds)."""

    load: Callable[[], type]
    summary: str


#: Each backend's name, how to reach the class that implements it (its module imported when first named;
#: a literal module name, so the layer test reads the import), and its one-line summary.
REGISTRY: dict[str, Registered] = {
    "local": Registered(lambda: importlib.import_module("wash.engine.members").LocalBackend,
                        "this process, one thread per model"),
    "ray": Registered(lambda: importlib.import_module("wash.engine.ray_members").RayBackend,
                      "one Ray actor per model, one GPU each where the cluster has GPUs; ray:address=HOST:PORT "
                      "joins a cluster, default $RAY_ADDRESS, else a local one; the same text as local"),
    "compiled": Registered(lambda: importlib.import_module("wash.engine.compiled_members").CompiledBackend,
                           "a static KV cache and a compiled one-token step; float sums may differ in the "
                           "last bits"),
}
BACKENDS = tuple(REGISTRY)


def summaries() -> str:
    """Every backend with its summary, in the registry's order: the ``--backend`` help's list."""
    return "; ".join(f"{name} ({line.summary})" for name, line in REGISTRY.items())
#: What a run uses when no backend is named anywhere (``WASH_BACKEND`` unset).
DEFAULT = "local"


class Backend(Protocol):
    """Where models run: members for model names. Implementations are frozen dataclasses whose
    fields are the backend's options."""

    name: ClassVar[str]
    #: Whether the models' weights live in this process (its memory is theirs: the bench measures it).
    in_process: ClassVar[bool]

    def members(self, names: Sequence[str], progress: Progress | None = None,
                parallel_forwards: bool | None = None) -> dict[str, Member]:
        """A member for each model of ``names``, by name; models that load, load at once."""

    def member(self, name: str, progress: Progress | None = None) -> Member:
        """One model as a member (a model needed beside the providers: a judge, a scorer)."""


def backend_class(name: str) -> type:
    """The class registered as ``name``, or one line listing the backends."""
    if name not in REGISTRY:
        raise WashInputError(f"unknown backend '{name}' (accepted: {', '.join(BACKENDS)})")
    return REGISTRY[name].load()


def parse_backend(spec: "str | Backend | None" = None) -> Backend:
    """``NAME[:param=value,...]`` as its backend (``None`` or empty: ``WASH_BACKEND``, else ``local``).

    The one place backend options are read: a bad name or option is one ``WashInputError``.
    A backend already parsed is returned as it is."""
    if spec is not None and not isinstance(spec, str):
        return spec
    text = (spec or default_backend()).strip()
    name, _, params = text.partition(":")
    cls = backend_class(name.strip())
    return cls(**parse_params(cls, f"backend '{cls.name}'", params))


def backend_text(backend: "str | Backend | None") -> str:
    """The canonical spelling of a backend: its name and the options it was given (``ray:address=...``)."""
    parsed = parse_backend(backend)
    given = [f for f in dataclasses.fields(parsed) if getattr(parsed, f.name) != f.default]
    params = params_text(parsed, [f.name for f in given])
    return f"{parsed.name}:{params}" if params else parsed.name


def default_backend() -> str:
    """``WASH_BACKEND`` or ``local``: read when a config is made, the edge where settings are parsed."""
    return env.backend() or DEFAULT


def backend_name(backend: "str | Backend | None") -> str:
    """Just the name (``ray`` for ``ray:address=...``): what reports and benchmarks record."""
    return parse_backend(backend).name
