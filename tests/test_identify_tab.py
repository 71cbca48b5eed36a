"""The Identify tab's engine side: real Water-Probe runs on the tiny models, three systems."""

from __future__ import annotations

import math

import pytest

from wash.errors import WashInputError
from wash.ui import identify as identify_ui

TINY = ["tiny-smollm2", "tiny-gemma3"]
ROWS = [["tiny-smollm2", "kgw", "1", ""], ["tiny-gemma3", "dipmark", "2", ""], ["tiny-smollm2", "unigram", "3", ""]]


def test_identify_probes_each_system_and_reports_bands(tiny_smollm2, tiny_gemma3):
    seen = []
    results = identify_ui.run_identify(ROWS, list(identify_ui.SYSTEMS), "fast", TINY,
                                       progress=lambda f, what: seen.append((f, what)))
    assert [name for name, _ in results] == list(identify_ui.SYSTEMS)
    alone, wash, clean = (r for _, r in results)
    assert alone.mode == "single" and alone.providers == ["tiny-smollm2:kgw:1"]
    assert wash.mode == "wash" and len(wash.providers) == 3 and clean.mode == "unwatermarked"
    for r in (alone, wash, clean):
        assert len(r.scores) == 3 and r.contexts == 20 and r.samples == 200
        assert r.band in ("high", "low", "none") and (math.isfinite(r.z) or r.band == "none")
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and 0 < fractions[0] and fractions[-1] == pytest.approx(1.0)
    frame = identify_ui.results_frame(results)
    assert list(frame["system"]) == list(identify_ui.SYSTEMS)
    fig = identify_ui.figure(results)
    assert len(fig.data) == 4 and sorted(s.y0 for s in fig.layout.shapes)[-2:] == [4.0, 10.0]
    text = identify_ui.summary(results)
    assert all(f"**{name}**" in text for name in identify_ui.SYSTEMS)


@pytest.mark.parametrize("systems, probe, match", [
    ([], "fast", "choose at least one system"),
    (["everything"], "fast", "unknown system 'everything'"),
    (["WASH ensemble"], "huge", "unknown probe 'huge'"),
])
def test_identify_refuses_bad_choices_by_name(systems, probe, match):
    with pytest.raises(WashInputError, match=match):
        identify_ui.run_identify(ROWS, systems, probe, TINY)
