"""The headline tables read the committed results as they are, and the paper's values as reported.

Every measured cell of ``detection_table`` and ``identification_table`` is checked
against the cell of the committed summary CSV it comes from; the paper's values are
spot-checked against its tables; the partial flag and the ``form``/``lineup`` columns
are checked on a copied results folder whose meta and summary are edited.
"""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest

from wash.reporting import results_tables as rt

TPR = rt.RESULTS_ROOT / rt.DETECTION_FOLDER
IDENTIFY = rt.RESULTS_ROOT / rt.IDENTIFICATION_FOLDER


def same(a, b) -> bool:
    """Equal cells, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_detection_table_cells_equal_the_tpr_summary():
    table = rt.detection_table()
    summary = pd.read_csv(TPR / "tpr_summary.csv")
    assert len(table) == len(summary)
    pairs = {"tpr": "tpr", "tpr_low": "tpr_ci_low", "tpr_high": "tpr_ci_high", "fpr_check": "fpr_check",
             "fpr_check_low": "fpr_check_ci_low", "fpr_check_high": "fpr_check_ci_high", "texts": "n_pos",
             "threshold": "threshold", "mean_z": "mean_z_pos", "scheme": "scheme", "mode": "mode", "n": "n"}
    for (_, row), (_, cells) in zip(table.iterrows(), summary.iterrows()):
        for ours, theirs in pairs.items():
            assert same(row[ours], cells[theirs]), (ours, row["scheme"], row["setting"])
        assert row["negatives"] == cells["n_cal"] + cells["n_check"]
    assert list(table.columns[:3]) == ["scheme", "form", "lineup"]
    assert set(table["setting"]) <= {"single", "naive N=3", "WASH N=3", "naive N=5", "WASH N=5"}
    assert (table["profile"] == json.loads((TPR / "tpr_meta.json").read_text())["profile"]["name"]).all()
    assert (table["lineup"] == "independent").all()
    assert (table["source"] == "results/tpr-paper").all()


def test_detection_table_puts_the_papers_table_2_beside_the_matching_settings():
    table = rt.detection_table().set_index(["scheme", "setting"])
    if ("kgw", "WASH N=5") in table.index:
        assert table.loc[("kgw", "WASH N=5"), "paper_tpr"] == pytest.approx(0.389)
    if ("dipmark", "single") in table.index:
        assert table.loc[("dipmark", "single"), "paper_tpr"] == pytest.approx(0.837)
    # the paper gives no per-scheme TPR at N = 3 nor for naive averaging: left missing
    rest = table.reset_index()
    assert rest.loc[rest["setting"].isin(["WASH N=3", "naive N=3", "naive N=5"]), "paper_tpr"].isna().all()


def test_identification_table_cells_equal_the_identify_summary():
    table = rt.identification_table()
    summary = pd.read_csv(IDENTIFY / "identify_summary.csv")
    assert len(table) == len(summary)
    pairs = {"s": "s", "s_low": "s_low", "s_high": "s_high", "p": "p", "p_holm": "p_holm", "holm_tests": "holm_tests",
             "p_floor": "p_floor",
             "identified": "identified", "z_waterprobe": "z", "null_s_mean": "null_s_mean", "scheme": "scheme",
             "mode": "mode", "n": "n", "samples": "samples", "band": "band"}
    for (_, row), (_, cells) in zip(table.iterrows(), summary.iterrows()):
        for ours, theirs in pairs.items():
            assert same(row[ours], cells[theirs]), (ours, row["scheme"], row["setting"], row["samples"])
    assert (table["profile"] == json.loads((IDENTIFY / "identify_meta.json").read_text())["profile"]["name"]).all()


@pytest.mark.parametrize("folder", rt.IDENTIFICATION_FOLDERS)
def test_every_committed_verdict_is_holm_over_the_systems_sharing_its_null(folder):
    """Each folder's systems sharing a null (same N and budget) form one Holm family: the committed
    ``p_holm`` is Holm's adjustment of their ``p``, never below it nor below the test's floor, and
    ``identified`` reads it."""
    from wash.detection.identify_stats import holm
    from wash.detection.thresholds import ALPHA_IDENTIFY

    table = rt.identification_table(folder_name=folder)
    scored = table[table["p"].notna()]
    assert not scored.empty
    for _, family in scored.groupby(["n", "samples"]):
        assert list(family["p_holm"]) == pytest.approx(list(holm(family["p"])))
        assert (family["holm_tests"] == len(family)).all()
    assert (scored["p_holm"] >= scored["p"]).all() and (scored["p"] >= scored["p_floor"] - 1e-12).all()
    assert (table["identified"] == (table["p_holm"] < ALPHA_IDENTIFY)).all()


def test_identification_table_puts_the_papers_table_1_beside_the_matching_settings():
    table = rt.identification_table()
    kgw3 = table[(table["scheme"] == "kgw") & (table["setting"] == "WASH N=3")].iloc[0]
    assert kgw3["paper_z"] == pytest.approx(0.634)  # Llama3.1-8B
    assert (kgw3["paper_z_low"], kgw3["paper_z_high"]) == (pytest.approx(0.058), pytest.approx(1.732))
    assert table.loc[table["mode"] == "unwatermarked", "paper_z"].isna().all()


def test_paper_tables_hold_the_reported_values():
    t2 = rt.paper_table2().set_index(["method", "scheme"])["tpr"]
    assert t2[("wash N=5", "aar")] == pytest.approx(0.428)
    assert t2[("watermarked", "exp-edit")] == pytest.approx(0.859)
    assert ("de-mark", "aar") not in t2.index  # the paper's "---"
    t1 = rt.paper_table1()
    assert len(t1) == 3 * 6 * 6 - 3 * 3
    assert rt.paper_z("its-edit", "watermarked") == pytest.approx(304.022)
    assert rt.paper_z_range("waterbag", "watermarked") == (pytest.approx(5.245), pytest.approx(10.237))
    assert math.isnan(rt.paper_z("aar", "de-mark"))


def test_default_forms_are_the_schemes_defaults():
    from wash.watermarks import SCHEMES

    for name, cls in SCHEMES.items():
        params = cls.Params()
        form = getattr(params, "form", None) or getattr(params, "permutation", None)
        assert rt.default_form(name) == (form or rt.NO_FORM), name


def test_a_partial_run_is_flagged_and_a_finished_one_is_not(tmp_path):
    shutil.copytree(TPR, tmp_path / rt.DETECTION_FOLDER, ignore=shutil.ignore_patterns("*_runs.csv", "*.html"))
    meta_path = tmp_path / rt.DETECTION_FOLDER / "tpr_meta.json"
    meta = json.loads(meta_path.read_text())
    meta.update(jobs_done=5, jobs_total=9)
    meta_path.write_text(json.dumps(meta))
    table = rt.detection_table(tmp_path)
    assert table["partial"].all() and (table["jobs"] == "5 of 9 jobs").all()
    assert (table["source"] == f"{tmp_path.name}/tpr-paper").all()
    meta.update(jobs_done=9)
    meta_path.write_text(json.dumps(meta))
    table = rt.detection_table(tmp_path)
    assert not table["partial"].any() and (table["jobs"] == "9 jobs").all()


def test_form_and_lineup_columns_of_a_summary_win_over_the_defaults(tmp_path):
    shutil.copytree(TPR, tmp_path / rt.DETECTION_FOLDER, ignore=shutil.ignore_patterns("*_runs.csv", "*.html"))
    path = tmp_path / rt.DETECTION_FOLDER / "tpr_summary.csv"
    summary = pd.read_csv(path)
    summary["lineup"] = "anchor"
    summary["form"] = ["soft" if s == "aar" else None for s in summary["scheme"]]
    summary.to_csv(path, index=False)
    table = rt.detection_table(tmp_path)
    assert (table["lineup"] == "anchor").all()
    assert (table.loc[table["scheme"] == "aar", "form"] == "soft").all()
    assert (table.loc[table["scheme"] == "kgw", "form"] == rt.NO_FORM).all()


def test_unmeasured_schemes_are_the_planned_ones_without_rows():
    planned = json.loads((TPR / "tpr_meta.json").read_text())["config"]["schemes"]
    have = set(pd.read_csv(TPR / "tpr_summary.csv")["scheme"])
    assert rt.unmeasured_schemes() == [s for s in planned if s not in have]


def test_the_charts_guide_line_is_justified_by_the_measured_null():
    """Z_WASHED is drawn as "unwatermarked texts rarely pass it": on the committed negatives at most the
    calibrated FPR of the scores exceed it, and none reach the detection line."""
    from wash.detection.thresholds import FPR_CALIBRATED, Z_THRESHOLD, Z_WASHED

    runs = pd.read_csv(TPR / "tpr_runs.csv", usecols=["role", "z"])
    negatives = runs.loc[runs["role"] == "negative", "z"].dropna()
    washed = rt.null_exceedance(Z_WASHED)
    assert (washed.above, washed.scores) == (int((negatives > Z_WASHED).sum()), len(negatives))
    assert washed.scores > 0 and washed.share <= FPR_CALIBRATED
    assert rt.null_exceedance(Z_THRESHOLD).share <= washed.share


def test_scheme_tokens_split_into_scheme_and_form():
    assert rt.scheme_and_form("aar:form=soft") == ("aar", "soft")
    assert rt.scheme_and_form("its-edit:permutation=shared") == ("its-edit", "shared")
    assert rt.scheme_and_form("exp-edit") == ("exp-edit", "gumbel")
    assert rt.scheme_and_form("kgw") == ("kgw", rt.NO_FORM)
    assert rt.scheme_and_form("aar:form=soft+detector=release") == ("aar", "soft (detector=release)")


def test_stacked_tables_label_each_folder_by_its_form_and_line_up(tmp_path):
    from support import results_with_an_anchor_run

    summary = pd.read_csv(results_with_an_anchor_run(tmp_path) / "identify_summary.csv")
    table = rt.identification_tables(tmp_path)
    assert len(table) == 2 * len(summary)
    soft = table[(table["scheme"] == "aar") & (table["form"] == "soft")]
    assert set(soft["lineup"]) == {"anchor"} and set(soft["source"]) == {f"{tmp_path.name}/identify-anchor"}
    # the paper's value is looked up by the scheme, whatever its form
    assert soft["paper_z"].dropna().tolist() == table[(table["scheme"] == "aar") & (table["form"] == "gumbel")][
        "paper_z"].dropna().tolist()
    assert rt.detection_tables(tmp_path).empty  # no tpr folder: an empty table, not an error
