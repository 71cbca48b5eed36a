"""The WASH loop on tiny random models built around the REAL SmolLM2 and Gemma 3 tokenizers.

Random two-layer models route often (their distributions ignore word structure),
which is what these tests need: many routed spans in few steps.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from wash.engine.averaging import mixture
from wash.engine.config import GenerationConfig, ProviderSpec
from wash.engine.ensemble import generate, generate_stream
from wash.engine.vocab import model_vocab
from wash.core.errors import WashInputError
from wash.engine.events import FinishedEvent, ResyncEvent, StepEvent
from wash.engine.members import ModelContext
from wash.engine.routing import pick_specialist, starts_new_word
from wash.engine.vocab import align

MIXED = ["tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2", "tiny-smollm2:unigram:3"]
PROMPT = "The committee met on Tuesday to discuss"


def run(specs, mode="wash", n=24, seed=0, **kw):
    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT, mode=mode,
                           max_new_tokens=n, seed=seed, **kw)
    return list(generate_stream(cfg))


def contexts_after(events):
    return next(e for e in events if isinstance(e, FinishedEvent)).result


# -- averaging -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def alignment(tiny_smollm2, tiny_gemma3):
    return align([model_vocab(tiny_smollm2), model_vocab(tiny_gemma3)])


def _random_dist(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(n, generator=g, dtype=torch.float64) * 3, dim=0)


def _text_only(p, lm, alignment):
    p = p.clone()
    p[alignment.to_union[lm.name] < 0] = 0
    return p / p.sum()


def test_average_is_a_probability_vector(tiny_smollm2, tiny_gemma3, alignment):
    parts = [(alignment.union_map(lm.name), _text_only(_random_dist(lm.vocab_size, s), lm, alignment))
             for s, lm in enumerate([tiny_smollm2, tiny_gemma3, tiny_smollm2])]
    p_bar = mixture(parts, 3)
    assert p_bar.min() >= 0
    assert math.isclose(float(p_bar.sum()), 1.0, abs_tol=1e-9)


def test_identical_providers_average_to_the_same_distribution(tiny_gemma3, alignment):
    p = _text_only(_random_dist(tiny_gemma3.vocab_size, 7), tiny_gemma3, alignment)
    union_map = alignment.union_map(tiny_gemma3.name)
    p_bar = mixture([(union_map, p), (union_map, p), (union_map, p)], 3)
    assert torch.allclose(p_bar, union_map.project(p), atol=1e-12)


def test_token_in_k_of_n_vocabularies_gets_one_nth_of_their_sum(tiny_smollm2, tiny_gemma3, alignment):
    lms = [tiny_smollm2, tiny_gemma3, tiny_gemma3]
    ps = [_text_only(_random_dist(lm.vocab_size, 10 + s), lm, alignment) for s, lm in enumerate(lms)]
    p_bar = mixture([(alignment.union_map(lm.name), p) for lm, p in zip(lms, ps)], 3)
    u = alignment.union_bytes.index(b" Bedrooms")  # Gemma only: k = 2 of N = 3
    g = int(alignment.from_union[tiny_gemma3.name][u])
    assert math.isclose(float(p_bar[u]), (float(ps[1][g]) + float(ps[2][g])) / 3, rel_tol=1e-9)
    shared = alignment.union_bytes.index(b" the")  # in all three
    expect = sum(float(p[int(alignment.from_union[lm.name][shared])]) for lm, p in zip(lms, ps)) / 3
    assert math.isclose(float(p_bar[shared]), expect, rel_tol=1e-9)


# -- routing ---------------------------------------------------------------------------
def test_word_boundaries():
    assert starts_new_word(b" word") and starts_new_word(b"\nx") and starts_new_word(b".")
    assert starts_new_word(b"") and starts_new_word(b",")
    assert not starts_new_word(b"ing") and not starts_new_word(b"\x80")  # continuation byte


def test_specialist_choice_is_uniform():
    g = torch.Generator().manual_seed(0)
    picks = [pick_specialist([2, 5, 7], g) for _ in range(3000)]
    counts = [picks.count(i) for i in (2, 5, 7)]
    assert stats.chisquare(counts).pvalue > 0.001, counts


@pytest.fixture(scope="module")
def mixed_run():
    return run(MIXED, n=40, seed=3)


def test_routing_happens_and_only_specialists_are_chosen(mixed_run, alignment):
    steps = [e for e in mixed_run if isinstance(e, StepEvent)]
    routed = [e for e in steps if e.routed]
    assert routed, "tiny random models should route within 40 tokens"
    models = ["tiny-smollm2", "tiny-gemma3", "tiny-smollm2"]
    for e in routed:
        assert e.specialists
        for i in e.specialists:  # every specialist can spell the token it was handed
            assert alignment.contains(models[i], e.union_id)
        if e.chosen is not None:
            assert e.chosen in e.specialists
    for e in steps:
        if not e.routed:
            assert bool(alignment.intersection[e.union_id])


def test_chosen_specialists_are_uniform_across_a_generation():
    """Over routed steps with two specialists, each is picked about half the time."""
    hits = {0: 0, 1: 0}
    for seed in range(6):
        for e in run(["tiny-gemma3:kgw:1", "tiny-gemma3:kgw:2", "tiny-smollm2:kgw:3"], n=40, seed=seed):
            if isinstance(e, StepEvent) and e.chosen is not None and e.specialists == [0, 1]:
                hits[e.chosen] += 1
    total = hits[0] + hits[1]
    assert total >= 30, hits
    assert stats.binomtest(hits[0], total, 0.5).pvalue > 0.001, hits


def test_after_routed_spans_every_context_decodes_to_the_same_text(mixed_run, tiny_smollm2, tiny_gemma3):
    result = contexts_after(mixed_run)
    assert result.spans
    for lm in (tiny_smollm2, tiny_gemma3):
        vocab = model_vocab(lm)
        spelled = b"".join(vocab.token_bytes[i] for i in result.model_ids[lm.name])
        assert spelled.decode("utf-8", errors="replace") == result.text
    resyncs = [e for e in mixed_run if isinstance(e, ResyncEvent)]
    assert [r.span_id for r in resyncs] == [s.span_id for s in result.spans]


def test_token_texts_concatenate_to_the_text(mixed_run):
    result = contexts_after(mixed_run)
    assert "".join(t.text for t in result.tokens) == result.text


def test_naive_mode_never_routes():
    result = contexts_after(run(MIXED, mode="naive", n=30, seed=3))
    assert result.routing.routed_spans == 0 and not any(t.routed for t in result.tokens)


def test_single_mode_uses_the_first_provider_only():
    result = contexts_after(run(MIXED, mode="single", n=10))
    assert [p["model"] for p in result.providers] == ["tiny-smollm2"]


def test_unwatermarked_mode_has_average_equal_to_consensus():
    for e in run(MIXED, mode="unwatermarked", n=8):
        if isinstance(e, StepEvent) and e.linf is not None:
            assert e.linf < 1e-9


def test_unwatermarked_mode_routes_and_reports_real_detector_z():
    """Unwatermarked is WASH with the watermarks off: same routing, and each provider's
    own detector (not a scheme 'none' placeholder) scores the text."""
    events = run(MIXED, mode="unwatermarked", n=40, seed=3)
    result = contexts_after(events)
    assert result.spans, "routing is on in unwatermarked mode"
    assert [d.scheme for d in result.detection] == ["kgw", "kgw", "unigram"]
    assert all(d.tokens_scored > 0 for d in result.detection)
    assert any(abs(d.z) > 1e-9 for d in result.detection)
    assert all(abs(d.z) < 4 for d in result.detection)
    live = [e.live_z for e in events if isinstance(e, StepEvent)][-1]
    assert all(z is not None for z in live)


def test_context_guard_counts_each_models_own_ids(monkeypatch):
    """A byte-level model can need several ids per union token: the run ends, cleanly, when
    any model's OWN context is full, not after a count of union tokens."""
    from wash.engine.models import load_model

    lm = load_model("tiny-smollm2")
    prompt_len = len(lm.encode_prompt(PROMPT))
    monkeypatch.setattr(lm, "max_context", prompt_len + 6)
    result = contexts_after(run(MIXED, n=30, seed=3))
    assert result.finish_reason == "context"
    assert len(result.model_ids["tiny-smollm2"]) + prompt_len <= prompt_len + 6


def test_watermarked_average_differs_from_consensus():
    linfs = [e.linf for e in run(MIXED, n=8) if isinstance(e, StepEvent) and e.linf is not None]
    assert max(linfs) > 1e-4


# -- KV caches -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tiny-smollm2", "tiny-gemma3"])
def test_incremental_forward_equals_from_scratch(name):
    from wash.engine.models import load_model

    lm = load_model(name)
    prompt = lm.encode_prompt("A short prompt about the weather")
    more = lm.encode(" and then some more words arrive, one by one.")
    ctx = ModelContext(lm, prompt)
    ctx.next_logits()
    for i in more[:4]:
        ctx.append([i])
        ctx.next_logits()
    ctx.append(more[4:])  # a batched catch-up
    ctx.next_logits()
    ctx.sync_to(ctx.ids[:-3] + lm.encode(" replaced tail"))  # crop and re-feed
    cached = ctx.next_logits()
    with torch.no_grad():
        scratch = lm.model(torch.tensor([ctx.ids])).logits[0, -1].float()
    assert torch.allclose(cached, scratch, atol=1e-4), float((cached - scratch).abs().max())


# -- determinism, EOS, stopping -----------------------------------------------------
def test_same_seed_same_text_different_seed_different_text():
    a = contexts_after(run(MIXED, n=20, seed=5))
    b = contexts_after(run(MIXED, n=20, seed=5))
    c = contexts_after(run(MIXED, n=20, seed=6))
    assert a.text == b.text and a.tokens == b.tokens
    assert a.text != c.text


def test_reencoding_every_step_gives_the_same_text():
    a = contexts_after(run(MIXED, n=12, seed=2))
    b = contexts_after(run(MIXED, n=12, seed=2, reencode_every_step=True))
    assert a.text == b.text


@pytest.fixture
def always_end(monkeypatch):
    """A throwaway scheme, "test-eos", that ends the text whenever end-of-text is allowed at all.

    Registered for the test only (``monkeypatch``): left in the registry, it would show
    up in every later test of the same worker that lists the schemes."""
    from wash.watermarks import SCHEMES
    from wash.watermarks.base import softmax
    from wash.watermarks.none import NoWatermark

    class AlwaysEnd(NoWatermark):
        name = "test-eos"
        published = False

        def distribution(self, logits, ids, prompt_len, state):
            from wash.engine.models import load_model

            eos = min(load_model("tiny-smollm2").eos_ids)
            if not torch.isfinite(logits[eos]):
                return softmax(logits)
            out = torch.zeros_like(logits, dtype=torch.float64)
            out[eos] = 1.0
            return out

    monkeypatch.setitem(SCHEMES, AlwaysEnd.name, AlwaysEnd)
    return AlwaysEnd.name


def test_end_of_text_stops_generation(always_end):
    result = contexts_after(run([f"tiny-smollm2:{always_end}:1"], n=20))
    assert result.finish_reason == "eos" and result.text == ""


def test_min_new_tokens_masks_end_of_text(always_end):
    result = contexts_after(run([f"tiny-smollm2:{always_end}:1"], n=20, min_new_tokens=5))
    assert result.finish_reason == "eos" and len(result.tokens) == 5


def test_stop_callback_stops_within_one_step():
    calls = {"n": 0}

    def stop():
        calls["n"] += 1
        return calls["n"] > 3

    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in MIXED], prompt=PROMPT, max_new_tokens=50)
    result = generate(cfg, should_stop=stop)
    assert result.finish_reason == "stopped" and len(result.tokens) <= 3


# -- bad input -------------------------------------------------------------------------
@pytest.mark.parametrize("spec, needle", [
    ("nosuchmodel:kgw:1", "unknown model 'nosuchmodel'"),
    ("tiny-smollm2:nosuch:1", "unknown watermark scheme 'nosuch'"),
    ("tiny-smollm2", "malformed provider spec"),
    ("tiny-smollm2:kgw:abc", "is not an integer"),
    ("tiny-smollm2:kgw:1:gamma", "not of the form name=value"),
    ("tiny-smollm2:kgw:1:nope=3", "has no parameter 'nope'"),
    ("tiny-smollm2:kgw:1:gamma=high", "must be float"),
])
def test_bad_provider_specs(spec, needle):
    with pytest.raises(WashInputError, match=needle):
        GenerationConfig(providers=[ProviderSpec.parse(spec)], prompt="x").validate()


@pytest.mark.parametrize("kw, needle", [
    (dict(providers=[]), "no provider"),
    (dict(providers=["tiny-smollm2:kgw:1"] * 9), "at most 8"),
    (dict(prompt="   "), "prompt is empty"),
    (dict(max_new_tokens=10_000), "max new tokens"),
    (dict(mode="blend"), "unknown mode"),
    (dict(temperature=-1), "temperature"),
])
def test_bad_generation_settings(kw, needle):
    specs = kw.pop("providers", ["tiny-smollm2:kgw:1"])
    cfg = {"prompt": "hello", **kw}
    with pytest.raises(WashInputError, match=needle):
        generate(GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], **cfg))


def test_prompt_longer_than_the_context_is_refused():
    long_prompt = "word " * 2100  # the tiny models have a 2048-token context
    cfg = GenerationConfig(providers=[ProviderSpec.parse("tiny-smollm2:kgw:1")], prompt=long_prompt,
                           max_new_tokens=4)
    with pytest.raises(WashInputError, match="prompt too long for model tiny-smollm2"):
        generate(cfg)
