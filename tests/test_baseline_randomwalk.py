"""RandomWalk (``--mode randomwalk``) on tiny random models around the real SmolLM2 and Gemma 3 tokenizers.

What the issue asks of it: it writes text, then keeps only the rewrites its check
accepts (a check that rejects everything leaves the watermarked text; replaying the
kept rewrites on the watermarked text gives the final text; every verdict follows
the rule with the judge model's real perplexity), a seed fixes the whole run, its
events carry what the app and the CLI read, and bad options are one-line input
errors. The provider's watermark and detector are the real ones.
"""

from __future__ import annotations

import json
import threading

import pytest
import torch

from wash.engine.modes import parse
from wash.baselines.randomwalk import RandomWalk
from wash.engine.config import GenerationConfig, ProviderSpec
from wash.detection.per_text import detect_text
from wash.engine.ensemble import generate, generate_stream
from wash.core.errors import WashInputError
from wash.engine.events import FinishedEvent, LoadEvent, RewriteEvent, StepEvent
from wash.engine.models import load_model
from wash.engine.providers import build_providers

pytestmark = pytest.mark.usefixtures("single_thread")  # small tiny-model forwards: one torch thread

PROVIDER = "tiny-smollm2:kgw:1"
PROMPT = "The committee met on Tuesday to discuss"
TINY = "rewriter=tiny-smollm2,judge=tiny-gemma3"
N = 40


def config(options: str, seed: int = 0, mode: str = "randomwalk", **kw) -> GenerationConfig:
    return GenerationConfig(providers=[ProviderSpec.parse(PROVIDER)], prompt=PROMPT, mode=mode,
                            max_new_tokens=N, min_new_tokens=N, seed=seed,
                            baseline_options=f"{TINY},{options}" if mode == "randomwalk" else "", **kw)


def run(options: str, seed: int = 0, should_stop=None) -> tuple[list, object]:
    events = list(generate_stream(config(options, seed), should_stop=should_stop))
    assert sum(isinstance(e, FinishedEvent) for e in events) == 1 and isinstance(events[-1], FinishedEvent)
    return events, events[-1].result


def rewrites(events: list) -> list[RewriteEvent]:
    return [e for e in events if isinstance(e, RewriteEvent)]


def replay(text: str, events: list[RewriteEvent]) -> str:
    """The watermarked text with every kept rewrite and step back applied in order."""
    for e in events:
        assert text[e.start:e.end] == e.old_text  # offsets are in the text before the attempt
        if e.accepted or e.backtrack:
            text = text[:e.start] + e.new_text + text[e.end:]
    return text


def judge_nll(text: str) -> float:
    """Mean NLL of ``text`` after the prompt under tiny-gemma3, by the model's own loss (independent code)."""
    lm = load_model("tiny-gemma3")
    prompt = lm.encode_prompt(PROMPT)
    ids = torch.tensor([prompt + lm.encode(text)])
    labels = ids.clone()
    labels[0, :len(prompt)] = -100
    with torch.no_grad():
        return float(lm.model(input_ids=ids, labels=labels).loss)


@pytest.fixture(scope="module")
def walk():
    return run("steps=24,tolerance=0.05")


def test_the_watermarked_text_is_what_mode_single_writes(walk):
    events, result = walk
    single = generate(config("", mode="single"))
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len(steps) == N
    assert "".join(e.token for e in steps) == single.text == result.settings["baseline"]["watermarked_text"]
    assert [d["z"] for d in result.settings["baseline"]["watermarked_detection"]] == [d.z for d in single.detection]


def test_only_rewrites_the_check_accepts_are_kept(walk):
    events, result = walk
    tries = rewrites(events)
    costs = result.settings["baseline"]
    assert len(tries) == costs["attempts"] + costs["backtracks"] == 24 + costs["backtracks"]
    accepted = [e for e in tries if e.accepted]
    assert 0 < len(accepted) == costs["accepted"] < 24  # the check both keeps and rejects here
    original = tries[0].reference_score
    for e in tries:
        assert e.reference_score == original  # reference=original: every candidate against the watermarked text
        assert e.threshold == pytest.approx(original + 0.05)
        if not e.backtrack:
            assert e.accepted == (e.candidate_score <= e.threshold)
    final = replay(costs["watermarked_text"], tries)
    assert final == result.text != costs["watermarked_text"]
    assert costs["changed"] == sum(e.new_text != e.old_text for e in accepted)


def test_the_judge_is_the_judge_models_perplexity(walk):
    events, result = walk
    tries = rewrites(events)
    assert tries[0].reference_score == pytest.approx(judge_nll(result.settings["baseline"]["watermarked_text"]),
                                                     abs=1e-4)
    last = [e for e in tries if e.accepted or e.backtrack][-1]
    assert last.candidate_score == pytest.approx(judge_nll(result.text), abs=1e-4)


def test_a_check_that_rejects_everything_leaves_the_watermarked_text():
    events, result = run("steps=12,tolerance=-1000")
    tries = rewrites(events)
    assert len(tries) == 12 and not any(e.accepted or e.backtrack for e in tries)
    assert any(e.new_text != e.old_text for e in tries)  # the rewriter did propose changes
    single = generate(config("", mode="single"))
    assert result.text == single.text
    assert [d.z for d in result.detection] == [d.z for d in single.detection]
    assert result.model_ids == single.model_ids
    costs = result.settings["baseline"]
    assert (costs["accepted"], costs["changed"], costs["judge_forwards"]) == (0, 0, 13)


def test_stepping_back_returns_to_the_text_before_the_last_kept_rewrite():
    events, result = run("steps=24,reference=current,patience=2", seed=3)
    tries = rewrites(events)
    backs = [i for i, e in enumerate(tries) if e.backtrack]
    assert backs and result.settings["baseline"]["backtracks"] == len(backs)
    text = result.settings["baseline"]["watermarked_text"]
    history = [text]
    for e in tries:
        text = replay(text, [e])
        history.append(text)
    for i in backs:
        kept = max(j for j in range(i) if tries[j].accepted)
        assert history[i + 1] == history[kept]  # the text before that rewrite, exactly
        # reference=current: after a rejection the reference is the score of the text stood on
        assert tries[i].candidate_score == tries[kept].reference_score
    assert text == result.text


def test_the_result_describes_the_final_text(walk):
    events, result = walk
    provider = build_providers([ProviderSpec.parse(PROVIDER)]).providers
    lm = load_model("tiny-smollm2")
    assert "".join(t.text for t in result.tokens) == result.text
    assert result.model_ids == {"tiny-smollm2": lm.encode(result.text)}
    assert len(result.tokens) == len(result.model_ids["tiny-smollm2"]) == result.routing.tokens
    assert [d.z for d in result.detection] == [d.z for d in detect_text(provider, result.text)]
    # tokens up to the first change keep their generation records; rewritten ones have none
    assert result.tokens[0].chosen is None and result.tokens[0].entropy is not None
    assert result.tokens[-1].entropy is None
    costs = result.settings["baseline"]
    assert costs["params"] == str(parse("randomwalk", f"{TINY},steps=24,tolerance=0.05"))
    assert costs["judge_forwards"] == costs["attempts"] + 1
    assert costs["rewriter_tokens"] >= costs["attempts"]
    assert result.timing.forward_calls["tiny-gemma3"] == costs["judge_forwards"]
    assert result.timing.total_s == pytest.approx(costs["generation_s"] + costs["rewrite_s"])
    assert costs["rewrite_s"] >= costs["judge_s"] + costs["rewriter_s"] > 0


def test_events_come_in_order_and_serialise(walk):
    events, _ = walk
    kinds = [type(e).__name__ for e in events]
    order = ["LoadEvent", "StepEvent", "RewriteEvent", "FinishedEvent"]
    assert kinds == sorted(kinds, key=order.index)
    for e in events:
        if not isinstance(e, LoadEvent):
            json.dumps(e.to_dict())
    assert rewrites(events)[0].to_dict()["event"] == "rewrite"


def test_the_app_and_the_cli_take_the_new_events(capsys):
    from wash.cli import main
    from wash.ui.run import WASH, drive

    views = list(drive(config("steps=4"), compare=False, stop=threading.Event()))
    record = views[-1].record
    assert views[-1].finished and record.results[WASH] is not None
    assert sum(e.get("event") == "rewrite" for e in json.loads(json.dumps(record.to_json()))["events"]) == 4
    code = main(["generate", "--provider", PROVIDER, "--prompt", PROMPT, "--mode", "randomwalk",
                 "--max-new-tokens", "12", "--baseline-options", f"{TINY},steps=3", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "randomwalk" and out["settings"]["baseline"]["attempts"] == 3


def test_a_seed_fixes_the_run(walk):
    events, result = walk
    again, result2 = run("steps=24,tolerance=0.05")
    strip = [(e.start, e.end, e.new_text, e.accepted, e.candidate_score) for e in rewrites(events)]
    assert strip == [(e.start, e.end, e.new_text, e.accepted, e.candidate_score) for e in rewrites(again)]
    assert result2.text == result.text
    _, other = run("steps=24,tolerance=0.05", seed=1)
    assert other.text != result.text


def test_budgets_and_stop_end_the_walk():
    _, capped = run("steps=24,tolerance=1000,max_accepted=3")
    assert (capped.settings["baseline"]["accepted"], capped.settings["baseline"]["ended_by"]) == (3, "max_accepted")
    _, none = run("steps=0")
    costs = none.settings["baseline"]
    assert (costs["attempts"], costs["judge_forwards"], costs["rewriter_tokens"]) == (0, 0, 0)
    assert none.text == costs["watermarked_text"]
    calls = iter(range(1000))
    events, stopped = run("steps=24", should_stop=lambda: next(calls) >= N + 2)
    assert len(rewrites(events)) == 2 and stopped.finish_reason == "stopped"
    assert stopped.settings["baseline"]["ended_by"] == "stopped"


def test_defaults_come_from_the_release():
    method = parse("randomwalk")
    assert isinstance(method, RandomWalk)
    assert str(method) == ("steps=400,max_accepted=70,span=6,tolerance=0.0,reference=original,patience=40,"
                           "rewriter=smollm2,judge=gemma3")


@pytest.mark.parametrize("options, message", [
    ("steps=-1", "steps must be a whole number from 0 to 5000"),
    ("steps=2.5", "steps='2.5' is not a whole number"),
    ("span=0", "span must be a whole number from 1 to 64"),
    ("patience=-3", "patience must be a whole number from 0 to 5000 (0: never step back)"),
    ("max_accepted=-1", "max_accepted must be a whole number from 0 to 5000 (0: no limit)"),
    ("tolerance=nan", "tolerance must be a finite number"),
    ("reference=best", "unknown reference 'best' (accepted: original, current)"),
    ("rewriter=gpt-5", "rewriter: unknown model 'gpt-5' (accepted: smollm2, gemma3"),
    ("judge=nope", "judge: unknown model 'nope'"),
    ("temperature=2", "has no parameter 'temperature' (accepted: steps, max_accepted"),
])
def test_bad_options_are_one_line_input_errors(options, message):
    with pytest.raises(WashInputError) as err:
        config(options).validate()
    assert message in str(err.value) and "\n" not in str(err.value)
    assert "randomwalk" in str(err.value)
