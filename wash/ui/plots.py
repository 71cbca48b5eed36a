"""Plotly figures for the app, built from the engine's events (no widgets).

* ``z_figure``: each provider's live detection z against tokens generated, with
  the detection threshold (z = 4) and the level unwatermarked texts rarely pass (z = 2);
  beside a comparison run, provider 1 alone (dashed) and each detector on the text of
  the models without watermarks (thin grey lines, near 0);
* ``distribution_figure``: one step's candidates, grouped bars of every
  provider's p_i, the average p̄ and the consensus p*, with ‖p̄ − p*‖∞; on a step
  drawn from one provider (lazy forwards, routed spans) only that provider's
  distribution exists, and the figure says why the others are missing;
* ``theory_figure``: the Theorem 1 simulation, distance against N.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
import plotly.io as pio

from wash.engine import StepEvent
from wash.detection import Z_THRESHOLD, Z_WASHED

PALETTE = ("#2563eb", "#16a34a", "#dc2626", "#9333ea", "#0891b2", "#db2777", "#65a30d", "#ea580c")
AVERAGE_COLOUR = "#111827"
CONSENSUS_COLOUR = "#9ca3af"
#: The legend entry of the grey lines: every detector's z on the text of the models without watermarks.
UNMARKED_LEGEND = "each detector on the unwatermarked text"

# The app's figures share one look. A template named per figure is validated and
# deep-copied every time (about 25 ms a figure, most of a live redraw); the default
# template is attached once, by reference.
pio.templates.default = "plotly_white"


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 340) -> go.Figure:
    fig.update_layout(title=dict(text=title, x=0.01, y=0.98, yref="container", yanchor="top",
                                 font=dict(size=14)),
                      height=height, margin=dict(l=50, r=20, t=95, b=45),
                      xaxis_title=x_title, yaxis_title=y_title,
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0.0,
                                  font=dict(size=11)),
                      uirevision="keep")
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    """A blank figure carrying a hint, shown before there is anything to plot."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(size=13, color="#6b7280"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10))
    return fig


def _z_series(steps: Sequence[StepEvent], index: int) -> tuple[list[int], list[float | None]]:
    xs = [s.step + 1 for s in steps]
    ys = [(s.live_z[index] if index < len(s.live_z) else None) for s in steps]
    return xs, ys


def z_figure(labels: Sequence[str], steps: Sequence[StepEvent],
             single_steps: Sequence[StepEvent] | None = None,
             single_label: str | None = None, z_detected: float = Z_THRESHOLD,
             z_washed: float = Z_WASHED, expect_n: int | None = None,
             unmarked_steps: Sequence[StepEvent] | None = None) -> go.Figure:
    """One line per provider (and a dashed one for the single-model run, if any).

    ``unmarked_steps``: the same providers' run with every watermark off. Each detector's z
    on that text is a thin grey line, one legend entry for all: what text without a
    watermark scores, the baseline every other line is read against.

    ``expect_n``: when the comparison run is provider 1 serving alone, draw its z
    divided by N as a dotted line. P1's own detector sees its perturbation at
    weight 1/N in the average, so that line is what P1's WASH trace should follow
    (the law measured in docs/RESULTS.md); a point-mass scheme stays above it.
    """
    fig = go.Figure()
    for i, label in enumerate(labels):
        xs, ys = _z_series(steps, i)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=label, connectgaps=False,
                                 line=dict(color=PALETTE[i % len(PALETTE)], width=2)))
    if single_steps is not None:
        xs, ys = _z_series(single_steps, 0)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=single_label or "P1 alone",
                                 line=dict(color=PALETTE[0], width=2, dash="dash")))
        if expect_n and expect_n > 1:
            scaled = [None if y is None else y / expect_n for y in ys]
            fig.add_trace(go.Scatter(x=xs, y=scaled, mode="lines", name=f"expected for P1: alone / {expect_n}",
                                     line=dict(color=PALETTE[0], width=1, dash="dot")))
    if unmarked_steps is not None:
        for i, label in enumerate(labels):
            xs, ys = _z_series(unmarked_steps, i)
            who = label.split(" ", 1)[0]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=UNMARKED_LEGEND, legendgroup="unmarked",
                                     showlegend=i == 0, line=dict(color=CONSENSUS_COLOUR, width=1),
                                     hovertemplate=f"{who} on the unwatermarked text: z %{{y:.2f}}"
                                                   "<extra></extra>"))
    # Two levels across the plot, as layout shapes: add_hline computes the same
    # shapes through axis-spanning machinery that costs more than the traces.
    fig.update_layout(shapes=[_level(z_detected, "#dc2626", "dash"), _level(z_washed, "#16a34a", "dot")],
                      annotations=[_level_note(z_detected, f"detected (z = {z_detected:g})", "bottom"),
                                   _level_note(z_washed, f"unwatermarked texts rarely pass (z = {z_washed:g})",
                                               "top")])
    return _layout(fig, "Each provider's detector z-score, live", "tokens generated", "z-score")


def _level(y: float, colour: str, dash: str) -> dict:
    return dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=y, y1=y,
                line=dict(color=colour, dash=dash, width=1))


def _level_note(y: float, text: str, side: str) -> dict:
    """A level's label at its left end, above (``side="bottom"`` anchors it there) or below the line."""
    return dict(text=text, showarrow=False, xref="x domain", x=0, xanchor="left", yref="y", y=y, yanchor=side)


def _shown(token: str) -> str:
    """A candidate token made visible on an axis: spaces and newlines marked."""
    return token.replace("\n", "⏎").replace("\t", "⇥").replace(" ", "␣") or "∅"


def _candidate_names(step: StepEvent) -> list[str]:
    names, seen = [], set()
    for text, uid in zip(step.candidates, step.candidate_ids):
        name = _shown(text)
        if name in seen:
            name = f"{name} #{uid}"
        seen.add(name)
        names.append(("→ " if uid == step.union_id else "") + name)
    return names


def missing_distributions(step: StepEvent, labels: Sequence[str], lazy: bool = False) -> str | None:
    """Why a step has no p̄, p* or other providers' p_i (None when it has them all).

    ``lazy`` says the run used lazy forwards (a routed step's first token was then
    drawn from a uniformly picked provider rather than from p̄).
    """
    if step.average_probs is not None:
        return None
    who = _who(step, labels)
    if not step.routed:
        return (f"Lazy forwards: this token was drawn from {who} alone, picked uniformly at random "
                f"(the same law as drawing from p̄). A lazy step computes only the chosen provider's "
                f"distribution, so p̄, p* and the other providers' p_i were never computed.")
    if lazy:
        return (f"Lazy forwards, routed span: this token was drawn from {who} alone (the uniformly picked "
                f"provider, or the span's specialist). Only that distribution was computed: p̄, p* and the "
                f"other providers' p_i were never computed.")
    return (f"Routed span: the specialist {who} finished the word from its own distribution, so p̄, p* "
            f"and the other providers' p_i were not computed for this token.")


def _who(step: StepEvent, labels: Sequence[str]) -> str:
    return labels[step.chosen] if step.chosen is not None and step.chosen < len(labels) else "one provider"


def distribution_figure(step: StepEvent, labels: Sequence[str], lazy: bool = False) -> go.Figure:
    """Grouped bars over one step's candidates; → marks the token actually sampled.

    A step drawn from one provider carries only that provider's bars and a note
    saying why p̄, p* and the others are missing (never an empty or made-up bar).
    """
    names = _candidate_names(step)
    fig = go.Figure()
    for i, probs in enumerate(step.provider_probs):
        if probs is None:
            continue
        fig.add_trace(go.Bar(x=names, y=probs, name=f"p{i + 1}: {labels[i]}",
                             marker_color=PALETTE[i % len(PALETTE)]))
    if step.average_probs is not None:
        fig.add_trace(go.Bar(x=names, y=step.average_probs, name="p̄ (average)",
                             marker_color=AVERAGE_COLOUR))
    if step.consensus_probs is not None:
        fig.add_trace(go.Bar(x=names, y=step.consensus_probs, name="p* (consensus)",
                             marker_color=CONSENSUS_COLOUR))
    head = f"Token {step.step + 1} {step.token!r}"
    why = missing_distributions(step, labels, lazy)
    if step.linf is not None:
        title = f"{head}: ‖p̄ − p*‖∞ = {step.linf:.4f}"
    elif why is not None and (lazy or not step.routed):
        title = f"{head}: lazy step, only {_who(step, labels)}'s distribution was computed"
    else:
        title = f"{head}: routed, only {_who(step, labels)}'s distribution is used"
    fig.update_layout(barmode="group", bargap=0.2)
    fig = _layout(fig, title, "candidate token", "probability", height=360)
    if why is not None:
        fig.add_annotation(text=_wrap(why, 70), showarrow=False, x=0.99, y=0.97, xref="paper", yref="paper",
                           xanchor="right", yanchor="top", align="left", font=dict(size=11, color="#374151"),
                           bgcolor="rgba(255,255,255,0.85)", bordercolor="#d1d5db", borderwidth=1)
    return fig


def _wrap(text: str, width: int) -> str:
    """Plotly annotations do not wrap: break the text into lines of about ``width`` characters."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "<br>".join(lines + [line])


def theory_figure(ns: Sequence[int], curves: dict[str, Sequence[float]],
                  bands: dict[str, tuple[Sequence[float], Sequence[float]]] | None,
                  reference: Sequence[float], reference_label: str) -> go.Figure:
    """Mean ‖p̄_N − p*‖∞ per perturbation kind against N, with the theorem's shape."""
    colours = {"independent": PALETTE[0], "coordinated": PALETTE[2], "biased": PALETTE[3]}
    fig = go.Figure()
    for kind, ys in curves.items():
        colour = colours.get(kind, AVERAGE_COLOUR)
        if bands and kind in bands:
            lo, hi = bands[kind]
            fig.add_trace(go.Scatter(x=list(ns) + list(ns)[::-1], y=list(hi) + list(lo)[::-1],
                                     fill="toself", fillcolor=colour, opacity=0.15, line=dict(width=0),
                                     hoverinfo="skip", showlegend=False, name=f"{kind} range"))
        fig.add_trace(go.Scatter(x=list(ns), y=list(ys), mode="lines+markers", name=kind,
                                 line=dict(color=colour, width=2), marker=dict(size=4)))
    fig.add_trace(go.Scatter(x=list(ns), y=list(reference), mode="lines", name=reference_label,
                             line=dict(color=AVERAGE_COLOUR, dash="dash", width=1.5)))
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return _layout(fig, "Distance of the average from the consensus, ‖p̄_N − p*‖∞",
                   "number of providers N (log)", "‖p̄_N − p*‖∞ (log)", height=420)
