"""The Identify tab: "is this model watermarked?", asked of one provider, the WASH ensemble and no watermark.

Per-text detection needs a provider's key; identification (Water-Probe, v1 with
forced contexts, ``wash.detection.identification``) needs none: it compares how a system ranks
the tokens after the same answer prefix under two crafted prompts, and a keyed
watermark makes those rankings agree more than an unwatermarked model does. The
paper's Table 1 very probably reports this score (docs/RESULTS.md).

The tab probes up to three systems built from the providers table, on the same
contexts and seeds: provider 1 alone, the WASH ensemble of every provider, and the
same base models without watermarks. The verdict is calibrated: each system's
line-up (its base models) is also probed ``NULL_RUNS`` times without watermarks,
with another seed; a system's p is a permutation test of its runs against that
null's (``wash.detection.identify_stats.permutation_p``), Holm-adjusted over the systems
probed here that share the null, and the system is called watermarked when the
adjusted p is below ``ALPHA_IDENTIFY``. The null costs no forwards (the base rows are
those the systems already computed), only sampling.
Water-Probe's z is shown beside the verdict for comparison with the paper, never
as the verdict.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd
import plotly.graph_objects as go

from wash.core.errors import WashInputError
from wash.detection import (Identification, Probe, holm_by, identified, permutation_p, ALPHA_IDENTIFY,
                            Z_THRESHOLD)
from wash.ui.providers import rows_to_specs

#: System name on the page -> the probe mode and which providers it serves.
SYSTEMS = {"provider 1 alone": ("single", 1), "WASH ensemble": ("wash", None),
           "unwatermarked models": ("unwatermarked", None)}
#: Probe sizes offered. ``fast`` probes the three systems and their nulls in about 15 s
#: on 2 CPU cores once the models are loaded; ``standard`` is the experiment's v1 probe.
PROBES = {"fast": Probe(version="v1", contexts=20, samples=200, runs=3),
          "standard": Probe(version="v1")}
#: Unwatermarked runs per line-up that the verdict is calibrated against.
NULL_RUNS = 50
#: The null's probe seed is the systems' plus this (independent samples).
NULL_SEED_OFFSET = 1000
COLUMNS = ["system", "providers", "verdict", "p", "p (Holm)", "S (95% CI)", "null S", "Water-Probe z (band)",
           "run scores", "contexts", "samples", "seconds"]


@dataclass
class Probed:
    """One probed system, the null runs of its line-up, the permutation p and its Holm adjustment
    over the systems probed against the same null (the verdict reads ``p_holm``)."""

    name: str
    result: Identification
    null: list[float]
    p: float
    p_holm: float

    @property
    def identified(self) -> bool:
        return identified(self.p_holm)


def run_identify(table: Any, systems: Sequence[str], probe_name: str, choices: list[str] | None = None,
                 progress: Callable[[float, str], None] | None = None) -> list[Probed]:
    """Probe each chosen system and its line-up's null; ``progress(fraction, what)`` after every context.

    The probe's forwards run on the calling (server) thread, with torch's default team of
    one thread per core. On a 2-core machine that is also generating or otherwise busy,
    every op's second OpenMP thread waits for a core: the forwards of the fast probe's 40
    base rows (SmolLM2) took 214 s at a load average near 6, and 10 s on one thread at a
    load near 12 (2026-11-27, 2-core AMD EPYC). One thread
    costs nothing on an idle machine (a second thread buys these models nothing,
    docs/BENCHMARKS.md), so the probe runs on one, as a generation's model threads do.
    """
    from wash.engine import caller_on_one_thread

    with caller_on_one_thread():
        return _probe(table, systems, probe_name, choices, progress)


def _probe(table: Any, systems: Sequence[str], probe_name: str, choices: list[str] | None,
           progress: Callable[[float, str], None] | None) -> list[Probed]:
    from wash.detection import identify
    from wash.engine import build_providers

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
    null_probe = dataclasses.replace(probe, runs=NULL_RUNS, seed=probe.seed + NULL_SEED_OFFSET, interval=False)
    pset = build_providers(specs)
    plan = []
    for name in chosen:
        mode, first = SYSTEMS[name]
        served = specs[:first] if first else specs
        plan.append((name, mode, served, tuple(s.model for s in served)))
    served_of: dict[tuple, list] = {}  # a line-up (its base models) -> specs that serve it
    for *_, served, lineup in plan:
        served_of.setdefault(lineup, served)
    steps, done = len(plan) + len(served_of), 0

    def reporter(what: str) -> Callable[[int, int], None]:
        at = done

        def step(k: int, total: int) -> None:
            if progress:
                progress((at + k / total) / steps, what)
        return step

    results: list[tuple[str, Identification, tuple]] = []
    for name, mode, served, lineup in plan:
        system_pset = pset if len(served) == len(specs) else build_providers(served)
        results.append((name, identify(served, mode, probe, progress=reporter(f"probing {name}"), pset=system_pset),
                        lineup))
        done += 1
    nulls: dict[tuple, list[float]] = {}
    for lineup, served in served_of.items():
        null_pset = pset if len(served) == len(specs) else build_providers(served)
        nulls[lineup] = identify(served, "unwatermarked", null_probe, pset=null_pset,
                                 progress=reporter(f"probing the unwatermarked null of {len(lineup)} model(s)")).scores
        done += 1
    ps = [permutation_p(r.scores, nulls[lineup]) for _, r, lineup in results]
    adjusted = holm_by(ps, [lineup for *_, lineup in results])
    return [Probed(name, r, nulls[lineup], p, float(p_holm))
            for (name, r, lineup), p, p_holm in zip(results, ps, adjusted)]


def _z_text(z: float, band: str) -> str:
    return "+inf (identical runs)" if math.isinf(z) and z > 0 else (
        "-inf (identical runs)" if math.isinf(z) else f"{z:.1f} ({band})")


def _verdict(p: Probed) -> str:
    return f"watermarked at {ALPHA_IDENTIFY:.0%}" if p.identified else "no evidence of a watermark"


def _null_text(null: Sequence[float]) -> str:
    s = pd.Series(null, dtype=float)
    return f"{s.mean():.3f} ± {s.std(ddof=1):.3f} ({s.size} runs)"


def results_frame(results: Sequence[Probed]) -> pd.DataFrame:
    rows = [{"system": p.name, "providers": ", ".join(p.result.providers), "verdict": _verdict(p),
             "p": f"{p.p:.3g}", "p (Holm)": f"{p.p_holm:.3g}", "S (95% CI)": f"{p.result.s:.3f} [{p.result.s_low:.3f}, {p.result.s_high:.3f}]",
             "null S": _null_text(p.null), "Water-Probe z (band)": _z_text(p.result.z, p.result.band),
             "run scores": ", ".join(f"{s:.3f}" for s in p.result.scores), "contexts": p.result.contexts,
             "samples": p.result.samples, "seconds": round(p.result.seconds, 1)} for p in results]
    return pd.DataFrame.from_records(rows, columns=COLUMNS)


def figure(results: Sequence[Probed]) -> go.Figure:
    """Left: each system's S with its interval beside its null. Right: each run's score against the null runs."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("S with its 95% interval over contexts",
                                                        "evidence: each run's score, null runs in grey"))
    names = [p.name for p in results]
    s = [p.result.s for p in results]
    fig.add_trace(go.Bar(x=names, y=s, name="S", marker_color=["#dc2626" if p.identified else "#2563eb"
                                                               for p in results],
                         error_y=dict(type="data", symmetric=False,
                                      array=[p.result.s_high - p.result.s for p in results],
                                      arrayminus=[p.result.s - p.result.s_low for p in results]),
                         text=[f"Holm p = {p.p_holm:.2g}" for p in results], textposition="outside"), row=1, col=1)
    nulls = pd.Series([sum(p.null) / len(p.null) for p in results], dtype=float)
    fig.add_trace(go.Scatter(x=names, y=nulls.tolist(), mode="markers", name="null mean",
                             marker=dict(symbol="line-ew-open", size=28, color="#6b7280", line=dict(width=2))),
                  row=1, col=1)
    for p in results:
        fig.add_trace(go.Box(x=[p.name] * len(p.null), y=p.null, name=f"{p.name} null", marker_color="#9ca3af",
                             boxpoints=False, showlegend=False), row=1, col=2)
        fig.add_trace(go.Scatter(x=[p.name] * len(p.result.scores), y=p.result.scores, mode="markers",
                                 name=f"{p.name} runs", marker=dict(size=10), showlegend=False), row=1, col=2)
    fig.update_layout(height=380, template="plotly_white", showlegend=False, margin=dict(l=50, r=20, t=60, b=60))
    fig.update_yaxes(title_text="S: rank-sign agreement between the two prompts", row=1, col=1)
    fig.update_yaxes(title_text="run score", row=1, col=2)
    return fig


def summary(results: Sequence[Probed]) -> str:
    lines = []
    for p in results:
        r = p.result
        lines.append(f"- **{p.name}**: {_verdict(p)} (p = {p.p:.3g}, Holm-adjusted {p.p_holm:.3g}); S = {r.s:.3f} [{r.s_low:.3f}, {r.s_high:.3f}] "
                     f"against the unwatermarked null {_null_text(p.null)}; Water-Probe z {_z_text(r.z, r.band)}.")
    return ("\n".join(lines) + "\n\nS measures how much each system's token rankings after the same answer prefix "
            "agree between two different prompts; a keyed watermark makes them agree more. p is a permutation "
            f"test of a system's {len(results[0].result.scores) if results else 3} runs against runs of the same "
            f"base models without watermarks ({NULL_RUNS} runs, another seed), Holm-adjusted over the systems "
            f"sharing those runs: below {ALPHA_IDENTIFY:g} the system is called watermarked. Water-Probe's own z (above "
            f"{Z_THRESHOLD:g}: its low-confidence band) divides by the spread of three runs against a fixed mean of "
            f"0.1 and can pass {Z_THRESHOLD:g} on an unwatermarked model, so it is shown for comparison with the "
            "paper only.")
