"""The main-finding table: one row per claim of the paper, our number beside the paper's, a verdict in words.

It opens the README, so a newcomer reads first what our committed runs say about each claim.
Like the headline, every number comes from a summary CSV of ``results/`` or from the paper's
values in ``wash.reporting.results_tables``, and every verdict word ("holds", "not reproduced", "for 6 of
8") is decided from those numbers: a changed result changes the row rather than contradicting it.
``tests/test_report_docs.py`` reads every number of the table back to a cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from wash.reporting import results_tables as rt
from wash.detection import TEST_NAME, Z_THRESHOLD
from wash.reporting import glossary
from wash.reporting.data import Folder
from wash.reporting.fmt import FPR_LEVEL, integer, md_table, num, num_ci, paper_pct, pct, pct_ci
from wash.reporting.headline import name, names

CLAIMS = rt.PAPER_CLAIMS
#: The folders the table quotes (the number test reads their summaries and metas).
FINDINGS_FOLDERS = ("decay-mix-paper", "tpr-paper", "identify-calibrated", "identify-anchor", "tpr-anchor",
                    "baselines-10x100", "quality-paper")
HEADERS = ["The paper says", "We measure (95% interval)", "Paper", "Verdict"]
BRIEF_HEADERS = ["The paper says", "We measure", "Verdict"]


@dataclass(frozen=True)
class Finding:
    """One claim: the full cells (docs/results/findings.md) and the short ones the README shows."""
    claim: str
    ours: str
    paper: str
    verdict: str
    #: What we measure and the verdict in a few words, jargon linked to the README's glossary.
    brief: str = ""
    brief_verdict: str = ""

    def row(self) -> list[str]:
        return [self.claim, self.ours, self.paper, self.verdict]

    def brief_row(self) -> list[str]:
        return [self.claim, self.brief or self.ours, self.brief_verdict or self.verdict]


def _count(part: int, whole: int, noun: str) -> str:
    """``every scheme`` or ``6 of 8 schemes``."""
    return f"every {noun}" if part == whole else f"{part} of {whole} {noun}s"


def _word(held: int, whole: int) -> str:
    """The verdict word for a claim that holds for ``held`` of ``whole`` cases."""
    return "Holds" if held == whole else "Partly holds" if held else "Not reproduced"


def _term(word: str, text: str | None = None) -> str:
    """``[z](#words-used-here)``: a word of the glossary, linked where the README prints it."""
    return f"[{text or word}]({glossary.ANCHOR})"


def per_text_z(F: dict[str, Folder]) -> Finding | None:
    """The abstract's "3 models bring z below 2", read as each provider's per-text z; the z = 4 line beside it."""
    f = F.get("decay-mix-paper")
    if f is None:
        return None
    s = f.summary
    at3 = s[(s["n"] == 3) & s["scheme"].str.startswith("mix/")].sort_values("mean", ascending=False)
    if at3.empty:
        return None
    bound = CLAIMS["z_below"]
    over = at3[at3["mean"] >= bound]
    held = len(at3) - len(over)
    below4 = at3[at3["mean"] < Z_THRESHOLD]
    reach = at3[at3["ci_high"] > Z_THRESHOLD]
    shown = over if len(over) else at3.head(2)
    ours = (f"Mean per-text z at N = 3 (`{f.name}`, every scheme over mixed base models): "
            + ("above " + num(bound, 0) + " " if len(over) else "highest ")
            + ", ".join(f"{name(r['scheme'][4:])} {num_ci(r['mean'], r['ci_low'], r['ci_high'])}"
                        for _, r in shown.iterrows())
            + f"; lowest {name(at3.iloc[-1]['scheme'][4:])} "
              f"{num_ci(at3.iloc[-1]['mean'], at3.iloc[-1]['ci_low'], at3.iloc[-1]['ci_high'])}")
    verdict = (f"**{_word(held, len(at3))}**: the mean is below {num(bound, 0)} for "
               f"{_count(held, len(at3), 'scheme')}" + (f"; not for {names(r[4:] for r in over['scheme'])}"
                                                         if len(over) else "")
               + f". Below {Z_THRESHOLD:g}: {_count(len(below4), len(at3), 'scheme')}")
    verdict += (f", though the intervals of {names(r[4:] for r in reach['scheme'])} reach past {Z_THRESHOLD:g}"
                if len(reach) else "") + "."
    brief = (f"Mean {_term('z')} at N = 3: "
             + (", ".join(f"{name(r['scheme'][4:])} {num(r['mean'])}" for _, r in over.iterrows())
                + f" above {num(bound, 0)}; the other {held} below" if len(over) else
                f"every scheme below {num(bound, 0)}"))
    brief_verdict = f"**{_word(held, len(at3))}** for {_count(held, len(at3), 'scheme')}"
    return Finding(f"With 3 models, detection z falls below {num(bound, 0)} (abstract)", ours,
                   f"below {num(bound, 0)}", verdict, brief, brief_verdict)


def _tpr_row(root: Path, F: dict[str, Folder], setting: str, bound: float, claim: str, paper: str
             ) -> Finding | None:
    """The schemes whose TPR reaches ``bound`` (the paper's claimed ceiling) are named with intervals."""
    if rt.DETECTION_FOLDER not in F:
        return None
    t = rt.detection_table(root)
    cells = t[t["setting"] == setting]
    if cells.empty:
        return None
    above = cells[cells["tpr"] > bound].sort_values("tpr", ascending=False)
    shown = above if len(above) else cells.sort_values("tpr", ascending=False).head(2)
    keyed = int(cells["key_null"].sum())
    source = (f"thresholds from at least {integer(cells[cells['key_null']]['null_scores'].min())} scores under "
              f"random keys for {_count(keyed, len(cells), 'scheme')}"
              + (", from the held-out calibration texts' own scores for the others" if keyed < len(cells) else "")
              if keyed else "thresholds from held-out texts")
    ours = (f"TPR at {FPR_LEVEL} FPR under WASH {setting.split()[-1]} (`{rt.DETECTION_FOLDER}`; {source}): "
            + "; ".join(f"{name(r['scheme'])} {pct_ci(r['tpr'], r['tpr_low'], r['tpr_high'])}"
                        + ("" if pd.isna(r["paper_tpr"]) else f" (paper {paper_pct(r['paper_tpr'])})")
                        for _, r in shown.iterrows())
            + (f"; the other {len(cells) - len(shown)} from {pct(cells.drop(shown.index)['tpr'].min())} to "
               f"{pct(cells.drop(shown.index)['tpr'].max())}" if len(cells) > len(shown) else ""))
    held = len(cells) - len(above)
    if held == len(cells):
        verdict = f"**Holds** for every one of {len(cells)} schemes."
    else:
        verdict = (f"**{'Partly holds' if held else 'Not reproduced'}**: at most {paper} for "
                   f"{_count(held, len(cells), 'scheme')}; not for {names(above['scheme'])}.")
    rest = cells.drop(shown.index)
    brief = (f"{_term('detection rate', 'Detected')} at {FPR_LEVEL} {_term('FPR')}, N = {setting.split('=')[-1]}: "
             + ", ".join(f"{name(r['scheme'])} {pct(r['tpr'])}" for _, r in shown.iterrows())
             + (f"; the other {len(rest)} from {pct(rest['tpr'].min())} to {pct(rest['tpr'].max())}"
                if len(rest) else ""))
    brief_verdict = f"**{_word(held, len(cells))}** for {_count(held, len(cells), 'scheme')}"
    return Finding(claim, ours, paper, verdict, brief, brief_verdict)


def tpr_n3(root: Path, F: dict[str, Folder]) -> Finding | None:
    return _tpr_row(root, F, "WASH N=3", CLAIMS["tpr_below"], f"With 3 models, TPR at {FPR_LEVEL} FPR falls below "
                                         f"{pct(CLAIMS['tpr_below'])} (abstract)", pct(CLAIMS["tpr_below"]))


def tpr_n5(root: Path, F: dict[str, Folder]) -> Finding | None:
    top = rt.paper_table2()
    top = top[top["method"] == "wash N=5"]["tpr"].max()
    return _tpr_row(root, F, "WASH N=5", top, f"With 5 models, every scheme's TPR at {FPR_LEVEL} FPR is at most "
                                         f"{paper_pct(top)} (Table 2)", paper_pct(top))


def identification(root: Path, F: dict[str, Folder]) -> Finding | None:
    """Table 1 read as model identification, for the paper's text: every provider watermarked."""
    if rt.IDENTIFICATION_FOLDER not in F:
        return None
    t = rt.identification_table(root)
    full = t[t["samples"] == t["samples"].max()]
    wash = full[(full["mode"] == "wash") & full["n"].isin([3, 5])]
    if wash.empty:
        return None
    ident = wash[wash["identified"]]
    under = wash[wash["z_waterprobe"] < Z_THRESHOLD]
    whole = [s for s in dict.fromkeys(ident["scheme"]) if (ident["scheme"] == s).sum() == (wash["scheme"] == s).sum()]
    ours = (f"`{rt.IDENTIFICATION_FOLDER}` (every provider watermarked, its own key): the {TEST_NAME} "
            f"against unwatermarked runs identifies {len(ident)} of {len(wash)} WASH systems at N = 3, 5"
            + (f" ({names(whole)} at both)" if whole else "")
            + f"; Water-Probe's own z is below {Z_THRESHOLD:g} in {len(under)} of {len(wash)}")
    paper_range = rt.paper_table1()
    paper_range = paper_range[paper_range["method"].isin(["wash N=3", "wash N=5"])]["z"]
    if len(ident) == 0 and len(under) == len(wash):
        verdict = "**Holds**: no WASH system is identified."
    else:
        verdict = (f"**Not reproduced** with independent keys: {names(whole) if whole else len(ident)} "
                   f"{'stay' if len(whole) != 1 else 'stays'} identifiable under WASH.")
    brief = (f"Without a key, a test on the model ({_term('Water-Probe')}) still identifies {len(ident)} of "
             f"{len(wash)} averaged systems" + (f" ({names(whole)} at N = 3 and 5)" if whole else ""))
    brief_verdict = "**Holds**" if len(ident) == 0 and len(under) == len(wash) else "**Not reproduced**"
    return Finding(f"Under WASH a model can no longer be identified as watermarked: every WASH cell of Table 1 "
                   f"below z = {Z_THRESHOLD:g}",
                   ours, f"z {num(paper_range.min())} to {num(paper_range.max())}", verdict, brief, brief_verdict)


def release(root: Path, F: dict[str, Folder]) -> Finding | None:
    """The paper's release attacks with one watermarked anchor: Tables 1 and 2 like for like."""
    if "identify-anchor" not in F:
        return None
    t = rt.identification_table(root, "identify-anchor")
    wash = t[(t["mode"] == "wash") & t["n"].isin([3, 5])]
    if wash.empty:
        return None
    under = wash[wash["z_waterprobe"] < Z_THRESHOLD]
    ident = wash[wash["identified"]]
    ours = (f"One watermarked anchor diluted by unwatermarked models (`identify-anchor`): Water-Probe's z "
            f"below {Z_THRESHOLD:g} in {len(under)} of {len(wash)} WASH cells; the {TEST_NAME} "
            f"identifies {len(ident)} of {len(wash)}")
    inside = total = 0
    if "tpr-anchor" in F:
        d = rt.detection_table(root, "tpr-anchor")
        d = d[(d["setting"] == "WASH N=5") & ~d["form"].str.endswith(" (detector=release)") & d["paper_tpr"].notna()]
        total = len(d)
        inside = int(((d["tpr_low"] <= d["paper_tpr"]) & (d["paper_tpr"] <= d["tpr_high"])).sum())
        if total:
            ours += (f". Table 2's N = 5 cell lies inside our TPR interval for {inside} of {total} schemes "
                     f"(`tpr-anchor`)")
    word = ("Reproduced" if len(under) == len(wash) and inside == total else
            "Mostly reproduced" if len(under) * 2 > len(wash) and inside * 2 > total else "Partly reproduced")
    verdict = (f"**{word}**: Water-Probe's z below {Z_THRESHOLD:g} as in the paper in {len(under)} of {len(wash)} "
               "cells" + (f", the paper's Table 2 cell inside our interval in {inside} of {total}" if total else "")
               + (f"; yet the {TEST_NAME} identifies {len(ident)} of the {len(wash)} systems." if len(ident)
                  else "."))
    brief = (f"One watermarked model among unwatermarked ones: {_term('Water-Probe')}'s z below "
             f"{Z_THRESHOLD:g} in {len(under)} of {len(wash)} systems, as in the paper; its permutation test "
             f"identifies {len(ident)} of {len(wash)}")
    return Finding("The release's own systems (one watermarked model among unwatermarked ones) stay below "
                   f"z = {Z_THRESHOLD:g} (Table 1) and at the Table 2 TPRs",
                   ours, f"{len(wash)} of {len(wash)} cells below {Z_THRESHOLD:g}", verdict, brief, f"**{word}**")


def baselines(F: dict[str, Folder]) -> Finding | None:
    f = F.get("baselines-10x100")
    if f is None:
        return None
    wash, tob = f.select(arm="wash"), f.select(arm="toblend")
    if wash.empty or tob.empty:
        return None
    pairs = [(f.row(scheme=s, arm="wash"), f.row(scheme=s, arm="toblend")) for s in dict.fromkeys(wash["scheme"])]
    pairs = [(w, t) for w, t in pairs if w is not None and t is not None]
    lower = sum(w["z_mean"] < t["z_mean"] for w, t in pairs)
    separated = sum(w["z_ci_high"] < t["z_ci_low"] for w, t in pairs)
    ours = (f"`{f.name}` (N = {int(wash['n'].iloc[0])}): mean z under WASH below ToBlend's for "
            f"{_count(lower, len(pairs), 'scheme')} ("
            + "; ".join(f"{name(w['scheme'])} {num_ci(w['z_mean'], w['z_ci_low'], w['z_ci_high'])} against "
                        f"{num_ci(t['z_mean'], t['z_ci_low'], t['z_ci_high'])}" for w, t in pairs)
            + f"); cost per text {num(wash['cost_ratio'].min(), 1)}x to {num(wash['cost_ratio'].max(), 1)}x one "
              f"model against ToBlend's {num(tob['cost_ratio'].min(), 1)}x to {num(tob['cost_ratio'].max(), 1)}x"
              "; its TPR thresholds are in-sample (negatives on the positives' own prompts)")
    cheaper = tob["cost_ratio"].min() >= CLAIMS["speedup"] * wash["cost_ratio"].max()
    verdict = (f"**{'Holds' if lower == len(pairs) else 'Partly holds'} for removal**"
               + (" (the intervals overlap)" if separated < len(pairs) else "")
               + ("; **holds for speed**." if cheaper else
                  f"; **not reproduced for speed**: ToBlend costs {num(tob['cost_ratio'].min(), 1)}x to "
                  f"{num(tob['cost_ratio'].max(), 1)}x here, not ~{num(CLAIMS['toblend_cost'], 0)}x."))
    brief = (f"Mean {_term('z')} lower under WASH than under ToBlend for {_count(lower, len(pairs), 'scheme')}; "
             f"ToBlend costs {num(tob['cost_ratio'].min(), 1)}x to {num(tob['cost_ratio'].max(), 1)}x one model "
             f"here, WASH {num(wash['cost_ratio'].min(), 1)}x to {num(wash['cost_ratio'].max(), 1)}x")
    brief_verdict = (f"**{'Holds' if lower == len(pairs) else 'Partly holds'} for removal**; "
                     + ("**holds for speed**" if cheaper else "**not reproduced for speed**"))
    return Finding(f"WASH removes as much as ToBlend at a fraction of the cost ({num(CLAIMS['speedup'], 0)}x "
                   "faster than the best baseline)", ours,
                   f"ToBlend ~{num(CLAIMS['toblend_cost'], 0)}x, WASH {num(CLAIMS['wash_cost_low'], 1)}x to "
                   f"{num(CLAIMS['wash_cost_high'], 1)}x one model", verdict, brief, brief_verdict)


def quality(F: dict[str, Folder]) -> Finding | None:
    f = F.get("quality-paper")
    if f is None:
        return None
    s = f.summary
    cont = s[s["task"] == "continuation"]
    parts, better, worse, total = [], 0, 0, 0
    for scorer in [x for x in dict.fromkeys(cont["scorer"]) if x != "words"]:
        for scheme in [x for x in dict.fromkeys(cont["scheme"]) if x != "none"]:
            a = f.row(task="continuation", scorer=scorer, scheme=scheme, mode="single")
            b = f.row(task="continuation", scorer=scorer, scheme=scheme, mode="wash")
            if a is None or b is None:
                continue
            total += 1
            better += bool(b["median_ci_high"] < a["median_ci_low"])
            worse += bool(b["median_ci_low"] > a["median_ci_high"])
            if scorer == "smollm2":
                parts.append(f"{name(scheme)} {num_ci(b['median'], b['median_ci_low'], b['median_ci_high'])} "
                             f"against {num_ci(a['median'], a['median_ci_low'], a['median_ci_high'])}")
    if not total:
        return None
    ours = (f"Median perplexity, WASH N = {f.config.get('n')} against the watermarked model (`{f.name}`, "
            f"scored by smollm2): {'; '.join(parts)}. Over both scorers and every scheme, WASH is lower in "
            f"{better}, higher in {worse}, and the intervals overlap in {total - better - worse} of {total}")
    verdict = ("**Reproduced**" if better == total else
               "**Not reproduced**" if better == 0 else "**Partly reproduced**") + (
        f": WASH improves on the watermarked model in {better} of {total} comparisons.")
    brief = (f"{_term('perplexity', 'Perplexity')} under WASH against the watermarked model alone: lower in "
             f"{better}, higher in {worse}, no clear difference in {total - better - worse} of {total} comparisons")
    return Finding("Averaging restores the quality a watermark costs (quality "
                   f"+{num(CLAIMS['quality_gain'] * 100, 1)}% over the baselines)", ours, f"+{num(CLAIMS['quality_gain'] * 100, 1)}%",
                   verdict, brief, verdict.split(":")[0])


def findings(root: Path, F: dict[str, Folder]) -> list[Finding]:
    rows = (per_text_z(F), tpr_n3(root, F), tpr_n5(root, F), identification(root, F), release(root, F),
            baselines(F), quality(F))
    return [r for r in rows if r is not None]


def findings_table(root: Path, F: dict[str, Folder]) -> list[str]:
    """Every cell in full: docs/results/findings.md."""
    return md_table(HEADERS, [f.row() for f in findings(root, F)])


def brief_table(root: Path, F: dict[str, Folder]) -> list[str]:
    """The README's table: a few words a cell, the paper's number inside its claim."""
    return md_table(BRIEF_HEADERS, [f.brief_row() for f in findings(root, F)])
