"""How much of a WASH text is routed to specialists, per prompt domain (paper Table 7).

Fluency-aware routing hands a word to the specialists whose vocabulary holds its
first token; during a routed span only one watermarked provider speaks, so long or
frequent spans could let a watermark back in. The paper finds routed tokens under
3.2% of the text with spans of about 3.6 tokens in medicine and law. This
experiment measures the same on heterogeneous ensembles (providers cycling over
``models``, a rotating mix of schemes) for every domain of the prompt set, with
the detection z of every provider on the final text.

Forwards default to ``lazy`` (``--forwards eager`` to change): routing and
re-synchronisation are the same in both (a routed span is always drawn from one
specialist), and a lazy step draws the next token from the same law as the
average, so the routed fractions estimate the same quantities at a fraction of
the forwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, rotate, specs_text
from wash.experiments.generation import generation_job
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series
from wash.content.prompts import DOMAINS

NAME = "routing"
ALL = "all"


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = ("kgw", "aar", "dipmark", "exp-edit", "unigram")
    n: int = 3
    #: Prompts per domain (``prompts`` is ignored: every domain gets this many).
    per_domain: int = 12
    #: Only the texts' routing counts and detection z are read: lazy.
    forwards: str = "lazy"

    PRESETS: ClassVar[dict] = {
        "quick": dict(per_domain=2, tokens=64),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), per_domain=1, tokens=6, schemes=("kgw", "aar"),
                     n=2),
    }


def jobs(config: Config) -> list[Job]:
    from wash.content.prompts import load_prompts

    out = []
    for domain in DOMAINS:
        for pi, prompt in enumerate(load_prompts(domain=domain, limit=config.per_domain)):
            for seed in config.seeds:
                schemes = rotate(config.schemes, pi + seed)
                specs = make_ensemble(config.n, config.models, schemes, seed, salt=pi)
                key = config.key(domain=domain, prompt_id=prompt.id, seed=seed, providers=specs_text(specs))
                out.append(Job(key, generation_job, (specs, prompt.text, "wash", config, seed)))
    return out


def _per_text(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per generated text: its routing counts and the mean/max z over its providers."""
    return rows.groupby("job", sort=False).agg(
        domain=("domain", "first"), tokens_generated=("tokens_generated", "first"),
        routed_tokens=("routed_tokens", "first"), routed_spans=("routed_spans", "first"),
        routed_token_fraction=("routed_token_fraction", "first"), mean_z=("z", "mean"), max_z=("z", "max"),
    ).reset_index()


def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    cols = ["domain", "texts", "tokens", "routed_tokens", "routed_spans", "routed_token_fraction",
            "mean_text_routed_fraction", "mean_routed_span_length", "mean_z", "max_z"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    texts = _per_text(rows)
    records = []
    for domain in [*DOMAINS, ALL]:
        t = texts if domain == ALL else texts[texts["domain"] == domain]
        if t.empty:
            continue
        tokens, routed, spans = int(t["tokens_generated"].sum()), int(t["routed_tokens"].sum()), int(t["routed_spans"].sum())
        records.append({"domain": domain, "texts": len(t), "tokens": tokens, "routed_tokens": routed,
                        "routed_spans": spans, "routed_token_fraction": routed / tokens if tokens else 0.0,
                        "mean_text_routed_fraction": float(t["routed_token_fraction"].mean()),
                        "mean_routed_span_length": routed / spans if spans else 0.0,
                        "mean_z": float(t["mean_z"].mean()), "max_z": float(t["max_z"].max())})
    return pd.DataFrame(records, columns=cols)


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    domains = summary["domain"].tolist()
    return FigureSpec(f"Fluency-aware routing per domain (N = {config.n}, {config.tokens} new tokens)", [
        Panel("routed tokens", "domain", "routed token fraction (%)",
              [Series("routed fraction", domains, (100 * summary["routed_token_fraction"]).tolist(), kind="bar")]),
        Panel("routed span length", "domain", "mean routed span (tokens)",
              [Series("mean span length", domains, summary["mean_routed_span_length"].tolist(), kind="bar")]),
        Panel("detection", "domain", "z (mean over providers and texts)",
              [Series("mean z", domains, summary["mean_z"].tolist(), kind="bar")],
              hlines=[(config.z_threshold, f"z = {config.z_threshold:g}")]),
    ])
