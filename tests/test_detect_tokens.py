"""The Detect tab's tokens-for-80% lines: how many more tokens each provider's statistic needs, read from
the committed curves of ``results/see-through`` (``wash.reporting.see_through.tokens_needed``), never
extrapolated.

The sentences are checked on a small hand-made table written where the committed one lies, with and
without the prompt-bootstrap interval columns (``tokens_lo``, ``tokens_hi``) a re-scoring adds; the tab's
lines on a real call of its handler on the tiny models.
"""

from __future__ import annotations

import copy
import math
import pickle
from pathlib import Path

import pandas as pd
import pytest

from wash.engine import ProviderDetection, ProviderSpec
from wash.reporting import see_through
from wash.ui.detect import TOKENS_TITLE, Verdicts, tokens_note

NAN = math.nan
#: (source, scheme, statistic, n, tokens_for_80, tpr_at_longest, longest_cut, tokens_lo, tokens_hi)
CURVES = [
    ("paper", "aar", "lr-mix", 1, 16.4, 1.0, 200, 12.0, 21.0),
    ("paper", "aar", "lr-mix", 3, 52.3, 0.97, 200, 40.0, NAN),
    ("paper", "aar", "lr-mix", 5, 97.8, 0.84, 200, 71.0, 140.0),
    ("paper", "kgw", "sum", 3, 150.2, 0.83, 200, 110.0, NAN),
    ("paper", "kgw", "sum", 5, NAN, 0.64, 200, NAN, NAN),
    # the anchor line-up's curves are not the Detect tab's: a KGW that reaches 80% at N = 5 here
    ("anchor", "kgw", "sum", 5, 40.0, 0.95, 200, 30.0, 55.0),
    ("anchor", "aar:form=soft", "lr-mix", 5, 60.0, 0.9, 200, 50.0, 80.0),
]
WHERE = "tpr-paper texts"


def write_curves(root: Path, interval: bool = True) -> Path:
    """``root/see-through/see_through_tokens.csv`` from ``CURVES`` (without the interval columns, as the
    table was committed before the re-scoring, when ``interval`` is False)."""
    t = pd.DataFrame(CURVES, columns=["source", "scheme", "statistic", "n", "tokens_for_80", "tpr_at_longest",
                                      "longest_cut", "tokens_lo", "tokens_hi"])
    if not interval:
        t = t.drop(columns=["tokens_lo", "tokens_hi"])
    folder = root / see_through.FOLDER
    folder.mkdir(parents=True)
    t.to_csv(folder / see_through.TOKENS_FILE, index=False)
    return root


@pytest.fixture
def root(tmp_path) -> Path:
    return write_curves(tmp_path / "with-interval")


@pytest.fixture
def bare_root(tmp_path) -> Path:
    return write_curves(tmp_path / "without-interval", interval=False)


def test_reached_and_enough_quotes_the_interval_where_the_table_has_it(root, bare_root) -> None:
    assert see_through.tokens_needed("aar", "lr-mix", 5, 120, root) == (
        f"80% TPR at N = 5 needs about 98 tokens [71, 140] (`lr-mix`, {WHERE}); this text has 120 tokens: "
        "enough on average")
    assert see_through.tokens_needed("aar", "lr-mix", 5, 120, bare_root) == (
        f"80% TPR at N = 5 needs about 98 tokens (`lr-mix`, {WHERE}); this text has 120 tokens: "
        "enough on average")
    # exactly as many as the curve needs is enough
    assert see_through.tokens_needed("aar", "lr-mix", 5, 98, root).endswith("enough on average")


def test_reached_with_too_few_tokens_says_how_many_more(root, bare_root) -> None:
    assert see_through.tokens_needed("aar", "lr-mix", 5, 40, root) == (
        f"80% TPR at N = 5 needs about 98 tokens [71, 140] (`lr-mix`, {WHERE}); this text has 40 tokens: "
        "about 58 more")
    # an upper end past the longest prefix
    assert see_through.tokens_needed("aar", "lr-mix", 3, 50, root) == (
        f"80% TPR at N = 3 needs about 52 tokens [40, > 200] (`lr-mix`, {WHERE}); this text has 50 tokens: "
        "about 2 more")
    assert see_through.tokens_needed("aar", "lr-mix", 3, 50, bare_root).endswith("this text has 50 tokens: "
                                                                                 "about 2 more")


def test_a_curve_that_never_reaches_80_percent_says_how_far_it_got(root) -> None:
    """KGW's paper curve stays at 64% by 200 tokens at N = 5 (the anchor line-up's reaches 80% at 40: not
    the one quoted)."""
    assert see_through.tokens_needed("kgw", "sum", 5, 150, root) == (
        f"at N = 5 the measured texts reach only 64% by 200 tokens (`sum`, {WHERE}): how many more this "
        "needs is not measured")


def test_an_n_not_measured_quotes_the_nearest_measured_n_on_each_side(root, bare_root) -> None:
    assert see_through.tokens_needed("aar", "lr-mix", 4, 60, root) == (
        f"N = 4 is not measured; at N = 3: 52 tokens [40, > 200], at N = 5: 98 tokens [71, 140] "
        f"(`lr-mix`, {WHERE}); this text has 60 tokens")
    assert see_through.tokens_needed("aar", "lr-mix", 4, 60, bare_root) == (
        f"N = 4 is not measured; at N = 3: 52 tokens, at N = 5: 98 tokens (`lr-mix`, {WHERE}); "
        "this text has 60 tokens")
    assert see_through.tokens_needed("kgw", "sum", 4, 60, root) == (
        f"N = 4 is not measured; at N = 3: 150 tokens [110, > 200], at N = 5: only 64% by 200 tokens "
        f"(`sum`, {WHERE}); this text has 60 tokens")
    # past the largest measured N, one side only
    assert see_through.tokens_needed("aar", "lr-mix", 7, 60, root) == (
        f"N = 7 is not measured; at N = 5: 98 tokens [71, 140] (`lr-mix`, {WHERE}); this text has 60 tokens")


@pytest.mark.parametrize("scheme, statistic, says", [
    ("kgw", "hc", "no committed tokens-for-80% curve for KGW under `hc` (tpr-paper texts)"),
    ("aar", "lr-lineup", "no committed tokens-for-80% curve for AAR under `lr-lineup` (tpr-paper texts)"),
    ("no-such-scheme", "sum", "no committed tokens-for-80% curve for no-such-scheme under `sum` "
                              "(tpr-paper texts)"),
    ("none", "sum", "an unwatermarked provider (scheme `none`) has no tokens-for-80% curve"),
])
def test_a_missing_curve_says_which_and_invents_none(root, scheme, statistic, says) -> None:
    assert see_through.tokens_needed(scheme, statistic, 5, 100, root) == says


def test_without_results_see_through_there_is_no_sentence(tmp_path) -> None:
    assert see_through.tokens_needed("aar", "lr-mix", 5, 100, tmp_path) is None
    assert tokens_note(_verdicts([_row("aar", 10)], [_spec("aar")], "lr-mix", ["lr-mix"]), tmp_path) == ""


# -- the tab's lines ---------------------------------------------------------------------------------------
def _row(scheme: str, tokens: int, label: str = "P1") -> ProviderDetection:
    return ProviderDetection(provider=f"{label} tiny-smollm2/{scheme}#1", model="tiny-smollm2", scheme=scheme,
                             key=1, z=0.0, p=0.5, tokens_scored=tokens, detected=False,
                             per_token=[None] * tokens, tokens=["t"] * tokens)


def _spec(scheme: str, params: tuple[tuple[str, str], ...] = (), coordinated: bool = False) -> ProviderSpec:
    return ProviderSpec(model="tiny-smollm2", scheme=scheme, key=1, params=params, coordinated=coordinated)


def _verdicts(rows, specs, statistic: str, used: list[str]) -> Verdicts:
    v = Verdicts(rows)
    v.statistic, v.specs, v.statistics = statistic, specs, used
    return v


def test_the_tab_lists_one_line_per_provider_with_n_the_providers_listed(root) -> None:
    """Three providers: N = 3. A statistic that does not cover a scheme says so and quotes the sum the
    verdict used; non-default parameters and a coordinated provider are named, not matched."""
    rows = [_row("aar", 40, "P1"), _row("kgw", 160, "P2"), _row("aar", 60, "P3")]
    specs = [_spec("aar"), _spec("kgw"), _spec("aar", (("form", "soft"),))]
    note = tokens_note(_verdicts(rows, specs, "lr-mix", ["lr-mix", "sum", "lr-mix"]), root)
    assert note.split("\n") == [
        TOKENS_TITLE, "",
        f"* P1 tiny-smollm2/aar#1: 80% TPR at N = 3 needs about 52 tokens [40, > 200] (`lr-mix`, {WHERE}); "
        "this text has 40 tokens: about 12 more",
        "* P2 tiny-smollm2/kgw#1: `lr-mix` does not cover KGW, whose verdict is its own sum: 80% TPR at "
        f"N = 3 needs about 150 tokens [110, > 200] (`sum`, {WHERE}); this text has 160 tokens: enough on "
        "average",
        f"* P3 tiny-smollm2/aar#1: 80% TPR at N = 3 needs about 52 tokens [40, > 200] (`lr-mix`, {WHERE}); "
        "this text has 60 tokens: enough on average (measured with the scheme's defaults; this provider "
        "sets form=soft)",
    ]
    coordinated = tokens_note(_verdicts([_row("kgw", 60)], [_spec("kgw", coordinated=True)], "sum", ["sum"]),
                              root)
    assert coordinated.endswith("* P1 tiny-smollm2/kgw#1: a coordinated provider has no committed "
                                "tokens-for-80% curve (tpr-paper texts: independent providers)")


def test_the_lines_need_what_scored_the_rows_and_it_survives_the_apps_copies(root) -> None:
    """Gradio keeps the rows in a State (deep-copied) and ZeroGPU pickles them back from its worker; a
    plain list (the State before the first score) says nothing."""
    assert tokens_note([_row("aar", 60)], root) == "" and tokens_note([], root) == ""
    v = _verdicts([_row("aar", 60)], [_spec("aar")], "lr-mix", ["lr-mix"])
    for copied in (copy.deepcopy(v), pickle.loads(pickle.dumps(v))):
        assert isinstance(copied, Verdicts) and copied == v
        assert tokens_note(copied, root) == tokens_note(v, root) != ""


def test_the_detect_handler_shows_each_providers_line(tiny_smollm2, monkeypatch) -> None:
    """A real Score click on the tiny models (``hc``: no forward), then the step that fills the lines: AAR
    reads its ``hc`` curve at N = 2, KGW (which ``hc`` does not cover) its sum's, from the committed table."""
    from wash.reporting.results_tables import RESULTS_ROOT
    from wash.ui import handlers

    if see_through.tokens_curves(RESULTS_ROOT) is None:
        pytest.skip("results/see-through is not committed")
    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2")
    text = ("The old lighthouse keeper climbed the stairs one last time, and as the storm rolled in he lit "
            "the lamp for a ship that would never come.")
    table = [["tiny-smollm2", "aar", "7", ""], ["tiny-smollm2", "kgw", "8", ""]]
    frame, _choices, _segments, rows = handlers.run_detect(text, table, 4.0, statistic="hc")
    assert len(frame) == 2 and [r.scheme for r in rows] == ["aar", "kgw"]
    note = handlers.show_tokens_needed(rows)
    aar = see_through.tokens_needed("aar", "hc", 2, len(rows[0].tokens))
    kgw = see_through.tokens_needed("kgw", "sum", 2, len(rows[1].tokens))
    assert aar.startswith("N = 2 is not measured; at N = 1: ") and "`hc`" in aar
    assert note.split("\n")[2:] == [
        f"* {rows[0].provider}: {aar}",
        f"* {rows[1].provider}: `hc` does not cover KGW, whose verdict is its own sum: {kgw}"]


def test_the_app_fills_the_lines_after_a_score_and_keeps_detects_outputs(monkeypatch) -> None:
    """app.py: the lines are a step of their own after a successful Score (no model, so outside the GPU
    call), reading the rows that Score wrote; ``/detect`` answers what it answered before."""
    import app
    from wash.ui import handlers
    from wash.ui.preload import Preload

    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2,tiny-gemma3")
    demo = app.build_demo(Preload([]))
    (score,) = [f for f in demo.fns.values() if f.api_name == "detect"]
    (lines,) = [f for f in demo.fns.values() if f.fn is handlers.show_tokens_needed]
    assert [getattr(b, "elem_id", None) for b in score.outputs] == ["detect-table", "detect-provider",
                                                                     "detect-tokens", None]
    assert lines.trigger_after == score._id and lines.trigger_only_on_success
    assert lines.inputs == [score.outputs[-1]]
    assert [b.elem_id for b in lines.outputs] == ["detect-tokens-needed"]
