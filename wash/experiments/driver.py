"""Run (or resume) one experiment: plan its jobs, run the missing ones, write CSVs, figure and meta.json.

``execute`` asks the experiment for its plan (a list of ``jobs.Job``: plain data),
skips the jobs whose rows are already in ``<out>/<name>_runs.csv``, and runs the
rest, in this process (``workers=1``) or in a ``ProcessPoolExecutor`` of ``workers``
processes. Either way this process alone writes files: it collects each finished
job's output as it completes, appends the rows to the results CSV (saved after
every job, so an interruption loses at most the jobs that were running) and puts
the job's new generations into the store, which workers only read. A re-run of
the same command resumes where the last one stopped; a finished one recomputes
nothing and only summarises again.

Then it summarises the rows of the current plan (rows of other settings in the
same file are kept but ignored), writes the summary CSV and the figure (HTML +
PNG), and ``<name>_meta.json`` recording the command, date, machine, code,
serving profile, forward settings and compute time for docs/RESULTS.md.

Workers and forwards. On a CPU the models of this project are too small to keep
even two cores busy from one process (a 135M model decodes no faster on two
torch threads than on one), so K processes with ``cores // K`` threads each finish
nearly K times sooner (two on 2 cores: about 1.8x, docs/BENCHMARKS.md). The two
kinds of parallelism multiply, so only one of them spreads a run over the cores:

* one process (``workers=1``): the engine's per-model forward threads
  (``wash/engine/parallel.py``) run an eager step's base models side by side with
  ``WASH_THREADS_PER_MODEL`` torch threads each; the environment's ``WASH_*``
  settings apply;
* K worker processes: the jobs are the parallelism. Each worker's initializer sets
  ``WASH_PARALLEL_FORWARDS=0`` (its models run one after the other on one executor
  thread) and ``WASH_THREADS_PER_MODEL`` = ``OMP_NUM_THREADS`` = cores // K (at
  least 1), before torch is imported there. Sequential and parallel forwards give
  the same text with the same threads per model, so rows do not depend on K where
  cores // K equals the single process's threads per model.

Workers are started with ``spawn`` (a fresh interpreter each), not ``fork``: a
forked copy of a process whose torch thread pools already ran is not safe, and a
fresh one applies its thread settings before torch starts.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

import pandas as pd

from wash.core.errors import WashInputError
from wash.experiments.config import ExperimentConfig
from wash.experiments.jobs import Job, JobOutput, run_job, unique_jobs
from wash.experiments.store import GenerationStore, store_of
from wash.experiments.table import ResultTable
from wash.core.provenance import command_line, cpu_description, load_average, portable
from wash.core.version import engine_fingerprint, git_commit


class Experiment(Protocol):
    """What ``execute`` needs of an experiment module."""

    NAME: str
    Config: type[ExperimentConfig]

    def jobs(self, config: ExperimentConfig) -> list[Job]: ...

    def summarize(self, rows: pd.DataFrame, config: ExperimentConfig) -> pd.DataFrame: ...

    def figure(self, summary: pd.DataFrame, config: ExperimentConfig): ...


@dataclass
class Outputs:
    out_dir: Path
    runs_csv: Path
    summary_csv: Path
    figures: dict[str, Path]
    rows: pd.DataFrame
    summary: pd.DataFrame
    jobs_run: int
    jobs_total: int
    elapsed_s: float
    meta: dict[str, Any] = field(default_factory=dict)


# -- worker processes -------------------------------------------------------------------
def threads_per_worker(workers: int) -> int:
    """The cores shared out evenly, at least one torch thread each."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def forward_env(workers: int) -> dict[str, str]:
    """The environment each of ``workers`` worker processes runs with (threads and forwards)."""
    threads = str(threads_per_worker(workers))
    return {"OMP_NUM_THREADS": threads, "WASH_PARALLEL_FORWARDS": "0", "WASH_THREADS_PER_MODEL": threads}


def init_worker(env: dict[str, str]) -> None:
    """A worker process's initializer: its forward settings, then its torch thread count.

    Ctrl-C is left to the parent, which ends the workers itself (a worker that
    caught it would hand it back as the failure of its job and carry on).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Progress bars in a worker (model loading) get a thread lock, not tqdm's default
    # multiprocessing lock: a worker ended mid-job would leave that semaphore behind.
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    os.environ.update(env)
    import torch

    torch.set_num_threads(int(env["WASH_THREADS_PER_MODEL"]))


def forward_settings(workers: int = 1) -> dict[str, Any]:
    """How the generations' forwards ran: parallel or not, torch threads per model.

    With one worker these are this process's (``wash.engine.parallel``'s defaults or the
    ``WASH_*`` environment); with several, what ``forward_env`` gives each worker.
    """
    if workers > 1:
        env = forward_env(workers)
        return {"parallel": env["WASH_PARALLEL_FORWARDS"] != "0",
                "threads_per_model": int(env["WASH_THREADS_PER_MODEL"])}
    from wash.engine import parallel_settings as settings

    return settings()


def machine_description() -> str:
    """The kind of machine (system, CPU model, logical CPUs) and torch's version and threads."""
    import torch

    return f"{cpu_description()}, torch {torch.__version__} threads={torch.get_num_threads()}"


# -- running the plan ---------------------------------------------------------------------
class _Recorder:
    """The parent's side of every finished job: rows to the CSV, generations to the store, the bar."""

    def __init__(self, table: ResultTable, store: GenerationStore | None, bar) -> None:
        self.table, self.store, self.bar = table, store, bar
        self.ran = 0

    def __call__(self, job: Job, output: JobOutput) -> None:
        if self.store is not None:
            for key, value in output.generations:
                self.store.put(key, value)
        self.table.add(job, output.rows)
        self.ran += 1
        self.bar.update(1)


def _run_here(todo: Sequence[Job], record: _Recorder) -> None:
    for job in todo:
        record(job, job.run())


def _run_in_workers(todo: Sequence[Job], record: _Recorder, workers: int) -> None:
    """Deal ``todo`` to ``workers`` processes in plan order; record each job as it completes.

    A job that fails stops the dealing: jobs not yet started are cancelled, those
    running are awaited and recorded, then the error is raised. An interruption
    (Ctrl-C) here ends the workers at once; what was recorded stays.
    """
    # the thread settings are those of ``workers`` processes even when fewer jobs are left
    executor = ProcessPoolExecutor(max_workers=min(workers, len(todo)),
                                   mp_context=multiprocessing.get_context("spawn"),
                                   initializer=init_worker, initargs=(forward_env(workers),))
    error: BaseException | None = None
    try:
        futures: dict[Future, Job] = {executor.submit(run_job, job): job for job in todo}
        for future in as_completed(futures):
            if future.cancelled():
                continue
            failure = future.exception()
            if failure is None:
                record(futures[future], future.result())
            elif error is None:
                error = failure
                for other in futures:
                    other.cancel()  # only those not yet handed to a worker
    except BaseException:  # Ctrl-C (or a failure recording a job): stop the workers now
        # (there is no public way to stop a running job)
        for proc in list((getattr(executor, "_processes", None) or {}).values()):
            proc.terminate()
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown(wait=True)
    if error is not None:
        raise error


def execute(experiment: Experiment, config: ExperimentConfig, command: str | None = None,
            workers: int = 1, partial: bool = False) -> Outputs:
    """Run (or resume) ``experiment`` under ``config`` with ``workers`` processes; write every output.

    ``partial``: run nothing, summarise the plan's rows already done (a long run
    committed as it grows, or a plan whose costly cells are left out); the meta
    records how many of the plan's jobs the summary covers.
    """
    from tqdm import tqdm

    if workers < 1:
        raise WashInputError(f"workers must be at least 1, got {workers}")
    if workers > 1 and not getattr(experiment, "PARALLEL", True):
        raise WashInputError(f"experiment {experiment.NAME} measures time and memory: run it with one worker")
    config.serving  # noqa: B018 (an unknown profile fails here, before any job)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    name = experiment.NAME
    plan = unique_jobs(experiment.jobs(config))
    table = ResultTable(out / f"{name}_runs.csv")
    todo = [] if partial else [j for j in plan if j.id not in table.done]
    start, load_at_start = time.perf_counter(), load_average()
    label = name if workers == 1 else f"{name} [{workers} workers]"
    with tqdm(total=len(plan), initial=len(plan) - len(todo), desc=label, unit="job", file=sys.stderr,
              dynamic_ncols=True, mininterval=1.0) as bar:
        record = _Recorder(table, store_of(config), bar)
        try:
            if workers == 1:
                _run_here(todo, record)
            elif todo:
                _run_in_workers(todo, record, workers)
        except BaseException:
            done = len(table.done & {j.id for j in plan})
            print(f"\n[wash] {name}: stopped with {done} of {len(plan)} jobs done, kept in {table.path}; "
                  "the same command resumes from there", file=sys.stderr)
            if record.ran:  # their compute time counts in the resumed run's total
                write_meta(out / f"{name}_meta.json", name, config, command, len(plan), record.ran,
                           time.perf_counter() - start, workers, jobs_done=done, load_at_start=load_at_start)
            raise
        finally:
            table.order_by(plan)
    elapsed = time.perf_counter() - start
    done = len(table.done & {j.id for j in plan})
    meta = write_meta(out / f"{name}_meta.json", name, config, command, len(plan), record.ran, elapsed,
                      workers, jobs_done=done, load_at_start=load_at_start)
    rows = table.rows_of(plan)
    summary = experiment.summarize(rows, config)
    summary_csv = out / f"{name}_summary.csv"
    summary.to_csv(summary_csv, index=False)
    spec = experiment.figure(summary, config)
    figures = save_figure(spec, out, name) if spec is not None else {}
    return Outputs(out_dir=out, runs_csv=table.path, summary_csv=summary_csv, figures=figures, rows=rows,
                   summary=summary, jobs_run=record.ran, jobs_total=len(plan), elapsed_s=elapsed, meta=meta)


# -- outputs --------------------------------------------------------------------------------
def write_meta(path: Path, name: str, config: ExperimentConfig, command: str | None, jobs_total: int,
               ran: int, elapsed: float, workers: int = 1, jobs_done: int | None = None,
               load_at_start: list[float] | None = None) -> dict[str, Any]:
    """Record how the outputs were made (written before summarising, so a later failure keeps it).

    The command and ``config.out`` are recorded relative to the repository root
    (``wash.core.provenance``): a committed meta names no path of the machine it was made on.
    """
    import torch

    previous = json.loads(path.read_text()) if path.exists() else {}
    same_plan = _same_plan(previous.get("config"), config)
    meta = {
        "experiment": name,
        "command": command or command_line(["python", *sys.argv]),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_description(),
        # the 1, 5 and 15 minute load averages when the jobs started and when this was written
        "load_average": {"start": load_at_start, "end": load_average()},
        "code": git_commit(),
        "engine": engine_fingerprint(),
        "config": {**config.to_dict(), "out": portable(str(config.out))},
        "profile": {"name": config.profile, **config.serving.settings()},
        "jobs_total": jobs_total,
        # how many of the plan's jobs have rows (below jobs_total: a partial summary)
        "jobs_done": jobs_total if jobs_done is None else jobs_done,
        "jobs_run_now": ran,
        "elapsed_s_now": round(elapsed, 1),
        "workers": workers,
        "threads_per_worker": threads_per_worker(workers) if workers > 1 else torch.get_num_threads(),
        "forwards": config.forwards,
        "forward_settings": forward_settings(workers),
        # compute time accumulated over resumed invocations of the same plan
        "elapsed_s_total": round(elapsed + (previous.get("elapsed_s_total", 0.0) if same_plan else 0.0), 1),
    }
    if same_plan and ran == 0:  # a pure re-summary keeps the command, date, code and machine of the run that computed the rows
        # ``note``: what a person recorded about how the rows were computed (a restored meta, say)
        for k in ("command", "date", "machine", "code", "engine", "workers", "threads_per_worker", "forward_settings",
                  "jobs_run_now", "elapsed_s_now", "load_average", "note", "key_null"):
            if k in previous:
                meta[k] = previous[k]
        if "load_average" not in previous:  # this call's load says nothing of the run that made the rows
            del meta["load_average"]
        meta["summarised_with"] = git_commit()
        meta["summarised_by"] = command or command_line(["python", *sys.argv])
    path.write_text(json.dumps(meta, indent=2))
    return meta


def _same_plan(previous: dict | None, config: ExperimentConfig) -> bool:
    """Whether a meta's recorded config is ``config``'s plan.

    Compared through JSON, where the config's tuples have become lists. A moved or
    copied output folder holds the same plan, and so does a meta written before a
    config field existed when the field is at its default (``lineup``, say): that
    field's default is what the earlier run did.
    """
    if not isinstance(previous, dict):
        return False
    now = json.loads(json.dumps(config.to_dict(), default=str))
    defaults = json.loads(json.dumps({f.name: f.default for f in dataclasses.fields(config)
                                      if f.default is not dataclasses.MISSING}, default=str))
    added = {k for k in now if k not in previous and k in defaults and now[k] == defaults[k]}
    drop = {"out"} | added
    return ({k: v for k, v in previous.items() if k not in drop}
            == {k: v for k, v in now.items() if k not in drop})


def save_figure(spec, out: Path, name: str) -> dict[str, Path]:
    from wash.experiments.plots import save_figure as _save

    return _save(spec, out, name)
