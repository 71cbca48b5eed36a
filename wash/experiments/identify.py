"""Model identification with Water-Probe (the paper's Table 1, very probably), calibrated.

Per-text detection needs a provider's key; identification (``wash.detection.identification``) asks,
keyless, whether a served system is watermarked at all. The paper's headline table
(single providers z 5 to 304, WASH N = 3 below 4 for all six schemes) is, by the
evidence in the project's notes, this score rather than a per-text z. This
experiment probes, for each scheme: the watermarked model alone (``single``), WASH
over N providers of that scheme with independent keys and base models cycling over
``models`` (``wash``, N in ``ns``), and the base models with every watermark off
(``unwatermarked``).

The verdict is calibrated (``wash.detection.identify_stats``): for every line-up probed (one
model; each N) the unwatermarked system is probed ``null_runs`` times (50) at the
same budget, serving and prompts, with an independent seed (rows of mode ``null``);
a system's p is a two-sample permutation test of its R runs against the null's runs,
for R = 3 (the paper's runs) and R = ``runs`` (10), and "identified" means that the
p over all runs, Holm-adjusted over the systems sharing that null, is below 5%.
S carries a 95% bootstrap interval over contexts. Water-Probe's z over the first
three runs stays as a column, for comparison with the paper only. The budget sweep
probes KGW at WASH N = 3 again at 2k, 5k and 10k samples (each with its own null):
Water-Probe's power grows with samples, and a reader must see whether "still
identified" is a matter of budget. A probe's samples per kept prefix and its format
fit are recorded for every system.

Providers are served with the ``open`` profile by default, as Water-Probe samples
without truncation (under top-k 10 only ten tokens can appear and the top-50 ranks
are mostly ties); ``--profile paper`` runs the same probe under the paper's serving.

The full preset runs v2 (the system samples its own answer prefixes, 20,000 samples
per prompt and run: the only version that sees the Edit schemes and Water-Bag); the
quick and tiny presets run v1 (forced prefixes). ``--aggregate`` probes the ensembles
under another aggregation rule (``wash.engine.aggregation``). Base rows are computed once
per process and shared by every system and null on the same models, so one worker
(``--workers 1``) is the cheap way to run it.

Forwards default to ``eager`` and change nothing here: the probe runs each base
model once per (prompt, context) itself and never decodes a text.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import LINEUPS, make_ensemble, scheme_variant, specs_text
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.watermarks import paper_schemes, rank, stateful_schemes

NAME = "identify"
#: The paper's Table 1 schemes (KGW, AAR, DiPMark, EXP-Edit, ITS-Edit, Water-Bag), in the project's order.
TABLE1 = tuple(sorted(paper_schemes(1), key=rank))


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = TABLE1
    ns: tuple[int, ...] = (3, 5)
    #: ``v1``: forced answer prefixes (``contexts`` of them, ``samples`` per context, prompt
    #: and run); ``v2``: the system samples its own prefixes (``samples`` per prompt and run,
    #: prefixes seen fewer than ``min_count`` times dropped).
    version: str = "v2"
    contexts: int = 50
    samples: int = 20000
    #: Runs per system: Water-Probe's z uses the first three (as the paper), the calibrated p
    #: is given for R = 3 and for all ``runs``.
    runs: int = 10
    min_count: int = 20
    #: v2: token paths a run takes fewer times than this stop there (``wash.detection.identification.Probe``).
    min_path: int = 3
    include_unwatermarked: bool = True
    #: Runs of the unwatermarked system of each line-up (one model; each N of ``ns``) probed as
    #: the null of S, at the same budget, serving and prompts as the systems.
    null_runs: int = 50
    #: The budget sweep: ``sweep_scheme`` at WASH N = ``sweep_n`` probed again at each of these
    #: samples per prompt and run (each with its own null); () for none.
    sweep_samples: tuple[int, ...] = (2000, 5000, 10000)
    sweep_scheme: str = "kgw"
    sweep_n: int = 3

    PRESETS: ClassVar[dict] = {
        "quick": dict(schemes=("kgw",), ns=(3,), version="v1", contexts=20, samples=200, runs=3, null_runs=20,
                      sweep_samples=()),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), schemes=("kgw",), ns=(2,), version="v1",
                     contexts=6, samples=40, runs=3, null_runs=8, sweep_samples=(20,), sweep_n=2),
    }
    LINEUPS: ClassVar[tuple[str, ...]] = LINEUPS


#: The null's probe seed is the system's plus this: its samples are independent of every system's.
NULL_SEED_OFFSET = 1000


def probe_job(specs: list, mode: str, config_fields: dict, rows_dir: str | None = None) -> list[dict]:
    """Probe one system (or one line-up's null) and return its row (module-level: runs in a worker).

    ``rows_dir``: where base rows are kept on disk for every job and later run (scratch)."""
    from wash.detection import SERVED_ROWS, Probe, identify

    SERVED_ROWS.use_directory(rows_dir)
    probe = Probe(**config_fields)
    result = identify(specs, mode, probe)
    return [{"z": result.z, "band": result.band, "mean_score": result.mean, "sd_score": result.sd,
             "s": result.s, "s_low": result.s_low, "s_high": result.s_high,
             "scores": " ".join(f"{s:.6f}" for s in result.scores), "pairs": result.pairs,
             "distributions": result.distributions, "forwards": result.forwards, "fit": result.fit,
             "contexts_scored": result.contexts, "samples_per_context": result.samples_per_context,
             "probe_s": result.seconds, "providers_probed": " ".join(result.providers)}]


def _probe_fields(config: Config, seed: int, samples: int, runs: int, interval: bool = True) -> dict:
    return dict(version=config.version, contexts=config.contexts, samples=samples, runs=runs,
                seed=seed, serving=config.profile, min_count=config.min_count, min_path=config.min_path,
                aggregate=config.aggregate, interval=interval)


def rows_dir(config: Config) -> str | None:
    """Base rows on disk beside the generation store (scratch: ``runs/identify-rows``), when caching."""
    return str(config.store_root().parent / "identify-rows") if config.cache else None


def lineups(config: Config) -> list[int]:
    """The line-ups probed: one model (the single systems) and each ensemble size."""
    return [1, *config.ns]


def jobs(config: Config) -> list[Job]:
    """The plan: each line-up's null before its systems, and the costly systems last.

    Costly: a stateful scheme's ensemble, whose per-generation state (a key offset, a bag
    draw) makes a v2 probe cost a distribution per state and node.

    A partial run (committed as it grows) thus holds complete line-ups of the cheap
    systems, the budget sweep and every null before the stateful schemes' hours."""
    out, costly = [], []
    rule = str(config.rule)  # the canonical spelling, as the job key records it
    stateful = stateful_schemes()
    for seed in config.seeds:
        def add(mode: str, scheme: str, n: int, samples: int, null: bool = False) -> None:
            # a null reads no watermark: its specs (and so its key) are the same under every line-up
            specs = make_ensemble(n, config.models, [scheme if scheme != "none" else "kgw"], seed,
                                  lineup="independent" if null else config.lineup)
            runs = config.null_runs if null else config.runs
            probe_seed = seed + NULL_SEED_OFFSET if null else seed
            key = config.key(mode="null" if null else mode, scheme=scheme, n=n,
                             aggregate=rule, seed=seed, version=config.version,
                             contexts=config.contexts, samples=samples, runs=runs, min_count=config.min_count,
                             min_path=config.min_path, providers=specs_text(specs))
            job = Job(key, probe_job, (list(specs), "unwatermarked" if null else mode,
                                       _probe_fields(config, probe_seed, samples, runs, not null),
                                       rows_dir(config)))
            (costly if scheme_variant(scheme)[0] in stateful and n > 1 else out).append(job)

        for n in lineups(config):
            add("unwatermarked", "none", n, config.samples, null=True)
            if n == 1:
                for scheme in config.schemes:
                    add("single", scheme, 1, config.samples)
                continue
            if config.include_unwatermarked and n == max(config.ns):
                add("unwatermarked", "none", n, config.samples)
            for scheme in config.schemes:
                add("wash", scheme, n, config.samples)
            if n == config.sweep_n:
                for samples in config.sweep_samples:
                    add("unwatermarked", "none", n, samples, null=True)
                    add("wash", config.sweep_scheme, n, samples)
    return out + costly


COLUMNS = ["mode", "scheme", "n", "aggregate", "samples", "z", "band", "s", "s_low", "s_high", "p", "p_holm",
           "holm_tests", "p_floor", "p_r3", "identified", "null_s_mean", "null_s_sd", "null_runs", "runs", "mean_score", "sd_score",
           "samples_per_context", "fit", "contexts_scored", "seeds"]


def _scores(cell) -> list[float]:
    return [float(v) for v in str(cell).split()] if isinstance(cell, str) and cell.strip() else []


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    """One row per system: S and its interval, the calibrated p (R = 3 and all runs), Water-Probe's z.

    A system's p (``permutation_p``) is against the null of its own line-up (same N,
    same samples, same seed); ``p_holm`` adjusts the p over all runs by Holm over the
    ``holm_tests`` systems of this summary that share that null, and the verdict
    ``identified`` is ``p_holm < ALPHA_IDENTIFY``. ``p_floor`` is the smallest p the
    test can give (the system above every null run); ``p_r3`` is the raw p of the
    first three runs (the paper's runs), not adjusted. ``null_runs`` counts the null's
    scored runs (a small budget can leave a run without any context pair). Several
    seeds of one system (rare) give one row each.
    """
    from wash.detection import holm_by, identified, p_floor, permutation_p

    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    # the mode as the job key spells it: pandas reads a CSV cell "null" as NaN
    rows = rows.assign(mode=rows["job"].map(lambda j: json.loads(j)["mode"]))
    nulls = {(int(r.n), int(r.samples), int(r.seed)): _scores(r.scores)
             for r in rows[rows["mode"] == "null"].itertuples()}
    records, families = [], []
    for r in rows[rows["mode"] != "null"].itertuples():
        scores = _scores(r.scores)
        family = (int(r.n), int(r.samples), int(r.seed))
        null = nulls.get(family, [])
        scored = [v for v in null if math.isfinite(v)]  # runs with at least one context pair
        families.append(family if null else None)
        records.append({"mode": r.mode, "scheme": r.scheme, "n": int(r.n), "aggregate": r.aggregate,
                        "samples": int(r.samples), "z": r.z, "band": r.band, "s": r.s, "s_low": r.s_low,
                        "s_high": r.s_high, "p": permutation_p(scores, null),
                        "p_floor": p_floor(len(scores), len(scored)), "p_r3": permutation_p(scores, null, runs=3),
                        "null_s_mean": float(np.mean(scored)) if scored else math.nan,
                        "null_s_sd": float(np.std(scored, ddof=1)) if len(scored) > 1 else math.nan,
                        "null_runs": len(scored), "runs": len(scores),
                        "mean_score": r.mean_score, "sd_score": r.sd_score,
                        "samples_per_context": r.samples_per_context, "fit": r.fit,
                        "contexts_scored": r.contexts_scored, "seeds": 1})
    adjusted = holm_by([r["p"] for r in records], families)
    for record, family, p_holm in zip(records, families, adjusted):
        record["p_holm"] = float(p_holm)
        record["holm_tests"] = sum(1 for f, r in zip(families, records) if f == family and math.isfinite(r["p"]))
        record["identified"] = identified(p_holm)
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    """S with its context-bootstrap interval per system, at the full budget, beside each null's mean."""
    full = summary[summary["samples"] == config.samples] if "samples" in summary else summary
    series = []
    for mode in ("single", "wash", "unwatermarked"):
        part = full[full["mode"] == mode]
        if part.empty:
            continue
        labels = [f"{s} N={n}" if mode != "single" else s for s, n in zip(part["scheme"], part["n"])]
        s = part["s"].astype(float)
        series.append(Series(mode, labels, s.tolist(), (s - part["s_low"]).tolist(),
                             (part["s_high"] - s).tolist(), kind="bar"))
    return FigureSpec(f"Water-Probe S, 95% interval over contexts ({config.samples} samples x {config.runs} runs)", [
        Panel(f"dashed: mean S of {config.null_runs} unwatermarked runs per line-up", "system",
              "S (mean rank-sign agreement)", series,
              hlines=[(float(v), f"null N={n}") for n, v in
                      summary.drop_duplicates("n")[["n", "null_s_mean"]].itertuples(index=False)
                      if math.isfinite(float(v))]),
    ])
