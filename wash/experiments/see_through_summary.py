"""``results/see-through``: TPR, check FPR and the "any provider" decision per cell and statistic.

Reads the per-cell CSVs ``see_through.score`` wrote (one record per text,
provider, statistic and prefix cut) and writes:

* ``see_through_cells.csv``: per (source, scheme, N, statistic), on whole texts:
  the per-provider TPR (positives flagged at p < 0.05), the check FPR (held-out
  negatives flagged at p < 0.05, never used to set anything), both with Wilson
  intervals, the null scores behind each threshold (``null_scores``: the simulated
  draws per text; 0 for ``sum``, whose p comes from its scheme's own exact or
  Gaussian null), and two text-level "any provider" decisions over the providers of the
  text that were scored (``providers_scored``; at most N): ``any_*``, Bonferroni (Holm's
  first step: min p < 0.05 / m over the m scored providers), valid under any dependence;
  and ``fisher_*``, Fisher's combination (``scipy.stats.combine_pvalues``: -2 sum log p
  against chi-square with 2m degrees of freedom) at 0.05. Fisher's is valid because,
  given the text, each provider's p is a function of its own key alone (the statistic's
  null is drawn over keys given the text) and the keys are independent, so the m p-values
  are independent given the text, each at least uniform; Bonferroni pays for a dependence
  they do not have. Each with its TPR and FPR and intervals;
* ``see_through_tokens.csv``: the text tokens each statistic needs for 80% TPR at
  N (prefixes of every text, interpolated in log tokens; empty where no prefix up
  to the whole text reaches it) and ``see_through_exponents.csv``: the fitted
  exponent b of tokens ~ N^b (``scipy.stats.linregress`` on log-log) where at
  least two N reach 80%;
* ``see_through_<source>.html`` / ``.png``: TPR against N per scheme, the scheme's own
  sum beside the model-aware LRs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from wash.detection import FPR_CALIBRATED
from wash.experiments.stats import wilson_interval

ALPHA = FPR_CALIBRATED
TARGET_TPR = 0.8


def load_rows(rows_dir: Path) -> pd.DataFrame:
    parts = [pd.read_csv(p) for p in sorted(rows_dir.glob("*.csv"))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _rate(flags: pd.Series) -> dict[str, float]:
    k, n = int(flags.sum()), int(len(flags))
    lo, hi = wilson_interval(k, n)
    return {"rate": k / n if n else float("nan"), "lo": lo, "hi": hi, "k": k, "n": n}


def _any_provider(rows: pd.DataFrame) -> pd.Series:
    """Per text: Bonferroni (Holm's first step) over its m scored providers' p (flag: min p < alpha / m)."""
    g = rows.groupby("text_id")["p"]
    return g.min() < ALPHA / g.count()


def fisher_p(pvalues: np.ndarray) -> float:
    """Fisher's combination of independent p-values (``scipy.stats.combine_pvalues``); 1 with none."""
    ps = np.asarray(pvalues, dtype=float)
    ps = ps[np.isfinite(ps)]
    return float(stats.combine_pvalues(ps, method="fisher").pvalue) if ps.size else 1.0


def _any_provider_fisher(rows: pd.DataFrame) -> pd.Series:
    """Per text: Fisher's combination of its m scored providers' p below alpha (independent given the text:
    one key each)."""
    return rows.groupby("text_id")["p"].agg(lambda g: fisher_p(g.to_numpy())) < ALPHA


def _full(rows: pd.DataFrame) -> pd.Series:
    return rows["full"].astype(str).str.lower() == "true"


def cell_table(rows: pd.DataFrame) -> pd.DataFrame:
    full = rows[_full(rows)]
    out = []
    for (source, scheme, n, stat), g in full.groupby(["source", "scheme", "n", "statistic"], sort=False):
        pos = g[g["role"] == "positive"]
        neg = g[g["role"] == "negative"]
        tpr, fpr = _rate(pos["p"] < ALPHA), _rate(neg["p"] < ALPHA)
        atpr, afpr = _rate(_any_provider(pos)), _rate(_any_provider(neg))
        ftpr, ffpr = _rate(_any_provider_fisher(pos)), _rate(_any_provider_fisher(neg))
        out.append({
            "source": source, "scheme": scheme, "n": int(n), "statistic": stat,
            "tpr": tpr["rate"], "tpr_lo": tpr["lo"], "tpr_hi": tpr["hi"], "positives": tpr["n"],
            "fpr": fpr["rate"], "fpr_lo": fpr["lo"], "fpr_hi": fpr["hi"], "negatives": fpr["n"],
            "null_scores": int(g["null_scores"].min()),
            "any_tpr": atpr["rate"], "any_tpr_lo": atpr["lo"], "any_tpr_hi": atpr["hi"], "texts": atpr["n"],
            "any_fpr": afpr["rate"], "any_fpr_lo": afpr["lo"], "any_fpr_hi": afpr["hi"],
            "negative_texts": afpr["n"],
            "fisher_tpr": ftpr["rate"], "fisher_tpr_lo": ftpr["lo"], "fisher_tpr_hi": ftpr["hi"],
            "fisher_fpr": ffpr["rate"], "fisher_fpr_lo": ffpr["lo"], "fisher_fpr_hi": ffpr["hi"],
            "providers_scored": int(g.groupby("text_id")["p"].count().max()),
        })
    return pd.DataFrame(out)


def tokens_for(cuts: np.ndarray, tpr: np.ndarray, target: float = TARGET_TPR) -> float:
    """Smallest prefix reaching ``target`` TPR, interpolated in log tokens; NaN when none does."""
    hit = np.flatnonzero(tpr >= target)
    if not len(hit):
        return float("nan")
    j = int(hit[0])
    if j == 0 or tpr[j] == tpr[j - 1]:
        return float(cuts[j])
    f = (target - tpr[j - 1]) / (tpr[j] - tpr[j - 1])
    return float(math.exp(math.log(cuts[j - 1]) + f * (math.log(cuts[j]) - math.log(cuts[j - 1]))))


def token_tables(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    pos = rows[(rows["role"] == "positive") & ~_full(rows)]
    curve = (pos.assign(flag=pos["p"] < ALPHA).groupby(["source", "scheme", "statistic", "n", "cut"])["flag"]
             .mean().reset_index())
    toks = []
    for (source, scheme, stat, n), g in curve.groupby(["source", "scheme", "statistic", "n"]):
        g = g.sort_values("cut")
        toks.append({"source": source, "scheme": scheme, "statistic": stat, "n": int(n),
                     "tokens_for_80": tokens_for(g["cut"].to_numpy(float), g["flag"].to_numpy()),
                     "tpr_at_longest": float(g["flag"].iloc[-1]), "longest_cut": int(g["cut"].iloc[-1])})
    toks = pd.DataFrame(toks)
    exps = []
    for (source, scheme, stat), g in toks.groupby(["source", "scheme", "statistic"]):
        ok = g.dropna(subset=["tokens_for_80"])
        row = {"source": source, "scheme": scheme, "statistic": stat, "n_values": int(len(ok)),
               "exponent": float("nan"), "exponent_se": float("nan")}
        if len(ok) >= 2 and ok["n"].nunique() >= 2:
            fit = stats.linregress(np.log(ok["n"].to_numpy(float)), np.log(ok["tokens_for_80"].to_numpy(float)))
            row.update(exponent=float(fit.slope), exponent_se=float(fit.stderr) if len(ok) > 2 else float("nan"))
        exps.append(row)
    return toks, pd.DataFrame(exps)


#: The statistics the figure draws: each scheme's own sum and the two model-aware ratios.
FIGURE_STATISTICS = ("sum", "lr", "lr-mix")


def figure(table: pd.DataFrame, out: Path) -> None:
    """``see_through_<source>.png`` / ``.html``: one panel per scheme, TPR against N per statistic."""
    from wash.experiments.plots import FigureSpec, Panel, Series, save_figure

    for source, rows in table.groupby("source", sort=False):
        panels = []
        for scheme, g in rows.groupby("scheme", sort=False):
            panel = Panel(title=scheme, xlabel="N", ylabel="TPR at p < 0.05")
            for stat in FIGURE_STATISTICS:
                s = g[g["statistic"] == stat].sort_values("n")
                if len(s):
                    panel.series.append(Series(name=stat, x=list(s["n"]), y=list(s["tpr"]),
                                               err_minus=list(s["tpr"] - s["tpr_lo"]),
                                               err_plus=list(s["tpr_hi"] - s["tpr"])))
            panels.append(panel)
        save_figure(FigureSpec(title=f"Can a detector see through the wash? tpr-{source}: TPR against N, own sum "
                                     "vs model-aware LR", panels=panels), out, f"see_through_{source}")


def summarize(rows_dir: Path = Path("out/see-through/rows"), out: Path = Path("results/see-through"),
              meta: dict | None = None) -> pd.DataFrame:
    rows = load_rows(rows_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = cell_table(rows)
    toks, exps = token_tables(rows)
    table.to_csv(out / "see_through_cells.csv", index=False, float_format="%.4g")
    toks.to_csv(out / "see_through_tokens.csv", index=False, float_format="%.4g")
    exps.to_csv(out / "see_through_exponents.csv", index=False, float_format="%.4g")
    figure(table, out)
    if meta is not None:
        (out / "see_through_run.json").write_text(json.dumps(meta, indent=2) + "\n")
    return table


#: The committed tables, each with one row per (source, scheme, ...): a scheme's cells are its rows.
TABLES = ("see_through_cells.csv", "see_through_tokens.csv", "see_through_exponents.csv")


def add_schemes(rows_dir: Path, out: Path, added: dict) -> pd.DataFrame:
    """Summarise the schemes whose rows are in ``rows_dir`` into the committed tables of ``out``.

    Why: every table is per (source, scheme), so a scheme scored later (with the same
    statistics, cuts and null draws) joins the committed ones without re-scoring them.
    Its earlier cells, if any, are replaced; the other schemes' cells are kept as
    committed; ``added`` (command, date, code, machine) is appended to the run meta's
    ``added`` list so the page says which cells came when."""
    rows = load_rows(rows_dir)
    if rows.empty:
        raise ValueError(f"no rows under {rows_dir}")
    new = dict(zip(TABLES, (cell_table(rows), *token_tables(rows))))
    fresh = set(zip(rows["source"], rows["scheme"]))
    merged = {}
    for name in TABLES:
        old = pd.read_csv(out / name)
        keep = old[[pair not in fresh for pair in zip(old["source"], old["scheme"])]]
        merged[name] = pd.concat([keep, new[name]], ignore_index=True)
        merged[name].to_csv(out / name, index=False, float_format="%.4g")
    table = merged[TABLES[0]]
    figure(table, out)
    meta_path = out / "see_through_run.json"
    meta = json.loads(meta_path.read_text())
    meta.setdefault("added", []).append({**added, "schemes": sorted({s for _, s in fresh})})
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return table
