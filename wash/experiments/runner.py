"""What every experiment shares: configs with presets, resumable CSV output, generation.

An experiment is a list of *jobs*, each one generation (or one measurement) keyed by
the parameters that determine it. ``execute`` runs the jobs whose key is not yet in
the output CSV, writing the CSV again after each job, so an interrupted run resumes
where it stopped and a finished one recomputes nothing. With ``workers > 1`` the
jobs are shared by worker processes (``wash.experiments.workers``) that claim them
one at a time, each appending to its own shard CSV, merged into the main CSV when
all are done.

Generations are also stored by what determines them (``GenerationStore``, under
``<out>/../generations``): the same WASH text needed by two experiments (decay's
mixed N = 3 and tpr's WASH N = 3, say) or an unwatermarked text scored by the
detectors of several schemes is generated once. The store's key includes a
fingerprint of the engine's source (``engine_fingerprint``), so texts made by a
different engine are never reused. Detection always runs afresh. It then summarises the
rows of the current plan only (rows of other settings in the same file are kept but
ignored), writes the summary CSV and the figure (HTML + PNG), and a ``meta.json``
recording the command, date, machine, forward settings and elapsed time for
docs/RESULTS.md.

Generation goes through the engine's public API (``wash.ensemble.generate``) with
live detection off and the config's ``forwards`` (``eager`` or ``lazy``, see
``wash.config.FORWARDS``); texts are scored with the providers' own detectors the
way ``python -m wash detect`` does.

Forwards: ``lazy`` draws each token from one uniformly picked provider's
distribution, the same law as drawing from the average, running only that
provider's model. Its texts are therefore distributed exactly like ``eager``'s,
but it never computes the average p̄, the consensus p* or the other providers'
distributions. An experiment that only reads the final text (its detection z, its
routing counts, its perplexity or answer) loses nothing by it and defaults to
``lazy``; one that needs the distributions or measures eager decoding itself
(``cost``) defaults to ``eager``. A seeded text differs between the two, so
``forwards`` is part of every job key and of the generation store's key.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Protocol, Sequence

import pandas as pd

from wash.config import GenerationConfig, ProviderSpec
from wash.events import ProviderDetection, RunResult
from wash.version import engine_fingerprint, engine_sources, git_commit as code_version, source_fingerprint  # noqa: F401

Scalar = str | int | float | bool

#: The paper's default watermark schemes (Table 2) plus Unigram and SynthID.
ALL_SCHEMES = ("kgw", "unigram", "waterbag", "dipmark", "aar", "its-edit", "exp-edit", "synthid")
#: Base of the derived secret keys (KGW's reference hash key).
KEY_BASE = 15485863


@dataclass
class ExperimentConfig:
    """Settings common to every experiment; subclasses add their own fields and presets.

    ``models[0]`` is the fixed base model (and the instruct model for arithmetic);
    heterogeneous ensembles assign provider ``i`` the model ``models[i % len(models)]``.
    """

    out: Path = Path("runs")
    models: tuple[str, ...] = ("smollm2", "gemma3")
    prompts: int = 30
    tokens: int = 200
    seeds: tuple[int, ...] = (0,)
    schemes: tuple[str, ...] = ALL_SCHEMES
    temperature: float = 1.0
    top_p: float = 1.0
    z_threshold: float = 4.0
    #: Reuse generations stored under ``<out>/../generations`` (see ``GenerationStore``).
    cache: bool = True
    #: ``eager`` or ``lazy`` forwards for every generation (``wash.config.FORWARDS``); each
    #: experiment sets its own default (see the module docstring).
    forwards: str = "eager"
    #: Name of the preset the config was built from (recorded in meta.json).
    preset: str = "full"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def from_preset(cls, name: str = "full", **overrides: Any) -> "ExperimentConfig":
        if name != "full" and name not in cls.PRESETS:
            raise ValueError(f"unknown preset '{name}' (accepted: full, {', '.join(cls.PRESETS)})")
        values = {**cls.PRESETS.get(name, {}), **{k: v for k, v in overrides.items() if v is not None}}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)} for {cls.__name__}")
        for f in dataclasses.fields(cls):
            if f.name in values and isinstance(values[f.name], list):
                values[f.name] = tuple(values[f.name])
        return cls(preset=name, **values)

    def key(self, **params: Scalar) -> dict[str, Scalar]:
        """A job key: the given parameters plus the sampling settings every job depends on."""
        return {"tokens": self.tokens, "temperature": self.temperature, "top_p": self.top_p,
                "forwards": self.forwards, **params}

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["out"] = str(self.out)
        return d


# -- jobs and the resumable table ------------------------------------------------------
@dataclass
class Job:
    """One unit of work: ``run()`` returns the rows it produced; ``key`` identifies it."""

    key: dict[str, Scalar]
    run: Callable[[], list[dict[str, Any]]]

    @property
    def id(self) -> str:
        return json.dumps(self.key, sort_keys=True, default=str)


class ResultTable:
    """A CSV of rows, each tagged with the id of the job that produced it.

    A worker process (``shard`` set) reads every row (the main CSV and all shard
    CSVs) to know what is done, but appends only to its own ``*.shard-I.csv``; a
    table opened without ``shard`` folds the shard files into the main CSV.
    Rows of a job already present in an earlier file are dropped on reading, so
    a worker that re-writes rows already merged cannot duplicate them.
    """

    def __init__(self, path: Path, shard: int | None = None) -> None:
        self.path = path
        self.shard = shard
        shards = sorted(path.parent.glob(f"{path.stem}.shard-*.csv"))
        self.frame = pd.DataFrame({"job": pd.Series(dtype=str)})
        for source in [path, *shards]:
            self.frame = self._merge(self.frame, _read_rows(source))
        self.done: set[str] = set(self.frame["job"].astype(str))
        if shard is not None:
            self.own_path = path.with_name(f"{path.stem}.shard-{shard}.csv")
            self.own = _read_rows(self.own_path)
        else:
            self.own_path, self.own = path, self.frame
            if shards:  # fold the workers' rows into the main CSV
                self.save()
                for f in shards:
                    f.unlink()

    @staticmethod
    def _merge(frame: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
        if new.empty:
            return frame
        new = new[~new["job"].astype(str).isin(set(frame["job"].astype(str)))]
        return new.reset_index(drop=True) if frame.empty else pd.concat([frame, new], ignore_index=True)

    def add(self, job: Job, rows: list[dict[str, Any]]) -> None:
        if not rows:  # record that the job ran even when it produced nothing
            rows = [{}]
        new = pd.DataFrame([{"job": job.id, **job.key, **r} for r in rows])
        self.frame = self._merge(self.frame, new)
        self.own = self.frame if self.shard is None else self._merge(self.own, new)
        self.done.add(job.id)
        self.save()

    def save(self) -> None:
        self.own_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.own_path.with_suffix(".csv.tmp")
        self.own.to_csv(tmp, index=False)
        os.replace(tmp, self.own_path)

    def rows_of(self, jobs: Sequence[Job]) -> pd.DataFrame:
        ids = {j.id for j in jobs}
        return self.frame[self.frame["job"].astype(str).isin(ids)].reset_index(drop=True)


def _read_rows(path: Path) -> pd.DataFrame:
    if path.exists() and path.stat().st_size:
        return pd.read_csv(path, keep_default_na=True)
    return pd.DataFrame({"job": pd.Series(dtype=str)})


def unique_jobs(jobs: Sequence[Job]) -> list[Job]:
    """The jobs with distinct keys, in plan order (the order workers are dealt them)."""
    unique: dict[str, Job] = {}
    for j in jobs:
        unique.setdefault(j.id, j)
    return list(unique.values())


def run_jobs(table: ResultTable, jobs: Sequence[Job], desc: str, claims: Path | None = None) -> int:
    """Run every job not yet in ``table``; returns how many this process ran.

    Alone (``claims`` None) it shows a progress bar on stderr. As one of several
    workers it takes a job only after claiming it (creating ``claims/<job>`` fails
    if another worker got there first), so the workers share the jobs dynamically:
    a worker whose jobs come from the generation store moves on to the next
    instead of idling. After each job it leaves ``claims/<job>.done`` for the
    parent's progress bar.
    """
    from tqdm import tqdm

    unique = unique_jobs(jobs)
    todo = [j for j in unique if j.id not in table.done]
    ran = 0
    if claims is not None:
        claims.mkdir(parents=True, exist_ok=True)
        for job in todo:
            marker = claims / _job_digest(job)
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            table.add(job, job.run())
            marker.with_suffix(".done").touch()
            ran += 1
        return ran
    with tqdm(total=len(unique), initial=len(unique) - len(todo), desc=desc, unit="job", file=sys.stderr,
              dynamic_ncols=True, mininterval=1.0) as bar:
        for job in todo:
            table.add(job, job.run())
            ran += 1
            bar.update(1)
    return ran


def _job_digest(job: Job) -> str:
    return hashlib.sha256(job.id.encode()).hexdigest()[:32]


def claims_dir(out: Path, name: str) -> Path:
    """Where the workers of one run claim their jobs (cleared before and after a run)."""
    return Path(out) / f".{name}-claims"


# -- the experiment protocol and its driver --------------------------------------------
class Experiment(Protocol):
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


def machine_description() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} logical CPUs ({cpu}), "
            f"torch {torch.__version__} threads={torch.get_num_threads()}")


def execute(experiment: Experiment, config: ExperimentConfig, command: str | None = None, workers: int = 1,
            shard: tuple[int, int] | None = None) -> Outputs:
    """Run (or resume) ``experiment`` under ``config``; write CSVs, figure and meta.json.

    ``workers > 1`` runs the jobs in that many worker processes (one torch thread
    each on a 2-core machine: small models decode no faster on two threads, so two
    processes give about 1.8x the throughput), then summarises here. ``shard = (i, k)`` is
    what worker ``i`` of ``k`` is given: it claims and runs jobs until none is left
    and returns without summarising.
    """
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    name = experiment.NAME
    jobs = experiment.jobs(config)
    if shard is not None:
        table = ResultTable(out / f"{name}_runs.csv", shard=shard[0])
        ran = run_jobs(table, jobs, desc=name, claims=claims_dir(out, name))
        return Outputs(out_dir=out, runs_csv=table.own_path, summary_csv=out / f"{name}_summary.csv", figures={},
                       rows=table.rows_of(jobs), summary=pd.DataFrame(), jobs_run=ran,
                       jobs_total=len(unique_jobs(jobs)), elapsed_s=0.0)
    start = time.perf_counter()
    if workers > 1:
        from wash.experiments.workers import run_workers

        before_table = ResultTable(out / f"{name}_runs.csv")
        before = len(before_table.done & {j.id for j in jobs})
        run_workers(name, config, workers, todo=len(unique_jobs(jobs)) - before)
        table = ResultTable(out / f"{name}_runs.csv")
        ran = len(table.done & {j.id for j in jobs}) - before
    else:
        table = ResultTable(out / f"{name}_runs.csv")
        ran = run_jobs(table, jobs, desc=name)
    elapsed = time.perf_counter() - start
    meta = _write_meta(out / f"{name}_meta.json", name, config, command, len(unique_jobs(jobs)), ran, elapsed,
                       workers)
    rows = table.rows_of(jobs)
    summary = experiment.summarize(rows, config)
    summary_csv = out / f"{name}_summary.csv"
    summary.to_csv(summary_csv, index=False)
    spec = experiment.figure(summary, config)
    figures = save_figure(spec, out, name) if spec is not None else {}
    return Outputs(out_dir=out, runs_csv=table.path, summary_csv=summary_csv, figures=figures, rows=rows,
                   summary=summary, jobs_run=ran, jobs_total=meta["jobs_total"], elapsed_s=elapsed, meta=meta)


def _write_meta(path: Path, name: str, config: ExperimentConfig, command: str | None, jobs_total: int,
                ran: int, elapsed: float, workers: int = 1) -> dict[str, Any]:
    """Record how the outputs were made (written before summarising, so a later failure keeps it)."""
    previous = json.loads(path.read_text()) if path.exists() else {}
    # compared through JSON, where the config's tuples have become lists
    same_plan = previous.get("config") == json.loads(json.dumps(config.to_dict(), default=str))
    meta = {
        "experiment": name,
        "command": command or " ".join(sys.argv),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_description(),
        "code": code_version(),
        "engine": engine_fingerprint(),
        "config": config.to_dict(),
        "jobs_total": jobs_total,
        "jobs_run_now": ran,
        "elapsed_s_now": round(elapsed, 1),
        "workers": workers,
        "threads_per_worker": _worker_threads(workers),
        "forwards": config.forwards,
        "forward_settings": forward_settings(workers),
        # compute time accumulated over resumed invocations of the same plan
        "elapsed_s_total": round(elapsed + (previous.get("elapsed_s_total", 0.0) if same_plan else 0.0), 1),
    }
    if same_plan and ran == 0:  # a pure re-summary keeps the date and code of the run that computed the rows
        meta["date"] = previous.get("date", meta["date"])
        meta["code"] = previous.get("code", meta["code"])
        meta["engine"] = previous.get("engine", meta["engine"])
        for k in ("workers", "threads_per_worker", "forward_settings"):  # how those rows were computed
            if k in previous:
                meta[k] = previous[k]
        meta["summarised_with"] = code_version()
    path.write_text(json.dumps(meta, indent=2))
    return meta


def forward_settings(workers: int = 1) -> dict[str, Any]:
    """How the generations' forwards ran: parallel or not, torch threads per model.

    With one worker these are this process's (``wash.parallel``'s defaults or the
    ``WASH_*`` environment); with several, what ``workers.forward_env`` gives each worker.
    """
    if workers > 1:
        from wash.experiments.workers import forward_env

        env = forward_env(workers)
        return {"parallel": env["WASH_PARALLEL_FORWARDS"] != "0",
                "threads_per_model": int(env["WASH_THREADS_PER_MODEL"])}
    from wash.parallel import settings

    return settings()


def _worker_threads(workers: int) -> int:
    import torch

    if workers <= 1:
        return torch.get_num_threads()
    from wash.experiments.workers import threads_per_worker

    return threads_per_worker(workers)


def save_figure(spec, out: Path, name: str) -> dict[str, Path]:
    from wash.experiments.plots import save_figure as _save

    return _save(spec, out, name)


# -- providers, generation and scoring -------------------------------------------------
def derive_key(seed: int, index: int, salt: int = 0) -> int:
    """Distinct, reproducible secret keys: provider ``index`` of run ``seed``."""
    return KEY_BASE + 1000 * int(seed) + 97 * int(salt) + int(index)


def spec(model: str, scheme: str, key: int, **params: Any) -> ProviderSpec:
    extra = ",".join(f"{k}={v}" for k, v in params.items())
    return ProviderSpec.parse(f"{model}:{scheme}:{key}" + (f":{extra}" if extra else ""))


def make_ensemble(n: int, models: Sequence[str], schemes: Sequence[str], seed: int, salt: int = 0,
                  shared_key: bool = False, **params: Any) -> list[ProviderSpec]:
    """N providers: provider ``i`` serves ``models[i % len]`` with ``schemes[i % len]``.

    Keys are independent across providers (and across ``salt``, e.g. the prompt
    index, so that every run draws a new key combination) unless ``shared_key``.
    """
    return [spec(models[i % len(models)], schemes[i % len(schemes)],
                 derive_key(seed, 0 if shared_key else i, salt), **params) for i in range(n)]


def rotate(items: Sequence[str], offset: int) -> list[str]:
    """``items`` rotated left by ``offset``: a different scheme mix for every run."""
    k = offset % len(items)
    return list(items[k:]) + list(items[:k])


def prompt_set(config: ExperimentConfig, domain: str | None = None):
    from wash.prompts import load_prompts

    return load_prompts(domain=domain, limit=config.prompts)


def specs_text(specs: Sequence[ProviderSpec]) -> str:
    """Providers as one CSV cell, e.g. ``smollm2:kgw:1|gemma3:aar:2``."""
    return "|".join(str(s) for s in specs)


def generate_run(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
                 max_new_tokens: int | None = None, **overrides: Any) -> RunResult:
    """One generation through the engine's public API (live detection off: faster)."""
    from wash.ensemble import generate

    settings: dict[str, Any] = dict(max_new_tokens=int(max_new_tokens or config.tokens),
                                    temperature=config.temperature, top_p=config.top_p, seed=int(seed),
                                    live_detection=False, z_threshold=config.z_threshold,
                                    forwards=config.forwards)
    settings.update(overrides)
    return generate(GenerationConfig(providers=list(specs), prompt=prompt, mode=mode, **settings))


_DETECTORS: dict[str, list] = {}


def watermarked_providers(specs: Sequence[ProviderSpec]) -> list:
    """The providers of ``specs`` with their watermarks (cached): detectors for any text."""
    from wash.providers import build_providers

    k = specs_text(specs)
    if k not in _DETECTORS:
        _DETECTORS[k] = build_providers(specs).providers
    return _DETECTORS[k]


def detect(specs: Sequence[ProviderSpec], text: str, threshold: float = 4.0) -> list[ProviderDetection]:
    """Each provider's own detector on ``text`` (re-tokenised by that provider's tokenizer)."""
    from wash.detection import detect_text

    return detect_text(watermarked_providers(specs), text, threshold)


def detection_rows(detections: Iterable[ProviderDetection]) -> list[dict[str, Any]]:
    """One row per provider: its index, base model, scheme, key and verdict."""
    return [{"provider": i, "provider_model": d.model, "provider_scheme": d.scheme, "provider_key": d.key,
             "z": float(d.z), "p": float(d.p), "tokens_scored": int(d.tokens_scored),
             "detected": bool(d.detected)} for i, d in enumerate(detections)]


def run_fields(result: RunResult) -> dict[str, Any]:
    """What every generation row records besides detection: length, routing, speed, text."""
    r = result.routing
    return {"tokens_generated": int(r.tokens), "routed_token_fraction": float(r.routed_token_fraction),
            "mean_routed_span_length": float(r.mean_routed_span_length), "routed_spans": int(r.routed_spans),
            "routed_tokens": int(sum(1 for t in result.tokens if t.routed)),
            "per_token_ms": float(result.timing.per_token_ms), "finish_reason": result.finish_reason,
            "text": result.text}


class GenerationStore:
    """Finished generations on disk, one JSON file per generation, named by a hash of its key.

    The key is everything the text depends on: mode, providers (for ``unwatermarked``
    only their base models, since no key or scheme touches the text), prompt, seed,
    sampling settings, forwards (``eager`` and ``lazy`` draw different seeded texts)
    and the engine's fingerprint (``engine_fingerprint``: a hash of the source of the
    modules that determine a text), so a text made by another version of the engine
    is a miss, never silently reused. Each file also records the git version that
    wrote it. A stored value is ``run_fields`` of the generation, JSON-exact, so a
    row built from it equals the row of a fresh generation.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @staticmethod
    def key(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
            **overrides: Any) -> dict[str, Any]:
        providers = ("|".join(s.model for s in specs) if mode == "unwatermarked"
                     else specs_text(specs[:1] if mode == "single" else specs))
        overrides = dict(overrides)
        return {"mode": mode, "providers": providers, "prompt": prompt, "seed": int(seed),
                "tokens": int(overrides.pop("max_new_tokens", None) or config.tokens),
                "temperature": overrides.pop("temperature", config.temperature),
                "top_p": overrides.pop("top_p", config.top_p),
                "forwards": overrides.pop("forwards", config.forwards), "engine": engine_fingerprint(),
                **{k: overrides[k] for k in sorted(overrides)}}

    def _path(self, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:32]
        return self.root / f"{digest}.json"

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.exists():
            return None
        stored = json.loads(path.read_text(encoding="utf-8"))
        return stored["value"] if stored.get("key") == key else None  # a hash collision is a miss

    def put(self, key: dict[str, Any], value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "code": code_version(), "value": value}), encoding="utf-8")
        os.replace(tmp, path)


def store_of(config: ExperimentConfig) -> GenerationStore | None:
    return GenerationStore(Path(config.out).parent / "generations") if config.cache else None


def generated(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
              **overrides: Any) -> tuple[dict[str, Any], list[ProviderDetection] | None]:
    """The text and ``run_fields`` of one generation: from the store if there, else generated and stored.

    A fresh generation also returns the engine's own detections of its providers
    (the same detectors ``detect`` would build), so they are not computed twice.
    """
    store = store_of(config)
    key = GenerationStore.key(specs, prompt, mode, config, seed, **overrides) if store else None
    if store is not None and (hit := store.get(key)) is not None:
        return hit, None
    result = generate_run(specs, prompt, mode, config, seed, **overrides)
    fields = run_fields(result)
    if store is not None:
        store.put(key, fields)
    return fields, result.detection


def generation_job(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
                   scorers: Sequence[str] = (), **overrides: Any) -> Callable[[], list[dict[str, Any]]]:
    """A job body: generate in ``mode``, then one row per provider's detector on the text.

    In ``unwatermarked`` mode the text is scored by the watermarked providers of
    ``specs`` (the calibration negatives of a TPR at fixed FPR). Every row also
    carries the run's length, routing and speed, and for each model in
    ``scorers`` the continuation's perplexity under that unwatermarked model
    (columns ``ppl_<model>``, ``nll_<model>``, ``scored_tokens_<model>``).
    """
    def run() -> list[dict[str, Any]]:
        fields, dets = generated(specs, prompt, mode, config, seed, **overrides)
        extra = dict(fields)
        if dets is None:  # a stored text: scored afresh by these specs' detectors
            dets = detect(specs[:1] if mode == "single" else specs, extra["text"], config.z_threshold)
        for scorer in dict.fromkeys(scorers):
            nll, n = continuation_nll(scorer, prompt, extra["text"])
            extra.update({f"nll_{scorer}": nll, f"scored_tokens_{scorer}": n, f"ppl_{scorer}": perplexity(nll, n)})
        return [{**row, **extra} for row in detection_rows(dets)]
    return run


def detection_job(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig,
                  seed: int) -> Callable[[], list[dict[str, Any]]]:
    """``generation_job`` without perplexities."""
    return generation_job(specs, prompt, mode, config, seed)


def first_per_job(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per job (a generation), for the per-text fields repeated on its provider rows."""
    return rows.drop_duplicates("job").reset_index(drop=True)


def perplexity_long(rows: pd.DataFrame, scorers: Sequence[str], by: Sequence[str]) -> pd.DataFrame:
    """Per-text perplexities in long form: the ``by`` columns, ``scorer`` and ``ppl``."""
    texts = first_per_job(rows)
    parts = []
    for scorer in dict.fromkeys(scorers):
        col = f"ppl_{scorer}"
        if col in texts:
            part = texts[[*by, col, f"scored_tokens_{scorer}"]].rename(
                columns={col: "ppl", f"scored_tokens_{scorer}": "scored_tokens"})
            parts.append(part[part["scored_tokens"] > 0].assign(scorer=scorer))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*by, "ppl", "scored_tokens",
                                                                                  "scorer"])


def continuation_nll(model: str, prompt: str, text: str) -> tuple[float, int]:
    """Summed negative log-likelihood (nats) of ``text`` after ``prompt`` under ``model``, and its length.

    The model reads ``prompt`` as the engine feeds it (with its BOS where it has one),
    then the continuation tokenised by its own tokenizer; only continuation tokens count.
    """
    import torch

    from wash.models import load_model

    lm = load_model(model)
    prompt_ids = lm.encode_prompt(prompt)
    cont = lm.encode(text)
    if not cont:
        return 0.0, 0
    ids = torch.tensor([prompt_ids + cont], device=lm.device)
    with torch.inference_mode():
        logits = lm.model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    logp = torch.log_softmax(logits, dim=-1)
    target = torch.tensor(cont, device=logp.device)
    nll = -logp.gather(1, target[:, None]).sum().item()
    return float(nll), len(cont)


def as_bool(values) -> pd.Series:
    """A column of booleans whether it holds bools or their CSV spelling."""
    return pd.Series(values).astype(str).str.strip().str.lower().isin(("true", "1", "1.0"))


def perplexity(nll: float, n: int) -> float:
    return math.exp(nll / n) if n > 0 else float("nan")
