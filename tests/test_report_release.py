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
    header = next(line for line in lines if line.startswith("| scheme | setting |"))
    assert header.split(" | ")[2:5] == ["ours: original form, independent keys", "release form, independent keys",
                                        "release form, one anchor"]
    # one row per scheme and setting, a cell per system: ours, the release form alone (not run here), the anchor
    aar = [line.split(" | ") for line in lines if line.startswith("| AAR | WASH N=3 |")]
    assert len(aar) == 1 and aar[0][3] == "–"
    assert "identified" in aar[0][2] and "identified" in aar[0][4]  # the fixture relabels the same scores
    kgw = next(line.split(" | ") for line in lines if line.startswith("| KGW | WASH N=3 |"))
    assert kgw[3] == "= ours"  # KGW's release form is the original: the same system
    single = next(line.split(" | ") for line in lines if line.startswith("| KGW | single |"))
    assert single[4] == "= ours"  # one provider has no partners, so no line-up
    assert not any("nan" in line for line in lines)  # a cell not reached is shown missing, never "nan"
