"""The report's like-for-like section: one row per (form, line-up) run, only once a second system exists."""

from __future__ import annotations

import shutil

from support import results_with_an_anchor_run

from wash.reporting import results_tables as rt
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


def _rows(*rows: tuple) -> "pd.DataFrame":
    import pandas as pd

    cols = ["scheme", "form", "lineup", "setting", "tpr", "tpr_low", "tpr_high", "paper_tpr"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_the_table_2_verdict_says_which_side_of_our_interval_the_paper_cell_lies():
    from wash.reporting.release import detection_verdict

    nan = float("nan")
    t = _rows(("kgw", rt.NO_FORM, "anchor", "WASH N=5", 0.5, 0.35, 0.7, 0.389),       # inside
              ("aar", "soft", "anchor", "WASH N=5", 0.8, 0.6, 0.9, 0.428),             # ours above
              ("its-edit", "shared", "anchor", "WASH N=5", 0.0, 0.0, 0.0, 0.162),      # ours below
              ("its-edit", "shared", "independent", "WASH N=5", 0.3, 0.1, 0.5, 0.162),  # not the release's system
              ("kgw", rt.NO_FORM, "anchor", "WASH N=3", 0.9, 0.8, 1.0, nan))             # no paper cell
    text = detection_verdict(t)
    inside, above, below = (text.split(k)[1].split(";")[0] for k in
                            ("inside our interval) for", "ours above the paper's for", "ours below the paper's for"))
    assert "KGW" in inside and "AAR" not in inside and "ITS-Edit" not in inside
    assert "AAR (80% [60, 90] against 42.8%)" in above and "ITS-Edit (0% [0, 0] against 16.2%)" in below
    assert "30%" not in text  # the independent line-up is another system: it decides nothing here
    assert "release's detector" not in text  # none scored these texts


def test_a_release_detector_weaker_alone_than_the_paper_is_named_as_unable_to_give_its_cells():
    from wash.reporting.release import detection_verdict

    t = _rows(("its-edit", "shared", "anchor", "WASH N=5", 0.0, 0.0, 0.0, 0.162),
              ("its-edit", "shared (detector=release)", "anchor", "WASH N=5", 0.1, 0.0, 0.2, 0.162),
              ("its-edit", "shared (detector=release)", "anchor", "single", 0.03, 0.0, 0.1, 0.835),
              ("aar", "soft (detector=release)", "anchor", "single", 1.0, 1.0, 1.0, 0.959),
              ("aar", "soft (detector=release)", "anchor", "WASH N=5", 0.8, 0.7, 0.9, 0.428))
    text = detection_verdict(t)
    assert "ITS-Edit by the release's detector (10% [0, 20] against 16.2%)" in text.split("; ")[0]  # inside
    assert "ITS-Edit 3% [0, 10] (paper 83.5%)" in text and "AAR 100% [100, 100] (paper 95.9%)" in text
    assert "the paper's ITS-Edit cells cannot come from that detector" in text
    assert "AAR cells cannot" not in text and "AAR and" not in text.split("So the paper's")[1]


def test_the_table_1_verdict_counts_cells_below_the_threshold_and_names_the_others():
    import pandas as pd

    from wash.reporting.release import identification_verdict

    t = pd.DataFrame({"scheme": ["kgw", "kgw", "aar", "aar", "aar"], "form": [rt.NO_FORM, rt.NO_FORM, "soft", "soft",
                                                                              "soft"],
                      "lineup": ["anchor", "anchor", "anchor", "anchor", "independent"],
                      "setting": ["WASH N=3", "WASH N=5", "WASH N=3", "WASH N=5", "WASH N=3"],
                      "z_waterprobe": [0.5, -0.2, 28.0, 3.99, 95.0], "paper_z": [0.6, 0.4, 3.7, 2.2, 3.7]})
    text = identification_verdict(t)
    assert "below 4 in 3 of 4 WASH cells" in text  # the independent run is another system
    assert text.endswith("not for AAR (soft) at WASH N=3 (28.0, paper 3.7).")
    assert identification_verdict(t[t["lineup"] == "independent"]) is None
