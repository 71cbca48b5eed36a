"""One small figure description rendered twice: interactive plotly HTML and a static PNG.

Plotly's static export needs Kaleido (and a Chrome build it downloads), which an
offline machine does not have. Rather than drawing every figure twice by hand,
experiments describe a figure once (panels of line/bar series with optional error
bars and reference lines) and this module renders it with plotly for the HTML and,
when plotly cannot export images, with matplotlib for the PNG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


@dataclass
class Series:
    name: str
    x: Sequence
    y: Sequence[float]
    #: Distances below and above y for error bars (e.g. mean - ci_low, ci_high - mean).
    err_minus: Sequence[float] | None = None
    err_plus: Sequence[float] | None = None
    kind: str = "line"  # "line" or "bar"
    #: A dashed line: a reference curve (a law's prediction) rather than a measurement.
    dash: bool = False
    #: Draw in the colour of the series of this name (a reference beside its measurement).
    color_of: str | None = None


@dataclass
class Panel:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    #: Horizontal reference lines: (y, label), e.g. the detection threshold z = 4.
    hlines: list[tuple[float, str]] = field(default_factory=list)
    log_y: bool = False
    #: A log x axis (tokens read: the length curve spans 25 to 800).
    log_x: bool = False


@dataclass
class FigureSpec:
    title: str
    panels: list[Panel]


def _clean(values: Sequence | None, floor: float | None = None) -> list | None:
    if values is None:
        return None
    out = [None if isinstance(v, float) and math.isnan(v) else v for v in values]
    return out if floor is None else [None if v is None else max(floor, v) for v in out]


def to_plotly(spec: FigureSpec):
    """The interactive figure: one subplot per panel, legend shared by series name."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=len(spec.panels), subplot_titles=[p.title for p in spec.panels])
    colors: dict[str, str] = {}
    for col, panel in enumerate(spec.panels, start=1):
        for s in panel.series:
            color = colors.setdefault(s.color_of or s.name, PALETTE[len(colors) % len(PALETTE)])
            error = None
            if s.err_plus is not None:
                error = dict(type="data", symmetric=False, array=_clean(s.err_plus, 0.0),
                             arrayminus=_clean(s.err_minus if s.err_minus is not None else s.err_plus, 0.0))
            common = dict(name=s.name, x=list(s.x), y=_clean(s.y), error_y=error, legendgroup=s.name,
                          showlegend=col == 1 or s.name not in [t.name for p in spec.panels[:col - 1]
                                                                 for t in p.series],
                          marker_color=color)
            if s.kind == "bar":
                fig.add_trace(go.Bar(**common), row=1, col=col)
            else:
                fig.add_trace(go.Scatter(mode="lines+markers", line_color=color,
                                         line_dash="dash" if s.dash else None, **common), row=1, col=col)
        for y, label in panel.hlines:
            fig.add_hline(y=y, line_dash="dash", line_color="gray", annotation_text=label, row=1, col=col)
        fig.update_xaxes(title_text=panel.xlabel, type="log" if panel.log_x else None, row=1, col=col)
        fig.update_yaxes(title_text=panel.ylabel, type="log" if panel.log_y else None, row=1, col=col)
    fig.update_layout(title=spec.title, barmode="group", template="plotly_white",
                      width=max(520, 460 * len(spec.panels)), height=440)
    return fig


def to_matplotlib_png(spec: FigureSpec, path: Path) -> None:
    """The same figure drawn with matplotlib (Agg), for offline static export."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    n = len(spec.panels)
    fig_w = max(7.0, 4.8 * n)
    fig, axes = plt.subplots(1, n, figsize=(fig_w, 4.4), squeeze=False)
    colors: dict[str, str] = {}
    for ax, panel in zip(axes[0], spec.panels):
        bars = [s for s in panel.series if s.kind == "bar"]
        categories: list = []
        for s in bars:
            for x in s.x:
                if x not in categories:
                    categories.append(x)
        bar_w = 0.8 / max(1, len(bars))
        for s in panel.series:
            color = colors.setdefault(s.color_of or s.name, PALETTE[len(colors) % len(PALETTE)])
            y = np.asarray([np.nan if v is None else float(v) for v in s.y], dtype=float)
            yerr = None
            if s.err_plus is not None:
                lo = s.err_minus if s.err_minus is not None else s.err_plus
                yerr = np.clip(np.nan_to_num(np.asarray([lo, s.err_plus], dtype=float), nan=0.0), 0.0, None)
            if s.kind == "bar":
                i = bars.index(s)
                xs = np.asarray([categories.index(x) for x in s.x], dtype=float) - 0.4 + bar_w * (i + 0.5)
                ax.bar(xs, y, width=bar_w, yerr=yerr, label=s.name, color=color, capsize=3)
            else:
                xs = list(s.x)
                if bars or any(isinstance(v, str) for v in xs):
                    for x in xs:
                        if x not in categories:
                            categories.append(x)
                    xs = [categories.index(x) for x in xs]
                ax.errorbar(xs, y, yerr=yerr, label=s.name, color=color, marker="o", capsize=3,
                            linestyle="--" if s.dash else "-", markerfacecolor="none" if s.dash else color)
        if categories:
            ax.set_xticks(range(len(categories)))
            ax.set_xticklabels([str(c) for c in categories], rotation=30 if len(categories) > 4 else 0,
                               ha="right" if len(categories) > 4 else "center")
        for y, label in panel.hlines:
            ax.axhline(y, linestyle="--", color="gray", linewidth=1)
            ax.annotate(label, xy=(1.0, y), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                        fontsize=8, color="gray")
        if panel.log_y:
            ax.set_yscale("log")
        if panel.log_x:  # ticks at the measured x, written plainly (no 3x10^1 minor labels)
            from matplotlib.ticker import NullFormatter, ScalarFormatter

            ax.set_xscale("log")
            ax.set_xticks(sorted({x for s in panel.series for x in s.x}))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        if not categories and not panel.log_x and all(isinstance(x, (int, np.integer)) for s in panel.series for x in s.x):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.grid(alpha=0.3)
    handles, labels = {}, []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    ncol = max(1, min(len(labels), int(fig_w // 1.8)))
    if labels:
        fig.legend([handles[lab] for lab in labels], labels, loc="lower center", ncol=ncol, fontsize=8,
                   frameon=False)
    fig.suptitle(spec.title, fontsize=11)
    rows_of_legend = math.ceil(len(labels) / ncol) if labels else 0
    fig.tight_layout(rect=(0, 0.06 * rows_of_legend, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_figure(spec: FigureSpec, out_dir: Path, name: str) -> dict[str, Path]:
    """Write ``name.html`` (plotly.js saved once beside it) and ``name.png``; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = to_plotly(spec)
    html = out_dir / f"{name}.html"
    fig.write_html(html, include_plotlyjs="directory")
    png = out_dir / f"{name}.png"
    try:
        fig.write_image(png)
    except Exception:  # no Kaleido / no Chrome offline: draw the same spec with matplotlib
        to_matplotlib_png(spec, png)
    return {"html": html, "png": png}
