"""Our systems beside the paper's release, like for like: per scheme and setting, one row per
(form, line-up) that was run, next to the paper's cell.

Why a section of its own: the paper's numbers come from its release's systems (soft AAR and
EXP-Edit, ITS-Edit's shared permutation, one watermarked anchor among unwatermarked
partners), ours from the original schemes' forms with every provider watermarked. A
disagreement means something only where the same system was run: these rows say which.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from wash import results_tables as rt
from wash.reporting.fmt import MISSING, md_table, missing, num, num_ci, paper_pct, pct_ci, pval
from wash.reporting.headline import name

#: The settings the paper's tables report, in their order.
SETTINGS = ("single", "WASH N=3", "WASH N=5")


def _order(t: pd.DataFrame) -> pd.DataFrame:
    """Schemes in the paper's order, settings as the paper's, then the folders' order (ours first); only
    the (scheme, setting) cells run by more than one system (the others are in the main tables)."""
    schemes = {s: i for i, s in enumerate(("kgw", "aar", "dipmark", "exp-edit", "its-edit", "waterbag",
                                           "unigram", "synthid"))}
    t = t[t["setting"].isin(SETTINGS)].copy()
    # one provider alone is the same system under every line-up: its repeat is the same measurement
    t = t[~(t["setting"].eq("single") & t.duplicated(["scheme", "setting", "form"]))]
    t = t[t.groupby(["scheme", "setting"])["setting"].transform("size") > 1]
    t["_s"] = t["scheme"].map(schemes).fillna(99)
    t["_n"] = t["setting"].map({s: i for i, s in enumerate(SETTINGS)})
    return t.sort_values(["_s", "_n"], kind="stable").drop(columns=["_s", "_n"])  # stable: folder order kept


def _several(t: pd.DataFrame) -> bool:
    return len(t.drop_duplicates(["form", "lineup"])) > 1 and t["source"].nunique() > 1


def identification_rows(root: Path) -> list[list[str]]:
    t = rt.identification_tables(root)
    if t.empty or not _several(t):
        return []
    t = _order(t[t["samples"] == t["samples"].max()])
    rows = []
    for _, r in t.iterrows():
        verdict = MISSING if missing(r["p"]) else ("identified" if r["identified"] else "not identified")
        rows.append([name(r["scheme"]), r["setting"], r["form"], r["lineup"],
                     num_ci(r["s"], r["s_low"], r["s_high"], 3), num(r["null_s_mean"], 3),
                     f"{pval(r['p'])}, {verdict}", num(r["z_waterprobe"], 1),
                     num(r["paper_z"], 1)])
    return rows


def detection_rows(root: Path) -> list[list[str]]:
    t = rt.detection_tables(root)
    if t.empty or not _several(t):
        return []
    rows = []
    for _, r in _order(t).iterrows():
        rows.append([name(r["scheme"]), r["setting"], r["form"], r["lineup"],
                     pct_ci(r["tpr"], r["tpr_low"], r["tpr_high"]),
                     pct_ci(r["fpr_check"], r["fpr_check_low"], r["fpr_check_high"]), paper_pct(r["paper_tpr"])])
    return rows


def release_section(root: Path) -> list[str]:
    ident, det = identification_rows(root), detection_rows(root)
    if not ident and not det:
        return []
    out = ["## Our systems beside the paper's release", "",
           "The paper's numbers come from its release's systems: AAR and EXP-Edit served in a soft form "
           "(the keyed law normalised and sampled, not the point mass), ITS-Edit with one shared permutation, "
           "and one watermarked anchor among unwatermarked partners. Each row below is one system that was "
           "run: `form` and `line-up` say which; a cell the runs have not reached is missing.", ""]
    if ident:
        out += ["Is this model watermarked? (calibrated Water-Probe, open serving; Water-Probe's own z beside "
                "the paper's Table 1, its Llama-3.1-8B value)", "",
                *md_table(["scheme", "setting", "form", "line-up", "S [95% CI]", "null S", "p, verdict",
                           "Water-Probe z", "paper Table 1 z"], ident), ""]
    if det:
        out += ["Is this text watermarked? (TPR at 5% FPR on held-out negatives, paper serving, beside the "
                "paper's Table 2)", "",
                *md_table(["scheme", "setting", "form", "line-up", "TPR [95% CI]", "check FPR [95% CI]",
                           "paper Table 2"], det), ""]
    return out
