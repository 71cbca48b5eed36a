"""The Results tab's figures and tables come from the committed CSVs, and its selectors filter them.

Each trace of the two figures is read back against the committed summary CSV it is
drawn from (``results/tpr-paper``, ``results/identify-calibrated``) and the paper's
values in ``wash.reporting.results_tables``; the selectors' choices are the data's values, and
choosing one narrows both tables and figures. Edited copies of the results folder
check what the tab says for a partial or finished run, a second line-up, and a
missing folder. The page itself is driven in tests/test_results_tab_browser.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil

import pandas as pd
import pytest

from wash.reporting import results_tables as rt
from wash.detection.thresholds import ALPHA_IDENTIFY, FPR_CALIBRATED
from wash.ui import results

TPR = rt.RESULTS_ROOT / rt.DETECTION_FOLDER
IDENTIFY = rt.RESULTS_ROOT / rt.IDENTIFICATION_FOLDER


def _traces(fig) -> dict:
    return {t.name: t for t in fig.data}


def _points(trace) -> dict:
    return dict(zip(trace.x, trace.y))


def _label(scheme: str) -> str:
    return results.scheme_label(pd.Series({"scheme": scheme, "form": rt.default_form(scheme)}))


def _copy(tmp_path, folder: str):
    shutil.copytree(rt.RESULTS_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("*_runs.csv", "*.html"))
    return tmp_path / folder


def test_detection_figure_draws_every_summary_cell_with_its_interval_and_the_papers_table_2(tmp_path):
    summary = pd.read_csv(TPR / "tpr_summary.csv")
    # the headline run alone; the other committed folders (forms, line-ups) are tested in the line-up test below
    _copy(tmp_path, rt.DETECTION_FOLDER)
    fig = results.view(root=tmp_path).detection_figure
    traces = _traces(fig)
    for (mode, n), cells in summary.groupby(["mode", "n"]):
        trace = traces[rt.setting_label(mode, n)]
        assert trace.type == "scatter" and trace.offsetgroup == trace.name
        assert _points(trace) == {_label(s): pytest.approx(v) for s, v in zip(cells["scheme"], cells["tpr"])}
        upper = dict(zip(trace.x, trace.error_y.array))
        lower = dict(zip(trace.x, trace.error_y.arrayminus))
        for _, c in cells.iterrows():
            assert upper[_label(c["scheme"])] == pytest.approx(c["tpr_ci_high"] - c["tpr"])
            assert lower[_label(c["scheme"])] == pytest.approx(c["tpr"] - c["tpr_ci_low"])
    # the paper's Table 2 sits in the slot of the same setting; where it gives no value, no marker
    for setting, method in (("single", "watermarked"), ("WASH N=5", "wash N=5")):
        paper = traces[f"paper Table 2, {setting}"]
        assert paper.offsetgroup == setting and paper.marker.symbol == "diamond-open"
        planned = json.loads((TPR / "tpr_meta.json").read_text())["config"]["schemes"]
        expected = {s: rt.paper_tpr(s, method) for s in dict.fromkeys(summary["scheme"].tolist() + planned)}
        assert _points(paper) == {_label(s): pytest.approx(v) for s, v in expected.items() if not math.isnan(v)}
    assert not any(name.startswith("paper Table 2, naive") or name == "paper Table 2, WASH N=3" for name in traces)
    # a planned cell without a row gets the paper's marker and no measured dot
    for scheme in rt.unmeasured_schemes(root=tmp_path):
        assert all(_label(scheme) not in t.x for t in fig.data if not t.name.startswith("paper"))
    its5 = summary[(summary["scheme"] == "its-edit") & (summary["mode"] == "wash") & (summary["n"] == 5)]
    if its5.empty:  # the committed run has not reached it yet
        assert _label("its-edit") not in traces["WASH N=5"].x and _label("its-edit") in traces[
            "paper Table 2, WASH N=5"].x
    assert fig.layout.scattermode == "group"
    assert [s.y0 for s in fig.layout.shapes] == [FPR_CALIBRATED]  # a detector at chance


def test_identification_figure_draws_s_per_scheme_against_each_settings_null_and_the_verdict(tmp_path):
    summary = pd.read_csv(IDENTIFY / "identify_summary.csv")
    full = summary[summary["samples"] == summary["samples"].max()]
    # the headline run alone; the other committed folders (forms, line-ups) are tested in the line-up test below
    _copy(tmp_path, rt.IDENTIFICATION_FOLDER)
    fig = results.view(root=tmp_path).identification_figure
    traces = _traces(fig)
    null = traces["null: same base models unwatermarked (mean ± sd)"]
    assert null.type == "bar"
    by_setting = full.assign(setting=[rt.setting_label(m, n) for m, n in zip(full["mode"], full["n"])])
    for x, base, height in zip(null.x, null.base, null.y):
        cell = by_setting[by_setting["setting"] == x].iloc[0]
        assert base == pytest.approx(cell["null_s_mean"] - cell["null_s_sd"])
        assert height == pytest.approx(2 * cell["null_s_sd"])
    drawn = 0
    for scheme, cells in by_setting.groupby("scheme"):
        cells = cells[cells["s"].notna()]
        label = _label(scheme)
        if cells.empty:
            assert label not in traces
            continue
        trace = traces[label]
        assert trace.offsetgroup == label
        assert _points(trace) == {s: pytest.approx(v) for s, v in zip(cells["setting"], cells["s"])}
        assert list(trace.marker.symbol) == ["circle" if ok else "circle-open" for ok in cells["identified"]]
        drawn += len(cells)
    assert drawn == full["s"].notna().sum()  # the budget sweep's rows are in the table only
    assert len(results.view().identification_table) == len(rt.identification_tables())  # every folder's rows


def test_tables_show_the_measured_cells_the_verdict_and_the_paper_comparable_z():
    view = results.view()
    det, ident = view.detection_table, view.identification_table
    assert list(det.columns) == results.DETECTION_HEADERS and list(ident.columns) == results.IDENTIFICATION_HEADERS
    summary = pd.read_csv(TPR / "tpr_summary.csv")
    # every committed folder's rows (the headline run and the release's line-up), plus the planned cells
    assert len(det) == len(rt.detection_tables()) + (det["TPR [95% CI]"] == results.NOT_MEASURED).sum()
    kgw5 = det[(det["scheme (form)"] == "KGW") & (det["setting"] == "WASH N=5")
               & (det["line-up"] == "independent")].iloc[0]
    cell = summary[(summary["scheme"] == "kgw") & (summary["mode"] == "wash") & (summary["n"] == 5)].iloc[0]
    assert kgw5["TPR [95% CI]"] == (f"{cell['tpr'] * 100:.0f}% [{cell['tpr_ci_low'] * 100:.0f}, "
                                    f"{cell['tpr_ci_high'] * 100:.0f}]")
    assert kgw5["paper Table 2"] == f"{rt.paper_tpr('kgw', 'wash N=5') * 100:.1f}%"
    identify = rt.identification_table()
    for (_, shown), (_, row) in zip(ident.iterrows(), identify.iterrows()):
        if pd.isna(row["p"]):
            assert shown["verdict"].startswith("no p")
        else:
            assert shown["verdict"] == ("identified" if row["identified"] else "not identified")
            # the verdict is Holm's: the adjusted p, never below the raw one, against the level
            assert row["p_holm"] >= row["p"] and row["identified"] == (row["p_holm"] < ALPHA_IDENTIFY)
            assert shown["p"] == results.pval(row["p"]) and shown["Holm p"] == results.pval(row["p_holm"])
        if not pd.isna(row["paper_z"]):
            assert shown["paper Table 1 z"].startswith(f"{row['paper_z']:.1f} (")
        assert shown["scheme (form)"] == results.scheme_label(row)


def test_selector_choices_come_from_the_data_and_a_choice_narrows_both_tables_and_figures():
    loaded = results.load()
    options = results.choices(loaded)
    for column in results.SELECTORS:
        values = set(loaded.detection[column].astype(str)) | set(loaded.identification[column].astype(str))
        assert options[column][0] == results.ALL and set(options[column][1:]) == values - {"none"}
    kgw = results.view("kgw")
    assert set(kgw.detection_table["scheme (form)"]) == {"KGW"}
    assert set(kgw.identification_table["scheme (form)"]) <= {"KGW", "unwatermarked"}  # the null line-up stays
    assert all(set(t.x) <= {"KGW"} for t in kgw.detection_figure.data)
    assert {t.name for t in kgw.identification_figure.data if t.type == "scatter"} <= {"KGW", "unwatermarked"}
    # each run has its own serving profile: choosing one leaves the other table empty, and says so
    det_profile = rt.run_info(TPR).profile
    paper_only = results.view(profile=det_profile)
    assert len(paper_only.detection_table) == len(results.view().detection_table)
    if rt.run_info(IDENTIFY).profile != det_profile:
        assert paper_only.identification_table.empty
        assert "No rows match this selection." in paper_only.identification_status
        assert not paper_only.identification_figure.data and paper_only.identification_sentence == ""


def test_the_status_says_partial_from_the_meta_and_a_finished_run_does_not(tmp_path):
    for folder in (rt.DETECTION_FOLDER, rt.IDENTIFICATION_FOLDER):
        _copy(tmp_path, folder)
    meta_path = tmp_path / rt.DETECTION_FOLDER / "tpr_meta.json"
    meta = json.loads(meta_path.read_text())
    meta.update(jobs_done=5, jobs_total=9)
    meta_path.write_text(json.dumps(meta))
    view = results.view(root=tmp_path)
    assert "**Partial run: 5 of 9 jobs.**" in view.detection_status
    assert "(partial run: 5 of 9 jobs)" in view.detection_figure.layout.title.text
    assert meta["command"] in view.detection_status
    meta.update(jobs_done=9)
    meta_path.write_text(json.dumps(meta))
    results.clear_cache()
    view = results.view(root=tmp_path)
    assert "Partial run" not in view.detection_status and "partial" not in view.detection_figure.layout.title.text
    # a scheme the run planned and has not scored: named, shown as not yet measured, never given a number
    unmeasured = rt.unmeasured_schemes(tmp_path)
    if unmeasured:
        assert "Planned but not yet measured" in view.detection_status
        rows = view.detection_table[view.detection_table["TPR [95% CI]"] == results.NOT_MEASURED]
        assert set(rows["threshold z"]) == {"–"} and set(rows["check FPR [95% CI]"]) == {"–"}


def _anchor_copy(tmp_path, folder: str, anchor: str, keep: str, token: str | None = None) -> pd.DataFrame:
    """``folder`` copied to ``anchor`` as a run of the anchor line-up whose summary holds ``keep``'s rows only
    (written as the scheme token ``token``, a form, where given)."""
    shutil.copytree(tmp_path / folder, tmp_path / anchor)
    meta_path = next((tmp_path / anchor).glob("*_meta.json"))
    meta = json.loads(meta_path.read_text())
    meta["config"]["lineup"] = "anchor"
    meta_path.write_text(json.dumps(meta))
    path = next((tmp_path / anchor).glob("*_summary.csv"))
    summary = pd.read_csv(path)
    summary = summary[summary["scheme"] == keep]
    summary.assign(scheme=token or keep).to_csv(path, index=False)
    return summary


def test_a_second_line_up_becomes_a_choice_and_the_figures_name_it(tmp_path):
    for folder in (rt.DETECTION_FOLDER, rt.IDENTIFICATION_FOLDER):
        _copy(tmp_path, folder)
    tpr = _anchor_copy(tmp_path, rt.DETECTION_FOLDER, rt.DETECTION_FOLDERS[-1], "kgw")
    ident = _anchor_copy(tmp_path, rt.IDENTIFICATION_FOLDER, rt.IDENTIFICATION_FOLDERS[-1], "aar",
                         token="aar:form=soft")
    loaded = results.load(tmp_path)
    assert results.choices(loaded)["lineup"] == [results.ALL, "independent", "anchor"]
    both = results.view(root=tmp_path)
    measured = _traces(both.detection_figure)["WASH N=5 · anchor"]
    cell = tpr[(tpr["mode"] == "wash") & (tpr["n"] == 5)].iloc[0]
    assert _points(measured) == {"KGW": pytest.approx(cell["tpr"])}
    independent = _traces(both.detection_figure)["WASH N=5 · independent"]
    assert measured.marker.symbol != independent.marker.symbol and measured.marker.color == independent.marker.color
    paper = [t.name for t in both.detection_figure.data if t.name.startswith("paper Table 2, WASH N=5")]
    assert paper == ["paper Table 2, WASH N=5"]  # once: the paper's value does not depend on our line-up
    assert f"`{tmp_path.name}/{rt.DETECTION_FOLDERS[-1]}`" in both.detection_status  # each run's own line
    # identification: the anchor line-up's settings are their own categories, each with its own null
    null = _traces(both.identification_figure)["null: same base models unwatermarked (mean ± sd)"]
    assert "WASH N=3 · anchor" in null.x and "WASH N=3 · independent" in null.x
    only = results.view(lineup="anchor", root=tmp_path)
    assert set(only.detection_table["line-up"]) == {"anchor"}
    assert set(only.identification_table["scheme (form)"]) == {"AAR (soft)"}
    assert len(only.identification_table) == len(ident)
    soft = _traces(both.identification_figure)["AAR (soft)"]  # a form is its own trace, beside the default's
    assert set(soft.x) <= {x for x in null.x if x.endswith("· anchor")} and "AAR (gumbel)" in _traces(
        both.identification_figure)
    assert "WASH N=5" in _traces(only.detection_figure)  # one line-up shown: no suffix
    assert f"From `{tmp_path.name}/{rt.DETECTION_FOLDER}`" not in only.detection_status  # only the rows' own run


def test_a_missing_results_folder_says_so_and_draws_nothing(tmp_path):
    view = results.view(root=tmp_path)
    assert view.detection_status.startswith("**Not available:**") and "tpr-paper" in view.detection_status
    assert view.identification_status.startswith("**Not available:**")
    assert not view.detection_figure.data and view.detection_table.empty and view.identification_table.empty
    assert results.choices(results.load(tmp_path)) == {c: [results.ALL] for c in results.SELECTORS}


def test_sentences_hold_no_typed_number_only_the_datas():
    """Without a WASH row the prose holds only the calibrated FPR level and the identification level (both
    from wash.detection.thresholds), the intervals' 95% and the paper's table names; with them, the numbers it adds
    are cells of the tables."""
    from wash.reporting.fmt import FPR_LEVEL

    def typed(text: str) -> list[str]:
        for quoted in ("95%", FPR_LEVEL, f"{ALPHA_IDENTIFY:g}", "Table 2"):
            text = text.replace(quoted, "")
        return re.findall(r"\d", text)

    table = rt.detection_tables()
    ident = rt.identification_tables()
    assert typed(results.detection_sentence(table[table["mode"] != "wash"])) == []
    assert typed(results.identification_sentence(ident[ident["mode"] != "wash"])) == []
    view = results.view()
    wash = rt.detection_tables().query("mode == 'wash'")
    at = wash[wash["n"] == wash["n"].max()].sort_values("tpr")
    assert (f"{results.name(at.iloc[-1]['scheme'])} keeps the most "
            f"({results.pct_ci(at.iloc[-1]['tpr'], at.iloc[-1]['tpr_low'], at.iloc[-1]['tpr_high'])})"
            in view.detection_sentence)
    assert f"below {ALPHA_IDENTIFY:g}" in view.identification_sentence
    ident = results.full_budget(ident).query("mode == 'wash' and p == p")
    assert f"{int(ident['identified'].sum())} of {len(ident)} WASH systems" in view.identification_sentence


def test_the_app_places_the_results_tab_after_identify_and_its_handler_answers_a_selection(monkeypatch):
    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2,tiny-gemma3")
    import importlib.util

    import gradio as gr

    from support import ROOT
    from wash.ui.preload import Preload
    from wash.ui import handlers

    spec = importlib.util.spec_from_file_location("wash_app_for_tabs", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    demo = module.build_demo(Preload([]).start())
    tabs = [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)]
    assert tabs == ["Generate", "Lesson", "Quiz", "Detect", "Identify", "Results", "Theory", "About"]
    out = handlers.show_results("kgw", results.ALL, results.ALL)
    assert len(out) == len(results.OUTPUTS)
    assert all(a is b for a, b in zip(out, results.view("kgw").outputs()))  # the cached view, not a new one
    assert all(a is b for a, b in zip(handlers.show_results(None, None, None), results.view().outputs()))
