"""Markdown sections generated from an experiment's own output files.

``python -m wash.experiments.report runs/decay-quick runs/tpr-quick ... [--figures docs/figures]``
prints, per output directory, the command, date, machine and compute time from
``NAME_meta.json``, the summary CSV as a markdown table, and a link to the PNG
(copied into ``--figures``): a quick look at a scratch run. The committed documents
(docs/RESULTS.md, docs/results/*.md) are written by ``python -m wash report``
(``wash.reporting``), which uses ``run_header`` and ``markdown_table`` from here.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

import pandas as pd

#: Columns left out of the markdown tables (kept in the CSVs).
HIDDEN = {"metric"}


def _fmt(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return str(value)


def markdown_table(frame: pd.DataFrame) -> str:
    cols = [c for c in frame.columns if c not in HIDDEN]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame[cols].itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    return "\n".join(lines)


def _forward_note(meta: dict) -> str:
    """`` (parallel, 1 thread per model)`` from meta.json's forward settings, if recorded."""
    fs = meta.get("forward_settings")
    if not fs:
        return ""
    how = "parallel" if fs.get("parallel") else "sequential"
    return f" ({how}, {fs.get('threads_per_model', '?')} thread(s) per model)"


def _profile_note(meta: dict) -> str:
    """``; profile: paper (temperature 1, top-k 10, top-p 1)`` from meta.json, if recorded (runs
    made before serving profiles existed sampled at the config's temperature and top-p, untruncated)."""
    p = meta.get("profile")
    if not p:
        return ""
    top_k = p.get("top_k", 0)
    return (f"; profile: {p.get('name', '?')} (temperature {p.get('temperature', '?'):g}, "
            f"top-k {top_k if top_k else 'off'}, top-p {p.get('top_p', '?'):g})")


def _jobs_note(meta: dict) -> str:
    """``24 jobs``, or ``20 of 24 jobs done (a partial summary)``."""
    total, done = meta["jobs_total"], meta.get("jobs_done", meta["jobs_total"])
    return f"{total} jobs" if done >= total else f"{done} of {total} jobs done (a partial summary)"


def _time_note(meta: dict) -> str:
    if not meta.get("elapsed_s_total") and not meta.get("jobs_run_now", 1):
        return " (rows computed by earlier commands on parts of this plan; their time is not summed here)"
    return f", {meta['elapsed_s_total']:.0f} s wall-clock running them"


def load_note(load: dict | None) -> str:
    """``load average (1, 5, 15 min) 1.05, 0.50, 0.20 at the start, 2.10, 2.00, 1.50 at the end`` from
    a meta's ``load_average``; metas written before it was recorded say so."""
    def fmt(values) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    if not isinstance(load, dict) or not any(load.values()):
        return "load average: not recorded"
    parts = [f"{fmt(load[k])} at the {k}" for k in ("start", "end") if load.get(k)]
    return "load average (1, 5, 15 min) " + ", ".join(parts)


def run_header(meta: dict) -> list[str]:
    """The lines that say which run made a table: command; date, code, engine, profile, forwards,
    machine, load, jobs and time; the meta's note, if any."""
    note = str(meta.get("note") or "").rstrip(". ")
    return [f"Command: `{meta['command']}`  ",
            f"Date: {meta['date']}; code: {meta.get('code', 'not recorded')}"
            + (f" (engine {meta['engine']})" if meta.get("engine") else "")
            + _profile_note(meta)
            + f"; forwards: {meta.get('forwards', 'eager')}{_forward_note(meta)}; machine: {meta['machine']}; "
            + load_note(meta.get("load_average")) + "; "
            + _jobs_note(meta) + _time_note(meta)
            + (f" in {meta['workers']} worker processes of {meta.get('threads_per_worker', '?')} torch "
               f"thread(s) each."
               if meta.get("workers", 1) > 1 else "."),
            *([f"Note: {note}."] if note else [])]


def section(out_dir: Path, figures: Path | None, link_prefix: str = "figures",
            columns: list[str] | None = None) -> str:
    """The markdown section of one output directory; ``columns`` picks the summary's columns to show."""
    meta_files = sorted(out_dir.glob("*_meta.json"))
    if not meta_files:
        raise FileNotFoundError(f"no *_meta.json in {out_dir}: run the experiment first")
    meta = json.loads(meta_files[0].read_text())
    name = meta["experiment"]
    summary = pd.read_csv(out_dir / f"{name}_summary.csv")
    if columns:
        missing = [c for c in columns if c not in summary.columns]
        if missing:
            raise KeyError(f"{out_dir}: no column(s) {missing} in {name}_summary.csv")
        summary = summary[columns]
    parts = [*run_header(meta), "", markdown_table(summary), ""]
    png = out_dir / f"{name}.png"
    if figures is not None and png.exists():
        figures.mkdir(parents=True, exist_ok=True)
        target = figures / f"{out_dir.name}.png"
        shutil.copyfile(png, target)
        parts.append(f"![{name}]({link_prefix}/{target.name})")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--figures", type=Path, help="copy each PNG here (e.g. docs/figures)")
    parser.add_argument("--columns", help="comma-separated summary columns to show (default: all)")
    args = parser.parse_args(argv)
    columns = args.columns.split(",") if args.columns else None
    for d in args.dirs:
        print(f"### {d.name}\n")
        print(section(d, args.figures, columns=columns))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
