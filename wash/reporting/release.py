"""Our systems beside the paper's release, like for like: per scheme and setting, one row, with a
column per system that was run (ours; the release's forms; the release's one-anchor line-up) and the
paper's cell last.

Why a section of its own: the paper's numbers come from its release's systems (soft AAR and
EXP-Edit, ITS-Edit's shared permutation, one watermarked anchor among unwatermarked
partners), ours from the original schemes' forms with every provider watermarked. A
disagreement means something only where the same system was run: the columns say which,
side by side, so a reader compares along a row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd

from wash.reporting import results_tables as rt
from wash.detection import TEST_NAME, Z_THRESHOLD
from wash.reporting.fmt import MISSING, md_table, missing, num, num_ci, paper_pct, pct_ci, pval
from wash.reporting.headline import name
from wash.watermarks import rank, release_forms

#: The settings the paper's tables report, in their order.
SETTINGS = ("single", "WASH N=3", "WASH N=5")
#: The systems, in column order: (column title, which rows belong to it).
OURS, RELEASE_FORM, ANCHOR = "ours: original form, independent keys", "release form, independent keys", \
    "release form, one anchor"
SAME_AS_OURS = "= ours"
#: A system that was run but gave the test nothing to score (a lone point mass repeats its token).
NO_SCORE = "no score"
SAME_AS_RELEASE_FORM = "= release form"


#: A scheme token's detector variant as ``scheme_and_form`` appends it to the form.
RELEASE_DETECTOR = " (detector=release)"


def split_detector(form: str) -> tuple[str, bool]:
    """``"soft (detector=release)"`` -> ``("soft", True)``: the form, and whether the release's detector scored."""
    return (form[:-len(RELEASE_DETECTOR)], True) if form.endswith(RELEASE_DETECTOR) else (form, False)


def system_of(scheme: str, form: str, lineup: str, setting: str) -> str | None:
    """Which column a run's row belongs to (``None``: a system this section does not compare).

    A single provider has no partners: an anchor run's single is its form's independent single.
    The release's detector scoring the same texts goes in its system's column, beside ours.
    """
    form, _ = split_detector(form)
    release = release_forms().get(scheme, rt.default_form(scheme))  # the scheme's ``release_form``
    if lineup == "anchor" and setting != "single":
        return ANCHOR if form == release else None
    if form == rt.default_form(scheme):
        return OURS
    return RELEASE_FORM if form == release else None


def _pivot(t: pd.DataFrame, cell: Callable[[pd.Series], str], paper: Callable[[pd.Series], str]) -> list[list[str]]:
    """One row per (scheme, setting) run by more than one system, a cell per system; the paper last."""
    t = _systems(t[t["setting"].isin(SETTINGS)])
    t = t[t["system"].notna()]
    forms = release_forms()
    rows = []
    for scheme in _ordered(t["scheme"]):
        for setting in SETTINGS:
            if setting == "single" and scheme not in forms:
                continue  # one provider in the original form: one system, already in the main tables
            both = t[(t["scheme"] == scheme) & (t["setting"] == setting)]
            here = both[~both["release_detector"]].drop_duplicates("system")
            if here["system"].nunique() < 2 and not (setting == "single" and len(here)):
                continue
            by = {r["system"]: r for _, r in here.iterrows()}
            theirs = {r["system"]: r for _, r in both[both["release_detector"]].drop_duplicates("system").iterrows()}
            cells = {s: cell(by[s]) if s in by else MISSING for s in (OURS, RELEASE_FORM, ANCHOR)}
            for s, r in theirs.items():  # the release's detector on the same texts
                cells[s] = f"{cells[s]} · release detector: {cell(r)}"
            if scheme not in forms:  # the release serves the original form: the same system
                cells[RELEASE_FORM] = SAME_AS_OURS
            if setting == "single":  # one provider alone: no partners, so no line-up
                cells[ANCHOR] = SAME_AS_RELEASE_FORM if scheme in forms else SAME_AS_OURS
            if sum(c not in (MISSING, SAME_AS_OURS, SAME_AS_RELEASE_FORM) for c in cells.values()) < 2 \
                    and setting != "single":
                continue
            rows.append([name(scheme), setting, *cells.values(), paper(next(iter(by.values())))])
    # a scheme whose only rows are its single provider compares nothing: drop it
    compared = {r[0] for r in rows if r[1] != "single"}
    return [r for r in rows if r[0] in compared]


def _systems(t: pd.DataFrame) -> pd.DataFrame:
    """Each row labelled with its system (column) and whether the release's detector scored it."""
    return t.assign(system=[system_of(s, f, lu, st) for s, f, lu, st in zip(t["scheme"], t["form"], t["lineup"],
                                                                              t["setting"])],
                    release_detector=[split_detector(f)[1] for f in t["form"]])


def _ordered(schemes) -> list[str]:
    return sorted(set(schemes), key=rank)


def _form(form: str) -> str:
    """`` (soft)`` for a scheme served in a named form; nothing for the original."""
    return "" if form == rt.NO_FORM else f" ({split_detector(form)[0]})"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def detection_verdict(t: pd.DataFrame) -> str | None:
    """Is each paper's Table 2 cell (WASH N = 5) reproduced by the release's system (one anchor,
    release form)? Inside our interval, or which side of it; and, where the release's detector
    scored the same texts, the same question for it, with its power on a single provider, since a
    detector that flags few watermarked texts alone cannot give the paper's cells."""
    t = _systems(t)
    n5 = t[(t["system"] == ANCHOR) & (t["setting"] == "WASH N=5") & t["paper_tpr"].notna()]
    if n5.empty:
        return None
    side = {"inside": [], "above": [], "below": []}
    for scheme in _ordered(n5["scheme"]):
        for _, r in n5[n5["scheme"] == scheme].sort_values("release_detector").iterrows():
            where = ("inside" if r["tpr_low"] <= r["paper_tpr"] <= r["tpr_high"]
                     else "above" if r["tpr_low"] > r["paper_tpr"] else "below")
            who = " by the release's detector" if r["release_detector"] else ""
            side[where].append(f"{name(scheme)}{who} ({pct_ci(r['tpr'], r['tpr_low'], r['tpr_high'])} against "
                               f"{paper_pct(r['paper_tpr'])})")
    parts = [f"{label} {_and(side[key])}" for key, label in
             (("inside", "reproduced (the paper's cell inside our interval) for"),
              ("above", "ours above the paper's for"), ("below", "ours below the paper's for")) if side[key]]
    text = "Verdict at WASH N = 5, the release's system (one anchor): " + "; ".join(parts) + "."
    alone = t[(t["setting"] == "single") & t["release_detector"] & t["paper_tpr"].notna()]
    if len(alone):
        cells = [f"{name(r['scheme'])} {pct_ci(r['tpr'], r['tpr_low'], r['tpr_high'])} (paper "
                 f"{paper_pct(r['paper_tpr'])})" for _, r in alone.drop_duplicates("scheme").iterrows()]
        text += " Alone, the release's detector flags " + _and(cells) + " of a single provider's texts."
        weak = alone[alone["tpr_high"] < alone["paper_tpr"]].drop_duplicates("scheme")
        if len(weak):
            text += (f" So the paper's {_and([name(s) for s in weak['scheme']])} cells cannot come from that "
                     "detector as implemented here from the release's code.")
    return text


def identification_verdict(t: pd.DataFrame) -> str | None:
    """Does Water-Probe's z stay below the threshold under the release's system, as every WASH cell
    of the paper's Table 1 does? Counted cell by cell, naming the ones that do not."""
    t = _systems(t)
    wash = t[(t["system"] == ANCHOR) & t["setting"].isin(SETTINGS[1:]) & t["z_waterprobe"].notna()]
    if wash.empty:
        return None
    above = wash[wash["z_waterprobe"] >= Z_THRESHOLD]
    text = (f"Verdict, the release's system (one anchor): Water-Probe's z stays below {Z_THRESHOLD:g} in "
            f"{len(wash) - len(above)} of {len(wash)} WASH cells, as every WASH cell of the paper's Table 1 does")
    if len(above):
        text += "; not for " + _and([f"{name(r['scheme'])}{_form(r['form'])} at {r['setting']} ("
                                     f"{num(r['z_waterprobe'], 1)}, paper {num(r['paper_z'], 1)})"
                                     for _, r in above.iterrows()])
    return text + "."


def _several(t: pd.DataFrame) -> bool:
    return len(t.drop_duplicates(["form", "lineup"])) > 1 and t["source"].nunique() > 1


def _identification(root: Path) -> pd.DataFrame:
    """Every identification run's rows at the largest sample count (the size the paper's z needs)."""
    t = rt.identification_tables(root)
    return t[t["samples"] == t["samples"].max()] if not t.empty and _several(t) else t.iloc[0:0]


def _detection(root: Path) -> pd.DataFrame:
    """Every detection run's rows; none while each scheme has one system (the main tables show it)."""
    t = rt.detection_tables(root)
    return t if not t.empty and _several(t) else t.iloc[0:0]


def identification_rows(t: pd.DataFrame) -> list[list[str]]:
    if t.empty:
        return []

    def cell(r: pd.Series) -> str:
        if missing(r["p"]):
            return NO_SCORE
        verdict = "identified" if r["identified"] else "not identified"
        return (f"{num(r['z_waterprobe'], 1)}; S {num_ci(r['s'], r['s_low'], r['s_high'], 3)}, p {pval(r['p'])} "
                f"(Holm {pval(r['p_holm'])}), {verdict}")

    return _pivot(t, cell, lambda r: num(r["paper_z"], 1))


def detection_rows(t: pd.DataFrame) -> list[list[str]]:
    if t.empty:
        return []

    def cell(r: pd.Series) -> str:
        tpr = pct_ci(r["tpr"], r["tpr_low"], r["tpr_high"])
        return tpr if missing(r["tpr"]) else f"{tpr}; FPR {pct_ci(r['fpr_check'], r['fpr_check_low'], r['fpr_check_high'])}"

    return _pivot(t, cell, lambda r: paper_pct(r["paper_tpr"]))


def release_section(root: Path) -> list[str]:
    ident_t, det_t = _identification(root), _detection(root)  # each read once: rows and verdict share it
    ident, det = identification_rows(ident_t), detection_rows(det_t)
    if not ident and not det:
        return []
    systems = [OURS, RELEASE_FORM, ANCHOR]
    out = ["## Our systems beside the paper's release", "",
           "The paper's numbers come from its release's systems: AAR and EXP-Edit served in a soft form "
           "(the keyed law normalised and sampled, not the point mass), ITS-Edit with one shared permutation, "
           "and one watermarked anchor among unwatermarked partners. One row per scheme and setting, one "
           "column per system run, the paper's cell last: compare along a row. `= ours` marks a scheme whose "
           "release form is the original (its single provider is then one system, shown in the main tables); "
           "a single provider has no partners, so no line-up; "
           f"`{MISSING}`: not run (yet); `{NO_SCORE}`: run, but the test had nothing to score; "
           "`release detector`: the same texts scored by the release's detector instead of ours.", ""]
    if ident:
        out += ["Is this model watermarked? Water-Probe's own z (the paper's Table 1 statistic, its "
                "Llama-3.1-8B value last), then the calibrated test: S above its null, p (Holm-adjusted), "
                f"verdict of the {TEST_NAME} (open serving)",
                "", *md_table(["scheme", "setting", *systems, "paper Table 1 z"], ident), ""]
        verdict = identification_verdict(ident_t)
        out += [verdict, ""] if verdict else []
    if det:
        out += ["Is this text watermarked? TPR at 5% FPR on held-out negatives, and the FPR the threshold "
                "gives on the other half (paper serving), beside the paper's Table 2", "",
                *md_table(["scheme", "setting", *systems, "paper Table 2"], det), ""]
        verdict = detection_verdict(det_t)
        out += [verdict, ""] if verdict else []
    return out
