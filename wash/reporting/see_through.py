"""The "Can a detector see through the wash?" section, read from ``results/see-through``.

Every number comes from the committed CSVs ``wash.experiments.see_through_summary``
writes; the section is empty when the folder is absent. The prose holds no typed
number: TPRs, FPRs, null counts and exponents are formatted from the tables.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from wash.reporting.fmt import md_table, num, pct_ci
from wash.reporting.headline import name
from wash.reporting.results_tables import RESULTS_ROOT

FOLDER = "see-through"
#: The statistic reported beside each scheme's own sum (fixed before any result: the model-aware LR).
NEW = ("lr", "lr-mix")
STAT_NAMES = {"sum": "own sum", "lr": "model-aware LR (max over w)", "lr-mix": "model-aware LR (mean over w)",
              "lr-lineup": "line-up-aware LR (mean over w)", "hc": "higher criticism",
              "entropy": "entropy-weighted"}
LEFT_OUT = ("Water-Bag's ratio takes the best (`lr`) or the average (`lr-mix`) over the 2 x bag_size lists a "
            "generation may have drawn; EXP-Edit's and ITS-Edit's over the 420 key offsets a generation may have "
            "started at (a generation reads key element offset + position). Not in these tables: EXP-Edit's soft "
            "form (the `tpr-anchor` line-up's EXP-Edit), whose keyed law is continuous, so its null would need a "
            "race per offset, position and draw (docs/DETECTORS.md).")


#: The tables this section (and the app's Results and Detect tabs) read, by their key in ``load``'s answer.
TABLES = {"summary": "see_through_cells.csv", "tokens": "see_through_tokens.csv",
          "exponents": "see_through_exponents.csv"}
#: TPR against length on the long texts (``see_through_summary.length_table``); absent before they are scored.
LENGTH = "see_through_length.csv"
META = "see_through_run.json"
#: Every file ``load`` reads (a Space copies them: the per-text rows stay out, no tab reads them).
FILES = (*TABLES.values(), LENGTH, META)


def load(root: Path) -> dict[str, pd.DataFrame] | None:
    folder = root / FOLDER
    if not (folder / TABLES["summary"]).exists():
        return None
    out = {k: pd.read_csv(folder / f) for k, f in TABLES.items()}
    out["length"] = pd.read_csv(folder / LENGTH) if (folder / LENGTH).exists() else None
    meta = folder / META
    out["meta"] = json.loads(meta.read_text()) if meta.exists() else {}
    return out


def bounds(r: pd.Series, key: str) -> tuple[float, float]:
    """A rate's quoted interval: the bootstrap over prompts where the table has one, else Wilson's.

    A bootstrap of a cell with no flag (or only flags) collapses to the point (every resample is 0 of
    its texts), which says nothing of the uncertainty; there Wilson's interval is quoted."""
    lo, hi = r.get(f"{key}_boot_lo", float("nan")), r.get(f"{key}_boot_hi", float("nan"))
    if not pd.isna(lo) and hi > lo:
        return lo, hi
    return r[f"{key}_lo"], r[f"{key}_hi"]


def _cell(r: pd.Series, key: str) -> str:
    return pct_ci(r[key], *bounds(r, key))


def _slot_fpr(r: pd.Series) -> str:
    if "fpr_slot" not in r or pd.isna(r["fpr_slot"]) or r.get("check_keys") != "fresh":
        return "–"
    return _cell(r, "fpr_slot")


def cell_rows(summary: pd.DataFrame) -> list[list[str]]:
    rows = []
    order = {"sum": 0, "lr": 1, "lr-mix": 2, "lr-lineup": 3, "entropy": 4, "hc": 5}
    t = summary.assign(_o=summary["statistic"].map(order)).sort_values(["source", "scheme", "n", "_o"])
    for _, r in t.iterrows():
        fisher = (f"{_cell(r, 'fisher_tpr')} / {_cell(r, 'fisher_fpr')}" if "fisher_tpr" in r
                  and not pd.isna(r["fisher_tpr"]) else "–")
        rows.append([name(r["scheme"]), f"tpr-{r['source']}", str(int(r["n"])), STAT_NAMES.get(r["statistic"], r["statistic"]),
                     f"{_cell(r, 'tpr')} of {int(r['positives'])}", f"{_cell(r, 'fpr')} of {int(r['negatives'])}",
                     _slot_fpr(r),
                     "its own null" if int(r["null_scores"]) == 0 else f"{int(r['null_scores']):,} per text",
                     "–" if pd.isna(r.get("providers_scored", float("nan"))) else str(int(r["providers_scored"])),
                     f"{_cell(r, 'any_tpr')} / {_cell(r, 'any_fpr')}", fisher])
    return rows


def _tokens(hit: pd.Series) -> str:
    """``61 [44, 90]``; ``> 200 (64%)`` where no prefix reaches 80%; an upper end past the longest prefix
    reads ``> 200``."""
    if pd.isna(hit["tokens_for_80"]):
        return f"> {int(hit['longest_cut'])} ({hit['tpr_at_longest']:.0%})"
    if "tokens_lo" not in hit or pd.isna(hit["tokens_lo"]):
        return f"{hit['tokens_for_80']:.0f}"
    hi = f"> {int(hit['longest_cut'])}" if pd.isna(hit["tokens_hi"]) else f"{hit['tokens_hi']:.0f}"
    return f"{hit['tokens_for_80']:.0f} [{hit['tokens_lo']:.0f}, {hi}]"


def exponent_text(e: pd.DataFrame) -> str:
    """``1.46 ± 0.16`` where at least three N were fitted (``exponent_se``); ``–`` otherwise."""
    if not len(e) or pd.isna(e["exponent"].iloc[0]) or pd.isna(e["exponent_se"].iloc[0]):
        return "–"
    return f"{num(e['exponent'].iloc[0])} ± {num(e['exponent_se'].iloc[0])}"


def token_rows(tokens: pd.DataFrame, exponents: pd.DataFrame) -> list[list[str]]:
    rows = []
    ns = sorted(tokens["n"].unique())
    for (source, scheme, stat), g in tokens.groupby(["source", "scheme", "statistic"]):
        if stat not in ("sum", *NEW):
            continue
        cells = []
        for n in ns:
            hit = g[g["n"] == n]
            cells.append(_tokens(hit.iloc[0]) if len(hit) else "–")
        e = exponents[(exponents["source"] == source) & (exponents["scheme"] == scheme)
                      & (exponents["statistic"] == stat)]
        rows.append([name(scheme), f"tpr-{source}", STAT_NAMES[stat], *cells, exponent_text(e)])
    return rows, ns


PAGE = "docs/results/see-through.md"
#: The statistic the short forms (RESULTS.md, README) quote beside each scheme's own sum, fixed on the null
#: side: the model-aware ratio averaged over w, whose p has no atom (``lr``'s check FPR falls below 5%).
QUOTED = "lr-mix"


def paired(summary: pd.DataFrame, first: str = "sum", second: str = QUOTED, source: str | None = "paper",
           n: int | None = 5):
    """(source, scheme, N, ``first``'s cell, ``second``'s cell) for every cell scored under both statistics,
    in the table's order (``source`` / ``n`` None: every one)."""
    t = summary[summary["statistic"].isin([first, second])]
    if source is not None:
        t = t[t["source"] == source]
    if n is not None:
        t = t[t["n"] == n]
    for (src, scheme, m), g in t.groupby(["source", "scheme", "n"], sort=False):
        a, b = g[g["statistic"] == first], g[g["statistic"] == second]
        if len(a) and len(b):
            yield src, scheme, int(m), a.iloc[0], b.iloc[0]


def _pairs(summary: pd.DataFrame, key: str, n: int = 5) -> list[str]:
    """``AAR 84% [76, 91] → 90% [82, 95]`` per scheme at N = n: own sum, then the quoted ratio, for the
    rate ``key`` (``tpr`` per provider, ``fisher_tpr`` per text; cells without it are left out)."""
    return [f"{name(scheme)} {_cell(own, key)} → {_cell(new, key)}"
            for _, scheme, _, own, new in paired(summary, n=n) if key in new and not pd.isna(new[key])]


def _fpr_range(summary: pd.DataFrame, stat: str, n: int, source: str = "paper") -> str:
    t = summary[(summary["statistic"] == stat) & (summary["n"] == n) & (summary["source"] == source)]
    low, high = f"{t['fpr'].min():.1%}", f"{t['fpr'].max():.1%}"
    return low if low == high else f"{low} to {high}"


def fpr_misses(summary: pd.DataFrame) -> list[str]:
    """Every cell whose quoted check-FPR interval excludes 5%, as ``AAR tpr-paper N = 3, own sum: 9% [6,
    15]``."""
    out = []
    for _, r in summary.sort_values(["source", "scheme", "n"]).iterrows():
        lo, hi = bounds(r, "fpr")
        if pd.isna(lo) or lo <= 0.05 <= hi:
            continue
        side = "below" if hi < 0.05 else "above"
        out.append(f"{name(r['scheme'])} tpr-{r['source']} N = {int(r['n'])}, "
                   f"{STAT_NAMES.get(r['statistic'], r['statistic'])}: {_cell(r, 'fpr')} ({side})")
    return out


def misses_paragraph(summary: pd.DataFrame) -> str:
    """Which check-FPR intervals exclude 5%, out of how many, and what that means."""
    misses = fpr_misses(summary)
    total = int(summary["fpr"].notna().sum())
    if not misses:
        return f"Every one of the {total} check-FPR intervals contains 5%."
    expected = 0.05 * total
    return (f"{len(misses)} of the {total} check-FPR intervals exclude 5%: " + "; ".join(misses) + ". At 95% "
            f"coverage about {expected:.0f} would by chance alone, and since the cells of one N share their "
            "negative texts, misses come in clusters. Below 5% is what a conservative p gives: `lr`'s maximum "
            "sits at w = 0 on most unwatermarked texts, an atom (docs/DETECTORS.md); above 5% is a null that "
            "misreads these texts or chance.")


def separated(summary: pd.DataFrame, n: int = 5, source: str = "paper") -> str:
    """Which schemes' ratio TPR interval lies above the sum's at N = n, and which overlap."""
    above, overlap = [], []
    for _, scheme, _, own, new in paired(summary, source=source, n=n):
        (above if bounds(new, "tpr")[0] > bounds(own, "tpr")[1] else overlap).append(name(scheme))
    parts = []
    if above:
        parts.append(f"the ratio's interval lies above the sum's for {', '.join(above)}")
    if overlap:
        parts.append(f"the two intervals overlap for {', '.join(overlap)}")
    if not parts:
        return ""
    why = (" Why the ratio gains little there: docs/DETECTORS.md, \"Where the ratio gains little\"."
           if overlap else "")
    return f"At N = {n} " + "; ".join(parts) + "." + why


def _scored(summary: pd.DataFrame, n: int, source: str = "paper") -> str:
    """Which providers the cells at N = n score: ``every provider scored`` or which schemes score fewer."""
    t = summary[(summary["source"] == source) & (summary["n"] == n)]
    scored = t["providers_scored"] if "providers_scored" in t else pd.Series(float("nan"), index=t.index)
    fewer = [name(s) for s in dict.fromkeys(t.loc[~(scored >= n), "scheme"])]
    if not fewer:
        return f"all {n} providers of every text scored"
    if len(fewer) == t["scheme"].nunique():
        return "the providers on smollm2 scored"
    return (f"all {n} providers of every text scored, but for {', '.join(fewer)}: the providers on smollm2, "
            "from the first run")


def sentence(data: dict, n: int = 5) -> str:
    summary = data["summary"]
    pairs = _pairs(summary, "tpr", n)
    fisher = _pairs(summary, "fisher_tpr", n)
    text = (f"At N = {n} (`tpr-paper` texts, {_scored(summary, n)}), per-provider TPR at p < 5%, own sum → "
            f"model-aware likelihood ratio: " + "; ".join(pairs) + ".")
    if fisher:
        text += " Per text, Fisher's combination over its providers: " + "; ".join(fisher) + "."
    return text + (f" Check FPR at N = {n} on the held-out negatives: {_fpr_range(summary, 'sum', n)} (own sum), "
                   f"{_fpr_range(summary, QUOTED, n)} (ratio).")


def section(root: Path) -> list[str]:
    """RESULTS.md's short form: one sentence per N, the figure and a link to the full page."""
    data = load(root)
    if data is None:
        return []
    ns = sorted(int(n) for n in data["summary"]["n"].unique() if n > 1)
    return ["## Can a detector see through the wash?", "",
            "The provider re-reads the text with its own model (one forward) and weighs each token by how much "
            "its watermark raised that token's served probability; p from 1,000 random-key draws per text "
            "(docs/DETECTORS.md). " + " ".join(sentence(data, n) for n in reversed(ns)) + " "
            + separated(data["summary"]), "",
            "![TPR against N, own sum and model-aware LR](../results/see-through/see_through_paper.png)", "",
            *_length_short(data)[:1],
            f"Every cell, the any-provider decision, tokens for 80% TPR and the exponents: "
            f"[{PAGE.removeprefix('docs/')}]({PAGE.removeprefix('docs/')}).", "", *_length_short(data)[1:]]


def _length_short(data: dict) -> list[str]:
    """RESULTS.md's lines on the long texts: the sentence at N = 5 (the paragraph of the link to the page) and
    the figure (none before they exist)."""
    line = length_sentence(data, 5)
    if not line:
        return []
    return [line, f"![TPR against tokens read, tpr-long](../results/see-through/{LENGTH_FIGURE})", ""]


def readme_line(root: Path) -> str | None:
    data = load(root)
    if data is None:
        return None
    length = length_sentence(data, 5)
    return ("**Can a detector see through the wash?** " + sentence(data, 5)
            + " These rates differ from the table's at N = 5 (KGW, say) because they decide at each scheme's own "
              "p < 5%, where the table uses thresholds calibrated on unwatermarked texts."
            + (f" **{LENGTH_TITLE}** " + length.removeprefix(LENGTH_TITLE + " ") if length else "")
            + " Details: [docs/results/see-through.md](docs/results/see-through.md).")



# -- how much text a provider needs (the long texts) ----------------------------------------------------
LENGTH_SOURCE = "long"
#: The lengths the page's table prints (the issue's 100 to 800); the figure and the tokens-for-80% column
#: use every scored cut.
LENGTH_COLUMNS = (100, 200, 400, 800)
LENGTH_TITLE = "How much text does a provider need to see through WASH?"
LENGTH_FIGURE = "see_through_length.png"


def _length_cell(t: pd.DataFrame, cut: int, key: str = "tpr") -> str:
    hit = t[t["cut"] == cut]
    return _cell(hit.iloc[0], key) if len(hit) else "–"


def length_rows(length: pd.DataFrame, tokens: pd.DataFrame) -> list[list[str]]:
    """Per (scheme, N, statistic) of the long texts: TPR per provider at each printed length, Fisher's per
    text and the check FPR at the longest, and the tokens for 80% with its interval."""
    rows = []
    order = {"sum": 0, "lr": 1, "lr-mix": 2, "lr-lineup": 3, "entropy": 4, "hc": 5}
    t = length[length["source"] == LENGTH_SOURCE]
    longest = int(t["cut"].max()) if len(t) else 0
    keys = t.assign(_o=t["statistic"].map(order))[["scheme", "n", "statistic", "_o"]].drop_duplicates()
    for _, k in keys.sort_values(["scheme", "n", "_o"], ascending=[True, False, True]).iterrows():
        g = t[(t["scheme"] == k["scheme"]) & (t["n"] == k["n"]) & (t["statistic"] == k["statistic"])]
        hit = tokens[(tokens["source"] == LENGTH_SOURCE) & (tokens["scheme"] == k["scheme"])
                     & (tokens["n"] == k["n"]) & (tokens["statistic"] == k["statistic"])]
        at_end = g[g["cut"] == longest].iloc[0]
        rows.append([name(k["scheme"]), str(int(k["n"])), STAT_NAMES.get(k["statistic"], k["statistic"]),
                     *(_length_cell(g, c) for c in LENGTH_COLUMNS), _length_cell(g, longest, "fisher_tpr"),
                     f"{_cell(at_end, 'fpr')} of {int(at_end['negatives'])}",
                     _tokens(hit.iloc[0]) if len(hit) else "–"])
    return rows


def length_sentence(data: dict, n: int = 5) -> str:
    """``At N = 5, on 800-token texts (tpr-long), tokens for 80% TPR per provider, own sum / ratio: AAR 310
    [250, 420] / 180 [...]; ...`` (empty without the long texts or without N = n among them)."""
    length, tokens = data.get("length"), data["tokens"]
    if length is None:
        return ""
    t = tokens[(tokens["source"] == LENGTH_SOURCE) & (tokens["n"] == n)]
    if not len(t):
        return ""
    longest = int(length.loc[length["source"] == LENGTH_SOURCE, "cut"].max())
    parts = []
    for scheme, g in t.groupby("scheme", sort=True):
        own, new = g[g["statistic"] == "sum"], g[g["statistic"] == QUOTED]
        if len(own) and len(new):
            parts.append(f"{name(scheme)} {_tokens(own.iloc[0])} / {_tokens(new.iloc[0])}")
    if not parts:
        return ""
    check = length[(length["source"] == LENGTH_SOURCE) & (length["n"] == n) & (length["cut"] == longest)
                   & length["statistic"].isin(("sum", QUOTED))]  # the statistics the sentence quotes
    low, high = f"{check['fpr'].min():.1%}", f"{check['fpr'].max():.1%}"
    return (f"{LENGTH_TITLE} At N = {n}, on texts of {longest} tokens (`tpr-long`), the tokens each provider "
            f"needs for 80% TPR at p < 5%, own sum / model-aware ratio (`{QUOTED}`): " + "; ".join(parts)
            + f" (`> {longest} (x%)`: not reached, x% at {longest}). Check FPR at {longest} tokens: "
            + (low if low == high else f"{low} to {high}") + ".")


def length_section(data: dict) -> list[str]:
    """The page's section on the long texts: the sentence per N, the table and the figure."""
    length = data.get("length")
    if length is None or not len(length):
        return []
    ns = sorted((int(n) for n in length["n"].unique()), reverse=True)
    longest = int(length["cut"].max())
    return [f"## {LENGTH_TITLE}", "",
            " ".join(filter(None, (length_sentence(data, n).removeprefix(LENGTH_TITLE + " ") for n in ns))), "",
            "Per-provider TPR at p < 5% on the first T tokens of each text, Fisher's per-text TPR and the "
            f"check FPR at {longest} tokens (held-out unwatermarked texts of the same length, keys of their own), "
            f"and the tokens for 80% TPR. Every text is {longest} WASH steps long, so each column reads prefixes "
            "of the same texts; the unit is the provider's own tokens (the text re-read by its tokenizer, a "
            "little shorter or longer than the steps), and a prefix past a text's end reads the whole text. "
            "Tokens for 80% are interpolated in log tokens over every scored prefix; intervals are 95%, from a "
            "bootstrap over prompts:", "",
            *md_table(["scheme", "N", "statistic", *[f"TPR at {c}" for c in LENGTH_COLUMNS],
                       f"per text, Fisher, at {longest}", f"check FPR at {longest}", "tokens for 80%"],
                      length_rows(length, data["tokens"])), "",
            f"![TPR against tokens read, tpr-long](../../results/see-through/{LENGTH_FIGURE})", ""]

LINEUP = "lr-lineup"


def lineup_paragraph(summary: pd.DataFrame) -> str:
    """``lr-lineup`` beside ``lr-mix``, cell by cell, where both were scored: which is higher and whether
    their intervals separate (empty when no cell has the line-up-aware ratio)."""
    parts, apart = [], []
    for source, scheme, n, m, q in paired(summary, QUOTED, LINEUP, source=None, n=None):
        parts.append(f"{name(scheme)} tpr-{source} N = {int(n)}: {_cell(m, 'tpr')} → {_cell(q, 'tpr')} (check FPR "
                     f"{_cell(m, 'fpr')} → {_cell(q, 'fpr')})")
        (m_lo, m_hi), (q_lo, q_hi) = bounds(m, "tpr"), bounds(q, "tpr")
        if q_lo > m_hi or m_lo > q_hi:
            apart.append(f"{name(scheme)} at N = {int(n)} ({'line-up' if q_lo > m_hi else 'own-model'} ratio higher)")
    if not parts:
        return ""
    verdict = (f"The intervals separate for {', '.join(apart)}." if apart
               else "No pair of intervals separates: on these texts the line-up's models as q change the TPR "
                    "by less than the texts can tell.")
    return ("Line-up-aware ratio (`lr-lineup`: the other slots' base models as the law q of the tokens a "
            "provider did not serve) beside the own-model ratio (`lr-mix`, q = the provider's own model), "
            "per-provider TPR and check FPR, `lr-mix` → `lr-lineup`: " + "; ".join(parts) + ". " + verdict)


def _rows_notes(meta: dict) -> list[str]:
    """What a row is: the first run's note, then each later scoring's where it has its own (the cells of a
    scheme scored again come from the later rows)."""
    later = [a for a in meta.get("added", []) if a.get("rows_note")]
    if not later:
        return [f"Rows: {meta.get('rows_note', '')}".rstrip()]
    out = [f"Rows of the first run: {meta.get('rows_note', '')}".rstrip()]
    for a in later:
        out += ["", f"Rows of {', '.join(name(s) for s in a.get('schemes', []))} ({a.get('date', '')}): "
                    f"{a['rows_note']}"]
    return out


def page(root: Path) -> str | None:
    data = load(root)
    if data is None:
        return None
    meta = data["meta"]
    trows, ns = token_rows(data["tokens"], data["exponents"])
    lineup = lineup_paragraph(data["summary"])
    lines = [
        "<!-- Generated by `python -m wash report` from results/see-through: do not edit by hand. -->", "",
        "# Can a detector see through the wash?", "",
        "Under WASH a provider's watermark sits in full on about 1/N of the tokens (the average of N laws is the "
        "law of one provider picked at random), so a sum over every token, each scheme's own test, needs about "
        "N² times the tokens. The provider also knows its own model: re-reading the text with it (one forward "
        "per text) gives, at each token, how much its watermark raised that token's served probability, "
        "rho = p_wm / p, and a likelihood ratio over the unknown share w of its tokens: `lr` maximises "
        "sum log((1 - w) + w rho) over w in [0, 1], `lr-mix` averages the ratio over a uniform prior on w "
        "(`wash/detection/statistics/`, docs/DETECTORS.md). Their p comes from 1,000 draws of the same "
        "statistic under random keys on the same served laws, per text; a text is flagged at p < 5%, and the "
        "check FPR is read on the held-out unwatermarked texts, which nothing was fitted on, each under a key "
        "of its own (\"check FPR\"; beside it, \"slot keys\": under the keys of the positive line-ups, "
        "which a cell's 70 negatives share 30 of). `sum` keeps its scheme's own exact null (its p as the TPR "
        "run recorded it, reproduced exactly). Beside them: higher criticism over AAR's per-token pivots and "
        "an entropy-weighted green count (model-free and SWEET/EWD-style baselines). Per text, over its m "
        "scored providers: Bonferroni (flagged when the smallest p is below 5%/m) and Fisher's combination "
        "(-2 sum log p against chi-square with 2m degrees of freedom; valid because, given the text, each "
        "provider's p depends on its own key alone). Intervals: 95%, from a bootstrap over prompts (a text's "
        "providers, and the texts of one prompt, are not independent trials); the committed per-text rows "
        "(`results/see-through/see_through_rows.csv.gz`) recompute every cell "
        "(`python -m wash.experiments.see_through summarize --committed`).", "",
        *_rows_notes(meta), "",
        *md_table(["scheme", "line-up", "N", "statistic", "TPR", "check FPR", "check FPR, slot keys",
                   "null scores", "providers", "per text, Bonferroni: TPR / FPR", "per text, Fisher: TPR / FPR"],
                  cell_rows(data["summary"])), "",
        separated(data["summary"], 5), "",
        misses_paragraph(data["summary"]), "",
        *([lineup, ""] if lineup else []),
        "Tokens each text needs for 80% TPR (prefixes of every positive, interpolated in log tokens, with a "
        "95% interval from a bootstrap over prompts; `> T (x%)`: the longest prefix reaches only x%) and the "
        "exponent b of tokens ~ N^b with its standard error, where at least three N reach 80%:", "",
        *md_table(["scheme", "line-up", "statistic", *[f"N = {n}" for n in ns], "exponent"], trows), "",
        "![TPR against N, own sum and model-aware LR: tpr-paper](../../results/see-through/see_through_paper.png)",
        "",
        "![TPR against N, own sum and model-aware LR: tpr-anchor](../../results/see-through/see_through_anchor.png)",
        "",
        *length_section(data),
        LEFT_OUT, "",
    ]
    if meta.get("command"):
        lines += [f"Made by `{meta['command']}` ({meta.get('date', '')}; {meta.get('machine', '')}; "
                  f"{meta.get('scoring', '')}).", ""]
    for added in meta.get("added", []):
        again = set(added.get("replaced", []))
        new = [s for s in added.get("schemes", []) if s not in again]
        what = "; ".join(part for part in (
            f"{', '.join(name(s) for s in sorted(again))} scored again" if again else "",
            f"{', '.join(name(s) for s in new)} added" if new else "") if part)
        if added.get("sources"):
            what += f" (the {' and '.join(f'tpr-{src}' for src in added['sources'])} texts)"
        lines += [f"{what} later by `{added.get('command', '')}` "
                  f"({added.get('date', '')}; {added.get('machine', '')}; code {added.get('code', {}).get('commit', '')}"
                  f"{'; ' + added['scoring'] if added.get('scoring') else ''}).", ""]
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


# -- the Detect tab: how many more tokens a provider needs for 80% TPR ----------------------------------
#: The line-ups whose curves the Detect tab quotes, preferred first: their schemes are the plain names a
#: provider lists. The long texts measure further (to 800 tokens) where they have the curve.
TOKENS_SOURCES = ("long", "paper")
TOKENS_FILE = "see_through_tokens.csv"


def tokens_curves(root: Path) -> pd.DataFrame | None:
    """The committed tokens-for-80% curves of ``TOKENS_SOURCES``, one per (scheme, statistic, N): the first
    source's that has it; None where ``results/see-through`` has none."""
    path = root / FOLDER / TOKENS_FILE
    if not path.exists():
        return None
    t = pd.read_csv(path)
    t = t[t["source"].isin(TOKENS_SOURCES)]
    rank = t["source"].map({s: i for i, s in enumerate(TOKENS_SOURCES)})
    return t.assign(_rank=rank).sort_values("_rank", kind="stable").drop_duplicates(
        ["scheme", "statistic", "n"]).drop(columns="_rank")


def texts_of(curves: pd.DataFrame) -> str:
    """``tpr-paper texts`` or ``tpr-long or tpr-paper texts``: where the quoted curves come from."""
    present = [s for s in TOKENS_SOURCES if s in set(curves["source"])] or list(TOKENS_SOURCES[-1:])
    return " or ".join(f"tpr-{s}" for s in present) + " texts"


def _count(v: float) -> str:
    return f"{float(v):.0f}"


def _interval(r: pd.Series) -> str:
    """`` [71, 140]`` from the prompt bootstrap where the table has it (``tokens_hi`` NaN: past the longest
    prefix); empty for a table written before the columns, or without a lower end."""
    lo, hi = r.get("tokens_lo", math.nan), r.get("tokens_hi", math.nan)
    if pd.isna(lo):
        return ""
    upper = f"> {int(r['longest_cut'])}" if pd.isna(hi) else _count(hi)
    return f" [{_count(lo)}, {upper}]"


def _at_n(r: pd.Series) -> str:
    """One measured N in short: ``52 tokens [40, 70]`` or ``only 64% by 200 tokens``."""
    if pd.isna(r["tokens_for_80"]):
        return f"only {r['tpr_at_longest']:.0%} by {int(r['longest_cut'])} tokens"
    return f"{_count(r['tokens_for_80'])} tokens{_interval(r)}"


def _measured(r: pd.Series, statistic: str, tokens: int) -> str:
    n, where = int(r["n"]), f"`{statistic}`, tpr-{r['source']} texts"
    if pd.isna(r["tokens_for_80"]):
        return (f"at N = {n} the measured texts reach only {r['tpr_at_longest']:.0%} by "
                f"{int(r['longest_cut'])} tokens ({where}): how many more this needs is not measured")
    need = round(float(r["tokens_for_80"]))
    verdict = "enough on average" if tokens >= need else f"about {need - tokens} more"
    return (f"80% TPR at N = {n} needs about {need} tokens{_interval(r)} ({where}); this text has {tokens} "
            f"tokens: {verdict}")


def tokens_needed(scheme: str, statistic: str, n: int, tokens: int,
                  root: Path = RESULTS_ROOT) -> str | None:
    """One sentence for a provider under WASH with ``n`` providers: how many more of the text's ``tokens``
    (under the provider's tokenizer: the curves' unit) its ``statistic`` needs for 80% TPR at p < 0.05.

    Read from the committed curve only, never extrapolated: an N not measured quotes the nearest measured N
    on each side, a curve that stays under 80% says how far it got, a missing curve says which. None when
    ``results/see-through`` is absent (the Detect tab then shows nothing)."""
    curves = tokens_curves(root)
    if curves is None:
        return None
    if scheme == "none":
        return "an unwatermarked provider (scheme `none`) has no tokens-for-80% curve"
    curve = curves[(curves["scheme"] == scheme) & (curves["statistic"] == statistic)]
    if not len(curve):
        return (f"no committed tokens-for-80% curve for {name(scheme)} under `{statistic}` "
                f"({texts_of(curves)})")
    by_n = {int(r["n"]): r for _, r in curve.iterrows()}
    if n in by_n:
        return _measured(by_n[n], statistic, tokens)
    sides = [by_n[m] for m in (max((m for m in by_n if m < n), default=None),
                               min((m for m in by_n if m > n), default=None)) if m is not None]
    one_source = len({r["source"] for r in sides}) == 1
    quoted = ", ".join(f"at N = {int(r['n'])}: {_at_n(r)}" + ("" if one_source else f" (tpr-{r['source']})")
                       for r in sides)
    where = f"`{statistic}`, tpr-{sides[0]['source']} texts" if one_source else f"`{statistic}`"
    return f"N = {n} is not measured; {quoted} ({where}); this text has {tokens} tokens"
