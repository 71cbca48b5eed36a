"""The results documents are what ``python -m wash report`` makes from the committed results.

* The committed docs/RESULTS.md, docs/results/*.md, docs/README.md and the README's
  results section equal what the report generates now: a results change without a
  re-generated report fails here.
* Every number of the headline reads back to a cell of the CSV or meta it quotes (or to
  the paper's tables), at the precision it is printed with.
* The README quotes the report's headline; the page stays short; the templates hold no
  measured number.
* The README's short table and its opening lines, and docs/CLASSROOM.md, are generated too:
  their numbers read back to cells, and a changed result changes them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from wash import reporting
from wash.reporting import results_tables as rt
from wash.reporting import descriptions, glossary, opening
from wash.reporting.data import folders
from wash.reporting.findings import FINDINGS_FOLDERS, brief_table, findings, findings_table
from wash.reporting.headline import HEADLINE_FOLDERS, headline, name as display_name

REPO = reporting.REPO
HINT = f"run `{reporting.REGENERATE}` and commit the documents it writes"


def test_committed_documents_equal_what_the_report_generates():
    out_of_date = reporting.differences()
    assert not out_of_date, f"results documents out of date ({', '.join(out_of_date)}): {HINT}"


# --- The headline's numbers. ---

#: A number as the documents print it: 6.95, -0.05, 20,000, 5e-05 (not inside words or hashes).
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?(?![\w.]*\w)|(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?=x\b)")
#: Numbers of the prose, not of a result: 95% intervals, the 5% FPR level, the z = 4 line, 1/N.
LITERALS = {"95", "5", "4"}


def _numbers_of(value) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers_of(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers_of(v)]
    return []


def _cells(names=HEADLINE_FOLDERS) -> list[float]:
    """Every numeric cell of the named folders' summary CSVs and metas, and the paper's values."""
    values: list[float] = []
    for name in names:
        path = rt.RESULTS_ROOT / name
        for csv in path.glob("*_summary.csv"):
            frame = pd.read_csv(csv)
            values += [float(v) for v in frame.select_dtypes("number").to_numpy().ravel() if v == v]
        for meta in path.glob("*_meta.json"):
            values += _numbers_of(json.loads(meta.read_text()))
    values += list(rt.paper_table2()["tpr"]) + list(rt.paper_table1()["z"])
    return values


def _printed(token: str, value: float) -> bool:
    token = token.replace(",", "")
    if "e" in token:
        return f"{value:.2g}" == token
    digits = len(token.split(".")[1]) if "." in token else 0
    printed = f"{value:.{digits}f}"
    return printed == token or (printed == "-" + token.lstrip("-") and float(token) == 0)


def test_every_number_in_the_headline_resolves_to_a_cell():
    text = "\n".join(headline(rt.RESULTS_ROOT, folders()))
    text = text.replace("1/N", "")
    tokens = NUMBER.findall(text)
    assert len(tokens) > 40, tokens  # the headline is made of numbers; a broken pattern would find few
    cells = _cells()
    unresolved = [t for t in tokens if t not in LITERALS
                  and not any(_printed(t, c * scale) for c in cells for scale in (1, 100))]
    assert not unresolved, f"headline numbers without a cell: {unresolved}"


def test_an_invented_number_does_not_resolve():
    cells = _cells()
    assert not any(_printed("123.45", c * scale) for c in cells for scale in (1, 100))
    assert any(_printed("6.95", c) for c in cells)  # KGW's single-provider z in decay-kgw-paper


def test_the_number_pattern_reads_what_the_documents_print():
    line = ("z 6.95 [6.47, 7.42], -0.05, 20,000 samples, p 5e-05, 2.8x to 3.3x, engine 3c774304ae61, "
            "SmolLM2-135M")
    assert NUMBER.findall(line) == ["6.95", "6.47", "7.42", "-0.05", "20,000", "5e-05", "2.8", "3.3"]


# --- The README and the page. ---

def _readme_section(text: str) -> str:
    start, end = text.index(reporting.README_START), text.index(reporting.README_END)
    return text[start:end + len(reporting.README_END)]


def test_the_readme_opens_with_the_reports_main_finding_table():
    text = (REPO / "README.md").read_text()
    section = _readme_section(text)
    assert section == reporting.readme_section(), f"README.md's main-finding table is out of date: {HINT}"
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| The paper")]
    assert len(rows) == len(findings(rt.RESULTS_ROOT, folders())) >= 6
    # on the first screen: the table starts within 50 lines of the page (the front matter is not shown)
    page = text.split("\n---\n", 1)[1] if text.startswith("---\n") else text
    assert page[:page.index(reporting.README_START)].count("\n") < 50


def test_every_number_in_the_main_finding_table_resolves_to_a_cell():
    text = "\n".join(findings_table(rt.RESULTS_ROOT, folders()))
    tokens = NUMBER.findall(text)
    assert len(tokens) > 30, tokens
    cells = _cells(FINDINGS_FOLDERS) + list(rt.PAPER_CLAIMS.values())
    unresolved = [t for t in tokens if t not in LITERALS
                  and not any(_printed(t, c * scale) for c in cells for scale in (1, 100))]
    assert not unresolved, f"main-finding numbers without a cell: {unresolved}"


def _unresolved(text: str, cells: list[float]) -> list[str]:
    return [t for t in NUMBER.findall(text) if t not in LITERALS
            and not any(_printed(t, c * scale) for c in cells for scale in (1, 100))]


def test_every_number_in_the_readme_short_table_resolves_to_a_cell():
    text = "\n".join(brief_table(rt.RESULTS_ROOT, folders()))
    assert len(NUMBER.findall(text)) > 20
    cells = _cells(FINDINGS_FOLDERS) + list(rt.PAPER_CLAIMS.values())
    assert not _unresolved(text, cells), f"short-table numbers without a cell: {_unresolved(text, cells)}"


def test_the_short_table_links_its_jargon_to_the_glossary_the_readme_holds():
    section = reporting.readme_section()
    assert f"{glossary.HEADING}" in section and "[z](#words-used-here)" in section
    assert glossary.ANCHOR == "#" + glossary.HEADING.lower().replace(" ", "-")
    for row in brief_table(rt.RESULTS_ROOT, folders())[2:]:
        assert len(row.split()) < 80, row  # a few words a cell, not the full cells of docs/results/findings.md


def test_the_opening_lines_are_generated_and_resolve_to_cells():
    readme = (REPO / "README.md").read_text()
    body = readme[readme.index(opening.START) + len(opening.START):readme.index(opening.END)].strip()
    assert body == opening.sentence(rt.RESULTS_ROOT, folders())
    cells = _cells(opening.FOLDERS)
    assert not _unresolved(body.replace("1/N", ""), cells), _unresolved(body.replace("1/N", ""), cells)


def test_each_scheme_is_sorted_by_its_own_decay(tmp_path):
    """A scheme whose z under WASH at N = 5 stays at its z alone reads "slower"; one at a tenth of z alone / 5
    reads "faster": the opening says what each scheme's numbers say."""
    shutil.copytree(rt.RESULTS_ROOT / rt.DETECTION_FOLDER, tmp_path / rt.DETECTION_FOLDER)
    path = tmp_path / rt.DETECTION_FOLDER / "tpr_summary.csv"
    t = pd.read_csv(path)
    alone = t[t["mode"] == "single"].set_index("scheme")["mean_z_pos"]
    wash5 = (t["mode"] == "wash") & (t["n"] == 5)
    t.loc[wash5 & (t["scheme"] == "kgw"), "mean_z_pos"] = alone["kgw"]
    t.loc[wash5 & (t["scheme"] == "aar"), "mean_z_pos"] = alone["aar"] / 50
    t.to_csv(path, index=False)
    classes = opening.decay_classes(folders(tmp_path))
    assert "kgw" in classes["slower"] and "aar" in classes["faster"], classes


@pytest.mark.parametrize("mean, word", [(1.0, "**Holds**"), (3.0, "**Not reproduced**")])
def test_the_first_rows_verdict_reads_the_papers_bound_of_two(tmp_path, mean, word):
    """Row 1 judges the abstract's "below 2", not the z = 4 line: every mean below 2 holds, none does not."""
    from wash.reporting.findings import per_text_z

    shutil.copytree(rt.RESULTS_ROOT / "decay-mix-paper", tmp_path / "decay-mix-paper")
    path = tmp_path / "decay-mix-paper" / "decay_summary.csv"
    t = pd.read_csv(path)
    t.loc[(t["n"] == 3) & t["scheme"].str.startswith("mix/"), "mean"] = mean
    t.to_csv(path, index=False)
    row = per_text_z(folders(tmp_path))
    assert row.verdict.startswith(word) and row.brief_verdict.startswith(word), row.verdict
    assert "below 2" in row.claim


def test_the_committed_first_row_names_the_schemes_above_two():
    from wash.reporting.findings import per_text_z

    f = folders()["decay-mix-paper"].summary
    above = f[(f["n"] == 3) & f["scheme"].str.startswith("mix/") & (f["mean"] >= rt.PAPER_CLAIMS["z_below"])]
    row = per_text_z(folders())
    assert len(above) and row.brief_verdict.startswith("**Partly holds**")
    for scheme in above["scheme"]:
        assert display_name(scheme[4:]) in row.brief


def test_the_handouts_survival_table_is_the_detection_tables_cells():
    from wash.reporting.classroom import HOW
    from wash.reporting.fmt import pct_ci

    text = (REPO / "docs" / "CLASSROOM.md").read_text()
    t = rt.detection_table()
    for scheme in HOW:
        row = next(x for x in text.splitlines() if x.startswith(f"| {display_name(scheme)} |")).split(" | ")
        for column, setting in ((2, "single"), (3, "WASH N=5")):
            c = t[(t["scheme"] == scheme) & (t["setting"] == setting)].iloc[0]
            assert row[column] == pct_ci(c["tpr"], c["tpr_low"], c["tpr_high"]), (scheme, setting, row)


def test_the_handout_holds_the_kit():
    """Answers for each question, a plan that adds up to a class period, the glossary and how to run it."""
    from wash.reporting import classroom

    text = (REPO / "docs" / "CLASSROOM.md").read_text()
    assert text.startswith("<!-- Generated by `python -m wash report`")
    questions = re.findall(r"^\d\. ", text, re.M)
    assert len(questions) == text.count("*Answer:*") == 5
    assert sum(m for m, _, _ in classroom.PLAN) == 45 and "## A 45-minute plan" in text
    assert f"## {glossary.HEADING}" in text and all(f"**{term}**" in text for term, _ in glossary.TERMS)
    for words in ("projector", "Duplicate this Space", "GRADIO_SERVER_NAME", "share link",
                  "## What numbers to expect on a Space"):
        assert words in text, words


@pytest.mark.parametrize("column, cut, word", [
    ("tpr", 0.0, "**Holds** for every one"),      # every scheme at 0% TPR: the TPR claims hold
    ("tpr", 0.99, "**Not reproduced**"),          # every scheme at 99%: none holds
])
def test_the_tpr_verdicts_follow_the_numbers(tmp_path, column, cut, word):
    root = tmp_path / "results"
    shutil.copytree(rt.RESULTS_ROOT / rt.DETECTION_FOLDER, root / rt.DETECTION_FOLDER)
    summary = next((root / rt.DETECTION_FOLDER).glob("*_summary.csv"))
    frame = pd.read_csv(summary)
    frame[column] = cut
    frame[f"{column}_ci_low"] = cut
    frame[f"{column}_ci_high"] = cut
    frame.to_csv(summary, index=False)
    rows = [f for f in findings(root, folders(root)) if "TPR" in f.claim]
    assert len(rows) == 2 and all(word in f.verdict for f in rows), [f.verdict for f in rows]


def test_the_results_page_is_short():
    assert len((REPO / "docs" / "RESULTS.md").read_text().splitlines()) <= 300


def test_the_description_templates_hold_no_measured_number():
    measured = re.compile(r"\d+\.\d+|\d+\s*%")
    for key, text in {**descriptions.EXPERIMENTS, **descriptions.FOLDERS, "quick": descriptions.QUICK}.items():
        # the FPR level is the experiment's setting, not a measurement
        assert not measured.search(text.replace("5% FPR", "")), f"{key}: a hand-typed number in a template"


def test_docs_index_lists_every_document():
    index = (REPO / "docs" / "README.md").read_text()
    for doc in (REPO / "docs").glob("*.md"):
        if doc.name != "README.md":
            assert f"]({doc.name})" in index, doc.name
    for page in (REPO / "docs" / "results").glob("*.md"):
        assert f"](results/{page.name})" in index, page.name


def test_generated_pages_link_figures_not_html():
    for path, text in reporting.generate().items():
        assert ".html)" not in text, path


# --- A changed result is caught. ---

def _results_copy(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for src in sorted(rt.RESULTS_ROOT.iterdir()):
        if src.is_dir():
            shutil.copytree(src, root / src.name, ignore=shutil.ignore_patterns("*_runs.csv", "*.html"))
    (tmp_path / "README.md").write_text((REPO / "README.md").read_text())
    return root


def test_a_changed_result_without_a_new_report_is_caught(tmp_path):
    root = _results_copy(tmp_path)
    reporting.write(root, tmp_path)
    assert reporting.differences(root, tmp_path) == []
    path = root / rt.DETECTION_FOLDER / "tpr_summary.csv"
    summary = pd.read_csv(path)
    cell = (summary["scheme"] == "kgw") & (summary["mode"] == "wash") & (summary["n"] == 5)
    summary.loc[cell, "tpr"] = 0.5
    summary.to_csv(path, index=False)
    changed = reporting.differences(root, tmp_path)
    assert {"docs/RESULTS.md", "README.md", f"docs/results/{rt.DETECTION_FOLDER}.md",
            "docs/CLASSROOM.md"} <= set(changed)
    low, high = (float(summary.loc[cell, c].iloc[0]) * 100 for c in ("tpr_ci_low", "tpr_ci_high"))
    documents = reporting.generate(root, tmp_path)
    assert f"KGW in 50% [{low:.0f}, {high:.0f}]" in documents["docs/RESULTS.md"]
    kgw_row = next(x for x in documents["docs/CLASSROOM.md"].splitlines() if x.startswith("| KGW |"))
    assert kgw_row.split(" | ")[3] == f"50% [{low:.0f}, {high:.0f}]", kgw_row  # the handout's "WASH N = 5" cell


def test_a_removed_folder_leaves_no_stale_page(tmp_path):
    root = _results_copy(tmp_path)
    reporting.write(root, tmp_path)
    shutil.rmtree(root / "routing-quick")
    assert "docs/results/routing-quick.md" in reporting.differences(root, tmp_path)
    reporting.write(root, tmp_path)
    assert not (tmp_path / "docs" / "results" / "routing-quick.md").exists()


def test_report_check_says_how_to_fix(monkeypatch, capsys):
    from wash.cli import main

    monkeypatch.setattr(reporting, "differences", lambda *a, **k: ["docs/RESULTS.md"])
    assert main(["report", "--check"]) == 1
    assert f"run `{reporting.REGENERATE}`" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["tpr-paper", "identify-calibrated"])
def test_partial_runs_say_so_on_their_pages(name):
    f = folders()[name]
    page = (REPO / "docs" / "results" / f"{name}.md").read_text()
    if f.partial:
        assert f"{f.jobs_done} of {f.jobs_total} jobs" in page


def test_the_release_line_up_bullet_sorts_cells_not_schemes(tmp_path):
    """A scheme whose WASH cells fall on both sides of z = 4 is split, each cell naming its N: AAR's N = 5
    (below 4, as in the paper) is not reported among the cells that stay above."""
    from wash.reporting.headline import release_lineup

    shutil.copytree(rt.RESULTS_ROOT / "identify-anchor", tmp_path / "identify-anchor")
    t = pd.read_csv(tmp_path / "identify-anchor" / "identify_summary.csv")
    aar = (t["mode"] == "wash") & t["scheme"].str.startswith("aar")
    assert sorted(t.loc[aar, "n"]) == [3, 5]
    t.loc[aar & (t["n"] == 5), "z"] = 1.5  # whatever the committed run holds: one below, one above
    t.loc[aar & (t["n"] == 3), "z"] = 9.5
    t.to_csv(tmp_path / "identify-anchor" / "identify_summary.csv", index=False)
    text = release_lineup(tmp_path, folders(tmp_path))
    below, above = text.split(" It does not for ")
    assert "AAR (soft) 1.5 (paper 2.2) at N = 5" in below and "9.5" not in below
    assert above.startswith("AAR (soft) 9.5 (paper 3.7) at N = 3") and "1.5" not in above
    assert "KGW" in below and " at N = " not in below.split("KGW")[1].split(";")[0]  # a whole scheme lists both


def test_every_data_file_and_figure_in_docs_is_named_by_another_tracked_file():
    """A figure or raw output in docs/ that nothing names is dead weight (and a Space ships it):
    each is named by some other tracked file, by its path from the repository root or from docs/,
    or by its folder (``docs/bench-threads/``)."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
                             ).stdout.decode().split("\0")
    texts = {}
    for name in tracked:
        path = REPO / name
        if name and path.is_file():
            data = path.read_bytes()
            if b"\0" not in data[:8192]:
                texts[name] = data.decode("utf-8", errors="replace")
    data_files = [n for n in tracked if n.startswith("docs/") and not n.endswith(".md") and n in texts
                  or n.startswith("docs/figures/")]
    assert data_files
    unnamed = []
    for name in data_files:
        folder = Path(name).parent.as_posix()
        forms = {name, name.removeprefix("docs/")} | ({folder + "/"} if folder not in ("docs", "docs/figures") else set())
        if not any(form in text for other, text in texts.items() if other != name for form in forms):
            unnamed.append(name)
    assert not unnamed, f"named by no tracked file (remove them, or link them where they are quoted): {unnamed}"
