"""The Lesson's data and texts, without a server: every step is a valid run of the app, in the lesson's order,
its card says what it should, and the committed measurement (docs/bench-lesson.json) is of these very steps,
within the click budget, and supports what each step's text tells the class."""

from __future__ import annotations

import json
import math
import re

import pytest

from wash.engine.catalog import CATALOG, OFFLINE_DEFAULTS
from wash.detection.thresholds import Z_THRESHOLD
from wash.core.errors import WashInputError
from wash.content.lesson import (CLICK_BUDGET_S, IDENTIFY_SYSTEMS, MEASURED, STEPS, load_measured, measured,
                                 run_lines, step, unmarked_lines)
from wash.ui import identify as identify_ui
from wash.ui import lesson as lesson_ui
from wash.ui import texts
from wash.ui.providers import build_config, rows_to_specs
from wash.ui.run import COMPARISONS, comparison_config, comparison_streams

TINY = ["tiny-smollm2", "tiny-gemma3"]
REAL = list(OFFLINE_DEFAULTS)


@pytest.mark.parametrize("models", [REAL, TINY])
@pytest.mark.parametrize("number", range(1, len(STEPS) + 1))
def test_every_step_is_a_run_the_app_accepts(number, models):
    s = step(number)
    rows = lesson_ui.table(s, models)
    specs = rows_to_specs(rows, models)  # every row parses, with a model the app offers
    assert specs and all(spec.model in CATALOG for spec in specs)
    if s.identify:
        assert set(IDENTIFY_SYSTEMS) <= set(identify_ui.SYSTEMS) and lesson_ui.PROBE in identify_ui.PROBES
        return
    (table, prompt, tokens, temperature, seed, mode, compare, forwards, top_k, top_p,
     aggregate) = lesson_ui.generate_inputs(s, models)
    config = build_config(table, prompt, tokens, temperature, seed, mode, models, forwards=forwards, top_k=top_k,
                          top_p=top_p, aggregate=aggregate)  # validates every setting, as a click does
    assert config.max_new_tokens == s.tokens and config.seed == s.seed and compare in COMPARISONS
    for mode in comparison_streams(compare).values():
        comparison_config(config, mode)


def test_the_steps_follow_the_lesson():
    """One model alone, WASH at N = 3 and 5 with provider 1 unchanged, AAR as provider 1, then identification."""
    kinds = [(s.preset.mode, len(s.preset.rows), s.preset.rows[0][1], s.identify) for s in STEPS]
    assert kinds == [("single", 1, "kgw", False), ("wash", 3, "kgw", False), ("wash", 5, "kgw", False),
                     ("wash", 3, "aar", False), ("wash", 5, "kgw", True)]
    first = STEPS[0].preset.rows[0]
    assert STEPS[1].preset.rows[0] == STEPS[2].preset.rows[0] == first  # the dashed line of 2 and 3 is step 1
    keys = [row[2] for row in STEPS[2].preset.rows]
    assert len(set(keys)) == len(keys)  # independent keys
    for s in STEPS[1:4]:
        assert (s.tokens, s.seed) == (STEPS[0].tokens, STEPS[0].seed)
        # provider 1 alone (the dashed line their texts speak of) and the unwatermarked text beside the run
        assert comparison_streams(s.compare) == {"single": "single", "unwatermarked": "unwatermarked"}
    assert comparison_streams(STEPS[0].compare) == {"unwatermarked": "unwatermarked"}  # step 1 is P1 alone
    assert STEPS[4].compare == "off" and STEPS[4].preset.rows == STEPS[2].preset.rows  # step 3's model, probed


def test_the_distribution_view_is_in_the_step_where_averaging_shows():
    """One step offers it: the first whose card speaks of averaging, a WASH generation over several providers."""
    offered = [n for n, s in enumerate(STEPS, start=1) if s.distributions]
    averaging = [n for n, s in enumerate(STEPS, start=1) if "averag" in (s.preset.why + s.question).lower()]
    assert offered == averaging[:1] == [2]
    s = STEPS[offered[0] - 1]
    assert s.preset.mode == "wash" and len(s.preset.rows) > 1 and not s.identify
    assert set(lesson_ui.DISTRIBUTION_OUTPUTS) <= set(lesson_ui.outputs(2))
    assert not set(lesson_ui.DISTRIBUTION_OUTPUTS) & set(lesson_ui.outputs(1))


def test_a_card_asks_its_question_first_and_keeps_the_outcome_for_after_the_run():
    for number, s in enumerate(STEPS, start=1):
        card = lesson_ui.card(number, REAL)
        assert f"Step {number} of {len(STEPS)}: {s.title}" in card and s.setup(REAL) in card
        assert f"**Predict first, then run.** {s.question}" in card
        revealed = lesson_ui.reveal(number, REAL)
        assert s.look_for not in card and measured(number, models=REAL) not in card  # no outcome before the run
        assert s.look_for in revealed and measured(number, models=REAL) in revealed
        assert s.question.endswith("?") and len(s.look_for) > 80
    beside = STEPS[1].setup(REAL)
    assert "provider 1 alone and the same providers with every watermark off, on the same prompt" in beside
    assert "with every watermark off" in STEPS[0].setup(REAL) and "beside" not in STEPS[4].setup(REAL)
    assert "P5 smollm2/kgw#505" in STEPS[2].setup(REAL)
    with pytest.raises(WashInputError, match="accepted: 1 to 5"):
        step(6)


def test_try_it_opens_a_generation_step_in_generate_and_the_probe_in_identify():
    out = lesson_ui.try_it(3, TINY)
    values = dict(zip(lesson_ui.TRY_OUTPUTS, out))
    assert len(values["table"]) == 5 and values["max_new"] == STEPS[2].tokens
    assert values["compare"] == STEPS[2].compare in COMPARISONS  # a choice the Generate tab offers
    assert values["profile"] == "open" and out[-1].selected == "generate"
    identify = lesson_ui.try_it(5, TINY)
    assert identify[len(lesson_ui.TRY_OUTPUTS)] == lesson_ui.table(STEPS[4], TINY)
    assert identify[-1].selected == "identify"


def test_the_z_score_text_is_short_and_its_tail_is_the_thresholds():
    from scipy import stats

    text = texts.z_score_markdown()
    assert 2 <= len(re.findall(r"[.;?!](\s|$)", text.replace("e.g.", ""))) <= 6
    assert f"z = {Z_THRESHOLD:g}" in text
    assert math.isclose(texts.null_tail(Z_THRESHOLD), stats.norm.sf(Z_THRESHOLD), rel_tol=1e-9)
    assert f"{stats.norm.sf(Z_THRESHOLD):.1e}" in text


def _bench(tmp_path, **step_fields) -> object:
    data = {"machine": "a CPU, 2 cores", "models_text": "smollm2 + gemma3",
            "rounds": [{"uptime_before": "12:00:00 up 1 min,  0 user,  load average: 9.50, 8.0, 7.0",
                        "steps": [{"step": 2, "seconds": 41.0}]},
                       {"uptime_before": "12:05:00 up 6 min,  0 user,  load average: 1.25, 3.0, 5.0",
                        "steps": [{"step": 2, "seconds": 14.6}]}],
            "steps": [dict({"step": 2, "seeds": [0, 1, 2], "click_s": [41.0, 14.6],
                            "z": {"P1 kgw": [2.1, 3.04, 2.5], "P1 kgw alone": [8.0, 8.02, 8.01]}}, **step_fields)]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    return path


def test_measured_line_reads_ranges_and_says_when_the_page_serves_other_models(tmp_path):
    path = _bench(tmp_path)
    line = measured(2, path, REAL)
    assert "seeds 0 to 2" in line and "P1 kgw z 2.1 to 3.0" in line and "P1 kgw alone z 8.0" in line
    assert "Click to done: 15 s on a CPU, 2 cores (1-minute load 1.2 when timed)" in line  # the quietest round
    assert "serves" not in line
    assert "This page serves tiny-smollm2 + tiny-gemma3" in measured(2, path, TINY)
    assert measured(1, path).startswith("Not measured yet")
    assert measured(2, tmp_path / "absent.json").startswith("Not measured yet")


# -- the committed measurement --------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench() -> dict:
    data = load_measured()
    assert data is not None, f"{MEASURED} is missing: python -m tools.lesson_time"
    return data


def test_the_committed_measurement_is_of_these_steps_on_the_real_models(bench):
    assert bench["models"] == REAL and len(bench["steps"]) == len(STEPS)
    for number, (entry, s) in enumerate(zip(bench["steps"], STEPS), start=1):
        assert (entry["step"], entry["title"], entry["tokens"], entry["seed"], entry["compare"]) == \
            (number, s.title, s.tokens, s.seed, s.compare), f"step {number} changed since it was measured"
        assert entry["click_s"], f"step {number} was never timed"
        assert ("identify" in entry) == s.identify and ("z" in entry) != s.identify
        if not s.identify:
            assert s.seed in entry["seeds"] and len(entry["seeds"]) >= 3
            # the unwatermarked text's detectors, one line per provider (its z: the page's measured line)
            assert len(unmarked_lines(entry["z"])) == len(s.preset.rows), f"step {number}: {list(entry['z'])}"


def test_every_step_finished_within_the_budget_in_the_quietest_round(bench):
    """The page quotes each step's time in the round timed on the least loaded machine: within the budget."""
    for number in range(1, len(STEPS) + 1):
        line = measured(number)
        seconds = float(re.search(r"Click to done: (\d+) s", line).group(1))
        assert seconds <= CLICK_BUDGET_S, line


def _z(bench: dict, number: int) -> dict[str, list[float]]:
    return bench["steps"][number - 1]["z"]


def _above(values: list[float]) -> int:
    return sum(v > Z_THRESHOLD for v in values)


def test_what_each_step_tells_the_class_holds_on_the_measured_seeds(bench):
    """Each sentence of a step's "what to look for" that states an outcome, against the committed numbers."""
    seed0 = bench["steps"][0]["seeds"].index(STEPS[0].seed)
    one = _z(bench, 1)["P1 kgw"]
    assert _above(one) == len(one)  # step 1: crosses the red line on every seed
    for number, n, outliers in ((2, 3, 1), (3, 5, 0)):
        alone = _z(bench, number)["P1 kgw alone"]
        z = run_lines(_z(bench, number))
        assert alone == one  # the dashed line is step 1's text
        wash = z["P1 kgw"]
        # provider 1 ends well below itself alone (by over 2), around alone / N: on average within 1
        assert all(a - w > 2 and abs(w - a / n) < 2.5 for w, a in zip(wash, alone)), (number, wash, alone)
        assert abs(sum(wash) / len(wash) - sum(alone) / len(alone) / n) < 1.0, (number, wash, alone)
        assert sum(_above(v) for v in z.values()) == outliers, z  # "one of the fifteen" / "all five below 4"
        assert not any(v[seed0] > Z_THRESHOLD for v in z.values())  # "none on this click's seed"
    below_two = [v <= 2.0 for values in run_lines(_z(bench, 3)).values() for v in values]
    assert sum(below_two) > len(below_two) / 2  # step 3: "most of them below the green line"
    survivor = _z(bench, 4)
    aar, alone = survivor["P1 aar"], survivor["P1 aar alone"]
    assert all(w > a / 3 and w > Z_THRESHOLD for w, a in zip(aar, alone)), (aar, alone)  # above both, every seed
    assert aar[seed0] > alone[seed0] / 3 + 2  # "well above on this click's seed"
    assert sum(w < a / 3 + 0.5 for w, a in zip(aar, alone)) == 1  # "only just on one seed of five"
    assert len(set(alone)) == 1  # "AAR alone writes the same text whatever the seed"
    kgw = [v for k, v in run_lines(survivor).items() if k.startswith(("P2", "P3"))]
    assert sum(_above(v) for v in kgw) == 1  # "one of their ten lines ... still ended above 4"
    verdicts = bench["steps"][4]["identify"]
    assert verdicts["provider 1 alone"].startswith("watermarked") and verdicts["WASH ensemble"].startswith("watermarked")
    assert verdicts["unwatermarked models"].startswith("no evidence")
    unmarked_z = float(re.search(r"Water-Probe z (-?[\d.]+)", verdicts["unwatermarked models"]).group(1))
    assert unmarked_z > 2.0  # "above 2 even for the model without watermarks"


def test_the_handout_quotes_the_measurement_and_links_what_exists(bench):
    from pathlib import Path

    from wash.content.presets import z_span

    docs = Path(MEASURED).parent
    text = (docs / "CLASSROOM.md").read_text(encoding="utf-8")
    links = [a or b for a, b in re.findall(r'src="([^"]+)"|\]\(([^)#]+)\)', text)]
    assert "figures/decay-kgw-paper.png" in links and "figures/dilution.png" in links
    assert all((docs / link).exists() for link in links), links
    for folder in re.findall(r"`results/([\w-]+)`", text):
        assert (docs.parent / "results" / folder).is_dir(), folder

    def span(values: list[float]) -> str:
        return f"({z_span(min(values), max(values))}"

    assert span(_z(bench, 1)["P1 kgw"]) in text and span(_z(bench, 2)["P1 kgw"]) in text
    step3 = [v for vs in run_lines(_z(bench, 3)).values() for v in vs]
    assert f"every line {z_span(min(step3), max(step3))}" in text  # the handout is generated from this file
    assert span(_z(bench, 4)["P1 aar"]) in text


def test_a_click_shows_the_comparison_texts_and_views_its_step_has_and_hides_the_outcome(tmp_path, monkeypatch):
    from wash.ui import replay

    monkeypatch.setattr(replay, "RECORDINGS", tmp_path)  # no recordings: every step runs live
    for number, s in enumerate(STEPS, start=1):
        *values, go_replay, go_live = lesson_ui.make_load(number, TINY)(replay.READING)
        shown = dict(zip(lesson_ui.LOAD_OUTPUTS, values))
        beside = comparison_streams(s.compare)
        assert shown["card"] == lesson_ui.card(number, TINY) and shown["look_for"] == lesson_ui.LOOK_FOR_WAIT
        assert shown["single_text"]["visible"] == ("single" in beside) and shown["single_text"]["value"] == []
        assert shown["unmarked_text"]["visible"] == ("unwatermarked" in beside) == (number <= 4)
        assert shown["averaging"]["visible"] == s.distributions and shown["state"] is None  # no earlier run
        assert shown["generation"]["visible"] != s.identify and isinstance(go_live, int)


def test_measured_lines_split_the_run_from_what_ran_beside_it(tmp_path):
    z = {"P1 kgw": [2.1], "P2 kgw": [1.0], "P1 kgw alone": [8.0], "P1 kgw unwatermarked": [0.3],
         "P2 kgw unwatermarked": [-0.4]}
    assert list(run_lines(z)) == ["P1 kgw", "P2 kgw"]
    assert list(unmarked_lines(z)) == ["P1 kgw unwatermarked", "P2 kgw unwatermarked"]
    path = _bench(tmp_path, z=z)
    assert "P1 kgw unwatermarked z 0.3" in measured(2, path, REAL)
    from wash.reporting.classroom import _beside

    assert _beside({"z": z}) == "; the unwatermarked text beside it: every detector z -0.4 to 0.3"
    assert _beside({"z": run_lines(z)}) == ""  # measured before the unwatermarked text ran beside it
