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
                                 step)
from wash.ui import identify as identify_ui
from wash.ui import lesson as lesson_ui
from wash.ui import texts
from wash.ui.providers import build_config, rows_to_specs
from wash.ui.run import COMPARISONS, comparison_config, comparison_mode

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
    if comparison_mode(compare):
        comparison_config(config, comparison_mode(compare))


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
        assert s.compare == "single" and (s.tokens, s.seed) == (STEPS[0].tokens, STEPS[0].seed)
    assert STEPS[4].preset.rows == STEPS[2].preset.rows  # the model whose texts lost the watermark, probed


def test_a_card_holds_the_setup_what_to_look_for_and_the_question():
    for number, s in enumerate(STEPS, start=1):
        card = lesson_ui.card(number, REAL)
        assert f"Step {number} of {len(STEPS)}: {s.title}" in card
        assert s.look_for in card and s.question in card and s.setup(REAL) in card
        assert s.question.endswith("?") and len(s.look_for) > 80
    assert "P5 smollm2/kgw#505" in STEPS[2].setup(REAL)
    with pytest.raises(WashInputError, match="accepted: 1 to 5"):
        step(6)


def test_try_it_opens_a_generation_step_in_generate_and_the_probe_in_identify():
    out = lesson_ui.try_it(3, TINY)
    values = dict(zip(lesson_ui.TRY_OUTPUTS, out))
    assert len(values["table"]) == 5 and values["max_new"] == STEPS[2].tokens and values["compare"] == "single"
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
        z = _z(bench, number)
        alone = z.pop("P1 kgw alone")
        assert alone == one  # the dashed line is step 1's text
        wash = z["P1 kgw"]
        # provider 1 ends well below itself alone (by over 2), around alone / N: on average within 1
        assert all(a - w > 2 and abs(w - a / n) < 2.5 for w, a in zip(wash, alone)), (number, wash, alone)
        assert abs(sum(wash) / len(wash) - sum(alone) / len(alone) / n) < 1.0, (number, wash, alone)
        assert sum(_above(v) for v in z.values()) == outliers, z  # "one of the fifteen" / "all five below 4"
        assert not any(v[seed0] > Z_THRESHOLD for v in z.values())  # "none on this click's seed"
    below_two = [v <= 2.0 for values in _z(bench, 3).values() for v in values]
    assert sum(below_two) > len(below_two) / 2  # step 3: "most of them below the green line"
    survivor = _z(bench, 4)
    aar, alone = survivor["P1 aar"], survivor["P1 aar alone"]
    assert all(w > a / 3 and w > Z_THRESHOLD for w, a in zip(aar, alone)), (aar, alone)  # above both, every seed
    assert aar[seed0] > alone[seed0] / 3 + 2  # "well above on this click's seed"
    assert sum(w < a / 3 + 0.5 for w, a in zip(aar, alone)) == 1  # "only just on one seed of five"
    assert len(set(alone)) == 1  # "AAR alone writes the same text whatever the seed"
    kgw = [v for k, v in survivor.items() if k.startswith(("P2", "P3"))]
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
    step3 = [v for k, vs in _z(bench, 3).items() if "alone" not in k for v in vs]
    assert f"every line {z_span(min(step3), max(step3))}" in text  # the handout is generated from this file
    assert span(_z(bench, 4)["P1 aar"]) in text
