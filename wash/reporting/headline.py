"""The headline: a few sentences, each number (and its interval) filled in from a committed CSV.

The templates below hold prose only. Every number comes from a summary CSV or a meta
of ``results/`` (or, marked "paper", from ``wash.reporting.results_tables``' copy of the paper's
tables), and every comparison word ("below", "overlap", "every") is decided from those
numbers, so a changed result changes the sentence rather than contradicting it.
``tests/test_report_docs.py`` reads every number of the rendered headline back to a cell.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from wash.reporting import results_tables as rt
from wash.reporting.data import Folder
from wash.reporting.fmt import FPR_LEVEL, integer, num, num_ci, paper_pct, pct, pct_ci, pval, pval_range
from wash.detection import TEST_NAME, ALPHA_IDENTIFY, Z_THRESHOLD
from wash.watermarks import title

#: The folders the headline quotes; ``HEADLINE_SOURCES`` are the files its numbers come from.
HEADLINE_FOLDERS = ("decay-kgw-paper", "decay-mix-paper", "tpr-paper", "identify-calibrated", "identify-anchor",
                    "tpr-anchor", "baselines-10x100",
                    "quality-paper", "decay-kgw-open", "entropy")

def name(scheme: str) -> str:
    """A scheme's display name (its ``title``); a variant token (``aar:form=soft``) keeps its parameters."""
    base, _, params = scheme.partition(":")
    return title(base) + (f" ({params.replace('+', ', ')})" if params else "")


def names(schemes) -> str:
    """``KGW, DiPMark and AAR``."""
    items = [name(s) for s in schemes]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _overlap(a_lo, a_hi, b_lo, b_hi) -> bool:
    return not (a_hi < b_lo or b_hi < a_lo)


def _z(row: pd.Series, mean: str = "mean", lo: str = "ci_low", hi: str = "ci_high") -> str:
    return num_ci(row[mean], row[lo], row[hi])


def decay(F: dict[str, Folder]) -> str | None:
    f = F.get("decay-kgw-paper")
    if f is None:
        return None
    rows = {n: f.row(setting="fixed", scheme="kgw", n=n) for n in (1, 3, 5)}
    if any(r is None for r in rows.values()):
        return None
    times = f.select(setting="fixed", scheme="kgw")["mean_times_n"]
    top_k = (f.meta.get("profile") or {}).get("top_k")
    serving = f"top-k {top_k} as the paper's release serves" if f.profile == "paper" else "open serving"
    text = (f"**Per-text z falls like 1/N** (`{f.name}`: {serving}, one base model). KGW's own detector "
            f"gives z {_z(rows[1])} for a single provider, {_z(rows[3])} at N = 3 and {_z(rows[5])} at N = "
            f"5, and z x N stays between {num(times.min())} and {num(times.max())}: a provider's detector "
            "sees only its own perturbation, which the average weights 1/N.")
    mix = F.get("decay-mix-paper")
    if mix is not None:
        at3 = mix.summary[(mix.summary["n"] == 3) & mix.summary["scheme"].str.startswith("mix/")]
        if not at3.empty:
            top = at3.sort_values("mean", ascending=False).head(2)
            every = bool((at3["mean"] < Z_THRESHOLD).all())
            reach = [r for _, r in top.iterrows() if r["ci_high"] > Z_THRESHOLD]
            text += (f" With every scheme mixed over mixed base models (`{mix.name}`), "
                     f"{'every' if every else 'not every'} scheme's mean z is below {Z_THRESHOLD:g} at N = "
                     "3; the "
                     f"highest are " + " and ".join(f"{name(r['scheme'][4:])} "
                                                    f"{_z(r)}" for _, r in top.iterrows())
                     + (f", {'whose intervals reach' if len(reach) > 1 else 'whose interval reaches'} past "
                        f"{Z_THRESHOLD:g}" if reach else "") + ".")
    return text


def detection(root: Path, F: dict[str, Folder]) -> str | None:
    if "tpr-paper" not in F:
        return None
    table = rt.detection_table(root)
    n5 = table[table["setting"] == "WASH N=5"]
    if n5.empty:
        return None
    parts = [f"{name(r['scheme'])} in {pct_ci(r['tpr'], r['tpr_low'], r['tpr_high'])}"
             + ("" if pd.isna(r["paper_tpr"]) else f" (paper {paper_pct(r['paper_tpr'])})")
             for _, r in n5.iterrows()]
    keyed = n5[n5["key_null"]]
    calibration = (f"thresholds from at least {integer(keyed['null_scores'].min())} scores of held-out "
                   "unwatermarked texts under random keys" + ("" if len(keyed) == len(n5) else
                   f" ({len(keyed)} of {len(n5)} schemes; the others from the held-out texts' own scores)"))
    text = (f"**Is this text watermarked?** (`{rt.DETECTION_FOLDER}`, TPR at {FPR_LEVEL} FPR, {calibration}, "
            "the text as the unit.) Under WASH at N = 5 a provider's own "
            f"detector flags {'; '.join(parts)} of texts; the held-out check half's FPR stays between "
            f"{pct(n5['fpr_check'].min())} and {pct(n5['fpr_check'].max())} for these schemes.")
    if len(keyed):
        text += (" Flagging a text when any of its 5 providers' detectors fires, with the family-wise FPR held "
                 "at 5% (Simes): " + "; ".join(
                     f"{name(r['scheme'])} {pct_ci(r['tpr_any'], r['tpr_any_low'], r['tpr_any_high'])} "
                     f"(check FPR {pct_ci(r['fpr_any_check'], r['fpr_any_check_low'], r['fpr_any_check_high'])})"
                     for _, r in keyed.iterrows()) + ".")
    lacking = [s for s in dict.fromkeys(table["scheme"]) if s not in set(n5["scheme"])]
    lacking += rt.unmeasured_schemes(root)
    if lacking:
        text += (f" {names(lacking)} {'have' if len(lacking) > 1 else 'has'} no N = 5 cell yet"
                 + (f" (the run is partial: "
                    f"{table['jobs'].iloc[0]})" if table["partial"].iloc[0] else "") + ".")
    return text


def _washed_out(wash: pd.DataFrame) -> str:
    """The schemes whose WASH ensembles the calibrated test misses at some N, with their Holm-adjusted p."""
    gone, fading = [], []
    for scheme in dict.fromkeys(wash["scheme"]):
        rows = wash[wash["scheme"] == scheme].sort_values("n")
        if rows["identified"].all():
            continue
        (gone if not rows["identified"].any() else fading).append((scheme, rows))
    text = ""
    for scheme, rows in fading:
        hit, miss = rows[rows["identified"]], rows[~rows["identified"]]
        text += (f" {name(scheme)} is identified at N = {' and '.join(str(int(n)) for n in hit['n'])} "
                 f"(Holm p {pval(hit['p_holm'].max())}) but not at N = "
                 f"{' and '.join(str(int(n)) for n in miss['n'])} (Holm p {pval(miss['p_holm'].min())}).")
    if gone:
        ps = pd.concat([rows["p_holm"] for _, rows in gone])
        text += (f" {names(s for s, _ in gone)} {'are' if len(gone) > 1 else 'is'} not identified under WASH "
                 f"at any N probed (Holm p {pval_range(ps)}).")
    return text


def identification(root: Path, F: dict[str, Folder]) -> str | None:
    if "identify-calibrated" not in F:
        return None
    t = rt.identification_table(root)
    full = t[t["samples"] == t["samples"].max()]
    single = full[full["mode"] == "single"]
    wash = full[full["mode"] == "wash"]
    missed = single[~single["identified"]]
    kept = [s for s in dict.fromkeys(wash["scheme"])
            if wash[wash["scheme"] == s]["identified"].all()
            and set(wash[wash["scheme"] == s]["n"]) >= {3, 5}]
    null_runs = int(full["null_runs"].max())
    text = (f"**Is this model watermarked?** (`{rt.IDENTIFICATION_FOLDER}`, Water-Probe, "
            f"{integer(full['samples'].iloc[0])} samples x {int(full['runs'].iloc[0])} runs; identified: the "
            f"{TEST_NAME} against {null_runs} unwatermarked runs per line-up, at {ALPHA_IDENTIFY:.0%}.) "
            + ("Every single provider is identified" if missed.empty else
               f"Every single provider is identified except {names(missed['scheme'])}")
            + ("" if missed.empty or (missed["contexts_scored"] > 1).any() else
               f" ({'it samples' if len(missed) == 1 else 'they sample'} one answer prefix only: no "
               "context pair "
               f"to score)") + ".")
    if kept:
        floor = wash[wash["scheme"].isin(kept)]
        at_floor = bool((floor["p"] <= floor["p_floor"]).all())
        text += (f" Under WASH, {names(kept)} stay identified at N = 3 and N = 5"
                 + (f" (p {pval(floor['p'].max())}, the floor of its random splits; Holm p at most "
                    f"{pval(floor['p_holm'].max())})" if at_floor else
                    f" (Holm p at most {pval(floor['p_holm'].max())})") + ".")
    text += _washed_out(wash)
    unprobed = [x for x in dict.fromkeys(single["scheme"]) if x not in set(wash["scheme"])]
    if unprobed:
        text += (f" {names(unprobed)} ensembles have no calibrated probe yet"
                 + (f" (the run is partial: "
                    f"{full['jobs'].iloc[0]})" if full["partial"].iloc[0] else "") + ".")
    kgw = {n: full[(full["scheme"] == "kgw") & (full["n"] == n)] for n in (1, 3, 5)}
    if all(len(v) == 1 for v in kgw.values()):
        r1, r3, r5 = (kgw[n].iloc[0] for n in (1, 3, 5))
        text += (f" KGW's S falls from {num_ci(r1['s'], r1['s_low'], r1['s_high'], 3)} alone to "
                 f"{num_ci(r3['s'], r3['s_low'], r3['s_high'], 3)} at N = 3 and "
                 f"{num_ci(r5['s'], r5['s_low'], r5['s_high'], 3)} at N = 5, against unwatermarked nulls "
                 f"of {num(r3['null_s_mean'], 3)} and {num(r5['null_s_mean'], 3)}; Water-Probe's own z for "
                 f"these systems is {num(r3['z_waterprobe'], 1)} and {num(r5['z_waterprobe'], 1)}, where "
                 f"the paper's Table 1 has every WASH cell below {Z_THRESHOLD:g}. Its release attacks with "
                 "one watermarked model among unwatermarked ones; ours are all watermarked.")
    return text


def release_lineup(root: Path, F: dict[str, Folder]) -> str | None:
    """The paper's Table 1 under its release's own line-up: Water-Probe's z beside the calibrated verdict."""
    folder = "identify-anchor"
    if folder not in F:
        return None
    t = rt.identification_table(root, folder)
    wash = t[(t["mode"] == "wash") & t["n"].isin([3, 5])]
    if wash.empty:
        return None
    below, above = [], []
    for scheme, rows in wash.groupby("scheme", sort=False):
        label = name(scheme) + (f" ({rows['form'].iloc[0]})" if rows["form"].iloc[0] != rt.NO_FORM else "")
        under = rows["z_waterprobe"] < Z_THRESHOLD
        for side, part in ((below, rows[under]), (above, rows[~under])):
            if part.empty:
                continue
            # a scheme split between the two lists names its N; a whole one lists N = 3, 5 in order
            at = (lambda r: f" at N = {int(r['n'])}") if len(part) < len(rows) else (lambda r: "")
            side.append(label + " " + ", ".join(f"{num(r['z_waterprobe'], 1)} (paper {num(r['paper_z'], 1)}){at(r)}"
                                                for _, r in part.sort_values("n").iterrows()))
    ident = wash[wash["identified"]]
    text = (f"**The paper's release, like for like** (`{folder}`: one watermarked anchor, the partners the "
            "same base models unwatermarked, AAR in the release's soft form; Water-Probe z at N = 3, 5.) ")
    if below:
        text += f"Water-Probe's own z stays below {Z_THRESHOLD:g}, as in the paper's Table 1, for " + "; ".join(below) + "."
    if above:
        text += " It does not for " + "; ".join(above) + "."
    if len(ident) == len(wash):
        text += (f" Yet the {TEST_NAME} identifies every one of these systems with {int(wash['runs'].max())} "
                 f"runs (Holm p {pval(wash['p_holm'].max())}); with the paper's three runs its raw p ranges from "
                 f"{pval(wash['p_r3'].min())} to {pval(wash['p_r3'].max())}: washed out for Water-Probe's z, "
                 "not for a test calibrated against the unwatermarked models.")
    else:
        # a scheme identified at one N only says which, so the count reads back from the names
        whole = [s for s in ident["scheme"].unique() if (ident["scheme"] == s).sum() == (wash["scheme"] == s).sum()]
        parts = ([f"{names(whole)} at every N"] if whole else []) + [
            f"{name(s)} at N = {', '.join(str(int(n)) for n in sorted(ident.loc[ident['scheme'] == s, 'n']))}"
            for s in ident["scheme"].unique() if s not in whole]
        text += (f" The {TEST_NAME} identifies {len(ident)} of these {len(wash)} systems "
                 f"({'; '.join(parts)}).")
    return text


def baselines(F: dict[str, Folder]) -> str | None:
    f = F.get("baselines-10x100")
    if f is None:
        return None
    parts, lower = [], []
    for scheme in dict.fromkeys(f.summary["scheme"]):
        w, t = f.row(scheme=scheme, arm="wash"), f.row(scheme=scheme, arm="toblend")
        if w is None or t is None:
            continue
        parts.append(f"{name(scheme)} z {_z(w, 'z_mean', 'z_ci_low', 'z_ci_high')} under WASH, "
                     f"{_z(t, 'z_mean', 'z_ci_low', 'z_ci_high')} under ToBlend")
        lower.append((w["z_mean"] < t["z_mean"],
                      _overlap(w["z_ci_low"], w["z_ci_high"], t["z_ci_low"], t["z_ci_high"])))
    if not parts:
        return None
    wash_cost = f.select(arm="wash")["cost_ratio"]
    tob_cost = f.select(arm="toblend")["cost_ratio"]
    n = int(f.select(arm="wash")["n"].iloc[0])
    verdict = ("below ToBlend's for every scheme" if all(lo for lo, _ in lower) else
               "not below ToBlend's for every scheme")
    overlap = " (the intervals overlap)" if any(ov for _, ov in lower) else ""
    text = (f"**Beside the paper's baselines** (`{f.name}`, N = {n}, {f.config.get('prompts')} prompts x "
            f"{f.config.get('tokens')} tokens, {f.profile} serving): {'; '.join(parts)}. WASH's mean z is "
            f"{verdict}{overlap}, at {num(wash_cost.min(), 1)}x to {num(wash_cost.max(), 1)}x the single "
            f"model's cost per text against ToBlend's {num(tob_cost.min(), 1)}x to "
            f"{num(tob_cost.max(), 1)}x.")
    rw = f.select(arm="randomwalk")
    if not rw.empty:
        best = rw.loc[rw["z_mean"].idxmin()]
        text += (f" RandomWalk leaves the least ({name(best['scheme'])} z "
                 f"{_z(best, 'z_mean', 'z_ci_low', 'z_ci_high')}) at {num(rw['cost_ratio'].min(), 0)}x to "
                 f"{num(rw['cost_ratio'].max(), 0)}x the cost.")
    return text


def quality(F: dict[str, Folder]) -> str | None:
    f = F.get("quality-paper")
    if f is None:
        return None
    s = f.summary
    cont = s[(s["task"] == "continuation") & (s["scorer"] == "smollm2")]
    parts, worse = [], []
    for scheme in [x for x in dict.fromkeys(cont["scheme"]) if x != "none"]:
        a = f.row(task="continuation", scorer="smollm2", scheme=scheme, mode="single")
        b = f.row(task="continuation", scorer="smollm2", scheme=scheme, mode="wash")
        if a is None or b is None:
            continue
        parts.append(f"{name(scheme)} {_z(a, 'median', 'median_ci_low', 'median_ci_high')} watermarked, "
                     f"{_z(b, 'median', 'median_ci_low', 'median_ci_high')} WASH")
        worse.append(b["median_ci_low"] > a["median_ci_high"])
    if not parts:
        return None
    base = f.row(task="continuation", scorer="smollm2", scheme="none", mode="unwatermarked")
    n = f.config.get("n")
    verdict = ("WASH does not improve on the watermarked model for any scheme" if all(worse) else
               "WASH is above the watermarked model for some schemes, not for all")
    text = (f"**Quality** (`{f.name}`, {f.profile} serving{f', N = {n}' if n else ''}). By median perplexity "
            f"under the unwatermarked smollm2, {verdict}: {'; '.join(parts)}"
            + (f"; unwatermarked "
               f"{_z(base, 'median', 'median_ci_low', 'median_ci_high')}" if base is not None else "")
            + ".")
    rep = f.row(task="continuation", scorer="words", scheme="aar", mode="single")
    rep0 = f.row(task="continuation", scorer="words", scheme="none", mode="unwatermarked")
    if rep is not None and rep0 is not None:
        text += (f" AAR's low perplexity alone is looping: "
                 f"{pct_ci(rep['value'], rep['ci_low'], rep['ci_high'])} of its word 3-grams repeat, "
                 f"against {pct_ci(rep0['value'], rep0['ci_low'], rep0['ci_high'])} unwatermarked.")
    return text


def release_detection(root: Path, F: dict[str, Folder]) -> str | None:
    """The paper's Table 2 under its release's systems: TPR at N = 5 beside the paper's, and whether
    the paper's value lies inside our interval."""
    folder = "tpr-anchor"
    if folder not in F:
        return None
    t = rt.detection_table(root, folder)
    n5 = t[t["setting"] == "WASH N=5"]
    if n5.empty:
        return None
    parts = []
    for _, r in n5.iterrows():
        if r["form"].endswith(" (detector=release)"):
            continue
        label = name(r["scheme"]) + (f" ({r['form']})" if r["form"] != rt.NO_FORM else "")
        text = f"{label} {pct_ci(r['tpr'], r['tpr_low'], r['tpr_high'])}"
        if not pd.isna(r["paper_tpr"]):
            inside = r["tpr_low"] <= r["paper_tpr"] <= r["tpr_high"]
            text += f" (paper {paper_pct(r['paper_tpr'])}, {'inside' if inside else 'outside'} our interval)"
        theirs = n5[(n5["scheme"] == r["scheme"]) & (n5["form"] == r["form"] + " (detector=release)")]
        if len(theirs):
            x = theirs.iloc[0]
            text += f", {pct_ci(x['tpr'], x['tpr_low'], x['tpr_high'])} by the release's detector"
        parts.append(text)
    out = (f"**Table 2 with the release's systems** (`{folder}`: one watermarked anchor, release forms, "
           f"TPR at {FPR_LEVEL} FPR under WASH at N = 5.) " + "; ".join(parts) + ".")
    planned = rt.unmeasured_schemes(root, folder)
    if planned or F[folder].partial:
        out += " The run is partial" + (f": {names(planned)} not yet measured" if planned else "") + "."
    return out


def provenance(F: dict[str, Folder]) -> str:
    """Which engine made the headline's runs, and which runs it leaves out (and why)."""
    quoted = [F[k] for k in ("decay-kgw-paper", "tpr-paper", "identify-calibrated", "identify-anchor", "tpr-anchor",
                             "baselines-10x100",
                             "quality-paper") if k in F]
    engines = sorted({f.engine for f in quoted})
    tpr = F.get("tpr-paper")
    size = (f" ({tpr.config.get('prompts')} prompts x {tpr.config.get('tokens')} new tokens where the "
            f"paper's size "
            f"was run)" if tpr is not None else "")
    text = (f"Every number here comes from a run committed under `results/`, made on engine"
            f"{'s' if len(engines) > 1 else ''} {' and '.join(engines)}{size}, with SmolLM2-135M and Gemma-3-270M on a CPU. Brackets hold "
            "95% intervals: a bootstrap over prompts for per-text numbers, over contexts for "
            "identification S.")
    left = []
    if "decay-kgw-open" in F:
        f = F["decay-kgw-open"]
        if f.partial:
            left.append(f"the open-serving re-run `{f.name}` ({f.jobs_done} of {f.jobs_total} jobs, engine "
                        f"{f.engine})")
    if "entropy" in F and F["entropy"].engine not in engines:
        left.append(f"the entropy law (`entropy`, engine {F['entropy'].engine})")
    if left:
        text += " Not quoted here: " + " and ".join(left) + "; docs/RESULTS.md shows them, with that caveat."
    return text


def headline(root: Path, F: dict[str, Folder]) -> list[str]:
    """The headline's lines: the provenance sentence, then one bullet per finding (one line each)."""
    bullets = [b for b in (decay(F), detection(root, F), identification(root, F), release_lineup(root, F),
                           release_detection(root, F), baselines(F), quality(F))
               if b]
    return [provenance(F), "", *(f"* {b}" for b in bullets)]
