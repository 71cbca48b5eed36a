"""Unit tests of the app's pure helpers (``wash/ui``): no server, no browser.

They pin what the widgets are fed: providers-table parsing and its error
messages, presets, figures with the expected traces (and the explanation of a
lazy step's missing distributions), the Theorem 1 simulation's qualitative
behaviour, token colouring, tables, the model preload, and the generation
driver (throttling, lock-step comparison, Stop, waiting for the preload, lazy
forwards) on the tiny models.
"""

from __future__ import annotations

import json
import threading

import pytest

from wash.engine.config import MAX_NEW_TOKENS_CAP, MAX_PROVIDERS, MODE_TABLE, ProviderSpec
from wash.core.errors import WashInputError
from wash.engine.events import (ProviderDetection, RoutingSummary, RunResult, StepEvent, Timing)
from wash.ui.preload import Preload
from wash.ui import handlers, plots, tables, texts, theory, tokens
from wash.ui import providers as ui_providers
from wash.content.presets import PRESETS, preset_names
from wash.ui.providers import add_row, build_config, preset_rows, remove_last_row, rows_to_specs
from wash.ui.run import (RunRecord, Throttle, comparison_config, comparison_mode, comparison_streams, drive,
                         lockstep, preload_markdown, single_config)
from wash.ui.settings import app_models, check_app_model

TINY = ["tiny-smollm2", "tiny-gemma3"]
ROWS = [["tiny-smollm2", "kgw", "1", ""], ["tiny-gemma3", "aar", "2", ""],
        ["tiny-smollm2", "dipmark", "3", ""]]


# -- providers table, presets, settings ----------------------------------------------
def test_rows_parse_into_specs_and_skip_blank_rows():
    specs = rows_to_specs(ROWS + [["", "", "", ""]], TINY)
    assert [str(s) for s in specs] == ["tiny-smollm2:kgw:1", "tiny-gemma3:aar:2", "tiny-smollm2:dipmark:3"]
    api_payload = {"headers": ["model", "scheme", "key", "params"],
                   "data": [["tiny-gemma3", "kgw", 42.0, ""]]}
    assert str(rows_to_specs(api_payload, TINY)[0]) == "tiny-gemma3:kgw:42"
    coordinated = rows_to_specs([["tiny-gemma3", "kgw", "5", "coordinated=true"]], TINY)[0]
    assert coordinated.coordinated


@pytest.mark.parametrize("row, fragment", [
    (["tiny-smollm2", "kgw", "abc", ""], "not an integer"),
    (["tiny-smollm2", "kgw", "1.5", ""], "not an integer"),
    (["mystery-model", "kgw", "1", ""], "unknown model 'mystery-model'"),
    (["smollm2", "kgw", "1", ""], "this app offers: tiny-smollm2, tiny-gemma3"),
    (["tiny-smollm2", "nope", "1", ""], "unknown watermark scheme"),
    (["tiny-smollm2", "kgw", "1", "gamma=x"], "must be float"),
    (["", "kgw", "1", ""], "choose a model"),
])
def test_bad_rows_name_their_row_and_problem(row, fragment):
    with pytest.raises(WashInputError, match="provider row 2") as err:
        rows_to_specs([ROWS[0], row], TINY)
    assert fragment in str(err.value)


def test_hub_ids_need_the_external_switch(monkeypatch):
    monkeypatch.delenv("WASH_ALLOW_EXTERNAL_MODELS", raising=False)
    with pytest.raises(WashInputError, match="WASH_ALLOW_EXTERNAL_MODELS"):
        check_app_model("org/some-model", TINY)
    monkeypatch.setenv("WASH_ALLOW_EXTERNAL_MODELS", "1")
    assert check_app_model("org/some-model", TINY) == "org/some-model"


def test_app_models_come_from_the_environment(monkeypatch):
    monkeypatch.delenv("WASH_APP_MODELS", raising=False)
    assert app_models() == ["smollm2", "gemma3"]
    monkeypatch.setenv("WASH_APP_MODELS", "tiny-smollm2, tiny-gemma3")
    assert app_models() == TINY


@pytest.mark.parametrize("kwargs, fragment", [
    ({"prompt": "   "}, "the prompt is empty"),
    ({"prompt": "x" * 5000}, "the prompt is too long"),
    ({"table": []}, "no provider given"),
    ({"table": ROWS * 3}, f"at most {MAX_PROVIDERS}"),
    ({"max_new": MAX_NEW_TOKENS_CAP + 1}, f"1 to {MAX_NEW_TOKENS_CAP}"),
    ({"max_new": 0}, f"1 to {MAX_NEW_TOKENS_CAP}"),
    ({"seed": 1.5}, "seed must be an integer"),
    ({"mode": "turbo"}, "unknown mode"),
    ({"forwards": "sideways"}, "unknown forwards 'sideways' (accepted: eager, lazy)"),
])
def test_build_config_rejects_bad_input(kwargs, fragment):
    args = {"table": ROWS, "prompt": "Hello", "max_new": 8, "temperature": 1.0, "seed": 0, "mode": "wash",
            "forwards": "eager"}
    args.update(kwargs)
    with pytest.raises(WashInputError) as err:
        build_config(args["table"], args["prompt"], args["max_new"], args["temperature"], args["seed"],
                     args["mode"], TINY, forwards=args["forwards"])
    assert fragment in str(err.value)


def test_build_config_accepts_widget_values():
    config = build_config(ROWS, "Hello", 12.0, 0.7, 3.0, "naive", TINY)
    assert (config.max_new_tokens, config.seed, config.mode, len(config.providers)) == (12, 3, "naive", 3)
    assert config.forwards == "eager"
    assert build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, forwards="lazy").forwards == "lazy"


def test_serving_controls_reach_the_config_and_the_profile_follows_them():
    config = build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, top_k=10.0, top_p=1.0)
    assert (config.top_k, config.profile) == (10, "paper")
    with pytest.raises(WashInputError, match="top-k must be an integer"):
        build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, top_k=2.5)
    with pytest.raises(WashInputError, match="top-p must be in"):
        build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, top_p=0)
    assert handlers.apply_profile("paper") == (1.0, 10, 1.0)
    assert handlers.match_profile(1.0, 10, 1.0) == "paper"
    assert handlers.match_profile(1.0, 0, 1.0) == "open"
    assert handlers.match_profile(0.7, 10, 1.0) == "custom"


def test_mode_texts_come_from_the_mode_table():
    about = texts.reference_markdown()
    for mode in MODE_TABLE.values():
        assert f"- **{mode.name}**: {mode.description}." in about
        assert mode.description in texts.mode_info(mode.name, "eager")
    assert "p̄, p* and the other providers' p_i are never computed" in texts.mode_info("wash", "lazy")
    assert not hasattr(ui_providers, "spec_to_row")


def test_add_and_remove_rows():
    rows = add_row(ROWS, "tiny-gemma3", "kgw", "9", "", True)
    assert rows[-1] == ["tiny-gemma3", "kgw", "9", "coordinated=true"]
    assert remove_last_row(rows) == ROWS
    with pytest.raises(WashInputError, match="at most 8"):
        add_row([ROWS[0]] * MAX_PROVIDERS, "tiny-gemma3", "kgw", "1")


def test_presets_resolve_to_offered_models_and_parse():
    # the presets with models of their own (the hub-only ones) are not offered with the tiny models
    assert preset_names(TINY) == [p.name for p in PRESETS if not p.models] and len(preset_names(TINY)) == 7
    for name in preset_names(TINY):
        rows, mode = preset_rows(name, TINY)
        specs = rows_to_specs(rows, TINY)
        assert 1 <= len(specs) <= MAX_PROVIDERS and mode in ("wash", "single")
        # what a click sets is what build_config accepts (the rule included)
        table, mode, aggregate, tokens, info = handlers.make_preset_handler(name, TINY)()
        config = build_config(table, "Hello", tokens, 1.0, 0, mode, TINY, aggregate=aggregate)
        assert config.aggregate == aggregate and info.startswith(f"**{name}.**")
    five, _ = preset_rows("Five providers, five schemes", TINY)
    assert len({r[1] for r in five}) == 5
    trade = [p for p in PRESETS if p.aggregate != "mean"]
    assert [p.rows for p in trade] == [PRESETS[0].rows]  # the paper setting under a robust centre
    paper, _ = preset_rows(PRESETS[0].name, TINY)
    assert {r[0] for r in paper} == set(TINY) and len(paper) == 3
    keys, _ = preset_rows("One model, 5 independent keys", TINY)
    assert len({r[2] for r in keys}) == 5 and {r[0] for r in keys} == {"tiny-smollm2"}
    coordinated, _ = preset_rows("Coordinated watermark (control)", TINY)
    assert all(s.coordinated for s in rows_to_specs(coordinated, TINY))
    anchor, _ = preset_rows("The release's attack: one watermarked model diluted by two open ones", TINY)
    assert [s.scheme for s in rows_to_specs(anchor, TINY)] == ["kgw", "none", "none"]  # one anchor
    assert {r[0] for r in anchor} == set(TINY)  # the partners keep the mixed base models
    single = preset_rows("Single watermarked model", ["smollm2"])
    assert single == ([["smollm2", "kgw", "15485863", ""]], "single")


# -- figures ------------------------------------------------------------------------
def _step(i: int, routed: bool = False, chosen: int | None = None, n: int = 3) -> StepEvent:
    """An eager step (chosen None), a routed one, or a lazy one (chosen set, not routed)."""
    probs = [0.5, 0.3, 0.2]
    return StepEvent(step=i, token=f" t{i}", union_id=10, routed=routed, span_id=0 if routed else None,
                     specialists=[1] if routed else [], chosen=chosen, candidates=[" a", " b", " a"],
                     candidate_ids=[10, 11, 12],
                     provider_probs=[probs if chosen in (None, k) else None for k in range(n)],
                     average_probs=None if chosen is not None else probs,
                     consensus_probs=None if chosen is not None else probs,
                     linf=None if chosen is not None else 0.0123, live_z=[0.1 * i, None, 4.5], elapsed_ms=1.0)


LABELS = ["P1 a/kgw#1", "P2 b/aar#2", "P3 a/dipmark#3"]


def test_z_figure_has_a_line_per_provider_and_both_thresholds():
    steps = [_step(i) for i in range(5)]
    fig = plots.z_figure(LABELS, steps)
    assert [t.name for t in fig.data] == LABELS
    assert list(fig.data[0].x) == [1, 2, 3, 4, 5] and fig.data[1].y[0] is None
    assert sorted(s.y0 for s in fig.layout.shapes) == [2.0, 4.0]
    compared = plots.z_figure(LABELS, steps, steps[:3], "P1 alone (single mode)")
    assert len(compared.data) == 4 and compared.data[-1].line.dash == "dash"
    expected = plots.z_figure(LABELS, steps, steps[:3], "P1 alone (single mode)", expect_n=3)
    alone, scaled = expected.data[-2], expected.data[-1]
    assert scaled.line.dash == "dot" and scaled.name.endswith("/ 3")
    assert [y / 3 for y in alone.y] == list(scaled.y)


def test_distribution_figure_groups_providers_average_and_consensus():
    fig = plots.distribution_figure(_step(2), LABELS)
    assert len(fig.data) == 5 and fig.layout.barmode == "group"
    assert fig.data[3].name.startswith("p̄") and fig.data[4].name.startswith("p*")
    assert "‖p̄ − p*‖∞ = 0.0123" in fig.layout.title.text
    assert fig.data[0].x[0] == "→ ␣a" and len(set(fig.data[0].x)) == 3  # duplicates kept apart
    routed = plots.distribution_figure(_step(3, routed=True, chosen=1), LABELS)
    assert [t.name for t in routed.data] == ["p2: P2 b/aar#2"] and "routed" in routed.layout.title.text
    assert "specialist P2 b/aar#2" in routed.layout.annotations[0].text.replace("<br>", " ")


def test_a_lazy_step_says_why_the_other_distributions_are_missing():
    lazy = _step(4, chosen=2)
    fig = plots.distribution_figure(lazy, LABELS, lazy=True)
    assert [t.name for t in fig.data] == ["p3: P3 a/dipmark#3"]  # nothing empty or made up
    assert "lazy step, only P3 a/dipmark#3's distribution was computed" in fig.layout.title.text
    note = fig.layout.annotations[0].text.replace("<br>", " ")
    assert "p̄, p* and the other providers' p_i were never computed" in note and "Lazy forwards" in note
    info = tokens.describe_step(lazy, LABELS, lazy=True)
    assert "drawn from **P3 a/dipmark#3** alone, picked uniformly" in info
    assert "*Not computed on this step:* p̄, p* and the other providers' distributions" in info
    assert tokens.token_label(lazy) is None  # every vocabulary holds it: not coloured as routed
    lazy_routed = plots.distribution_figure(_step(5, routed=True, chosen=1), LABELS, lazy=True)
    assert "Lazy forwards, routed span" in lazy_routed.layout.annotations[0].text.replace("<br>", " ")
    assert not plots.distribution_figure(_step(2), LABELS, lazy=True).layout.annotations


# -- theory ---------------------------------------------------------------------------
def test_theory_independent_shrinks_coordinated_and_biased_do_not():
    result = theory.simulate(vocab_size=2000, xi=0.5, max_n=64, trials=6, seed=1)
    ind, coord, biased = (result.mean[k] for k in ("independent", "coordinated", "biased"))
    assert ind[-1] < 0.3 * ind[0]
    assert all(b <= a * 1.15 for a, b in zip(ind[::8], ind[8::8]))  # falls (up to noise)
    assert coord[-1] == pytest.approx(coord[0], rel=1e-6)
    assert biased[-1] > 0.75 * biased[15] and biased[-1] > 2 * ind[-1]  # a plateau above independent
    assert result.seconds < 2.0
    assert len(result.reference) == 64 and result.reference[0] > result.reference[-1]
    fig = plots.theory_figure(result.ns, result.mean, None, result.reference, "shape")
    assert [t.name for t in fig.data] == ["independent", "coordinated", "biased", "shape"]


def test_theory_rejects_out_of_range_settings():
    with pytest.raises(WashInputError, match="ξ"):
        theory.simulate(xi=1.5)
    with pytest.raises(WashInputError, match="largest N"):
        theory.simulate(max_n=200)


def test_theory_tail_shortcut_is_exact():
    import numpy as np

    p_star = theory.consensus(3000).astype(np.float32)
    delta = theory._perturbations("independent", np.random.default_rng(0), 2, 16, 3000, 0.8, 0.5)
    fast = theory._distances(p_star, delta)
    full = np.abs(np.cumsum(p_star * np.exp(delta) / (p_star * np.exp(delta)).sum(-1, keepdims=True), axis=1)
                  / np.arange(1, 17)[None, :, None] - p_star).max(-1)
    assert np.allclose(fast, full, rtol=1e-4)


# -- tokens and tables ---------------------------------------------------------------------
def test_highlight_segments_label_routed_tokens_only():
    steps = [_step(0), _step(1, routed=True), _step(2, routed=True, chosen=1)]
    assert tokens.highlight_segments(steps) == [(" t0", None), (" t1", tokens.ROUTED_FROM_AVERAGE),
                                                (" t2", "routed: P2")]
    assert "specialist **P2 b/aar#2**" in tokens.describe_step(steps[2], LABELS)
    assert set(tokens.colour_map(plots.PALETTE, 3)) == {tokens.ROUTED_FROM_AVERAGE, "routed: P1",
                                                         "routed: P2", "routed: P3"}


def test_score_segments_use_the_schemes_null_not_the_texts_own_spread():
    green = tokens.score_segments(["a", "b", "c"], [1.0, 0.0, None], (0.5, 0.5))
    assert green == [("a", 0.5), ("b", -0.5), ("c", None)]  # +-1 sd, full colour at 2 sd
    # AAR's Exp(1) null: a score of 1 is no evidence, 5 is full colour, whatever the rest of the text
    assert tokens.score_segments(["a", "b"], [1.0, 5.0], (1.0, 1.0)) == [("a", 0.0), ("b", 1.0)]
    assert tokens.score_segments(["a", "b"], [1.0, 1.0], (1.0, 1.0)) == [("a", 0.0), ("b", 0.0)]
    assert tokens.score_segments(["a", "b"], [None, None], None) == [("a", None), ("b", None)]


@pytest.mark.parametrize("scheme", ["kgw", "unigram", "dipmark", "waterbag", "aar", "synthid", "exp-edit"])
def test_unwatermarked_text_is_not_coloured_as_marked(scheme, tiny_smollm2):
    """Real detectors on a random-token text: the mean colour stays near 0 for every scheme."""
    import random

    from wash.engine.providers import build_providers
    from wash.detection.per_text import detect_ids

    provider = build_providers([ProviderSpec.parse(f"tiny-smollm2:{scheme}:5")]).providers[0]
    rng = random.Random(3)
    ids = [rng.randrange(1000, 20000) for _ in range(300)]
    det = detect_ids(provider, ids)
    values = [v for _, v in tokens.score_segments(det.tokens, det.per_token, det.token_null) if v is not None]
    if scheme == "exp-edit":
        assert det.token_null is None and not values and "nothing is coloured" in tokens.evidence_note(det)
        return
    assert len(values) > 100 and abs(sum(values) / len(values)) < 0.1
    assert "own tokenisation" in tokens.evidence_note(det)


def _result(text: str = "hello") -> RunResult:
    det = ProviderDetection(provider="P1 a/kgw#1", model="a", scheme="kgw", key=1, z=5.123, p=1.5e-7,
                            tokens_scored=30, detected=True)
    return RunResult(text=text, prompt="p", mode="wash", seed=0, providers=[], tokens=[], spans=[],
                     routing=RoutingSummary(routed_token_fraction=0.2, mean_routed_span_length=2.0,
                                            routed_spans=1, tokens=10),
                     detection=[det],
                     timing=Timing(per_token_ms=200.0, median_token_ms=190.0, total_s=2.0, load_s=0.0,
                                   forward_calls={"a": 11, "b": 4}, ids_fed={}, forward_s={}),
                     model_ids={}, finish_reason="length", settings={"forwards": "lazy"})


def test_detection_table_and_routing_summary(tmp_path):
    single = _result()
    single.mode = "single"
    frame = tables.combined_detection(_result(), single)
    assert list(frame.columns) == tables.DETECTION_COLUMNS and len(frame) == 2
    assert frame.loc[0, "detected (z > 4)"] == "yes" and frame.loc[1, "run"].startswith("single")
    text = tables.routing_markdown(_result(), first_token_s=1.25)
    assert "5.00 tokens/s" in text and "20.0%" in text and "first token 1.2" in text
    assert "lazy forwards" in text and "Forward calls per base model: a 11, b 4." in text
    path = tables.write_csv(frame)
    assert open(path, encoding="utf-8").readline().startswith("run,provider,model")


# -- the generation driver --------------------------------------------------------------
def test_throttle_fires_every_n_tokens_or_after_the_interval():
    now = [0.0]
    t = Throttle(every_tokens=4, every_seconds=0.25, clock=lambda: now[0])
    assert [t.tick() for _ in range(8)] == [False, False, False, True] * 2
    now[0] = 1.0
    assert t.tick()


def test_throttle_keeps_slow_redraws_to_their_share_of_the_time():
    """A redraw dearer than a token would otherwise run after every token."""
    now = [0.0]
    t = Throttle(every_tokens=1, every_seconds=0.25, share=0.25, clock=lambda: now[0])
    assert t.tick()
    now[0] += 0.4  # the redraw took 0.4 s: the next waits 1.2 s more
    t.drawn()
    fired = []
    for _ in range(20):  # tokens every 0.1 s
        now[0] += 0.1
        fired.append(t.tick())
    assert fired.index(True) == 11  # 1.2 s after the redraw ended, not at the next token


def test_lockstep_alternates_until_every_stream_ends():
    out = list(lockstep({"a": iter([1, 2, 3]), "b": iter([10])}))
    assert out == [("a", 1), ("b", 10), ("a", 2), ("a", 3)]


def _config(max_new: int = 10, mode: str = "wash"):
    return build_config(ROWS, "The lighthouse keeper", max_new, 1.0, 3, mode, TINY)


def test_drive_matches_the_engine_and_records_every_event(tiny_smollm2, tiny_gemma3):
    from wash.engine.ensemble import generate

    config = _config()
    views = list(drive(config, compare=True, stop=threading.Event()))
    record = views[-1].record
    assert views[-1].finished and record.finished and record.first_token_s is not None
    assert record.results["wash"].text == generate(_config()).text
    assert record.results["single"].text == generate(single_config(_config())).text
    assert len(record.steps["wash"]) == record.results["wash"].routing.tokens
    assert all(isinstance(s, StepEvent) for s in record.steps["wash"])
    assert record.load_messages and record.preload_wait_s is None
    dumped = json.loads(open(tables.write_run_json(record.to_json()), encoding="utf-8").read())
    assert dumped["events"][-1]["event"] == "finished" and dumped["single_events"][0]["event"] == "step"
    assert dumped["events"][-1]["result"]["text"] == record.results["wash"].text
    assert dumped["settings"]["forwards"] == "eager"
    assert any(v.refresh for v in views[:-1])


def test_comparison_switch_runs_a_baseline_beside_wash(tiny_smollm2, tiny_gemma3):
    from wash.engine.ensemble import generate

    config = _config(max_new=5)
    record = list(drive(config, compare="toblend", stop=threading.Event()))[-1].record
    assert record.finished and record.compare == "toblend" and record.settings["compare_with"] == "toblend"
    other = record.results["single"]
    assert other.mode == "toblend" and other.text == generate(comparison_config(_config(max_new=5), "toblend")).text
    assert record.single_label.endswith("under toblend")
    frame = tables.combined_detection(record.results["wash"], other)
    assert set(frame["run"]) == {"wash", "toblend"}
    # older API callers' booleans still mean single / off
    assert comparison_mode(True) == "single" and comparison_mode(False) is None and comparison_mode("off") is None
    with pytest.raises(WashInputError, match="unknown comparison 'paraphrase'"):
        list(drive(_config(), compare="paraphrase", stop=threading.Event()))


def test_comparison_switch_runs_the_unwatermarked_providers_and_provider_1_alone_together(tiny_smollm2,
                                                                                           tiny_gemma3):
    """``single+unwatermarked``: two comparison streams, each the engine's own run on the same prompt and seed."""
    from wash.engine.ensemble import generate
    from wash.ui import gpu

    assert comparison_streams("single+unwatermarked") == {"single": "single", "unwatermarked": "unwatermarked"}
    assert comparison_streams("unwatermarked") == {"unwatermarked": "unwatermarked"}
    assert comparison_streams(True) == {"single": "single"} and comparison_streams("off") == {}
    record = list(drive(_config(max_new=6), compare="single+unwatermarked", stop=threading.Event()))[-1].record
    assert record.finished and record.compare == "single" and record.unmarked
    assert record.settings["compare_with"] == "single+unwatermarked"
    unmarked = record.results["unwatermarked"]
    assert unmarked.text == generate(comparison_config(_config(max_new=6), "unwatermarked")).text
    assert record.results["single"].text == generate(single_config(_config(max_new=6))).text
    assert [d.provider for d in unmarked.detection] == record.labels  # each provider's detector scores it
    frame = tables.combined_detection(record.results["wash"], record.results["single"], unmarked)
    assert list(dict.fromkeys(frame["run"])) == ["wash", "single (P1 alone)", "unwatermarked"]
    assert "Comparison run (unwatermarked)" in tables.routing_markdown(record.results["wash"], None, None, unmarked)
    assert record.to_json()["unwatermarked_events"][-1]["event"] == "finished"
    fig = plots.z_figure(record.labels, record.steps["wash"], record.steps["single"], record.single_label,
                         expect_n=3, unmarked_steps=record.steps["unwatermarked"])
    grey = [t for t in fig.data if t.name == plots.UNMARKED_LEGEND]
    assert len(grey) == len(record.labels) and [t.showlegend for t in grey] == [True, False, False]
    assert [list(t.y) for t in grey] == [[s.live_z[i] for s in record.steps["unwatermarked"]] for i in range(3)]
    # unwatermarked mode compared with itself shows nothing twice; the GPU time counts every stream
    same = list(drive(_config(max_new=2, mode="unwatermarked"), compare="unwatermarked",
                      stop=threading.Event()))[-1].record
    assert same.comparisons == {} and same.finished
    seconds = [gpu.generate_seconds(ROWS, "p", 200, 1.0, 0, "wash", c)
               for c in ("off", "single", "single+unwatermarked")]
    assert seconds == [gpu.BASE_S + round(200 * n * gpu.TOKEN_S) for n in (3, 4, 7)]


def test_drive_lazy_forwards_draw_from_one_provider_per_step(tiny_smollm2, tiny_gemma3):
    from wash.engine.ensemble import generate

    config = build_config(ROWS, "The lighthouse keeper", 8, 1.0, 3, "wash", TINY, forwards="lazy")
    record = list(drive(config, compare=False, stop=threading.Event()))[-1].record
    assert record.lazy and record.results["wash"].text == generate(config).text
    steps = record.steps["wash"]
    assert steps and all(s.chosen is not None and s.average_probs is None and s.linf is None for s in steps)
    assert all(sum(p is not None for p in s.provider_probs) == 1 for s in steps)


def test_drive_stops_within_one_step(tiny_smollm2, tiny_gemma3):
    stop = threading.Event()
    steps = 0
    record: RunRecord | None = None
    for view in drive(_config(max_new=200), compare=False, stop=stop):
        record = view.record
        steps = len(record.steps["wash"])
        if steps >= 3:
            stop.set()
    assert record is not None and record.results["wash"].finish_reason == "stopped"
    assert record.results["wash"].routing.tokens <= 4


def test_drive_reports_bad_input_found_by_the_engine(tiny_smollm2):
    from wash.engine.config import GenerationConfig

    # Past the app's own character cap: the engine's token-level check must still surface.
    config = GenerationConfig(providers=rows_to_specs([ROWS[0]], TINY), prompt="word " * 3000,
                              max_new_tokens=8)
    with pytest.raises(WashInputError, match="prompt too long"):
        list(drive(config, compare=False, stop=threading.Event()))


# -- the model preload ------------------------------------------------------------------
def _held_preload(gate: threading.Event) -> Preload:
    """A preload of the tiny models that stays 'loading' until the test opens the gate."""
    def hold(say):
        say("held by the test")
        assert gate.wait(60), "the test never released the preload"
    return Preload(TINY, then=hold)


def test_preload_reports_progress_then_ready(tiny_smollm2, tiny_gemma3):
    gate = threading.Event()
    preload = _held_preload(gate)
    assert not preload.started and "Loading" not in preload_markdown(preload)
    preload.start()
    assert not preload.wait(0.5) and not preload.done
    assert preload.to_dict()["ready"] is False and preload.last_message == "held by the test"
    assert "**Loading models** (2/2 loaded" in preload_markdown(preload)
    gate.set()
    assert preload.wait(30) and preload.ready and preload.error is None
    assert preload.elapsed_s >= 0.5 and preload.start() is preload  # starting again does nothing
    assert f"Models ready in {preload.elapsed_s:.1f} s" in preload_markdown(preload)
    assert preload.to_dict()["loaded"] == TINY


def test_preload_keeps_its_error():
    preload = Preload(["no-such-model"]).start()
    assert preload.wait(30) and preload.done and not preload.ready
    assert "unknown model 'no-such-model'" in preload.to_dict()["error"]
    assert "Loading the models failed" in preload_markdown(preload)


def test_drive_waits_for_a_running_preload_then_generates(tiny_smollm2, tiny_gemma3):
    from wash.engine.ensemble import generate

    gate = threading.Event()
    preload = _held_preload(gate).start()
    views = drive(_config(max_new=4), compare=False, stop=threading.Event(), poll_seconds=0.05,
                  preload=preload)
    for count, view in enumerate(views):
        assert count < 400, "the preload's progress never reached the status"
        if "held by the test" in view.status:
            break
    assert view.status.startswith("**Waiting for the models**")
    later = [next(views) for _ in range(3)]  # still waiting: the preload holds
    assert all(v.status.startswith("**Waiting for the models**") for v in later)
    assert not later[-1].record.steps["wash"]
    gate.set()
    record = list(views)[-1].record
    assert record.finished and record.results["wash"].text == generate(_config(max_new=4)).text
    assert record.preload_wait_s is not None and record.preload_wait_s < record.first_token_s
    assert "held by the test" in record.load_messages


def test_stop_while_waiting_for_the_preload_ends_the_run(tiny_smollm2, tiny_gemma3):
    gate = threading.Event()
    preload = _held_preload(gate).start()
    stop = threading.Event()
    views = drive(_config(max_new=4), compare=False, stop=stop, poll_seconds=0.05, preload=preload)
    next(views)
    stop.set()
    last = list(views)[-1]
    gate.set()
    assert last.finished and not last.record.finished and not last.record.steps["wash"]
    assert last.status.startswith("**Stopped** while the models were loading")


def test_about_is_short_cites_the_paper_and_folds_each_schemes_own_words(tmp_path):
    from wash.watermarks import SCHEMES

    about = texts.about_markdown()
    assert "Linear Ensembles Wash Away Watermarks" in about and "Z. Wu, G. Gong" in about
    assert "shipped with this project" not in about and "docs/RESULTS.md" in about and "**Results**" in about
    assert len(about.split()) < 700
    reference = texts.reference_markdown()
    for cls in SCHEMES.values():
        assert cls.explain() in reference
    page = tmp_path / "RESULTS.md"
    page.write_text("# R\n\n## Headline\n\n* z fell from 9.9 to 1.1.\n\n## Next\n\n* not this\n")
    quoted = texts.results_headline(page)
    assert "9.9 to 1.1" in quoted and "not this" not in quoted
    assert "not shipped" in texts.results_headline(tmp_path / "missing.md")


def test_build_config_takes_the_aggregation_rule_and_names_a_bad_one():
    config = build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, aggregate=" median-clip ")
    assert config.aggregate == "median-clip:xi=1.0"
    assert build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, aggregate=None).aggregate == "mean"
    with pytest.raises(WashInputError, match="unknown aggregate 'trimmed'"):
        build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, aggregate="trimmed")
    with pytest.raises(WashInputError, match="needs --forwards eager"):
        build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, forwards="lazy", aggregate="median")
    # the comparison run (provider 1 alone) always takes the mean
    compared = comparison_config(build_config(ROWS, "Hello", 4, 1.0, 0, "wash", TINY, aggregate="median"),
                                 "single")
    assert compared.aggregate == "mean" and len(compared.providers) == 1


def test_text_a_tokenizer_cannot_encode_is_refused_by_name():
    with pytest.raises(WashInputError, match="the prompt is not valid Unicode text: character 8"):
        build_config(ROWS, "broken \udcff bytes", 4, 1.0, 0, "wash", TINY)
    with pytest.raises(WashInputError, match="seed must be an integer from"):
        build_config(ROWS, "Hello", 4, 1.0, 10**30, "wash", TINY)
    from wash.detection.per_text import detect_text

    with pytest.raises(WashInputError, match="the text to score is not valid Unicode"):
        detect_text([], "bad \udcff")


def test_a_new_run_of_a_session_stops_the_one_before_and_no_other() -> None:
    """One run per browser session: a new Generate or lesson step ends the session's running one."""
    from wash.ui.run import StopRegistry

    stops = StopRegistry()
    first = stops.start("tab-a")
    other = stops.start("tab-b")
    second = stops.start("tab-a")
    assert first.is_set() and not second.is_set() and not other.is_set()
    assert stops.superseded(first) and not stops.superseded(second) and not stops.superseded(other)
    stops.finish("tab-a", first)
    assert not stops.superseded(first)  # forgotten once its run has ended  # the ended run's cleanup leaves the new run's flag in place
    assert "tab-a" in stops and stops.stop("tab-a") and second.is_set()
    stops.finish("tab-a", second)
    assert "tab-a" not in stops and not stops.stop("tab-a")
    third = stops.start("tab-a")
    stops.supersede("tab-a")  # a lesson step's click, before its run starts
    assert third.is_set() and stops.superseded(third) and "tab-a" not in stops
    fourth = stops.start("tab-a")
    stops.finish("tab-a", third)
    assert not fourth.is_set() and "tab-a" in stops and not stops.superseded(third)


def test_a_page_that_falls_behind_gets_one_view_of_what_arrived_meanwhile(tiny_smollm2, tiny_gemma3):
    """Events that arrive while the last view is being drawn are drawn together: a slow page catches
    up in one view instead of being sent one stale view per token, and no event is lost."""
    import time

    from wash.engine.ensemble import generate

    views = drive(_config(max_new=12), compare=False, stop=threading.Event())
    first = next(views)
    time.sleep(3)  # a page busy drawing: the tiny models finish the run meanwhile
    rest = list(views)
    record = rest[-1].record
    assert record.finished and record.results["wash"].text == generate(_config(max_new=12)).text
    assert len(record.steps["wash"]) == record.results["wash"].routing.tokens >= 8
    assert len(rest) <= 3, [len(v.record.steps["wash"]) for v in rest]  # the backlog and the final view
    assert rest[-1].finished and not first.finished


def test_only_the_final_view_says_done(tiny_smollm2, tiny_gemma3):
    """A view that reads "Done" carries the run's results: none before the final one says the run ended,
    however the events were batched (a page would show Done with an empty routing summary)."""
    import time

    views = drive(_config(max_new=6), compare=False, stop=threading.Event())
    seen = [next(views)]
    time.sleep(2)  # the run and its end arrive while the page is busy
    seen += list(views)
    assert [v.finished for v in seen if "Done" in v.status] == [True]
