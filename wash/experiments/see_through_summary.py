"""``results/see-through``: TPR, check FPR and the "any provider" decision per cell and statistic.

Reads the per-cell CSVs ``see_through.score`` wrote (one record per text,
provider, statistic and prefix cut) and writes:

* ``see_through_rows.csv.gz``: every scored (text, provider, statistic, key kind), its p
  at each prefix cut and on the whole text: any cell below is recomputed from it
  (``summarize --committed``) without re-scoring;
* ``see_through_cells.csv``: per (source, scheme, N, statistic), on whole texts:
  the per-provider TPR (positives flagged at p < 0.05), the check FPR (held-out
  negatives flagged at p < 0.05 under keys of their own, never used to set anything;
  ``fpr_slot`` under their slots' committed keys, which ~70 negatives share ~30 of),
  both with Wilson intervals and with intervals from a bootstrap over prompts
  (``*_boot_lo`` / ``*_boot_hi``: a text's providers, and a prompt's texts, are not
  independent trials), the null scores behind each threshold (``null_scores``: the simulated
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
  to the whole text reaches it), with a prompt-bootstrap interval (an upper end
  past the longest prefix is empty), and ``see_through_exponents.csv``: the fitted
  exponent b of tokens ~ N^b (``scipy.stats.linregress`` on log-log) with its
  standard error, only where at least three N reach 80% (two points fit a line
  exactly and give no error);
* ``see_through_<source>.html`` / ``.png``: TPR against N per scheme, the scheme's own
  sum beside the model-aware LRs;
* ``see_through_length.csv`` and ``see_through_length.html`` / ``.png``, for the sources
  whose texts are long (``LENGTH_SOURCES``): per (scheme, N, statistic) and prefix cut,
  the per-provider TPR, the per-text Fisher TPR and the check FPR at that many tokens,
  each with its prompt-bootstrap interval: how much text a provider needs to see
  through WASH.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from wash.detection import FPR_CALIBRATED
from wash.experiments.stats import BOOTSTRAP_SEED, cluster_mean_interval, wilson_interval

ALPHA = FPR_CALIBRATED
TARGET_TPR = 0.8
#: Fewest N values an exponent is fitted on (a line through two points has no error).
MIN_EXPONENT_NS = 3
#: Resamples of the prompts behind each tokens-for-80% interval.
TOKEN_RESAMPLES = 2000
#: Sources whose texts are long enough for the length table and figure (``see_through.SOURCE_CUTS``).
LENGTH_SOURCES = ("long",)
#: The length table and figure.
LENGTH_FILE = "see_through_length.csv"
LENGTH_FIGURE = "see_through_length"
#: The committed per-text rows (one line per text, provider, statistic and key kind; p per cut).
ROWS_FILE = "see_through_rows.csv.gz"
#: Columns that say which scored row a record is (the compact file's identity columns).
ID_COLUMNS = ["source", "scheme", "n", "mode", "role", "prompt_id", "provider", "provider_model", "provider_key",
              "text_id", "keys", "statistic"]


def load_rows(rows_dir: Path) -> pd.DataFrame:
    parts = [pd.read_csv(p) for p in sorted(rows_dir.glob("*.csv"))]
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if len(rows) and "keys" not in rows:  # cells scored before negatives had keys of their own
        rows["keys"] = "slot"
    return rows


def compact(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per scored (text, provider, statistic, key kind): its whole-text record and ``p_<cut>`` per
    prefix cut. The long records repeat the whole-text fields once per cut; this keeps what the tables read."""
    full = rows[_full(rows)]
    keep = [c for c in ID_COLUMNS + ["committed_p", "length", "value", "p", "tokens_scored", "null_scores"]
            if c in full] + [c for c in full if c.startswith("q_")]
    out = full[keep].set_index(ID_COLUMNS)
    cuts = rows[~_full(rows)].pivot_table(index=ID_COLUMNS, columns="cut", values="p", aggfunc="first")
    cuts.columns = [f"p_{int(c)}" for c in cuts.columns]
    return out.join(cuts).reset_index()


def expand(compacted: pd.DataFrame) -> pd.DataFrame:
    """``compact``'s lines back as the long records the tables read (a cut's ``value`` is not kept)."""
    cut_cols = [c for c in compacted if c.startswith("p_")]
    whole = compacted.drop(columns=cut_cols).assign(full=True, cut=compacted["length"])
    parts = [whole]
    for col in cut_cols:
        # sources scored at other cuts (``see_through.SOURCE_CUTS``) leave this column empty: no record there
        has = compacted[col].notna()
        parts.append(compacted[has].drop(columns=cut_cols).assign(full=False, cut=int(col[2:]),
                                                                  p=compacted.loc[has, col], value=float("nan")))
    return pd.concat(parts, ignore_index=True)


def read_committed(out: Path) -> pd.DataFrame:
    return expand(pd.read_csv(out / ROWS_FILE))


def write_rows(compacted: pd.DataFrame, out: Path) -> None:
    """The committed rows, gzip without a timestamp (the same rows give the same bytes)."""
    compacted.to_csv(out / ROWS_FILE, index=False, float_format="%.6g",
                     compression={"method": "gzip", "mtime": 0})


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


def _boot(flags: pd.Series, prompts: pd.Series) -> tuple[float, float]:
    """A rate's 95% interval from a bootstrap over prompts (``stats.cluster_mean_interval``)."""
    return cluster_mean_interval(flags.to_numpy(float), prompts.to_numpy(), seed=BOOTSTRAP_SEED)


def _per_text(rows: pd.DataFrame, decide) -> pd.DataFrame:
    """A text-level decision (``decide``: per-text flags indexed by text id) beside each text's prompt."""
    flags = decide(rows)
    prompts = rows.groupby("text_id")["prompt_id"].first()
    return pd.DataFrame({"flag": flags, "prompt": prompts.loc[flags.index]})


def _rates(prefix: str, rows: pd.DataFrame, decide=None) -> dict[str, float]:
    """``prefix``'s rate, Wilson and prompt-bootstrap intervals: per (text, provider) row, or per text."""
    if decide is None:
        flags, prompts = rows["p"] < ALPHA, rows["prompt_id"]
    else:
        t = _per_text(rows, decide)
        flags, prompts = t["flag"], t["prompt"]
    r = _rate(flags)
    lo, hi = _boot(flags, prompts) if len(flags) else (float("nan"), float("nan"))
    return {prefix: r["rate"], f"{prefix}_lo": r["lo"], f"{prefix}_hi": r["hi"], f"{prefix}_boot_lo": lo,
            f"{prefix}_boot_hi": hi}


def _negatives(g: pd.DataFrame, kind: str) -> pd.DataFrame:
    neg = g[g["role"] == "negative"]
    return neg[neg["keys"] == kind] if "keys" in neg else (neg if kind == "slot" else neg.iloc[:0])


def _check_negatives(g: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The negatives a check FPR reads, and under which keys: their own where scored so, else their slots'."""
    fresh = _negatives(g, "fresh")
    return (fresh, "fresh") if len(fresh) else (_negatives(g, "slot"), "slot")


def cell_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (source, scheme, N, statistic). The check FPR is read under the negatives' own keys
    where they were scored so (else under their slots'), and ``fpr_slot`` under their slots' keys."""
    full = rows[_full(rows)]
    out = []
    for (source, scheme, n, stat), g in full.groupby(["source", "scheme", "n", "statistic"], sort=False):
        pos = g[g["role"] == "positive"]
        slot = _negatives(g, "slot")
        neg, kind = _check_negatives(g)
        row = {"source": source, "scheme": scheme, "n": int(n), "statistic": stat, "check_keys": kind}
        row.update(_rates("tpr", pos))
        row.update(_rates("fpr", neg))
        row.update(_rates("fpr_slot", slot))
        row.update(_rates("any_tpr", pos, _any_provider))
        row.update(_rates("any_fpr", neg, _any_provider))
        row.update(_rates("fisher_tpr", pos, _any_provider_fisher))
        row.update(_rates("fisher_fpr", neg, _any_provider_fisher))
        row.update(positives=len(pos), negatives=len(neg), texts=pos["text_id"].nunique(),
                   negative_texts=neg["text_id"].nunique())
        row["null_scores"] = int(g["null_scores"].min())
        row["providers_scored"] = int(pos.groupby("text_id")["p"].count().max()) if len(pos) else 0
        out.append(row)
    return pd.DataFrame(out)


def tokens_for(cuts: np.ndarray, tpr: np.ndarray, target: float = TARGET_TPR) -> float:
    """Smallest prefix reaching ``target`` TPR, interpolated in log tokens; NaN when none does."""
    return float(tokens_for_each(cuts, np.asarray(tpr, dtype=float)[None, :], target)[0])


def tokens_for_each(cuts: np.ndarray, curves: np.ndarray, target: float = TARGET_TPR) -> np.ndarray:
    """``tokens_for`` of each row of ``curves`` (curves x cuts) at once: the bootstrap's thousands of curves."""
    reached = curves >= target
    j = reached.argmax(axis=1)
    rows = np.arange(len(curves))
    prev = np.maximum(j - 1, 0)
    lo_t, hi_t = curves[rows, prev], curves[rows, j]
    log_c = np.log(np.asarray(cuts, dtype=float))
    step = hi_t - lo_t
    f = np.divide(target - lo_t, step, out=np.zeros_like(step), where=step != 0)
    flat = (j == 0) | (step == 0)
    out = np.where(flat, np.asarray(cuts, dtype=float)[j], np.exp(log_c[prev] + f * (log_c[j] - log_c[prev])))
    return np.where(reached.any(axis=1), out, np.nan)


def tokens_interval(flags: np.ndarray, prompts: np.ndarray, cuts: np.ndarray, confidence: float = 0.95,
                    resamples: int = TOKEN_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """A percentile interval of ``tokens_for`` over resamples of the prompts (a (text, provider) row's
    flags at each cut, ``flags``: rows x cuts). A resample whose curve never reaches the target counts
    as past the longest cut: an end that falls there is NaN (not measured)."""
    names, inverse = np.unique(prompts.astype(str), return_inverse=True)
    if names.size < 2:
        return float("nan"), float("nan")
    k = np.zeros((names.size, flags.shape[1]))
    np.add.at(k, inverse, flags.astype(float))
    m = np.bincount(inverse, minlength=names.size).astype(float)
    idx = np.random.default_rng(seed).integers(0, names.size, size=(resamples, names.size))
    curves = k[idx].sum(axis=1) / m[idx].sum(axis=1)[:, None]
    draws = tokens_for_each(cuts, curves)
    draws[np.isnan(draws)] = np.inf
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha], method="inverted_cdf")  # no interpolation with inf
    return (float(lo) if np.isfinite(lo) else float("nan")), (float(hi) if np.isfinite(hi) else float("nan"))


def token_tables(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    pos = rows[(rows["role"] == "positive") & ~_full(rows)].assign(flag=lambda d: d["p"] < ALPHA)
    toks = []
    for (source, scheme, stat, n), g in pos.groupby(["source", "scheme", "statistic", "n"]):
        wide = g.pivot_table(index=["text_id", "provider"], columns="cut", values="flag", aggfunc="first")
        prompts = g.groupby(["text_id", "provider"])["prompt_id"].first().loc[wide.index].to_numpy()
        cuts = wide.columns.to_numpy(float)
        curve = wide.to_numpy(float).mean(axis=0)
        lo, hi = tokens_interval(wide.to_numpy(float), prompts, cuts)
        toks.append({"source": source, "scheme": scheme, "statistic": stat, "n": int(n),
                     "tokens_for_80": tokens_for(cuts, curve), "tokens_lo": lo, "tokens_hi": hi,
                     "tpr_at_longest": float(curve[-1]), "longest_cut": int(cuts[-1])})
    toks = pd.DataFrame(toks)
    exps = []
    for (source, scheme, stat), g in toks.groupby(["source", "scheme", "statistic"]):
        ok = g.dropna(subset=["tokens_for_80"])
        row = {"source": source, "scheme": scheme, "statistic": stat, "n_values": int(len(ok)),
               "exponent": float("nan"), "exponent_se": float("nan")}
        if ok["n"].nunique() >= MIN_EXPONENT_NS:
            fit = stats.linregress(np.log(ok["n"].to_numpy(float)), np.log(ok["tokens_for_80"].to_numpy(float)))
            row.update(exponent=float(fit.slope), exponent_se=float(fit.stderr))
        exps.append(row)
    return toks, pd.DataFrame(exps)


def length_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (source, scheme, N, statistic, cut) of ``LENGTH_SOURCES``: the TPR per provider, Fisher's per
    text and the check FPR (negatives under keys of their own) of the first ``cut`` tokens, with intervals.

    Every text of a long source has the same length, so each cut is a prefix of every text: the curve
    compares one set of texts at growing lengths, not shorter texts with longer ones."""
    part = rows[rows["source"].isin(LENGTH_SOURCES) & ~_full(rows)]
    out = []
    for (source, scheme, n, stat, cut), g in part.groupby(["source", "scheme", "n", "statistic", "cut"],
                                                          sort=False):
        pos = g[g["role"] == "positive"]
        neg, kind = _check_negatives(g)
        row = {"source": source, "scheme": scheme, "n": int(n), "statistic": stat, "cut": int(cut)}
        row.update(_rates("tpr", pos))
        row.update(_rates("fisher_tpr", pos, _any_provider_fisher))
        row.update(_rates("fpr", neg))
        row.update(positives=len(pos), negatives=len(neg), check_keys=kind)
        out.append(row)
    columns = ["source", "scheme", "n", "statistic", "cut"]
    return pd.DataFrame(out).sort_values(columns).reset_index(drop=True) if out else pd.DataFrame(columns=columns)


def length_figure(table: pd.DataFrame, out: Path) -> None:
    """``see_through_length.png`` / ``.html``: per scheme, TPR against the tokens read (log axis), one line per
    statistic and N, with the 80% line the tokens-for-80% table reads off."""
    from wash.experiments.plots import FigureSpec, Panel, Series, save_figure

    if table.empty:
        return
    panels = []
    for scheme, g in table.groupby("scheme", sort=False):
        panel = Panel(title=scheme, xlabel="tokens read", ylabel="TPR at p < 0.05", log_x=True,
                      hlines=[(TARGET_TPR, f"{TARGET_TPR:.0%}")])
        for (stat, n), s in g.groupby(["statistic", "n"], sort=False):
            s = s.sort_values("cut")
            lo, hi = s["tpr_boot_lo"], s["tpr_boot_hi"]
            panel.series.append(Series(name=f"{stat}, N={int(n)}", x=list(s["cut"]), y=list(s["tpr"]),
                                       err_minus=list(s["tpr"] - lo), err_plus=list(hi - s["tpr"])))
        panels.append(panel)
    save_figure(FigureSpec(title="How much text does a provider need to see through WASH? TPR against length "
                                 "(tpr-long, 800-token texts)", panels=panels), out, LENGTH_FIGURE)


def write_length(rows: pd.DataFrame, out: Path) -> pd.DataFrame:
    """The length table and figure from the committed rows (nothing written when no long source is there)."""
    table = length_table(rows)
    if len(table):
        table.to_csv(out / LENGTH_FILE, index=False, float_format="%.4g")
        length_figure(table, out)
    return table


#: The statistics the figure draws: each scheme's own sum and the two model-aware ratios.
FIGURE_STATISTICS = ("sum", "lr", "lr-mix")


def figure(table: pd.DataFrame, out: Path) -> None:
    """``see_through_<source>.png`` / ``.html``: one panel per scheme, TPR against N per statistic."""
    from wash.experiments.plots import FigureSpec, Panel, Series, save_figure

    for source, rows in table.groupby("source", sort=False):
        if source in LENGTH_SOURCES:  # one N so far: its figure is TPR against length (``length_figure``)
            continue
        panels = []
        for scheme, g in rows.groupby("scheme", sort=False):
            panel = Panel(title=scheme, xlabel="N", ylabel="TPR at p < 0.05")
            for stat in FIGURE_STATISTICS:
                s = g[g["statistic"] == stat].sort_values("n")
                if len(s):
                    lo, hi = (s["tpr_boot_lo"], s["tpr_boot_hi"]) if "tpr_boot_lo" in s else (s["tpr_lo"],
                                                                                            s["tpr_hi"])
                    panel.series.append(Series(name=stat, x=list(s["n"]), y=list(s["tpr"]),
                                               err_minus=list(s["tpr"] - lo), err_plus=list(hi - s["tpr"])))
            panels.append(panel)
        save_figure(FigureSpec(title=f"Can a detector see through the wash? tpr-{source}: TPR against N, own sum "
                                     "vs model-aware LR", panels=panels), out, f"see_through_{source}")


def summarize(rows_dir: Path | None = Path("out/see-through/rows"), out: Path = Path("results/see-through"),
              meta: dict | None = None) -> pd.DataFrame:
    """The tables, the figure and the committed rows from the scored cells under ``rows_dir``; with
    ``rows_dir=None``, from the committed rows themselves (no re-scoring: the tables must come out equal)."""
    out.mkdir(parents=True, exist_ok=True)
    if rows_dir is not None:  # the tables are read from the rows as committed, so they recompute equal
        write_rows(compact(load_rows(rows_dir)), out)
    rows = read_committed(out)
    table = cell_table(rows)
    toks, exps = token_tables(rows)
    table.to_csv(out / "see_through_cells.csv", index=False, float_format="%.4g")
    toks.to_csv(out / "see_through_tokens.csv", index=False, float_format="%.4g")
    exps.to_csv(out / "see_through_exponents.csv", index=False, float_format="%.4g")
    figure(table, out)
    write_length(rows, out)
    if meta is not None:
        (out / "see_through_run.json").write_text(json.dumps(meta, indent=2) + "\n")
    return table


#: The committed tables, each with one row per (source, scheme, ...): a scheme's cells are its rows.
TABLES = ("see_through_cells.csv", "see_through_tokens.csv", "see_through_exponents.csv")


def add_schemes(rows_dir: Path, out: Path, added: dict, sources: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Summarise the schemes whose rows are in ``rows_dir`` into the committed tables of ``out``.

    Why: every table is per (source, scheme), so a scheme scored later (with the same
    statistics, cuts and null draws) joins the committed ones without re-scoring them.
    Its earlier cells, if any, are replaced; the other schemes' cells are kept as
    committed; ``added`` (command, date, code, machine) is appended to the run meta's
    ``added`` list so the page says which cells came when."""
    scored = load_rows(rows_dir)
    if sources is not None and len(scored):
        scored = scored[scored["source"].isin(sources)]
    if scored.empty:
        raise ValueError(f"no rows under {rows_dir}" + (f" for {', '.join(sources)}" if sources else ""))
    fresh = set(zip(scored["source"], scored["scheme"]))

    def among(frame: pd.DataFrame) -> pd.Series:
        """Which of ``frame``'s lines belong to a (source, scheme) scored now."""
        return pd.Series([pair in fresh for pair in zip(frame["source"], frame["scheme"])], index=frame.index,
                         dtype=bool)

    old_rows = pd.read_csv(out / ROWS_FILE) if (out / ROWS_FILE).exists() else pd.DataFrame(columns=ID_COLUMNS)
    write_rows(pd.concat([old_rows[~among(old_rows)], compact(scored)], ignore_index=True), out)
    every = read_committed(out)
    write_length(every, out)
    rows = every[among(every)]
    new = dict(zip(TABLES, (cell_table(rows), *token_tables(rows))))
    committed = pd.read_csv(out / TABLES[0])
    replaced = set(committed.loc[among(committed), "scheme"])
    merged = {}
    for name in TABLES:
        old = pd.read_csv(out / name)
        merged[name] = pd.concat([old[~among(old)], new[name]], ignore_index=True)
        merged[name].to_csv(out / name, index=False, float_format="%.4g")
    table = merged[TABLES[0]]
    figure(table, out)
    meta_path = out / "see_through_run.json"
    meta = json.loads(meta_path.read_text())
    meta.setdefault("added", []).append({**added, "schemes": sorted({s for _, s in fresh}),
                                         "replaced": sorted(replaced)})
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return table
