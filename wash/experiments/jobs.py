"""A job as plain data: its key, a module-level function and that function's arguments.

The driver (``wash.experiments.driver``) runs a job in this process or hands it to
a worker process. Both need nothing but the job itself: ``fn`` is pickled by
reference (its module and name) and ``args``/``kwargs`` by value, so a job made of
closures or lambdas, which a worker process could not receive, is refused when it
is built rather than when the first worker fails to unpickle it.

A job returns a ``JobOutput``: the rows it produced and the generations it made.
Workers only read the generation store; the parent writes what they made, so the
parent alone writes every file of a run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from wash.experiments.config import Scalar

Row = dict[str, Any]


@dataclass(frozen=True)
class JobOutput:
    """What one job produced: rows for the results CSV and new generations for the store."""

    rows: list[Row]
    #: ``(store key, stored value)`` pairs of generations made (not reused) by the job.
    generations: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)


@dataclass(frozen=True)
class Job:
    """One unit of work: ``fn(*args, **kwargs)``, identified by ``key``.

    ``key`` holds every parameter that determines the job's rows; it becomes the
    rows' columns and, serialised, the ``id`` by which a resumed run knows the job
    is done. ``fn`` returns a ``JobOutput`` or a plain list of rows.
    """

    key: Mapping[str, Scalar]
    fn: Callable[..., JobOutput | list[Row]]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        name = getattr(self.fn, "__name__", "")
        qualname = getattr(self.fn, "__qualname__", "")
        if not callable(self.fn) or not name or qualname != name or name == "<lambda>":
            raise TypeError(f"a job's function must be a module-level function (picklable by name), "
                            f"got {qualname or self.fn!r}")

    @property
    def id(self) -> str:
        """The key as canonical JSON: the job's identity in the results CSV."""
        return json.dumps(dict(self.key), sort_keys=True, default=str)

    def run(self) -> JobOutput:
        """Call the function; a bare list of rows becomes a ``JobOutput`` without generations."""
        out = self.fn(*self.args, **dict(self.kwargs))
        return out if isinstance(out, JobOutput) else JobOutput(rows=list(out))


def run_job(job: Job) -> JobOutput:
    """``job.run()`` as a module-level function: what the driver submits to a worker process."""
    return job.run()


def unique_jobs(jobs: Sequence[Job]) -> list[Job]:
    """The jobs with distinct keys, in plan order (the order they are dealt out)."""
    unique: dict[str, Job] = {}
    for j in jobs:
        unique.setdefault(j.id, j)
    return list(unique.values())
