"""``tools/compiled_agreement.py``: the compiled backend's texts and probabilities against local's, recorded."""

from __future__ import annotations

import json


def test_the_script_compares_every_run_and_records_the_largest_gap(tmp_path, tiny_smollm2, tiny_gemma3):
    from tools import compiled_agreement

    out = tmp_path / "agreement.json"
    assert compiled_agreement.main(["--seeds", "0", "--tokens", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert len(report["runs"]) == 4  # two line-ups, eager and lazy, one seed
    assert report["command"].startswith("python -m tools.compiled_agreement --seeds 0 --tokens 3 --out")
    for variant in compiled_agreement.VARIANTS:
        s = report["summary"][variant]
        assert s["runs"] == 4 and 0 <= s["same_texts"] <= 4
        assert s["max_prob_gap"] == max(r[variant]["max_prob_gap"] for r in report["runs"]) < 1e-5
