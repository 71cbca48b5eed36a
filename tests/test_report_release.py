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
    # KGW alone is one system under every column: its single row would compare nothing
    assert not any(line.startswith("| KGW | single |") for line in lines)
    single = next(line.split(" | ") for line in lines if line.startswith("| AAR | single |"))
    assert single[4] == "= release form"  # one provider has no partners, so no line-up
    assert not any("nan" in line for line in lines)  # a cell not reached is shown missing, never "nan"


def test_the_release_detector_on_the_same_texts_sits_beside_ours_in_its_system(tmp_path):
    import json

    import pandas as pd

    for folder in (rt.DETECTION_FOLDER, "tpr-anchor"):
        shutil.copytree(rt.RESULTS_ROOT / rt.DETECTION_FOLDER, tmp_path / folder,
                        ignore=shutil.ignore_patterns("*_runs.csv", "*.html", "*.png", "*.js"))
    anchor = tmp_path / "tpr-anchor"
    meta = json.loads((anchor / "tpr_meta.json").read_text())
    meta["config"]["lineup"] = "anchor"
    (anchor / "tpr_meta.json").write_text(json.dumps(meta))
    summary = pd.read_csv(anchor / "tpr_summary.csv")
    soft = summary[summary["scheme"] == "aar"].assign(scheme="aar:form=soft")
    release = soft.assign(scheme="aar:form=soft+detector=release", tpr=0.123, tpr_ci_low=0.05, tpr_ci_high=0.2)
    pd.concat([soft, release]).to_csv(anchor / "tpr_summary.csv", index=False)
    lines = release_section(tmp_path)
    row = next(line.split(" | ") for line in lines if line.startswith("| AAR | WASH N=5 |"))
    assert "release detector: 12% [5, 20]" in row[4] and "release detector" not in row[2]
    assert not any(line.startswith("| AAR | WASH N=5 | soft") for line in lines)  # no row of its own
