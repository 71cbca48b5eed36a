"""Run one experiment's jobs in several processes: ``execute(..., workers=K)``.

On a CPU the models of this project are too small to keep even two cores busy
from one process (a 135M model decodes no faster on two torch threads than on
one), so K processes with ``cores / K`` threads each finish nearly K times sooner
(two on 2 cores: about 1.8x, docs/BENCHMARKS.md).
The workers claim jobs one at a time (``runner.run_jobs``), so none idles while
another has a queue, and each appends its rows to its own shard CSV (see
``runner.ResultTable``); the parent shows one progress bar for all of them,
waits, and then summarises once. A worker that fails makes the whole run fail,
with its exit code; the rows it finished stay and a re-run resumes them.

How ``--workers`` combines with the parallel forwards (``wash/parallel.py``): the
two multiply, so only one of them spreads a run over the cores.

* One process (``--workers 1``, the default): the engine's process-wide forward
  threads run the distinct base models of an eager step side by side, one thread
  per model with ``WASH_THREADS_PER_MODEL``
  torch threads (default cores // 2); the environment's ``WASH_*`` settings apply.
* K worker processes: the jobs are the parallelism. Each worker gets
  ``WASH_PARALLEL_FORWARDS=0`` (its models run one after the other in a single
  executor thread) and ``WASH_THREADS_PER_MODEL`` = ``OMP_NUM_THREADS`` = cores // K
  (at least 1: one on a 2-core machine with 2 workers), so K workers use about K x
  cores // K cores, never more. Sequential and parallel forwards give the same
  text (same thread settings per model, see ``wash/parallel.py``), so rows do not
  depend on K where cores // K equals the single process's threads per model.
  (Lazy forwards run one model per step anyway; the setting matters for eager.)

Both are recorded in the run's meta.json (``forward_settings``).

The worker entry point is ``python -m wash.experiments.workers NAME I K CONFIG_JSON``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from wash.errors import WashInputError


def threads_per_worker(workers: int) -> int:
    """The cores shared out evenly, at least one torch thread each."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def forward_env(workers: int) -> dict[str, str]:
    """The environment each of ``workers`` worker processes runs with (threads and forwards)."""
    threads = str(threads_per_worker(workers))
    return {"OMP_NUM_THREADS": threads, "WASH_WORKER_THREADS": threads,
            "WASH_PARALLEL_FORWARDS": "0", "WASH_THREADS_PER_MODEL": threads}


def run_workers(name: str, config, workers: int, todo: int) -> None:
    """Start ``workers`` worker processes for experiment ``name`` and wait for all of them."""
    import shutil
    import time

    from tqdm import tqdm

    from wash.experiments.runner import claims_dir

    claims = claims_dir(config.out, name)
    shutil.rmtree(claims, ignore_errors=True)  # claims of an interrupted run: their jobs are not in the CSVs
    payload = json.dumps(config.to_dict())
    env = {**os.environ, **forward_env(workers)}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = [subprocess.Popen([sys.executable, "-m", "wash.experiments.workers", name, str(i), str(workers), payload],
                              env=env) for i in range(workers)]
    try:
        with tqdm(total=todo, desc=f"{name} [{workers} workers]", unit="job", file=sys.stderr,
                  dynamic_ncols=True, mininterval=1.0) as bar:
            while any(p.poll() is None for p in procs):
                time.sleep(1.0)
                bar.update(_finished(claims) - bar.n)
            bar.update(_finished(claims) - bar.n)
        codes = [p.wait() for p in procs]
    except BaseException:  # Ctrl-C or an error here: do not leave workers running
        for p in procs:
            p.terminate()
        raise
    finally:
        shutil.rmtree(claims, ignore_errors=True)
    failed = [(i, c) for i, c in enumerate(codes) if c != 0]
    if failed:
        raise RuntimeError(f"experiment {name}: worker(s) {', '.join(f'{i} (exit {c})' for i, c in failed)} failed; "
                           "finished jobs are kept, run the same command again to resume")


def _finished(claims: Path) -> int:
    return len(list(claims.glob("*.done"))) if claims.exists() else 0


def main(argv: list[str]) -> int:
    import torch

    from wash.experiments import load
    from wash.experiments.runner import execute

    name, index, count, payload = argv
    threads = int(os.environ.get("WASH_WORKER_THREADS", "1"))
    torch.set_num_threads(threads)
    module = load(name)
    values = json.loads(payload)
    preset = values.pop("preset", "full")
    values["out"] = Path(values["out"])
    config = module.Config.from_preset(preset, **values)
    try:
        execute(module, config, shard=(int(index), int(count)))
    except WashInputError as err:
        print(f"[wash] worker {index}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
