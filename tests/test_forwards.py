"""Parallel and lazy forwards on tiny random models around the real tokenizers.

Parallel forwards must change nothing but the wall clock; lazy forwards must draw
each token from the same law as the eager average, and the models that sat a step
out must catch up to exactly the contexts (and logits) they would have had.
"""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from wash.engine.config import GenerationConfig, ProviderSpec
from wash.engine.decode import Generation
from wash.engine.ensemble import LazySteps, generate, generate_stream
from wash.engine.events import StepEvent
from wash.engine.providers import build_providers
from wash.engine.members import ModelContext

MIXED = ["tiny-smollm2:kgw:1", "tiny-gemma3:aar:2", "tiny-smollm2:unigram:3"]
PROMPT = "The committee met on Tuesday to discuss"


def config(specs=MIXED, n=24, seed=0, **kw) -> GenerationConfig:
    return GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT,
                            max_new_tokens=n, seed=seed, **kw)


def steps(cfg):
    return [e for e in generate_stream(cfg) if isinstance(e, StepEvent)]


# -- parallel forwards -------------------------------------------------------------------
def test_parallel_and_sequential_forwards_give_equal_logits(tiny_smollm2, tiny_gemma3):
    from wash.engine.parallel import run_all

    lms = [tiny_smollm2, tiny_gemma3]
    par = [ModelContext(lm, lm.encode_prompt(PROMPT)) for lm in lms]
    seq = [ModelContext(lm, lm.encode_prompt(PROMPT)) for lm in lms]
    for _ in range(4):
        a = run_all([(c.lm.name, c.next_logits) for c in par])
        b = [c.next_logits() for c in seq]  # the caller's thread, its own thread count
        for x, y in zip(a, b):
            assert torch.allclose(x, y, atol=1e-5), float((x - y).abs().max())
        nxt = [int(x.argmax()) for x in a]
        for c, d, i in zip(par, seq, nxt):
            c.append([i])
            d.append([i])


def test_parallel_and_sequential_forwards_give_identical_seeded_text(monkeypatch):
    """The choice is the run's (``parallel_forwards``; the environment gives only its default): in one
    process, under one environment, a run on one shared thread computes every forward there and
    draws the same text as a run whose models compute side by side, each on its own thread."""
    import threading

    import wash.engine.members as members

    monkeypatch.setenv("WASH_THREADS_PER_MODEL", "1")
    monkeypatch.setenv("WASH_PARALLEL_FORWARDS", "1")
    feed, threads = members.ModelContext._feed, []

    def spy(self, target, logits=True):
        threads.append(threading.current_thread().name)
        return feed(self, target, logits)

    monkeypatch.setattr(members.ModelContext, "_feed", spy)
    par = steps(config(n=20, seed=4))
    on_par = set(threads)
    threads.clear()
    seq = steps(config(n=20, seed=4, parallel_forwards=False))
    assert on_par == {"wash-tiny-smollm2_0", "wash-tiny-gemma3_0"}
    assert set(threads) == {"wash-(all models)_0"}
    assert [e.token for e in par] == [e.token for e in seq]
    assert [e.average_probs for e in par] == [e.average_probs for e in seq]


def test_lazy_background_catch_up_does_not_depend_on_timing(monkeypatch):
    """Background catch-ups feed chunks fixed by the algorithm: the same seed gives the same
    text and the same per-step distributions however late each forward runs."""
    import time

    import wash.engine.members as members

    monkeypatch.setenv("WASH_THREADS_PER_MODEL", "1")
    first = steps(config(n=30, seed=7, forwards="lazy"))
    feed = members.ModelContext._feed
    background = {"feeds": 0}

    def slow_feed(self, target, logits=True):  # every forward late: queued work piles up differently
        background["feeds"] += not logits
        time.sleep(0.01)
        return feed(self, target, logits)

    monkeypatch.setattr(members.ModelContext, "_feed", slow_feed)
    slow = steps(config(n=30, seed=7, forwards="lazy"))
    assert background["feeds"] > 10, "the models not picked next catch up in the background"
    assert [e.token for e in slow] == [e.token for e in first]
    assert [e.provider_probs for e in slow] == [e.provider_probs for e in first]


def test_lazy_sequential_forwards_catch_up_when_picked(monkeypatch):
    """On one shared thread, lazy models feed their backlog in one forward when picked
    (no background feeds), and a seed still fixes the text."""
    monkeypatch.setenv("WASH_PARALLEL_FORWARDS", "0")
    a = generate(config(n=30, seed=7, forwards="lazy"))
    b = generate(config(n=30, seed=7, forwards="lazy"))
    assert a.text == b.text
    # one forward per drawn token (a routed span's discarded boundary token included), nothing else
    assert sum(a.timing.forward_calls.values()) <= len(a.tokens) + a.routing.routed_spans
    assert a.settings["parallel_forwards"] is False


# -- lazy forwards -----------------------------------------------------------------------
def test_lazy_steps_run_only_the_chosen_model_and_show_only_its_distribution():
    result_events = steps(config(n=30, seed=1, forwards="lazy"))
    result = generate(config(n=30, seed=1, forwards="lazy"))
    lazy = [e for e in result_events if not e.routed]
    assert lazy and all(e.chosen is not None for e in lazy)
    for e in lazy:
        assert e.average_probs is None and e.consensus_probs is None and e.linf is None
        assert [i for i, p in enumerate(e.provider_probs) if p is not None] == [e.chosen]
    # Only the chosen model runs a forward: the other one catches up in batches.
    assert min(result.timing.forward_calls.values()) < len(result.tokens)
    assert result.settings["forwards"] == "lazy"


def test_lazy_draws_the_first_token_from_the_same_law_as_the_average():
    """Empirical first tokens of lazy runs over many seeds against the exact p̄ of an eager step.

    The schemes (KGW, AAR, Unigram) depend on the key and the context only, so p̄ at
    the first step is the same for every seed. Binned to the likeliest tokens plus
    "other", chi-square, failing only below p = 0.001.
    """
    first = steps(config(n=1, seed=0, view_k=8))[0]
    bins = [(u, p) for u, p in zip(first.candidate_ids, first.average_probs) if p > 0.02]
    assert len(bins) >= 2, "the test needs a few likely tokens"
    expected = [p for _, p in bins] + [1.0 - sum(p for _, p in bins)]
    index = {u: i for i, (u, _) in enumerate(bins)}
    counts = [0] * len(expected)
    runs = 300
    for seed in range(runs):
        token = generate(config(n=1, seed=seed, forwards="lazy", live_detection=False)).tokens[0]
        counts[index.get(token.union_id, len(bins))] += 1
    keep = [i for i, p in enumerate(expected) if p * runs >= 5]  # chi-square needs expected counts >= 5
    obs = [counts[i] for i in keep] + [sum(c for i, c in enumerate(counts) if i not in keep)]
    exp = [expected[i] * runs for i in keep] + [sum(p for i, p in enumerate(expected) if i not in keep) * runs]
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    scale = sum(obs) / sum(exp)
    assert stats.chisquare(obs, [e * scale for e in exp]).pvalue > 0.001, (obs, exp)


def test_lazy_catch_up_gives_the_contexts_and_logits_of_a_full_re_encoding():
    """After lazy steps and routed spans, every model's context spells the text and its
    KV-cached logits (fed the pending ids in one batch) equal a forward from scratch."""
    cfg = config(n=40, seed=3, forwards="lazy")
    cfg.validate()
    run = Generation(cfg, build_providers(cfg.active_providers()), cfg.strategy)
    stepper = cfg.strategy.start(run)
    assert isinstance(stepper, LazySteps)
    routed = 0
    while len(run.tokens) < cfg.max_new_tokens and run.finish == "length":
        event = stepper.step()
        if event is None:
            break
        if event.routed:
            routed += 1
            list(run.route(lambda: False))
            run.resync()
            stepper.resynced()
    assert routed, "tiny random models route within 40 tokens"
    text = b"".join(run.alignment.token_bytes(t.union_id) for t in run.tokens)
    for m, ctx in run.contexts.items():
        vocab = run.members[m].vocab
        assert b"".join(vocab.token_bytes[i] for i in ctx.generated_ids()) == text
        pending = len(ctx.ids) - ctx.n_cached
        cached = ctx.next_logits()
        with torch.no_grad():
            scratch = ctx.lm.model(torch.tensor([ctx.ids])).logits[0, -1].float()
        assert torch.allclose(cached, scratch, atol=1e-4), (m, pending, float((cached - scratch).abs().max()))


@pytest.mark.parametrize("mode", ["wash", "naive", "single", "unwatermarked"])
def test_lazy_runs_every_mode(mode):
    result = generate(config(n=16, seed=2, mode=mode, forwards="lazy"))
    assert len(result.tokens) == 16 or result.finish_reason == "eos"
    assert "".join(t.text for t in result.tokens) == result.text
