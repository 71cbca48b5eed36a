"""The Results tab: the two headline tables of the committed results and their figures.

Pure plotly and pandas (no widgets). Every number comes from ``wash.reporting.results_tables``,
which reads the committed ``results/`` folders, so the tab, ``docs/RESULTS.md`` and the
README cannot disagree; the prose around the figures holds no typed number.

* :func:`detection_figure`: "is this text watermarked?", TPR at the calibrated FPR per
  scheme, one dot per setting (single, WASH N=3, ...) with its interval, the paper's
  Table 2 as open diamonds in the same slot;
* :func:`identification_figure`: "is this model watermarked?", Water-Probe's S per
  setting, one dot per scheme with its interval, filled when the calibrated verdict
  identifies the system, against a grey box of the same base models without
  watermarks (the null's mean ± sd);
* :func:`view`: both, filtered by scheme, line-up and serving profile (choices from
  the data, :func:`choices`), with a status line per run the rows come from (partial
  or not) and one sentence per figure. Computed once per selection and cached. Every
  committed folder of a question is read (``rt.DETECTION_FOLDERS`` and
  ``rt.IDENTIFICATION_FOLDERS``): where the rows shown span several line-ups, the
  figures say which point is which (a marker shape per line-up, a category per
  setting and line-up).

A cell the run has not reached stays empty: a scheme and setting the run planned but
has not scored shows as "not yet measured" with the paper's value beside it, never a number.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from wash.reporting import results_tables as rt
from wash.reporting import (FPR_LEVEL, integer, num, num_ci, paper_pct, pct_ci, pval, display_name as name,
                            display_names as names)
from wash.detection import TEST_NAME, ALPHA_IDENTIFY, FPR_CALIBRATED
from wash.ui.plots import PALETTE, empty_figure

#: The selector value that keeps every row.
ALL = "all"
#: The selectors, in the order the tab shows them and :func:`view` takes them.
SELECTORS = ("scheme", "lineup", "profile")
NOT_MEASURED = "not yet measured"
MISSING_NULL = "–"

#: Each setting's colour in the detection figure (others take the palette's next one).
SETTING_COLOURS = {"single": "#1f2937", "WASH N=3": "#86efac", "WASH N=5": "#16a34a",
                   "naive N=3": "#fdba74", "naive N=5": "#ea580c"}
NULL_COLOUR = "#9ca3af"
_MODE_RANK = {"single": 0, "wash": 1, "naive": 2, "unwatermarked": 3}

DETECTION_HEADERS = ["scheme (form)", "line-up", "profile", "setting", "TPR [95% CI]", "check FPR [95% CI]",
                     "negatives", "threshold z", "paper Table 2"]
IDENTIFICATION_HEADERS = ["scheme (form)", "line-up", "profile", "setting", "samples", "S [95% CI]",
                          "null S (mean ± sd)", "p", "Holm p", "verdict", "paper-comparable z (band)",
                          "paper Table 1 z"]
#: Column widths (percent of the table) that fit every column on a 1400-pixel page without scrolling sideways.
DETECTION_WIDTHS = ["15%", "10%", "7%", "10%", "13%", "13%", "9%", "10%", "13%"]
IDENTIFICATION_WIDTHS = ["11%", "8%", "6%", "9%", "7%", "12%", "10%", "6%", "6%", "9%", "8%", "8%"]
#: The tables' captions: what their paper columns hold.
DETECTION_CAPTION = ("TPR at the calibrated FPR per scheme and setting; check FPR: the held-out half of the "
                     "unwatermarked texts at the same threshold; paper Table 2: the paper's value for the same "
                     "setting")
IDENTIFICATION_CAPTION = (f"Verdict of the {TEST_NAME} per probed system (p: the permutation test against the "
                          "null's runs; Holm p: adjusted over the systems sharing that null; rows with fewer "
                          "samples: a budget sweep); "
                          "paper-comparable z: Water-Probe's own z and band, the statistic of the paper's Table 1; "
                          f"paper Table 1 z: its {rt.PAPER_Z_MODEL} value (range over its three base models)")


# --- Loading (once per process). ---

#: Each question's folders (``wash.reporting.results_tables``: our forms, the release's forms, the
#: release's line-up).
FOLDERS = {"detection": rt.DETECTION_FOLDERS, "identification": rt.IDENTIFICATION_FOLDERS}
_READ = {"detection": (rt.detection_table, rt.DETECTION_COLUMNS),
         "identification": (rt.identification_table, rt.IDENTIFICATION_COLUMNS)}


@dataclass(frozen=True)
class Loaded:
    """Both questions' rows of one results root, every committed folder of each stacked (``source`` says
    which), with each folder's run; ``problems`` names a folder that is there but could not be read."""
    detection: pd.DataFrame
    identification: pd.DataFrame
    runs: dict = field(default_factory=dict)  # source ("results/tpr-paper") -> rt.RunInfo
    problems: dict = field(default_factory=dict)  # question -> ["`results/x` could not be read (...)"]


def _plan(folder: Path) -> dict:
    """A run's plan (its meta's ``config``)."""
    metas = sorted(folder.glob("*_meta.json"))
    return json.loads(metas[0].read_text()).get("config", {}) if metas else {}


def with_unmeasured(table: pd.DataFrame, folder: Path, info: rt.RunInfo) -> pd.DataFrame:
    """One folder's detection rows plus a row for each planned (scheme, form, setting) the paper reports and
    the run has not scored yet: ``tpr`` missing, ``paper_tpr`` the paper's. Planned: a scheme token of the
    run's plan (or a scheme with rows), single, and WASH at an N of the plan."""
    plan = _plan(folder)
    pairs = list(zip(table["scheme"], table["form"])) + [rt.scheme_and_form(t) for t in plan.get("schemes", [])]
    settings = [("single", 1)] + [("wash", n) for n in plan.get("n_values", []) if "wash" in plan.get("modes", [])]
    have = set(zip(table["scheme"], table["form"], table["mode"], table["n"].astype(int)))
    extra = []
    for scheme, form in dict.fromkeys(pairs):
        for mode, n in settings:
            paper = rt.paper_tpr(scheme, "watermarked" if mode == "single" else f"{mode} N={n}")
            if (scheme, form, mode, n) not in have and not math.isnan(paper):
                extra.append({"scheme": scheme, "form": form, "lineup": info.lineup, "profile": info.profile,
                              "setting": rt.setting_label(mode, n), "mode": mode, "n": n, "paper_tpr": paper,
                              "source": f"{folder.parent.name}/{folder.name}", "partial": info.partial,
                              "jobs": info.jobs})
    if not extra:
        return table
    return pd.concat([table, pd.DataFrame(extra)], ignore_index=True)[table.columns]


def load(root: Path = rt.RESULTS_ROOT) -> Loaded:
    """Read both questions' folders under ``root`` (cached: the committed results do not change under a
    running app)."""
    return _load(Path(root))


def clear_cache() -> None:
    """Forget every table and view read so far (for a results folder changed on disk)."""
    _load.cache_clear()
    _view.cache_clear()


@lru_cache(maxsize=4)
def _load(root: Path) -> Loaded:
    tables, runs, problems = {}, {}, {}
    for key, folders in FOLDERS.items():
        read, columns = _READ[key]
        parts = []
        for name_ in folders:
            folder = root / name_
            if not any(folder.glob("*_summary.csv")):
                continue  # not committed (yet)
            try:
                info = rt.run_info(folder)
                table = read(root, name_)
                if key == "detection":
                    table = with_unmeasured(table, folder, info)
            except (OSError, ValueError, KeyError) as err:
                problems.setdefault(key, []).append(f"`{root.name}/{name_}` could not be read "
                                                    f"({type(err).__name__}: {err})")
                continue
            parts.append(table)
            runs[f"{root.name}/{name_}"] = info
        tables[key] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)
    return Loaded(tables["detection"], tables["identification"], runs, problems)


def choices(loaded: Loaded) -> dict[str, list[str]]:
    """Each selector's choices: ``all`` then every value either table holds (in the order they appear)."""
    out = {}
    for column in SELECTORS:
        values = pd.concat([loaded.detection[column], loaded.identification[column]]).dropna().astype(str)
        out[column] = [ALL, *dict.fromkeys(v for v in values if v != "none")]
    return out


def select(table: pd.DataFrame, scheme: str = ALL, lineup: str = ALL, profile: str = ALL) -> pd.DataFrame:
    """The rows matching each selector that is not ``all`` (the unwatermarked line-up stays with any scheme)."""
    keep = pd.Series(True, index=table.index)
    if scheme and scheme != ALL:
        keep &= table["scheme"].isin([scheme, "none"])
    for column, value in (("lineup", lineup), ("profile", profile)):
        if value and value != ALL:
            keep &= table[column].astype(str) == value
    return table[keep]


# --- Ordering and labels. ---

def _setting_key(mode: str, n: int) -> tuple:
    return int(n), _MODE_RANK.get(mode, len(_MODE_RANK))


def settings_in_order(table: pd.DataFrame) -> list[str]:
    """The table's settings, by N then single / WASH / naive / unwatermarked."""
    pairs = table[["setting", "mode", "n"]].drop_duplicates("setting")
    return [s for s, _, _ in sorted(pairs.itertuples(index=False), key=lambda r: _setting_key(r[1], r[2]))]


def _varying(table: pd.DataFrame, columns=("lineup", "profile")) -> list[str]:
    return [c for c in columns if table[c].nunique(dropna=True) > 1]


def _suffix(row: pd.Series, varying: list[str]) -> str:
    return "".join(f" · {row[c]}" for c in varying)


def scheme_label(row: pd.Series) -> str:
    """``AAR (gumbel)``, ``KGW``: the scheme with its form where it has one."""
    if row["scheme"] == "none":
        return "unwatermarked"
    form = row.get("form", rt.NO_FORM)
    return name(row["scheme"]) + ("" if form in (rt.NO_FORM, None) or pd.isna(form) else f" ({form})")


def _colour(label: str, i: int) -> str:
    return SETTING_COLOURS.get(label, PALETTE[i % len(PALETTE)])


def _errors(values: pd.Series, low: pd.Series, high: pd.Series) -> dict:
    return dict(type="data", symmetric=False, array=(high - values).tolist(), arrayminus=(values - low).tolist(),
                thickness=1.5, width=4)


def _nan_to_none(values) -> list:
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]


def _partial_note(table: pd.DataFrame) -> str:
    """`` (partial run: 1912 of 2880 jobs)`` when a shown row comes from a run that has not finished."""
    partial = table[table["partial"].astype(bool)].drop_duplicates("source")
    if partial.empty:
        return ""
    if len(partial) == 1:
        return f" (partial run: {partial.iloc[0]['jobs']})"
    return " (partial runs: " + ", ".join(f"{r['source'].split('/')[-1]} {r['jobs']}" for _, r in
                                          partial.iterrows()) + ")"


def _base_layout(fig: go.Figure, title: str, x_title: str, y_title: str, categories: list[str]) -> go.Figure:
    """Shared layout: points of one x grouped side by side by ``offsetgroup``, the legend under the axis
    (the figure grows with it, so a long legend never covers the title)."""
    legend_rows = math.ceil(sum(1 for t in fig.data if t.showlegend is not False) / 5)
    top, bottom = 50, 75 + 22 * legend_rows
    plot_height = 330  # pixels of the axes alone, whatever the legend takes
    fig.update_layout(title=dict(text=title, x=0.01, font=dict(size=14)), height=top + plot_height + bottom,
                      template="plotly_white", margin=dict(l=60, r=20, t=top, b=bottom),
                      scattermode="group", scattergap=0.25,
                      legend=dict(orientation="h", yanchor="top", y=-62 / plot_height, xanchor="left", x=0.0,
                                  font=dict(size=11)),
                      xaxis=dict(title=x_title, type="category", categoryorder="array", categoryarray=categories),
                      yaxis=dict(title=y_title), uirevision="results")
    return fig


#: A marker per line-up / profile variant when a figure shows several (the paper's diamond excluded).
VARIANT_SYMBOLS = ("circle", "square", "triangle-up", "pentagon", "star")


# --- "Is this text watermarked?" ---

def detection_figure(table: pd.DataFrame) -> go.Figure:
    """TPR per scheme: a dot with its 95% interval per setting (and per line-up or profile where the rows
    span several: one marker shape each), the paper's Table 2 as an open diamond once per setting, and the
    calibrated FPR level (a detector at chance) as a dashed line."""
    if table.empty:
        return empty_figure("no detection rows for this selection")
    table = table.assign(_x=[scheme_label(r) for _, r in table.iterrows()])
    categories = list(dict.fromkeys(table["_x"]))
    varying = _varying(table)
    variants = list(dict.fromkeys(_suffix(r, varying) for _, r in table.iterrows()))
    fig = go.Figure()
    for i, setting in enumerate(settings_in_order(table)):
        rows = table[table["setting"] == setting]
        colour = _colour(setting, i)
        first = None
        for _, group in (rows.groupby(varying, sort=False) if varying else [(None, rows)]):
            suffix = _suffix(group.iloc[0], varying)
            label = setting + suffix
            first = first or label
            symbol = VARIANT_SYMBOLS[variants.index(suffix) % len(VARIANT_SYMBOLS)]
            measured = group[group["tpr"].notna()]
            fig.add_trace(go.Scatter(
                x=measured["_x"], y=measured["tpr"], mode="markers", name=label, offsetgroup=label,
                legendgroup=label,
                marker=dict(size=10, color=colour, symbol=symbol, line=dict(width=1, color="#111827")),
                error_y=_errors(measured["tpr"], measured["tpr_low"], measured["tpr_high"]),
                customdata=[[pct_ci(r["tpr"], r["tpr_low"], r["tpr_high"]), integer(r["texts"]),
                             num(r["threshold"])] for _, r in measured.iterrows()],
                hovertemplate=(f"%{{x}}, {label}<br>TPR %{{customdata[0]}}<br>%{{customdata[1]}} texts; "
                               "threshold z %{customdata[2]}<extra></extra>")))
        paper = rows[rows["paper_tpr"].notna()].drop_duplicates("_x")  # the same value whatever the line-up
        if not paper.empty:
            fig.add_trace(go.Scatter(
                x=paper["_x"], y=paper["paper_tpr"], mode="markers", name=f"paper Table 2, {setting}",
                offsetgroup=first, legendgroup=first,
                marker=dict(symbol="diamond-open", size=13, color=colour, line=dict(width=2.5)),
                customdata=[[paper_pct(v)] for v in paper["paper_tpr"]],
                hovertemplate=f"%{{x}}, {setting}<br>paper Table 2: %{{customdata[0]}}<extra></extra>"))
    fig.add_hline(y=FPR_CALIBRATED, line=dict(color="#6b7280", dash="dash", width=1),
                  annotation_text=f"{FPR_LEVEL}: a detector at chance", annotation_position="top left")
    _base_layout(fig, "Is this text watermarked? TPR at " + FPR_LEVEL + " FPR per scheme" + _partial_note(table),
                 "scheme (form)", f"share of texts flagged at {FPR_LEVEL} FPR", categories)
    fig.update_yaxes(range=[-0.03, 1.08], tickformat=".0%")
    return fig


def detection_display(table: pd.DataFrame) -> pd.DataFrame:
    """The detection rows as the tab shows them (text cells, missing as ``–``, unscored as "not yet measured")."""
    rows = []
    for _, r in table.iterrows():
        measured = not pd.isna(r["tpr"])
        rows.append([scheme_label(r), r["lineup"], r["profile"], r["setting"],
                     pct_ci(r["tpr"], r["tpr_low"], r["tpr_high"]) if measured else NOT_MEASURED,
                     pct_ci(r["fpr_check"], r["fpr_check_low"], r["fpr_check_high"]), integer(r["negatives"]),
                     num(r["threshold"]), paper_pct(r["paper_tpr"])])
    return pd.DataFrame(rows, columns=DETECTION_HEADERS)


def detection_sentence(table: pd.DataFrame) -> str:
    """What to look at in the detection figure, and (from the data) which scheme keeps the most at the largest
    WASH ensemble shown."""
    text = ("Each dot is the share of texts a provider's own detector flags at a threshold that flags "
            f"{FPR_LEVEL} of unwatermarked texts (whiskers: 95% interval over prompts); an open diamond is the "
            "paper's Table 2 for the same setting. **Look at** how far each scheme's WASH dots fall from its "
            "single dot towards the dashed chance line: a scheme whose WASH dots stay high keeps its "
            "watermark through the average.")
    wash = table[(table["mode"] == "wash") & table["tpr"].notna()]
    if wash.empty:
        return text
    at = wash[wash["n"] == wash["n"].max()].sort_values("tpr", ascending=False)
    if len(at) < 2:
        return text
    top, bottom = at.iloc[0], at.iloc[-1]
    return (text + f" Here, at {top['setting']}, {name(top['scheme'])} keeps the most "
            f"({pct_ci(top['tpr'], top['tpr_low'], top['tpr_high'])}) and {name(bottom['scheme'])} the least "
            f"({pct_ci(bottom['tpr'], bottom['tpr_low'], bottom['tpr_high'])}).")


# --- "Is this model watermarked?" ---

def full_budget(table: pd.DataFrame) -> pd.DataFrame:
    """One row per probed system: the one with the most samples (the budget sweep's smaller ones left out)."""
    if table.empty:
        return table
    keys = ["scheme", "form", "lineup", "profile", "setting"]
    most = table.groupby(keys, sort=False, dropna=False)["samples"].transform("max")
    return table[table["samples"] == most]


def _verdict(r: pd.Series) -> str:
    if pd.isna(r["p"]):
        return "no p (no S)" if pd.isna(r["s"]) else "no p (no null)"
    return "identified" if r["identified"] else "not identified"


def identification_figure(table: pd.DataFrame) -> go.Figure:
    """S per setting (x): a dot per scheme with its 95% interval, filled when identified, hollow when not;
    behind them a grey box per setting, the null (the same base models without watermarks) mean ± sd."""
    table = full_budget(table)
    if table.empty:
        return empty_figure("no identification rows for this selection")
    varying = _varying(table)
    table = table.assign(_x=[r["setting"] + _suffix(r, varying) for _, r in table.iterrows()])
    order = {s: i for i, s in enumerate(settings_in_order(table))}
    seen = list(dict.fromkeys(table["_x"]))  # line-ups in the order their folders come
    categories = sorted(seen, key=lambda x: (order[x.split(" · ")[0]], seen.index(x)))
    fig = go.Figure()
    nulls = table.dropna(subset=["null_s_mean", "null_s_sd"]).drop_duplicates("_x")
    nulls = nulls.set_index("_x").reindex([c for c in categories if c in set(nulls["_x"])]).reset_index()
    if not nulls.empty:
        fig.add_trace(go.Bar(
            x=nulls["_x"], base=(nulls["null_s_mean"] - nulls["null_s_sd"]).tolist(),
            y=(2 * nulls["null_s_sd"]).tolist(), width=0.85, offset=-0.425,
            name="null: same base models unwatermarked (mean ± sd)", marker=dict(color=NULL_COLOUR, opacity=0.35),
            customdata=[[num(m, 3), num(s, 3), integer(k)] for m, s, k in
                        zip(nulls["null_s_mean"], nulls["null_s_sd"], nulls["null_runs"])],
            hovertemplate="%{x}<br>null S %{customdata[0]} ± %{customdata[1]} over %{customdata[2]} runs"
                          "<extra></extra>"))
        for _, r in nulls.iterrows():
            i = categories.index(r["_x"])
            fig.add_shape(type="line", xref="x", yref="y", x0=i - 0.42, x1=i + 0.42, y0=r["null_s_mean"],
                          y1=r["null_s_mean"], line=dict(color="#4b5563", width=1.5))
    table = table.assign(_scheme=[scheme_label(r) for _, r in table.iterrows()])  # a form is its own trace
    for i, label in enumerate(dict.fromkeys(table["_scheme"])):
        rows = table[(table["_scheme"] == label) & table["s"].notna()]
        if rows.empty:
            continue
        colour = NULL_COLOUR if rows.iloc[0]["scheme"] == "none" else PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(
            x=rows["_x"], y=rows["s"], mode="markers", name=label, offsetgroup=label, legendgroup=label,
            marker=dict(size=11, color=colour, line=dict(width=2, color=colour),
                        symbol=["circle" if ok else "circle-open" for ok in rows["identified"]]),
            error_y=_errors(rows["s"], rows["s_low"], rows["s_high"]),
            customdata=[[num_ci(r["s"], r["s_low"], r["s_high"], 3), pval(r["p"]), pval(r["p_holm"]), _verdict(r)]
                        for _, r in rows.iterrows()],
            hovertemplate=(f"{label}, %{{x}}<br>S %{{customdata[0]}}<br>p %{{customdata[1]}}, Holm p "
                           "%{customdata[2]}: %{customdata[3]}<extra></extra>")))
    _base_layout(fig, "Is this model watermarked? Water-Probe S against the unwatermarked null" + _partial_note(table),
                 "setting (line-up of base models)", "S: rank agreement between the two prompts", categories)
    fig.update_layout(bargap=0.15)
    return fig


def identification_display(table: pd.DataFrame) -> pd.DataFrame:
    """The identification rows as the tab shows them: the verdict from the Holm-adjusted p, Water-Probe's z and
    the paper's Table 1 z in the table only."""
    rows = []
    for _, r in table.iterrows():
        null = MISSING_NULL if pd.isna(r["null_s_mean"]) else f"{num(r['null_s_mean'], 3)} ± {num(r['null_s_sd'], 3)}"
        paper = "–" if pd.isna(r["paper_z"]) else (
            f"{num(r['paper_z'], 1)} ({num(r['paper_z_low'], 1)} to {num(r['paper_z_high'], 1)})")
        z = "–" if pd.isna(r["z_waterprobe"]) else f"{num(r['z_waterprobe'], 1)} ({r['band']})"
        rows.append([scheme_label(r), r["lineup"], r["profile"], r["setting"], integer(r["samples"]),
                     num_ci(r["s"], r["s_low"], r["s_high"], 3), null, pval(r["p"]), pval(r["p_holm"]), _verdict(r),
                     z, paper])
    return pd.DataFrame(rows, columns=IDENTIFICATION_HEADERS)


def identification_sentence(table: pd.DataFrame) -> str:
    """What to look at in the identification figure, and (from the data) which systems are identified."""
    text = ("Each dot is a system's Water-Probe S with its 95% interval over contexts; the grey box behind a "
            "setting is the same base models probed without watermarks (the null, mean ± sd). A filled dot is "
            f"identified by the {TEST_NAME} (its p against the null's runs, Holm-adjusted over the systems "
            f"sharing them, is below {ALPHA_IDENTIFY:g}), a hollow one is not. **Look at** "
            "which WASH dots still clear their grey box: averaging has not hidden those watermarks from a "
            "probe that needs no key.")
    marked = full_budget(table)
    marked = marked[(marked["mode"] != "unwatermarked") & marked["p"].notna()]
    if marked.empty:
        return text
    wash = marked[marked["mode"] == "wash"]
    if wash.empty:
        return text
    hit = wash[wash["identified"]]
    missed = wash[~wash["identified"]]
    out = f" Here, {len(hit)} of {len(wash)} WASH systems probed are identified"
    if not missed.empty:
        out += "; not identified: " + names([f"{name(r['scheme'])} {r['setting']}" for _, r in missed.iterrows()])
    return text + out + "."


# --- The tab's content for one selection. ---

def _run_line(source: str, info: rt.RunInfo, root: Path) -> str:
    line = (f"From `{source}`: `{info.command}` ({info.date}; code {info.code}, engine {info.engine}; serving "
            f"profile {info.profile}; line-up {info.lineup}).")
    if info.partial:
        line += f" **Partial run: {info.jobs}.** Cells the run has not reached are empty, never filled in."
    unmeasured = rt.unmeasured_schemes(root, source.split("/", 1)[1])
    if unmeasured:
        labels = [scheme_label(pd.Series(dict(zip(("scheme", "form"), rt.scheme_and_form(t))))) for t in unmeasured]
        line += f" Planned but not yet measured: {', '.join(labels)} (the paper's value shown alone)."
    return line


def _status(key: str, loaded: Loaded, shown: pd.DataFrame, root: Path) -> str:
    """One line per run the shown rows come from (all the question's runs when none is shown)."""
    table = getattr(loaded, key)
    sources = list(dict.fromkeys(shown["source"] if not shown.empty else table["source"]))
    lines = [_run_line(s, loaded.runs[s], root) for s in sources if s in loaded.runs]
    lines += [f"**Not read:** {p}." for p in loaded.problems.get(key, [])]
    if table.empty and not loaded.problems.get(key):
        lines.append("**Not available:** no committed folder of " +
                     ", ".join(f"`{root.name}/{f}`" for f in FOLDERS[key]) + ".")
    if shown.empty and not table.empty:
        lines.append("No rows match this selection.")
    return "  \n".join(lines)


@dataclass(frozen=True)
class View:
    """Everything the tab shows for one selection, in the order the tab wires its outputs."""
    detection_status: str
    detection_figure: go.Figure
    detection_sentence: str
    detection_table: pd.DataFrame
    identification_status: str
    identification_figure: go.Figure
    identification_sentence: str
    identification_table: pd.DataFrame

    def outputs(self) -> tuple:
        return (self.detection_status, self.detection_figure, self.detection_sentence, self.detection_table,
                self.identification_status, self.identification_figure, self.identification_sentence,
                self.identification_table)


#: The names of :meth:`View.outputs`, for wiring.
OUTPUTS = ("detection_status", "detection_figure", "detection_sentence", "detection_table",
           "identification_status", "identification_figure", "identification_sentence", "identification_table")


def view(scheme: str | None = ALL, lineup: str | None = ALL, profile: str | None = ALL,
         root: Path = rt.RESULTS_ROOT) -> View:
    """The tab for one selection (cached: a warm app answers a selector change without recomputing);
    an empty selector means ``all``."""
    return _view(scheme or ALL, lineup or ALL, profile or ALL, Path(root))


@lru_cache(maxsize=64)
def _view(scheme: str, lineup: str, profile: str, root: Path) -> View:
    loaded = load(root)
    det = select(loaded.detection, scheme, lineup, profile)
    ident = select(loaded.identification, scheme, lineup, profile)
    return View(_status("detection", loaded, det, root), detection_figure(det),
                detection_sentence(det) if not det.empty else "", detection_display(det),
                _status("identification", loaded, ident, root), identification_figure(ident),
                identification_sentence(ident) if not ident.empty else "", identification_display(ident))


def intro_markdown() -> str:
    """The tab's first lines: what it shows and where it comes from."""
    return ("The two questions the committed experiments answer, beside the paper's tables ("
            f"{rt.PAPER}). Everything here is read from the `results/` folders of this copy (the same numbers "
            "as docs/RESULTS.md, which `python -m wash report` regenerates). Pick a scheme, line-up or serving "
            "profile to narrow both tables and figures; hover a point for its numbers.")


# --- "Can a detector see through the wash?" (results/see-through). ---

SEE_THROUGH_TITLE = "Can a detector see through the wash?"
#: Colours of the scheme's own sum and of the model-aware likelihood ratio.
STATISTIC_COLOURS = {"sum": "#6b7280", "lr": "#7c3aed", "lr-mix": "#db2777"}


def see_through_figure(root: Path = rt.RESULTS_ROOT) -> go.Figure:
    """TPR against N per scheme: the scheme's own sum beside the model-aware LR, with the page's intervals."""
    from wash.reporting import see_through as st

    data = st.load(root)
    if data is None:
        return empty_figure("results/see-through is not committed yet")
    t = data["summary"]
    # TPR against N: the long texts' one N is drawn against length instead (``see_through_length_figure``)
    t = t[t["statistic"].isin(list(STATISTIC_COLOURS)) & (t["source"] != st.LENGTH_SOURCE)]
    fig = go.Figure()
    labels = [f"{name(s)} ({src})" for s, src in zip(t["scheme"], t["source"])]
    t = t.assign(_label=labels)
    for stat, colour in STATISTIC_COLOURS.items():
        for n, symbol in ((1, "circle"), (3, "square"), (5, "diamond")):
            g = t[(t["statistic"] == stat) & (t["n"] == n)]
            if not len(g):
                continue
            fig.add_trace(go.Scatter(
                x=[[c for c in g["_label"]], [f"N={n}"] * len(g)], y=g["tpr"], mode="markers",
                name=f"{st.STAT_NAMES[stat]}, N={n}", marker={"color": colour, "symbol": symbol, "size": 9},
                error_y=_errors(g["tpr"], *(pd.Series(side, index=g.index)
                                            for side in zip(*(st.bounds(r, "tpr") for _, r in g.iterrows())))),
                hovertemplate="%{x}: TPR %{y:.0%}<extra>" + st.STAT_NAMES[stat] + "</extra>"))
    fig.update_layout(title=SEE_THROUGH_TITLE + " TPR at p < 5% per provider", yaxis={"range": [0, 1.02],
                      "tickformat": ".0%", "title": "TPR"}, xaxis={"title": "scheme (line-up), N"},
                      margin={"t": 60, "b": 80}, legend={"orientation": "h", "y": -0.3}, height=460)
    return fig


def see_through_length_figure(root: Path = rt.RESULTS_ROOT) -> go.Figure:
    """TPR against the tokens read on the long texts, per scheme: the scheme's own sum beside the ratio, with
    the page's intervals and the 80% line the tokens-for-80% column reads off."""
    from wash.reporting import see_through as st

    data = st.load(root)
    length = None if data is None else data.get("length")
    if length is None or not len(length):
        return empty_figure("the long texts (results/tpr-long) are not scored yet")
    fig = go.Figure()
    schemes = list(dict.fromkeys(length["scheme"]))
    dashes = {5: "solid", 3: "dot", 1: "dash"}
    for (scheme, stat, n), g in length.groupby(["scheme", "statistic", "n"], sort=False):
        if stat not in STATISTIC_COLOURS:
            continue
        g = g.sort_values("cut")
        lo, hi = zip(*(st.bounds(r, "tpr") for _, r in g.iterrows()))
        fig.add_trace(go.Scatter(
            x=g["cut"], y=g["tpr"], mode="lines+markers", name=f"{name(scheme)}: {st.STAT_NAMES[stat]}, N={n}",
            line={"color": STATISTIC_COLOURS[stat], "dash": dashes.get(int(n), "solid")},
            marker={"symbol": ["circle", "square", "diamond", "triangle-up"][schemes.index(scheme) % 4]},
            error_y=_errors(g["tpr"], pd.Series(lo, index=g.index), pd.Series(hi, index=g.index)),
            hovertemplate="%{x} tokens: TPR %{y:.0%}<extra>" + f"{name(scheme)}, {stat}, N={n}</extra>"))
    fig.add_hline(y=0.8, line_dash="dash", line_color="gray", annotation_text="80%")
    fig.update_layout(title=st.LENGTH_TITLE + " TPR at p < 5% per provider against tokens read",
                      xaxis={"type": "log", "title": "tokens read (prefix of each 800-token text)"},
                      yaxis={"range": [0, 1.02], "tickformat": ".0%", "title": "TPR"}, margin={"t": 60, "b": 80},
                      legend={"orientation": "h", "y": -0.3}, height=480)
    return fig


def see_through_markdown(root: Path = rt.RESULTS_ROOT) -> str:
    """The section's prose and tables, as docs/RESULTS.md has them (``wash.reporting.see_through``)."""
    from wash.reporting import see_through as st

    lines = st.section(root)
    if not lines:
        return "`results/see-through` is not committed yet."
    body = [ln.replace("../results/", "results/") for ln in lines if not ln.startswith(("## ", "!["))]
    return "\n".join(body).strip() + "\n"
