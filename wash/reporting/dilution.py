"""How a watermark's signal shrinks with N: the per-text z of a provider's own detector against
the keyless identification score S above its null, each fitted to N ** exponent.

Why both: a provider's detector holds its key and sees only its own perturbation, which
the average weighs 1/N, so its z should fall like 1/N whatever the partners serve. A
keyless probe (Water-Probe) sees the sum of every fixed perturbation: one anchor among
unwatermarked partners is diluted 1/N, but N independent watermarks add up like a random
walk, 1/sqrt(N) in size. Which law holds decides whether "washed out" for one question
means washed out for the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wash.experiments import FigureSpec, Panel, Series, power_law_exponent
from wash.reporting.data import Folder
from wash.reporting.fmt import num, num_ci
from wash.reporting.headline import name

#: The two laws the fit is read against.
LAWS = {"1/N": -1.0, "1/sqrt(N)": -0.5}


def reads_as(low: float, high: float) -> str:
    """Which of the two laws the exponent's interval admits."""
    if math.isnan(low) or math.isnan(high):
        return "no fit"
    inside = [law for law, b in LAWS.items() if low <= b <= high]
    if len(inside) == 1:
        return inside[0]
    if inside:
        return "cannot tell"
    return "flatter than 1/sqrt(N)" if low > -0.5 else "steeper than 1/N" if high < -1.0 else "between the two"


@dataclass
class Fit:
    """One signal's cells (N, value above its null, interval) and its fitted law, for the table and figure."""
    measure: str
    label: str
    ns: list[int]
    above: list[float]
    low: list[float]
    high: list[float]
    row: list[str]


def _fit_row(measure: str, scheme: str, lineup: str, cells: pd.DataFrame, value: str, low: str, high: str,
             baseline: np.ndarray | float = 0.0, baseline_se: np.ndarray | float = 0.0) -> Fit | None:
    cells = cells.dropna(subset=[value, low, high])
    if cells["n"].nunique() < 2:
        return None
    fit = power_law_exponent(cells["n"].tolist(), cells[value].tolist(), cells[low].tolist(),
                             cells[high].tolist(), baseline=baseline, baseline_se=baseline_se)
    values = ", ".join(f"{int(n)}: {num(v, 3)}" for n, v in zip(cells["n"], cells[value]))
    kept = "" if fit.kept == fit.draws else f" ({fit.kept} of {fit.draws} draws above the null)"
    base = np.broadcast_to(np.asarray(baseline, dtype=float), (len(cells),))
    return Fit(measure, f"{name(scheme)}, {lineup}", [int(n) for n in cells["n"]],
               list(cells[value].to_numpy() - base), list(cells[low].to_numpy() - base),
               list(cells[high].to_numpy() - base),
               [measure, name(scheme), lineup, values, num_ci(fit.exponent, fit.low, fit.high) + kept,
                reads_as(fit.low, fit.high)])


def identification_fits(f: Folder) -> list[Fit]:
    """One fit per scheme of an identify run: S above each line-up's null at N = 1 and every WASH N."""
    s = f.summary
    lineup = f.config.get("lineup", "independent")
    budget = f.config.get("samples")
    if budget is not None and "samples" in s:
        s = s[s["samples"] == budget]
    rows = []
    for scheme in dict.fromkeys(s.loc[s["mode"].isin(["single", "wash"]), "scheme"]):
        cells = s[(s["scheme"] == scheme) & s["mode"].isin(["single", "wash"])].sort_values("n")
        cells = cells.dropna(subset=["s", "s_low", "s_high", "null_s_mean", "null_s_sd", "null_runs"])
        se = cells["null_s_sd"] / cells["null_runs"].clip(lower=1) ** 0.5
        row = _fit_row("identification S above the null", scheme, lineup, cells, "s", "s_low", "s_high",
                       baseline=cells["null_s_mean"].to_numpy(), baseline_se=se.to_numpy())
        if row:
            rows.append(row)
    return rows


def per_text_fits(f: Folder) -> list[Fit]:
    """The provider's own per-text z of a decay run (one base model: the ``fixed`` setting)."""
    s = f.summary
    if "setting" in s:
        s = s[s["setting"] == "fixed"]
    lineup = f.config.get("lineup", "independent")
    rows = []
    for scheme in dict.fromkeys(s["scheme"]):
        row = _fit_row("per-text z (own detector)", scheme, lineup, s[s["scheme"] == scheme].sort_values("n"),
                       "mean", "ci_low", "ci_high")
        if row:
            rows.append(row)
    return rows


def dilution_fits(F: dict[str, Folder]) -> list[Fit]:
    rows: list[Fit] = []
    for folder in ("decay-kgw-paper",):
        if folder in F:
            rows += per_text_fits(F[folder])
    for folder in ("identify-calibrated", "identify-anchor", "identify-release-forms"):
        if folder in F:
            rows += identification_fits(F[folder])
    return rows


def dilution_figure(fits: list[Fit]) -> FigureSpec | None:
    """Each signal above its null, relative to its value at N = 1, against N (log scale), beside the
    1/N and 1/sqrt(N) laws: a measured line on a dashed one follows that law. Signals without an
    N = 1 cell (a lone provider the probe cannot score) are in the table only."""
    panels = []
    for measure in dict.fromkeys(f.measure for f in fits):
        mine = [f for f in fits if f.measure == measure and f.ns[0] == 1]
        if not mine:
            continue
        panel = Panel(measure, "ensemble size N", "above the null, relative to N = 1 (95% CI)", log_y=True)
        for f in mine:
            a0 = f.above[0]
            panel.series.append(Series(f.label, f.ns, [a / a0 for a in f.above],
                                       [(a - lo) / a0 for a, lo in zip(f.above, f.low)],
                                       [(hi - a) / a0 for a, hi in zip(f.above, f.high)]))
        ns = sorted({n for f in mine for n in f.ns})
        for law, b in LAWS.items():
            panel.series.append(Series(f"{law} law", ns, [n ** b for n in ns], dash=True))
        panels.append(panel)
    return FigureSpec("How the signal shrinks with N", panels) if panels else None
