"""The README's opening lines on what WASH shows, made from the committed results.

Why generated: the opening is what a newcomer remembers, and a hand-typed "z falls like 1/N"
said it of every scheme while the runs measured it for some. Here each scheme is sorted by its
own mean z under WASH at N = 5 against its z alone / 5 (``tpr-paper``), the survivors are the
schemes whose detection rate stays above the paper's Table 2 ceiling, and every number is a cell
of a summary CSV (``tests/test_report_docs.py`` reads them back).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from wash.reporting import results_tables as rt
from wash.reporting import glossary
from wash.reporting.data import Folder
from wash.reporting.fmt import num, pct_ci
from wash.reporting.headline import name, names

START = "<!-- results:opening:start -->"
END = "<!-- results:opening:end -->"
#: The folders the opening quotes (the number test reads their summaries).
FOLDERS = ("tpr-paper", "decay-kgw-paper", "identify-calibrated")
#: z x N at N = 5 within this factor of z alone reads as "like 1/N" (a short text's z wanders by about 1).
LIKE_1_OVER_N = 1.25
N = 5


def decay_classes(F: dict[str, Folder]) -> dict[str, list[str]] | None:
    """Schemes by how their mean z falls from alone to WASH at N: ``like``, ``faster``, ``slower`` than 1/N."""
    f = F.get(rt.DETECTION_FOLDER)
    if f is None:
        return None
    out: dict[str, list[str]] = {"like": [], "faster": [], "slower": []}
    for scheme in dict.fromkeys(f.summary["scheme"]):
        alone, washed = f.row(scheme=scheme, mode="single"), f.row(scheme=scheme, mode="wash", n=N)
        if alone is None or washed is None:
            continue
        ratio = washed["mean_z_pos"] * N / alone["mean_z_pos"]
        key = "like" if 1 / LIKE_1_OVER_N <= ratio <= LIKE_1_OVER_N else "slower" if ratio > 1 else "faster"
        out[key].append(scheme)
    return out


def _kgw_one_base(F: dict[str, Folder]) -> str:
    """``z x N stays between 6.52 and 6.96 on one base model``: the 1/N law where it was measured."""
    f = F.get("decay-kgw-paper")
    if f is None:
        return ""
    times = f.select(setting="fixed", scheme="kgw")["mean_times_n"]
    return f" (on one base model z x N stays between {num(times.min())} and {num(times.max())})" if len(times) else ""


def _z_pair(f: Folder, scheme: str) -> str:
    alone, washed = f.row(scheme=scheme, mode="single"), f.row(scheme=scheme, mode="wash", n=N)
    return f"{num(alone['mean_z_pos'])} alone, {num(washed['mean_z_pos'])} at N = {N}"


def survivors(root: Path) -> pd.DataFrame:
    """The WASH N = 5 cells whose detection rate stays above the paper's Table 2 ceiling."""
    t = rt.detection_table(root)
    top = rt.paper_table2()
    top = top[top["method"] == f"wash N={N}"]["tpr"].max()
    cells = t[t["setting"] == f"WASH N={N}"]
    return cells[cells["tpr"] > top].sort_values("tpr", ascending=False)


def _point_mass(scheme: str) -> str:
    """``a keyed point mass `` for a scheme whose p_i is one (the reason it fades slowly)."""
    from wash.watermarks import SCHEMES

    cls = SCHEMES.get(scheme)
    return "a keyed point mass " if cls is not None and cls.point_mass else ""


def _identified(root: Path, F: dict[str, Folder]) -> str:
    if rt.IDENTIFICATION_FOLDER not in F:
        return ""
    t = rt.identification_table(root)
    full = t[t["samples"] == t["samples"].max()]
    wash = full[(full["mode"] == "wash") & full["n"].isin([3, 5])]
    return (f"; and a test of the model itself, without a key, still identifies {int(wash['identified'].sum())} "
            f"of {len(wash)} averaged systems as watermarked")


def sentence(root: Path, F: dict[str, Folder]) -> str | None:
    """What it shows, per scheme as measured."""
    classes = decay_classes(F)
    if not classes:
        return None
    f = F[rt.DETECTION_FOLDER]
    z = f"[z]({glossary.ANCHOR})"
    parts = []
    if classes["like"]:
        like = [name(s) + (_kgw_one_base(F) if s == "kgw" else "") for s in classes["like"]]
        parts.append(f"like 1/N for {', '.join(like[:-1]) + ' and ' + like[-1] if len(like) > 1 else like[0]}")
    if classes["faster"]:
        parts.append(f"faster for {names(classes['faster'])}")
    if classes["slower"]:
        parts.append("slower for " + "; ".join(f"{name(s)} ({_z_pair(f, s)})" for s in classes["slower"]))
    prompts = int(f.summary["n_prompts"].max())
    text = (f"What it shows, measured below (`{f.name}`, mean {z} over {prompts} prompts): a provider's own per-text {z} "
            f"falls " + ", ".join(parts) + f". So most watermarks drop under the detection line at N = 3 to {N}, "
            "but not all")
    alive = survivors(root)
    if len(alive):
        best = f.summary[f.summary["mode"] == "single"].sort_values("mean_z_pos").iloc[-1]["scheme"]
        why = {s: (_point_mass(s) + "whose z falls slower" if s in classes["slower"] else
                   f"whose z alone is the highest ({num(f.row(scheme=s, mode='single')['mean_z_pos'])})"
                   if s == best else "") for s in alive["scheme"]}
        text += (": " + " and ".join(f"{name(s)}" + (f", {why[s]}," if why[s] else "") for s in alive["scheme"])
                 + f" are still [detected]({glossary.ANCHOR}) in "
                 + " and ".join(pct_ci(r.tpr, r.tpr_low, r.tpr_high) for r in alive.itertuples())
                 + f" of texts at N = {N} (95% intervals)")
    return text + _identified(root, F) + "."


def replace(readme: str, body: str) -> str:
    """The README with its opening block set to ``body`` (markers kept); unchanged where it has none."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        return readme
    return readme[:start] + f"{START}\n{body}\n" + readme[end:]
