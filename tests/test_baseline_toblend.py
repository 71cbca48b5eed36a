"""ToBlend (``--mode toblend``) on tiny random models around the real SmolLM2 and Gemma 3 tokenizers.

What the issue asks of it: it writes text, blocks alternate as configured, a seed
fixes random turns, every switch re-tokenises the text and encodes it from
scratch (counted), the text is what every model's ids and the final detection
see, and the events carry what the app reads. The providers' watermarks and
detectors are the real ones.
"""

from __future__ import annotations

import pytest

from wash.engine.modes import parse
from wash.baselines.toblend import ToBlend
from wash.engine.config import GenerationConfig, ProviderSpec
from wash.engine.ensemble import generate_stream
from wash.core.errors import WashInputError
from wash.engine.events import FinishedEvent, StepEvent
from wash.engine.models import load_model
from wash.engine.providers import build_providers
from wash.engine.vocab import model_vocab

pytestmark = pytest.mark.usefixtures("single_thread")  # small tiny-model forwards: one torch thread

TWO = ["tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2"]
#: Two providers share SmolLM2: a turn passing between them is still a switch.
THREE = ["tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2", "tiny-smollm2:unigram:3"]
PROMPT = "The committee met on Tuesday to discuss"


def run(specs: list[str], options: str, n: int = 14, seed: int = 0, **kw) -> tuple[list[StepEvent], object]:
    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT, mode="toblend",
                           max_new_tokens=n, min_new_tokens=n, seed=seed, baseline_options=options, **kw)
    events = list(generate_stream(cfg))
    assert isinstance(events[-1], FinishedEvent)
    assert sum(isinstance(e, FinishedEvent) for e in events) == 1
    steps = [e for e in events if isinstance(e, StepEvent)]
    return steps, events[-1].result


def model_of(spec: str) -> str:
    return spec.split(":")[0]


@pytest.fixture(scope="module")
def round_robin():
    return run(TWO, "block=3,select=round-robin")


def test_round_robin_blocks_alternate_as_configured(round_robin):
    steps, result = round_robin
    assert len(steps) == 14 and result.text
    assert [e.chosen for e in steps] == [(t // 3) % 2 for t in range(14)]
    assert [t.chosen for t in result.tokens] == [(t // 3) % 2 for t in range(14)]
    costs = result.settings["baseline"]
    assert costs["params"] == "block=3,select=round-robin,lookahead=0"
    assert costs["blocks"] == 5 and costs["switches"] == 4
    assert costs["tokens_per_provider"] == [8, 6]


def test_every_switch_reencodes_the_retokenised_text_from_scratch(round_robin):
    steps, result = round_robin
    lms = {m: load_model(m) for m in map(model_of, TWO)}
    expected = {m: 0 for m in lms}
    for t in range(3, 14, 3):  # a switch opens every block after the first
        m = model_of(TWO[steps[t].chosen])
        text = "".join(e.token for e in steps[:t])
        expected[m] += len(lms[m].encode_prompt(PROMPT)) + len(lms[m].encode(text))
    costs = result.settings["baseline"]
    assert costs["reencoded_ids"] == expected
    assert costs["reencode_forwards"] == {"tiny-smollm2": 2, "tiny-gemma3": 2}
    # A model computes logits only on its own turns: one forward per token it writes (a
    # block's first forward is the re-encoding), and the idle model never runs.
    assert result.timing.forward_calls == {"tiny-smollm2": 8, "tiny-gemma3": 6}
    # Fed ids: the first prefill, every re-encoded context, then one id per further token.
    first = len(lms["tiny-smollm2"].encode_prompt(PROMPT))
    assert result.timing.ids_fed == {"tiny-smollm2": first + expected["tiny-smollm2"] + 8 - 3,
                                     "tiny-gemma3": expected["tiny-gemma3"] + 6 - 2}


def test_the_text_is_what_every_model_and_the_final_detection_see(round_robin):
    steps, result = round_robin
    assert "".join(e.token for e in steps) == result.text
    for m, ids in result.model_ids.items():
        vocab = model_vocab(load_model(m))
        assert b"".join(vocab.token_bytes[i] for i in ids) == result.text.encode("utf-8")
    pset = build_providers([ProviderSpec.parse(s) for s in TWO])
    for p, d in zip(pset.providers, result.detection):
        ids = p.member.encode(result.text)
        assert d.tokens_scored > 0
        assert d.z == pytest.approx(p.scheme.detect(p.scheme_ids(ids)).z)


def test_events_carry_what_the_app_needs(round_robin):
    steps, result = round_robin
    pset = build_providers([ProviderSpec.parse(s) for s in TWO])
    for t, e in enumerate(steps):
        assert e.step == t and not e.routed and e.span_id is None and e.specialists == []
        assert len(e.candidates) == len(e.candidate_ids) > 0
        k = e.chosen
        assert [p is None for p in e.provider_probs] == [i != k for i in range(2)]
        probs = e.provider_probs[k]
        assert len(probs) == len(e.candidates) and 0 < sum(probs) <= 1 + 1e-9
        assert e.average_probs is None and e.consensus_probs is None and e.linf is None
        assert e.entropy is not None and e.entropy > 0 and e.elapsed_ms > 0
        assert len(e.live_z) == 2
    assert all(z is not None for z in steps[-1].live_z)
    # Live detectors follow each model's ids, also across the re-encodings that restart them.
    for i, p in enumerate(pset.providers):
        prompt_ids = p.member.encode_prompt(PROMPT)
        z = p.make_detector(prompt_ids).extend(p.scheme_ids(result.model_ids[p.model])).result().z
        assert result.settings["live_z_final"][i] == pytest.approx(z)
        assert steps[-1].live_z[i] == pytest.approx(z)


def test_random_turns_are_fixed_by_the_seed_and_switch_only_on_a_change():
    first, r1 = run(THREE, "block=2,select=random", n=16, seed=3, live_detection=False)
    again, r2 = run(THREE, "block=2,select=random", n=16, seed=3, live_detection=False)
    other, r3 = run(THREE, "block=2,select=random", n=16, seed=4, live_detection=False)
    turns = [e.chosen for e in first]
    assert turns == [e.chosen for e in again] and r1.text == r2.text
    assert turns != [e.chosen for e in other]
    assert all(turns[t] == turns[t - t % 2] for t in range(16))  # constant within a block
    blocks = turns[::2]
    assert set(blocks) == {0, 1, 2}
    changes = sum(a != b for a, b in zip(blocks, blocks[1:]))
    costs = r1.settings["baseline"]
    assert costs["blocks"] == 8 and costs["switches"] == changes
    assert sum(costs["reencode_forwards"].values()) == changes
    drawn = {m: sum(1 for k in turns if model_of(THREE[k]) == m) for m in ("tiny-smollm2", "tiny-gemma3")}
    assert r1.timing.forward_calls == drawn


def test_lookahead_costs_forwards_but_never_changes_the_text(round_robin):
    steps, result = round_robin
    ahead_steps, ahead = run(TWO, "block=3,select=round-robin,lookahead=2")
    assert ahead.text == result.text and [e.chosen for e in ahead_steps] == [e.chosen for e in steps]
    costs = ahead.settings["baseline"]
    # Two discarded predictions after each of the four blocks that hand the turn on.
    assert costs["lookahead_ids"] == {"tiny-smollm2": 4, "tiny-gemma3": 4}
    for m in costs["lookahead_ids"]:
        assert ahead.timing.forward_calls[m] == result.timing.forward_calls[m] + 4


def test_each_provider_keeps_only_its_share_of_the_watermark():
    """Fixed seed: each KGW provider (delta 4) alone vs ToBlend over both, 48 tokens, blocks of 4.

    On a tiny random model KGW's boost makes nearly every token green, so a provider
    alone scores z near sqrt(T). Under ToBlend it wrote half the tokens and the other
    half are green for it at rate gamma = 0.5, so its z is about half of that (sd
    about 1). Both providers sit on SmolLM2 so that "half the tokens" is also half of
    each detector's ids (the tiny Gemma's multilingual tokens re-tokenise into about
    four SmolLM2 ids each), and every turn is a switch between two providers of one model.
    """
    specs = ["tiny-smollm2:kgw:1:delta=4", "tiny-smollm2:kgw:2:delta=4"]
    _, blended = run(specs, "block=4,select=round-robin", n=48, live_detection=False)
    assert blended.settings["baseline"]["reencode_forwards"] == {"tiny-smollm2": 11}
    for i, spec in enumerate(specs):
        cfg = GenerationConfig(providers=[ProviderSpec.parse(spec)], prompt=PROMPT, mode="single",
                               max_new_tokens=48, min_new_tokens=48, seed=0, live_detection=False)
        alone = next(e for e in generate_stream(cfg) if isinstance(e, FinishedEvent)).result.detection[0].z
        assert alone > 5
        assert 0.15 * alone < blended.detection[i].z < 0.8 * alone


@pytest.mark.parametrize("options, words", [
    ("block=0", "block must be a whole number from 1 to 400, got 0"),
    ("block=1.5", "is not a whole number"),
    ("select=zigzag", "unknown select 'zigzag' (accepted: random, round-robin)"),
    ("lookahead=-1", "lookahead must be a whole number from 0 to 64, got -1"),
    ("blocks=2", "has no parameter 'blocks' (accepted: block, select, lookahead)"),
])
def test_bad_options_are_one_line_input_errors(options, words):
    with pytest.raises(WashInputError) as err:
        parse("toblend", options)
    assert words in str(err.value) and "\n" not in str(err.value)
    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in TWO], prompt=PROMPT, mode="toblend",
                           baseline_options=options)
    with pytest.raises(WashInputError):  # refused at validation, before any model loads
        next(generate_stream(cfg, on_load=lambda e: pytest.fail(f"loaded: {e}")))


def test_defaults_are_canonical_and_recorded():
    method = parse("toblend", "")
    assert isinstance(method, ToBlend)
    assert str(method) == "block=1,select=random,lookahead=0"
    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in TWO], prompt=PROMPT, mode="toblend",
                           baseline_options=" select = round-robin ")
    cfg.validate()
    assert cfg.baseline_options == "block=1,select=round-robin,lookahead=0"



def test_a_stop_request_ends_the_run_with_its_result():
    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in TWO], prompt=PROMPT, mode="toblend",
                           max_new_tokens=20, min_new_tokens=20, live_detection=False,
                           baseline_options="block=2,select=round-robin")
    seen: list[StepEvent] = []
    events = []
    for e in generate_stream(cfg, should_stop=lambda: len(seen) >= 5):
        events.append(e)
        if isinstance(e, StepEvent):
            seen.append(e)
    result = events[-1].result
    assert len(seen) == 5 and result.finish_reason == "stopped" and len(result.tokens) == 5
    assert result.settings["baseline"]["blocks"] == 3
