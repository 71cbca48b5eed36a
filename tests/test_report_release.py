"""The report's like-for-like section: one row per (form, line-up) run, only once a second system exists."""

from __future__ import annotations

import json
import shutil

import pandas as pd

from wash import results_tables as rt
from wash.reporting.release import release_section


def _copy(tmp_path, folder: str):
    shutil.copytree(rt.RESULTS_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("*_runs.csv", "*.html"))


def test_the_section_appears_with_a_second_system_and_labels_each_row(tmp_path):
    _copy(tmp_path, rt.IDENTIFICATION_FOLDER)
    assert release_section(tmp_path) == []  # one system per scheme: the main tables already show it
    anchor = tmp_path / "identify-anchor"
    shutil.copytree(tmp_path / rt.IDENTIFICATION_FOLDER, anchor)
    meta = json.loads((anchor / "identify_meta.json").read_text())
    meta["config"]["lineup"] = "anchor"
    (anchor / "identify_meta.json").write_text(json.dumps(meta))
    summary = pd.read_csv(anchor / "identify_summary.csv")
    summary.loc[summary["scheme"] == "aar", "scheme"] = "aar:form=soft"
    summary.to_csv(anchor / "identify_summary.csv", index=False)
    lines = release_section(tmp_path)
    rows = [line for line in lines if line.startswith("| AAR | WASH N=3 |")]
    assert [r.split(" | ")[2:4] for r in rows] == [["gumbel", "independent"], ["soft", "anchor"]]
    assert not any("nan" in line for line in lines)  # a cell not reached is shown missing, never "nan"
