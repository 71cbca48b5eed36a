"""``docs/results/<folder>.md``: one generated page per committed results folder."""

from __future__ import annotations

import string

from wash.experiments import load_note, markdown_table, run_header
from wash.reporting.data import Folder
from wash.reporting.descriptions import EXPERIMENTS, FOLDERS, QUICK, is_quick
from wash.reporting.fmt import md_table
from wash.reporting.page import GENERATED


class _Fields(dict):
    """Placeholders of a description: the run's config and profile; an unknown one is a bug."""

    def __missing__(self, key):
        raise KeyError(f"description placeholder {{{key}}} has no value in the run's meta")


def _fields(f: Folder) -> _Fields:
    out = _Fields()
    for k, v in f.config.items():
        out[k] = ", ".join(map(str, v)) if isinstance(v, list) else v
    out["profile"] = f.profile
    return out


def describe(f: Folder) -> str:
    parts = [EXPERIMENTS.get(f.experiment, "")]
    if f.name in FOLDERS:
        parts.append(string.Formatter().vformat(FOLDERS[f.name], (), _fields(f)))
    if is_quick(f.name):
        parts.append(QUICK)
    return " ".join(p for p in parts if p)


def _header(f: Folder) -> list[str]:
    m = f.meta
    if "machine" in m and "jobs_total" in m:
        return run_header(m)
    # the browser tour's meta has its own fields
    return [f"Command: `{m.get('command', '?')}`  ",
            f"Date: {m.get('date', '?')}; machine: {m.get('machine', 'not recorded')}; "
            f"{load_note({'end': m.get('load_average')})}; browser: {m.get('browser', 'not recorded')}; seeds: "
            f"{', '.join(map(str, m.get('seeds', [])))}."]


def experiment_page(f: Folder) -> str:
    partial = ([f"**A partial summary**: {f.jobs_done} of {f.jobs_total} jobs of the plan are in it; a cell "
                f"the "
                "run has not reached is missing, not zero.", ""] if f.partial else [])
    lines = [GENERATED, "", f"# {f.name}", "", describe(f), "", *partial, *_header(f), "",
             f"Files: [`results/{f.name}/`](../../results/{f.name}/) (`{f.summary_file}` is the table "
             "below; the "
             f"runs CSV holds every row and text).", "",
             markdown_table(f.summary), ""]
    if f.figure:
        lines += [f"![{f.name}](../../results/{f.name}/{f.figure})", ""]
    lines += ["Back to [the results](../RESULTS.md)."]
    return "\n".join(lines) + "\n"


def index_rows(folders: dict[str, Folder]) -> list[str]:
    return md_table(["page", "experiment", "date", "kind"],
                    [[f"[{f.name}]({f.name}.md)", f.experiment, str(f.meta.get("date", "?")),
                      "quick / screen" if is_quick(f.name) else ("partial" if f.partial else "full")]
                     for f in folders.values()])
