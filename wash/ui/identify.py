"""The Identify tab: "is this model watermarked?", asked of one provider, the WASH ensemble and no watermark.

Per-text detection needs a provider's key; identification (Water-Probe, v1 with
forced contexts, ``wash.identify``) needs none: it compares how a system ranks
the tokens after the same answer prefix under two crafted prompts, and a keyed
watermark makes those rankings agree more than an unwatermarked model does. The
paper's Table 1 very probably reports this score (docs/RESULTS.md).

The tab probes up to three systems built from the providers table, on the same
contexts and seeds, so their z are comparable: provider 1 alone, the WASH
ensemble of every provider, and the same base models without watermarks.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import pandas as pd
import plotly.graph_objects as go

from wash.errors import WashInputError
from wash.identify import Identification, Probe
from wash.identify_stats import NULL_MEAN
from wash.thresholds import Z_HIGH, Z_THRESHOLD
from wash.ui.providers import rows_to_specs

#: System name on the page -> the probe mode and which providers it serves.
SYSTEMS = {"provider 1 alone": ("single", 1), "WASH ensemble": ("wash", None),
           "unwatermarked models": ("unwatermarked", None)}
#: Probe sizes offered. ``fast`` probes the three systems in about 11 s on 2 CPU cores
#: once the models are loaded (docs/BENCHMARKS.md); ``standard`` is the experiment's v1 probe.
PROBES = {"fast": Probe(version="v1", contexts=20, samples=200, runs=3),
          "standard": Probe(version="v1")}
COLUMNS = ["system", "providers", "z", "band", "run scores", "contexts", "samples", "seconds"]


def run_identify(table: Any, systems: Sequence[str], probe_name: str, choices: list[str] | None = None,
                 progress: Callable[[float, str], None] | None = None) -> list[tuple[str, Identification]]:
    """Probe each chosen system; ``progress(fraction, what)`` after every context."""
    from wash.identify import identify
    from wash.providers import build_providers

    if probe_name not in PROBES:
        raise WashInputError(f"unknown probe '{probe_name}' (accepted: {', '.join(PROBES)})")
    chosen = [s for s in SYSTEMS if s in (systems or [])]
    unknown = [s for s in (systems or []) if s not in SYSTEMS]
    if unknown:
        raise WashInputError(f"unknown system {unknown[0]!r} (accepted: {', '.join(SYSTEMS)})")
    if not chosen:
        raise WashInputError("choose at least one system to probe")
    specs = rows_to_specs(table, choices)
    if not specs:
        raise WashInputError("no provider given (add at least one row: model, scheme, key)")
    probe = PROBES[probe_name]
    pset = build_providers(specs)
    out = []
    for k, name in enumerate(chosen):
        mode, first = SYSTEMS[name]
        served = specs[:first] if first else specs

        def step(done: int, total: int, k: int = k, name: str = name) -> None:
            if progress:
                progress((k + done / total) / len(chosen), f"probing {name}")

        system_pset = pset if not first else build_providers(served)
        out.append((name, identify(served, mode, probe, progress=step, pset=system_pset)))
    return out


def _z_text(z: float) -> str:
    return "not scorable" if not math.isfinite(z) else f"{z:.1f}"


def results_frame(results: Sequence[tuple[str, Identification]]) -> pd.DataFrame:
    rows = [{"system": name, "providers": ", ".join(r.providers), "z": _z_text(r.z),
             "band": r.band if math.isfinite(r.z) else "–",
             "run scores": ", ".join(f"{s:.3f}" for s in r.scores), "contexts": r.contexts,
             "samples": r.samples, "seconds": round(r.seconds, 1)} for name, r in results]
    return pd.DataFrame.from_records(rows, columns=COLUMNS)


def figure(results: Sequence[tuple[str, Identification]]) -> go.Figure:
    """Left: each system's z with Water-Probe's bands. Right: the evidence, each run's score vs the null."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("identification z", "evidence: each run's score"))
    names = [name for name, _ in results]
    zs = [r.z if math.isfinite(r.z) else None for _, r in results]
    fig.add_trace(go.Bar(x=names, y=zs, name="z", marker_color="#2563eb",
                         text=[_z_text(r.z) for _, r in results], textposition="outside"), row=1, col=1)
    for y, label, colour in ((Z_THRESHOLD, f"z = {Z_THRESHOLD:g}: low confidence", "#f59e0b"),
                             (Z_HIGH, f"z = {Z_HIGH:g}: high confidence", "#dc2626")):
        fig.add_hline(y=y, line=dict(color=colour, dash="dash", width=1), annotation_text=label,
                      annotation_position="top left", row=1, col=1)
    for name, r in results:
        fig.add_trace(go.Scatter(x=[name] * len(r.scores), y=r.scores, mode="markers", name=f"{name} runs",
                                 marker=dict(size=10), showlegend=False), row=1, col=2)
    fig.add_hline(y=NULL_MEAN, line=dict(color="#6b7280", dash="dot", width=1),
                  annotation_text=f"unwatermarked mean {NULL_MEAN:g}", annotation_position="bottom left",
                  row=1, col=2)
    fig.update_layout(height=380, template="plotly_white", showlegend=False, margin=dict(l=50, r=20, t=60, b=60))
    fig.update_yaxes(title_text="z", row=1, col=1)
    fig.update_yaxes(title_text="rank-sign agreement between the two prompts", row=1, col=2)
    return fig


def summary(results: Sequence[tuple[str, Identification]]) -> str:
    lines = []
    for name, r in results:
        if not math.isfinite(r.z):
            lines.append(f"- **{name}**: not scorable: every run gave the same score (a deterministic "
                         f"system, e.g. a lone sampling-based scheme, has no run-to-run spread to divide by).")
        else:
            verdict = {"high": "watermarked (high confidence)", "low": "watermarked (low confidence)",
                       "none": "no evidence of a watermark"}[r.band]
            lines.append(f"- **{name}**: z = {r.z:.1f}: {verdict}.")
    return ("\n".join(lines) + "\n\nz compares how each system ranks the tokens after the same answer prefix "
            "under two different prompts, over several independent runs; a keyed watermark makes the two "
            f"rankings agree more than an unwatermarked model's (mean {NULL_MEAN:g}).")
