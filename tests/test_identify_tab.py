"""The Identify tab's engine side: real Water-Probe runs on the tiny models, three systems."""

from __future__ import annotations

import math

import pytest

from wash.core.errors import WashInputError
from wash.ui import identify as identify_ui

TINY = ["tiny-smollm2", "tiny-gemma3"]
ROWS = [["tiny-smollm2", "kgw", "1", ""], ["tiny-gemma3", "dipmark", "2", ""], ["tiny-smollm2", "unigram", "3", ""]]


def test_identify_probes_each_system_and_reports_calibrated_verdicts(tiny_smollm2, tiny_gemma3):
    seen = []
    results = identify_ui.run_identify(ROWS, list(identify_ui.SYSTEMS), "fast", TINY,
                                       progress=lambda f, what: seen.append((f, what)))
    assert [p.name for p in results] == list(identify_ui.SYSTEMS)
    alone, wash, clean = (p.result for p in results)
    assert alone.mode == "single" and alone.providers == ["tiny-smollm2:kgw:1"]
    assert wash.mode == "wash" and len(wash.providers) == 3 and clean.mode == "unwatermarked"
    for p in results:
        r = p.result
        assert len(r.scores) == 3 and r.contexts == 20 and r.samples == 200
        assert r.band in ("high", "low", "none") and (math.isfinite(r.z) or r.band == "high")
        assert len(p.null) == identify_ui.NULL_RUNS and 0 < p.p <= 1 and r.s_low <= r.s <= r.s_high
    # provider 1 alone has its own line-up (one model); the ensemble and no watermark share one
    assert results[0].null != results[1].null and results[1].null == results[2].null
    # Holm over the systems sharing a null: provider 1 alone is its null's only test, the other two share one
    assert results[0].p_holm == results[0].p
    assert sorted(p.p_holm for p in results[1:]) == pytest.approx(
        sorted([min(1.0, 2 * min(results[1].p, results[2].p)), max(min(1.0, 2 * min(results[1].p, results[2].p)),
                                                                     max(results[1].p, results[2].p))]))
    assert all(p.identified == (p.p_holm < 0.05) for p in results)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and 0 < fractions[0] and fractions[-1] == pytest.approx(1.0)
    assert any("null" in what for _, what in seen)
    frame = identify_ui.results_frame(results)
    assert list(frame["system"]) == list(identify_ui.SYSTEMS)
    assert set(frame["verdict"]) <= {"watermarked at 5%", "no evidence of a watermark"}
    fig = identify_ui.figure(results)
    assert [t.type for t in fig.data[:2]] == ["bar", "scatter"] and len(fig.data) == 2 + 2 * len(results)
    text = identify_ui.summary(results)
    assert all(f"**{name}**" in text for name in identify_ui.SYSTEMS) and "p = " in text


@pytest.mark.parametrize("systems, probe, match", [
    ([], "fast", "choose at least one system"),
    (["everything"], "fast", "unknown system 'everything'"),
    (["WASH ensemble"], "huge", "unknown probe 'huge'"),
])
def test_identify_refuses_bad_choices_by_name(systems, probe, match):
    with pytest.raises(WashInputError, match=match):
        identify_ui.run_identify(ROWS, systems, probe, TINY)
