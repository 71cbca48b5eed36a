"""Parallel forwards: the distinct base models of a step run at the same time (WASH-Par).

An eager WASH step needs one forward per distinct base model. Run one after the
other, a step costs the SUM of the models' forwards; run side by side, it costs
about the slowest one, which is what the paper's parallel variant (one GPU per
model) and union-vocabulary ensembling servers achieve.

On a CPU the models share the cores, so what matters is how torch's intra-op
threads are split. One process-wide pool of Python threads runs the per-model
work; each pool thread pins its own torch (OpenMP) thread count to
``threads_per_model`` when it starts (OpenMP thread counts are per calling thread,
so the caller's own setting is untouched). The default splits the cores evenly
between two models: ``max(1, cores // 2)``, one thread each on a 2-core machine,
where a second torch thread buys these small models nothing (docs/BENCHMARKS.md).
Override with ``WASH_THREADS_PER_MODEL``. Torch kernels release the GIL, so the
Python threads do run concurrently; only the models' Python glue contends.

How it combines with other concurrency (all are multiplied, so budget the cores):

* ``--workers K`` (experiments): every worker process would have its own pool, so
  with K > 1 the workers run their models one after the other
  (``WASH_PARALLEL_FORWARDS=0``) with ``cores // K`` torch threads each
  (``wash.experiments.workers.forward_env``): K processes, not K pools, share the
  cores. With one worker the parallel pool is used.
* the app's concurrency limit (``WASH_APP_CONCURRENCY``, default 2): each running
  generation submits its models' work to the SAME pool, whose size is
  ``WASH_FORWARD_THREADS`` (default 2, one per model of a two-model ensemble), so
  concurrent generations queue for the pool instead of oversubscribing the cores.

On GPUs each model sits on its own device where there are several
(``models.resolve_device``); where two share one device, each pool thread issues
its work on its own CUDA stream so the kernels can overlap. (No GPU was available
where this was written; the CUDA path is not exercised by the tests.)

``WASH_PARALLEL_FORWARDS=0`` runs the same tasks one after another in a single
pool thread: the same thread settings, so the same floating-point results and the
same seeded text; only the wall clock differs.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

import torch

T = TypeVar("T")

_POOL: ThreadPoolExecutor | None = None
_POOL_KEY: tuple[int, int] | None = None
_GUARD = threading.Lock()
_LOCAL = threading.local()


def threads_per_model() -> int:
    value = os.environ.get("WASH_THREADS_PER_MODEL")
    if value:
        return max(1, int(value))
    return max(1, (os.cpu_count() or 1) // 2)


def parallel_enabled() -> bool:
    return os.environ.get("WASH_PARALLEL_FORWARDS", "1") not in ("0", "false", "no", "off")


def pool_threads() -> int:
    if not parallel_enabled():
        return 1
    return max(1, int(os.environ.get("WASH_FORWARD_THREADS", "2")))


def _init_thread(threads: int) -> None:
    torch.set_num_threads(threads)


def _pool() -> ThreadPoolExecutor:
    """The process-wide pool, rebuilt when its settings change (tests switch them)."""
    global _POOL, _POOL_KEY
    key = (pool_threads(), threads_per_model())
    with _GUARD:
        if _POOL is None or _POOL_KEY != key:
            if _POOL is not None:
                _POOL.shutdown(wait=True)
            _POOL = ThreadPoolExecutor(max_workers=key[0], thread_name_prefix="wash-forward",
                                       initializer=_init_thread, initargs=(key[1],))
            _POOL_KEY = key
        return _POOL


def _on_stream(device: torch.device | None, task: Callable[[], T]) -> T:
    """Run ``task``, on this pool thread's own CUDA stream when its model is on a GPU."""
    if device is None or device.type != "cuda":
        return task()
    streams = getattr(_LOCAL, "streams", None)
    if streams is None:
        streams = _LOCAL.streams = {}
    if device not in streams:
        streams[device] = torch.cuda.Stream(device=device)
    with torch.cuda.stream(streams[device]):
        out = task()
    streams[device].synchronize()
    return out


def run_all(tasks: Sequence[Callable[[], T]], devices: Sequence[torch.device | None] | None = None) -> list[T]:
    """Run per-model tasks in the pool and return their results in order.

    Every task runs on a pool thread, even a lone one, so that results never
    depend on how many tasks a step happened to have (thread counts are the
    pool's, not the caller's). Exceptions propagate to the caller.
    """
    devices = list(devices) if devices is not None else [None] * len(tasks)
    pool = _pool()
    futures = [pool.submit(_on_stream, d, t) for t, d in zip(tasks, devices)]
    return [f.result() for f in futures]
