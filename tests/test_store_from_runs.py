"""tools/store_from_runs.py: a new machine refills the generation store from a committed runs CSV.

A tiny ``tpr`` run is made, its store deleted (as on a fresh clone), and the tool
refills it: the same command then generates nothing and adds a detector variant by
re-scoring, giving the same rows as before. A text altered in the CSV, or a folder
made by another engine, is refused with nothing written.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from tools import store_from_runs
from wash.experiments import load
from wash.experiments.driver import execute


@pytest.fixture()
def made(tmp_path, tiny_smollm2, tiny_gemma3):
    tpr = load("tpr")
    config = tpr.Config.from_preset("tiny", out=tmp_path / "tpr", schemes=("aar",))
    first = execute(tpr, config, command="test refill")
    first_rows = pd.read_csv(tmp_path / "tpr" / "tpr_runs.csv", keep_default_na=False, na_values=[""])
    store = tmp_path / "generations"
    texts = len(list(store.glob("*.json")))
    shutil.rmtree(store)  # a fresh clone has the CSV, not the scratch store
    return tpr, tmp_path / "tpr", store, texts, first_rows


def test_a_refilled_store_lets_a_grown_run_rescore_instead_of_generating(made, monkeypatch):
    tpr, folder, store, texts, first = made
    counts = store_from_runs.refill(folder)
    assert counts == {"texts": texts, "scores_checked": len(first), "written": texts, "already_stored": 0}
    again = store_from_runs.refill(folder)  # already there: neither checked nor written again
    assert again == {"texts": 0, "scores_checked": 0, "written": 0, "already_stored": texts}

    def no_generation(*args, **kwargs):
        raise AssertionError("a refilled text was generated again")

    monkeypatch.setattr("wash.experiments.generation.generate_run", no_generation)
    both = execute(tpr, tpr.Config.from_preset("tiny", out=folder, schemes=("aar", "aar:detector=release")),
                   command="test refill grown")
    rows = both.rows
    ours = rows[rows["scheme"] == "aar"].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, first, check_dtype=False)  # the CSV's rows, unchanged
    assert len(rows[rows["scheme"] == "aar:detector=release"]) == len(ours)


def test_one_scheme_s_jobs_hold_every_negative_text(made):
    _, folder, store, texts, first = made
    counts = store_from_runs.refill(folder, schemes=("aar",))
    assert counts["texts"] == texts  # one scheme ran here: all of its texts


def test_an_altered_text_or_another_engine_writes_nothing(made):
    _, folder, store, _, _ = made
    runs = folder / "tpr_runs.csv"
    rows = pd.read_csv(runs, keep_default_na=False, na_values=[""])
    original = rows.copy()
    rows.loc[0, "text"] = rows.loc[0, "text"] + " and then"
    rows.to_csv(runs, index=False)
    with pytest.raises(SystemExit, match="now against"):
        store_from_runs.refill(folder)
    assert not store.exists() or not list(store.glob("*.json"))
    original.to_csv(runs, index=False)
    meta_path = folder / "tpr_meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "engine": "000000000000"}))
    with pytest.raises(SystemExit, match="engine 000000000000"):
        store_from_runs.refill(folder)
    assert not store.exists() or not list(store.glob("*.json"))
