"""Parallel forwards: each base model computes on its own thread (WASH-Par on one machine).

An eager WASH step needs one forward per distinct base model. Run one after the
other, a step costs the SUM of the models' forwards; run side by side, it costs
about the slowest one, which is what the paper's parallel variant (one GPU per
model) and union-vocabulary ensembling servers achieve. Lazy forwards (one
provider's model per step) use the same threads to let the models that sat a step
out catch up in the background while the chosen one computes.

Every base model gets ONE executor thread for the whole process, and all of that
model's forwards run on it, in the order they were submitted. That order is what
makes the results reproducible: a context's ids are fed in chunks fixed by the
algorithm (never by timing), on a thread whose torch thread count is fixed, so a
seed gives the same text whatever the machine's load.

On a CPU the models share the cores. Each executor thread pins its own torch
(OpenMP) thread count to ``threads_per_model`` when it starts (OpenMP thread
counts belong to the calling thread, so the caller's setting is untouched). The
default splits the cores between two models: ``max(1, cores // 2)``, one thread
each on a 2-core machine, where a second torch thread buys these small models
nothing (docs/BENCHMARKS.md). Override with ``WASH_THREADS_PER_MODEL``. Torch
kernels release the GIL, so the threads do compute at the same time; only the
models' Python glue contends.

How it combines with other concurrency:

* ``--workers K`` (experiments): every worker process would have its own
  threads, so with K > 1 the workers run their models one after the other
  (``WASH_PARALLEL_FORWARDS=0``) with ``cores // K`` torch threads each
  (``wash.experiments.driver.forward_env``): K processes, not K sets of model
  threads, share the cores. With one worker the models run side by side.
* the app's concurrency limit (``WASH_APP_CONCURRENCY``, default 2): concurrent
  generations submit their forwards to the SAME per-model threads, so two users
  of one model queue for it instead of oversubscribing the cores.

On GPUs each model sits on its own device where there are several
(``models.resolve_device``); where two share one device, each model's thread
issues its work on its own CUDA stream so the kernels can overlap, and the caller's
stream waits for it on the GPU, not on the host. Compiled members that keep their
logits on the GPU run on one driver thread instead (``compiled_members``): each step
returns once its kernels are queued, so one thread queues every member's step and
the members on different GPUs compute at the same time. (No GPU was available where
this was written; the CUDA path is not exercised by the tests.)

A run's ``parallel_forwards=False`` (``WASH_PARALLEL_FORWARDS=0`` makes it every
run's default) puts every model on one shared executor thread: the same work in
the same order with the same thread settings, so the same floating-point results
and the same seeded eager text; only the wall clock differs. The choice is the
run's, passed down to its members (``members.LocalMember.parallel_forwards``) and
from them to every call here, so two runs of one process may choose differently.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, TypeVar

import torch

from wash.core import env

T = TypeVar("T")

_EXECUTORS: dict[tuple[str, int], ThreadPoolExecutor] = {}
_GUARD = threading.Lock()
_LOCAL = threading.local()
_SHARED = "(all models)"


def threads_per_model() -> int:
    """``WASH_THREADS_PER_MODEL``, else half the cores (at least 1)."""
    return env.threads_per_model() or max(1, (os.cpu_count() or 1) // 2)


def parallel_enabled(parallel_forwards: bool | None = None) -> bool:
    """``parallel_forwards`` as given, or the default when ``None`` (``WASH_PARALLEL_FORWARDS``)."""
    return env.parallel_forwards() if parallel_forwards is None else bool(parallel_forwards)


def _init_thread(key: str, threads: int) -> None:
    torch.set_num_threads(threads)
    _LOCAL.key = key


def _lane(model: str, parallel_forwards: bool | None) -> str:
    return model if parallel_enabled(parallel_forwards) else _SHARED


def on_model_thread(model: str, parallel_forwards: bool | None = None) -> bool:
    """Whether the calling thread is the one that runs ``model``'s forwards (in a run choosing ``parallel_forwards``)."""
    return getattr(_LOCAL, "key", None) == _lane(model, parallel_forwards)


def _executor(model: str, parallel_forwards: bool | None) -> ThreadPoolExecutor:
    """The model's executor thread (per setting: runs may choose differently, tests switch thread counts)."""
    key = (_lane(model, parallel_forwards), threads_per_model())
    with _GUARD:
        if key not in _EXECUTORS:
            _EXECUTORS[key] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"wash-{key[0]}",
                                                 initializer=_init_thread, initargs=key)
        return _EXECUTORS[key]


def _on_stream(device: torch.device | None, task: Callable[[], T]) -> T:
    """Run ``task``, on this thread's own CUDA stream when its model is on a GPU.

    The task's tensors are then used on the device's default stream (the caller's): that
    stream is made to wait for this one on the GPU, and the host waits for nothing, so a
    task that leaves its results on the device returns as soon as its kernels are queued."""
    if device is None or device.type != "cuda":
        return task()
    streams = getattr(_LOCAL, "streams", None)
    if streams is None:
        streams = _LOCAL.streams = {}
    if device not in streams:
        streams[device] = torch.cuda.Stream(device=device)
    with torch.cuda.stream(streams[device]):
        out = task()
    torch.cuda.default_stream(device).wait_stream(streams[device])
    return out


def submit(model: str, task: Callable[[], T], device: torch.device | None = None,
           parallel_forwards: bool | None = None) -> Future:
    """Queue ``task`` on ``model``'s thread (the shared one when not ``parallel_forwards``),
    after everything queued there before it."""
    return _executor(model, parallel_forwards).submit(_on_stream, device, task)


def run_all(tasks: Sequence[tuple[str, Callable[[], T]]],
            devices: Sequence[torch.device | None] | None = None, parallel_forwards: bool | None = None) -> list[T]:
    """Run ``(model, task)`` pairs, each on its model's thread, and return results in order.

    Every task runs on its model's thread, even a lone one, so results never
    depend on how many tasks a step happened to have. Exceptions propagate.
    """
    devices = list(devices) if devices is not None else [None] * len(tasks)
    futures = [submit(m, t, d, parallel_forwards) for (m, t), d in zip(tasks, devices)]
    return [f.result() for f in futures]


@contextmanager
def caller_on_one_thread() -> Iterator[None]:
    """Run the caller's own torch work on one thread while the models' threads compute.

    The generation thread's work (summing, sampling, top-k over ~260k entries) is
    small, but with its default thread count every such op opens an OpenMP team
    whose second thread must wait for a core the models hold, and a 2 MB copy then
    took milliseconds. On one thread this work is 2-3 ms a step
    (``python -m tools.bench_profile``). The caller's setting is restored on exit
    (thread counts are per thread).
    """
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def settings(parallel_forwards: bool | None = None) -> dict:
    """What a run records about its forwards (``None``: the default)."""
    return {"parallel": parallel_enabled(parallel_forwards), "threads_per_model": threads_per_model()}
