"""``python -m wash report``: every results document, regenerated from the committed ``results/`` alone.

Writes ``docs/RESULTS.md`` (the headline, the two questions beside the paper, the main
runs), ``docs/results/<folder>.md`` (one page per results folder, every column),
``docs/results/findings.md`` (the main-finding table in full), ``docs/CLASSROOM.md`` (the
teacher's kit, ``classroom``), ``docs/README.md`` (the documents, one line each) and two parts
of the README: its opening lines on what WASH shows (``opening``) and its results section
(between ``README_START`` and ``README_END``: the main-finding table of ``findings`` in short
cells, and the ``glossary``). Nothing in them
is typed by hand except fixed prose: a result that changes without a re-generated report
fails ``tests/test_report_docs.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wash.reporting import classroom, glossary, opening
from wash.reporting.data import folders
from wash.reporting.experiments import experiment_page
from wash.reporting.findings import brief_table, findings_table
from wash.reporting.dilution import dilution_figure, dilution_fits
from wash.reporting.page import DILUTION_FIGURE, GENERATED, provenance_table, results_page
from wash.core.exports import lazy_exports
from wash.reporting.results_tables import RESULTS_ROOT

#: What the ways in may use besides this module's own functions: the number formats and the
#: schemes' display names (for the app's Results tab), markdown tables (the Quiz's tally), the see-through section and the
#: results tables whole, and the tables' names the ways in import.
_EXPORTS = {
    **dict.fromkeys(("DETECTION_FOLDER", "null_exceedance"), "results_tables"),
    **dict.fromkeys(("FPR_LEVEL", "integer", "md_table", "num", "num_ci", "paper_pct", "pct_ci", "pval"), "fmt"),
    "display_name": "headline:name", "display_names": "headline:names",
    "GLOSSARY_ANCHOR": "glossary:ANCHOR", "glossary_definition": "glossary:definition",
    "glossary_lines": "glossary:lines",
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, ("see_through", "results_tables"))
__all__ += ["add_parser", "generate", "differences", "write", "REGENERATE"]

REPO = RESULTS_ROOT.parent
README_START = "<!-- results:start -->"
FINDINGS_PAGE = "docs/results/findings.md"
README_END = "<!-- results:end -->"
REGENERATE = "python -m wash report"

#: docs/README.md's line for each document that is not generated here (a test checks none is missing).
DOCS = {
    "RESULTS.md": "the results: headline, is this text / this model watermarked (beside the paper), quality, "
                  "the entropy law, where WASH does not wash, the baselines (generated)",
    "APP.md": "the app: its tabs, presets, models ready before the first click, how it is tested in a "
              "browser",
    "BASELINES.md": "the paper's baselines (ToBlend, De-mark, RandomWalk) as generation modes: parameters, "
                    "defaults, what is not reproduced",
    "BENCHMARKS.md": "latency and memory of the WASH loop, the app and the test suite, each with its "
                     "command, date, machine and load",
    "DETECTORS.md": "how each detector counts evidence, and its null distribution on looping text",
    "USAGE.md": "the Python API and the command line: modes, forwards, aggregation rules, threads, backends",
    "SCHEMES.md": "the watermark schemes, their defaults (generated) and the release's forms",
    "ARCHITECTURE.md": "where each concept of the paper lives in the code",
    "EXPERIMENTS.md": "the experiments: commands, outputs, the driver and the generation store",
    "TESTING.md": "what `make test` runs, the fingerprints, the benchmark and measurement tools",
    "SPACE.md": "the Hugging Face Space: how to build and push it, what it holds, its check from a fresh venv",
    "SCREENSHOTS.md": "the README's and the tabs' screenshots: the script that makes them, to re-run after a UI "
                      "change",
    "CLASSROOM.md": "the teacher's kit for the app's Lesson tab: the idea in pictures, what survives and why, "
                    "the five steps, questions with answers, a 45-minute plan, the words, how to run the app for "
                    "a class (generated)",
}
#: Data files in docs/ that documents link to, one line for all.
DOC_DATA = ("bench-*.json, bench-threads/, soak-*.json, arena-growth.json, test-suite.json, "
            "detector-null-*.json: the raw outputs BENCHMARKS.md, APP.md and DETECTORS.md quote")


def readme_section(root: Path = RESULTS_ROOT) -> str:
    """The README's main-finding table, markers included: one row per claim of the paper, and a link."""
    lines = [README_START, GENERATED, "",
             *brief_table(root, folders(root)), "", *_see_through_line(root),
             "Each row reads a committed run under `results/` (SmolLM2-135M and Gemma-3-270M on a CPU, in place "
             f"of the paper's 8B models); every row in full, with its run and 95% intervals: "
             f"[{FINDINGS_PAGE}]({FINDINGS_PAGE}); the runs' commands, dates, serving and "
             "every cell: [docs/RESULTS.md](docs/RESULTS.md).", "", *glossary.section("###"), README_END]
    return "\n".join(lines)


def findings_page(root: Path = RESULTS_ROOT) -> str:
    """docs/results/findings.md: the README's table with every cell in full."""
    return "\n".join([GENERATED, "", "# What we found, claim by claim: every cell", "",
                      "The README's table in full: each claim of the paper, what the committed run measures with "
                      "its 95% intervals, the paper's number and the verdict.", "",
                      *findings_table(root, folders(root)), ""])


def _see_through_line(root: Path) -> list[str]:
    from wash.reporting import see_through

    line = see_through.readme_line(root)
    return [line, ""] if line else []


def replace_readme_section(readme: str, section: str) -> str:
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {README_START} ... {README_END} section")
    return readme[:start] + section + readme[end + len(README_END):]


def docs_index(root: Path = RESULTS_ROOT) -> str:
    F = folders(root)
    lines = [GENERATED, "", "# Documents", "",
             "* [../README.md](../README.md): what WASH is, how to run the app, the command line and the "
             "experiments.",
             *(f"* [{name}]({name}): {text}." for name, text in DOCS.items()),
             f"* {DOC_DATA}.",
             "* [../results/README.md](../results/README.md): what a committed results folder holds.",
             f"* [{FINDINGS_PAGE.removeprefix('docs/')}]({FINDINGS_PAGE.removeprefix('docs/')}): the README's "
             "main-finding table with every cell in full (generated).",
             *_see_through_index(root),
             "", *provenance_table(F)]
    return "\n".join(lines) + "\n"


def _see_through_index(root: Path) -> list[str]:
    from wash.reporting import see_through

    if see_through.load(root) is None:
        return []
    return ["* [results/see-through.md](results/see-through.md): can a detector see through the wash? The "
            "committed TPR texts re-scored with model-aware statistics (results/see-through)."]


def generate(root: Path = RESULTS_ROOT, repo: Path = REPO) -> dict[str, str]:
    """Every generated document, by path relative to ``repo``."""
    F = folders(root)
    out = {"docs/RESULTS.md": results_page(root, F), "docs/README.md": docs_index(root)}
    for f in F.values():
        out[f"docs/results/{f.name}.md"] = experiment_page(f)
    from wash.reporting import see_through

    page = see_through.page(root)
    if page is not None:
        out[see_through.PAGE] = page
    out[FINDINGS_PAGE] = findings_page(root)
    handout = classroom.page(root, F, repo)
    if handout is not None:
        out[classroom.PAGE] = handout
    out["README.md"] = _readme(root, F, repo)
    return out


def _readme(root: Path, F, repo: Path) -> str:
    """The README with its results section and its opening lines regenerated."""
    text = replace_readme_section((Path(repo) / "README.md").read_text(), readme_section(root))
    sentence = opening.sentence(root, F)
    return opening.replace(text, sentence) if sentence else text


def stale(repo: Path = REPO, documents: dict[str, str] | None = None) -> list[str]:
    """Generated pages on disk that ``generate`` no longer makes (a results folder removed)."""
    documents = documents if documents is not None else generate(repo=repo)
    return sorted(p.relative_to(repo).as_posix() for p in (Path(repo) / "docs" / "results").glob("*.md")
                  if p.relative_to(repo).as_posix() not in documents)


def differences(root: Path = RESULTS_ROOT, repo: Path = REPO) -> list[str]:
    """The documents whose committed text differs from what ``generate`` makes (or that are stale)."""
    documents = generate(root, repo)
    out = [path for path, text in documents.items()
           if not (Path(repo) / path).exists() or (Path(repo) / path).read_text() != text]
    return out + stale(repo, documents)


def write(root: Path = RESULTS_ROOT, repo: Path = REPO) -> list[str]:
    """Write every document (and remove stale pages); returns the paths that changed."""
    documents = generate(root, repo)
    changed = []
    for path, text in documents.items():
        target = Path(repo) / path
        if not target.exists() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            changed.append(path)
    for path in stale(repo, documents):
        (Path(repo) / path).unlink()
        changed.append(path)
    if write_figures(root, repo):
        changed.append(DILUTION_FIGURE)
    return changed


def write_figures(root: Path = RESULTS_ROOT, repo: Path = REPO) -> bool:
    """Draw the figures the results page links that no experiment folder holds (the dilution law);
    True when a file changed. Drawn with matplotlib (Agg), which writes the same bytes for the same data."""
    import tempfile

    from wash.experiments import to_matplotlib_png

    spec = dilution_figure(dilution_fits(folders(root)))
    if spec is None:
        return False
    target = Path(repo) / DILUTION_FIGURE
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / target.name
        to_matplotlib_png(spec, fresh)
        if target.exists() and target.read_bytes() == fresh.read_bytes():
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(fresh.read_bytes())
    return True


def cmd_report(args: argparse.Namespace) -> int:
    root = Path(args.results) if args.results else RESULTS_ROOT
    if args.check:
        diff = differences(root)
        if diff:
            print(f"out of date: {', '.join(diff)}; run `{REGENERATE}`", file=sys.stderr)
            return 1
        print("every results document matches results/")
        return 0
    changed = write(root)
    print("\n".join(f"wrote {p}" for p in changed) if changed else "every results document was up to date")
    return 0


def add_parser(sub) -> None:
    r = sub.add_parser("report", help="regenerate docs/RESULTS.md, docs/results/*.md, docs/README.md and the "
                                      "README's results section from the committed results/ folders")
    r.add_argument("--check", action="store_true", help="write nothing; exit 1 if a document is out of date")
    r.add_argument("--results", metavar="DIR",
                   help="read the results from DIR instead of results/ (e.g. a `git archive HEAD results` "
                        "snapshot while a run is still writing its CSV)")
    r.set_defaults(func=cmd_report)
