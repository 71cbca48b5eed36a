"""The report's like-for-like section: one row per (form, line-up) run, only once a second system exists."""

from __future__ import annotations

import shutil

from support import results_with_an_anchor_run

from wash import results_tables as rt
from wash.reporting.release import release_section


def test_the_section_appears_with_a_second_system_and_labels_each_row(tmp_path):
    shutil.copytree(rt.RESULTS_ROOT / rt.IDENTIFICATION_FOLDER, tmp_path / "alone" / rt.IDENTIFICATION_FOLDER,
                    ignore=shutil.ignore_patterns("*_runs.csv", "*.html"))
    assert release_section(tmp_path / "alone") == []  # one system per scheme: the main tables already show it
    results_with_an_anchor_run(tmp_path)
    lines = release_section(tmp_path)
    rows = [line for line in lines if line.startswith("| AAR | WASH N=3 |")]
    assert [r.split(" | ")[2:4] for r in rows] == [["gumbel", "independent"], ["soft", "anchor"]]
    assert not any("nan" in line for line in lines)  # a cell not reached is shown missing, never "nan"
