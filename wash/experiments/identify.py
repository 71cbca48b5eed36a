"""Model identification with Water-Probe (the paper's Table 1, very probably): single, WASH, none.

Per-text detection needs a provider's key; identification (``wash.identify``) asks,
keyless, whether a served system is watermarked at all. The paper's headline table
(single providers z 5 to 304, WASH N = 3 below 4 for all six schemes) is, by the
evidence in the project's notes, this score rather than a per-text z. This
experiment probes, for each scheme: the watermarked model alone (``single``), WASH
over N providers of that scheme with independent keys and base models cycling over
``models`` (``wash``, N in ``ns``), and the base models with every watermark off
(``unwatermarked``). One row per (mode, scheme, N, seed): the three run scores, z
and Water-Probe's band (z > 10 high, 4 < z <= 10 low, else none).

Providers are served with the ``open`` profile by default, as Water-Probe samples
without truncation (under top-k 10 only ten tokens can appear and the top-50 ranks
are mostly ties); ``--profile paper`` runs the same probe under the paper's serving.

The full preset runs v2 (the system samples its own answer prefixes, 20,000 samples
per prompt and run: the only version that sees the Edit schemes and Water-Bag); the
quick and tiny presets run v1 (forced prefixes). ``--aggregate`` probes the ensembles
under another aggregation rule (``wash.aggregation``).

Forwards default to ``eager`` and change nothing here: the probe runs each base
model once per (prompt, context) itself and never decodes a text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from wash.aggregation import canonical
from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, specs_text
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.thresholds import Z_HIGH, Z_THRESHOLD

NAME = "identify"
#: The paper's Table 1 schemes (KGW, AAR, DiPMark, EXP-Edit, ITS-Edit, Water-Bag).
TABLE1 = ("kgw", "aar", "dipmark", "exp-edit", "its-edit", "waterbag")


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
    runs: int = 3
    min_count: int = 20
    include_unwatermarked: bool = True

    PRESETS: ClassVar[dict] = {
        "quick": dict(schemes=("kgw",), ns=(3,), version="v1", contexts=20, samples=200),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), schemes=("kgw",), ns=(2,), version="v1",
                     contexts=6, samples=40),
    }


def probe_job(specs: list, mode: str, config_fields: dict) -> list[dict]:
    """Probe one system and return its row (module-level: runs in a worker process)."""
    from wash.identify import Probe, identify

    probe = Probe(**config_fields)
    result = identify(specs, mode, probe)
    return [{"z": result.z, "band": result.band, "mean_score": result.mean, "sd_score": result.sd,
             "scores": " ".join(f"{s:.6f}" for s in result.scores), "pairs": result.pairs,
             "distributions": result.distributions, "forwards": result.forwards, "fit": result.fit, "contexts_scored": result.contexts,
             "probe_s": result.seconds,
             "providers_probed": " ".join(result.providers)}]


def _probe_fields(config: Config, seed: int) -> dict:
    return dict(version=config.version, contexts=config.contexts, samples=config.samples, runs=config.runs,
                seed=seed, serving=config.profile, min_count=config.min_count,
                aggregate=config.aggregate)


def jobs(config: Config) -> list[Job]:
    out = []
    for seed in config.seeds:
        fields = _probe_fields(config, seed)
        systems = []
        if config.include_unwatermarked:
            n = max(config.ns)
            systems.append(("unwatermarked", "none", n, make_ensemble(n, config.models, ["kgw"], seed)))
        for scheme in config.schemes:
            systems.append(("single", scheme, 1, make_ensemble(1, config.models, [scheme], seed)))
            for n in config.ns:
                systems.append(("wash", scheme, n, make_ensemble(n, config.models, [scheme], seed)))
        for mode, scheme, n, specs in systems:
            key = config.key(mode=mode, scheme=scheme, n=n, aggregate=canonical(config.aggregate), seed=seed,
                             version=config.version, contexts=config.contexts, samples=config.samples,
                             runs=config.runs, min_count=config.min_count,
                             providers=specs_text(specs))
            out.append(Job(key, probe_job, (list(specs), mode, fields)))
    return out


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    cols = ["mode", "scheme", "n", "aggregate", "z", "band", "mean_score", "sd_score", "seeds"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    out = (rows.groupby(["mode", "scheme", "n", "aggregate"], sort=False)
           .agg(z=("z", "median"), band=("band", lambda b: "/".join(sorted(set(b)))),
                mean_score=("mean_score", "mean"), sd_score=("sd_score", "mean"), seeds=("seed", "count"))
           .reset_index())
    return out[cols]


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    series = []
    for mode in ("single", "wash", "unwatermarked"):
        part = summary[summary["mode"] == mode]
        if part.empty:
            continue
        labels = [f"{s} N={n}" if mode == "wash" else s for s, n in zip(part["scheme"], part["n"])]
        # A point-mass scheme can give z = +inf (three identical runs); draw it at the top band.
        z = [min(float(v), 1e3) if not math.isnan(float(v)) else None for v in part["z"]]
        series.append(Series(mode, labels, z, kind="bar"))
    return FigureSpec(f"Water-Probe identification z ({config.contexts} contexts x {config.samples} samples, "
                      f"{config.runs} runs)", [
        Panel("identification", "system", "identification z (median over seeds)", series,
              hlines=[(Z_THRESHOLD, f"z = {Z_THRESHOLD:g} (low confidence)"), (Z_HIGH, f"z = {Z_HIGH:g} (high confidence)")]),
    ])
