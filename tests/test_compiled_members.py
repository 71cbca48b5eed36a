"""The compiled backend: one-id decode steps through ``torch.compile`` on a static KV cache.

It must change how the forwards run and not what they give: a context's logits are
``ModelContext``'s within float tolerance after every call the engine makes (append,
truncate, sync_to, catch-ups, restart, a cache outgrown, a text past Gemma's sliding
window), and seeded WASH runs across the two tokenizers (routed spans, re-synchronised
contexts, eager and lazy forwards) give the committed fingerprints' texts.

Cost: compiling is the slow part (about 8 s per tiny model on a 2-core CPU), so the
static-cache path is checked eagerly (``compile=false``) and the compiled step is built
once per model for the module (``compiled_members._STEPS``), by the first test needing it.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
import torch

from fingerprint_cases import EXPECTED, MIXED, PROMPT, expected, run_case, split
from wash.engine.backends import backend_text, parse_backend
from wash.engine.compiled_members import CompiledBackend, CompiledMember
from wash.engine.members import LocalMember
from wash.core.errors import WashInputError

#: The largest gap allowed between a compiled member's logits and ``ModelContext``'s (measured: 2.7e-6).
ATOL = 1e-5
#: Fingerprint cases whose texts the compiled step reproduces (seeds pinned by the cases themselves).
PINNED = ["wash-eager", "wash-lazy", "wash-eager-schemes"]


def test_the_backend_is_one_registry_line_with_options_parsed_once():
    backend = parse_backend("compiled:compile=false,cache_len=64")
    assert isinstance(backend, CompiledBackend) and (backend.compile, backend.cache_len) == (False, 64)
    assert backend_text(backend) == "compiled:compile=False,cache_len=64"
    assert backend_text("compiled") == "compiled"
    bad = {"mode=fast": "mode='fast' is not one of default, reduce-overhead, max-autotune, "
                        "max-autotune-no-cudagraphs",
           "cache_len=0": "cache_len must be a whole number from 1 to 262144, got 0",
           "compile=maybe": "compile='maybe' is not true or false",
           "device=abacus": "device='abacus' is not a torch device"}
    if not torch.cuda.is_available():
        bad["device=cuda"] = "device='cuda', but this machine has no CUDA device"
    for option, message in bad.items():
        with pytest.raises(WashInputError) as refused:
            parse_backend(f"compiled:{option}")
        assert str(refused.value) == f"backend 'compiled': {message}"
    accepted = r"\(accepted: device, mode, compile, cache_len, host_logits\)$"
    with pytest.raises(WashInputError, match=r"^backend 'compiled' has no parameter 'graphs' " + accepted):
        parse_backend("compiled:graphs=on")


def _walk(member: CompiledMember, local: LocalMember, long: bool) -> float:
    """Both members' contexts through every call the engine makes; the largest gap in their logits."""
    prompt = member.encode_prompt(PROMPT)
    mine, theirs = member.context(prompt), local.context(prompt)
    gaps = []

    def compare() -> int:
        a, b = member.run(mine.next_logits), local.run(theirs.next_logits)
        assert mine.ids == theirs.ids
        gaps.append(float((a - b).abs().max()))
        return int(b.argmax())

    def both(call: Callable[[Any], Any]) -> None:
        call(mine)
        call(theirs)

    for _ in range(12):  # past the first cache length: the cache doubles, its contents kept
        token = compare()
        both(lambda c: c.append([token]))
    both(lambda c: c.truncate(len(c.ids) - 5))  # positions left behind must never be attended
    compare()
    target = mine.ids[:-3] + [5, 6, 7, 8]
    both(lambda c: c.sync_to(target))  # a re-synchronisation: a cut and a catch-up of four ids
    compare()
    both(lambda c: (c.append([9, 10]), c.catch_up_async(), c.append([11])))  # lazy: catch up, then one more
    compare()
    both(lambda c: c.catch_up_async())  # caught up to the end: the last id is fed again for its logits
    compare()
    both(lambda c: c.restart(prompt + [1, 2, 3]))
    for _ in range(3):
        token = compare()
        both(lambda c: c.append([token]))
    uncached = member.context(mine.ids, use_cache=False)
    assert torch.allclose(member.run(uncached.next_logits), member.run(mine.next_logits), atol=ATOL)
    if long:  # past Gemma's 512-id sliding window: every position is kept and the window is the mask's
        text = (prompt * 80)[:700]
        mine.restart(text)
        gaps.append(float((member.run(mine.next_logits) - local.position_logits(text)[-1]).abs().max()))
    return max(gaps)


@pytest.mark.parametrize("name", ["tiny-smollm2", "tiny-gemma3"])
def test_the_static_cache_gives_model_contexts_logits(name):
    member = parse_backend("compiled:compile=false,cache_len=16").member(name)
    assert member.step is None
    assert _walk(member, LocalMember(member.lm), long=name == "tiny-gemma3") <= ATOL


def test_the_compiled_step_gives_model_contexts_logits():
    member = parse_backend("compiled").member("tiny-smollm2")  # the cache's growth is the eager test's
    assert member.step is not None and member.step is member.step  # one compiled step per model and mode
    assert _walk(member, LocalMember(member.lm), long=False) <= ATOL


def test_a_context_belongs_only_to_members_that_decode_the_same_way():
    compiled = parse_backend("compiled:compile=false").member("tiny-smollm2")
    ctx = compiled.context([1, 2, 3])
    assert ctx.belongs_to(compiled)
    assert ctx.belongs_to(parse_backend("compiled:compile=false").member("tiny-smollm2"))
    assert not ctx.belongs_to(LocalMember(compiled.lm))
    assert not LocalMember(compiled.lm).context([1, 2, 3]).belongs_to(compiled)


@pytest.mark.parametrize("name", PINNED)
def test_wash_texts_are_the_committed_fingerprints_texts(name, monkeypatch):
    """Routed spans and re-synchronisation across the two tokenizers, eager and lazy forwards: the
    fingerprints' portable parts (the text, the number of draws). Their float bits are not the local
    backend's: the static cache's attention and the compiled step sum in other orders."""
    monkeypatch.setenv("WASH_BACKEND", "compiled")
    portable, _ = expected(name, json.loads(EXPECTED.read_text()))
    assert split({name: run_case(name)})[0][name] == portable


def test_served_probabilities_differ_from_local_by_float_noise_only():
    """Every candidate's probability under every distribution of a routed WASH run, step by step."""
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate_stream
    from wash.engine.events import ResyncEvent, StepEvent

    def run(backend: str) -> tuple[list[StepEvent], int]:
        config = GenerationConfig(providers=[ProviderSpec.parse(s) for s in MIXED], prompt=PROMPT,
                                  max_new_tokens=24, seed=3, backend=backend)
        events = list(generate_stream(config))
        steps = [e for e in events if isinstance(e, StepEvent)]
        return steps, sum(isinstance(e, ResyncEvent) for e in events)

    (local, local_resyncs), (compiled, compiled_resyncs) = run("local"), run("compiled")
    assert local_resyncs == compiled_resyncs > 0
    gaps = []
    for a, b in zip(local, compiled, strict=True):
        assert (a.union_id, a.candidate_ids) == (b.union_id, b.candidate_ids)
        for x, y in zip([*a.provider_probs, a.average_probs, a.consensus_probs],
                        [*b.provider_probs, b.average_probs, b.consensus_probs]):
            gaps += [abs(p - q) for p, q in zip(x or [], y or [])]
    assert max(gaps) < 1e-5  # measured 7.1e-7 over 32 seeded runs of 32 tokens


def test_bench_compares_local_with_the_compiled_backend_under_its_own_name():
    """``bench --compare-backends --backend compiled``: the report's keys carry the other backend's name."""
    from wash.bench.models import compare_backends

    report = compare_backends(("tiny-smollm2", "tiny-gemma3"), tokens=2, rounds=1, other="compiled:compile=false")
    assert report["backend"] == "compiled:compile=False"
    for row in report["wash"] + report["plain_decode"] + report["top_k_rows_shipped"]:
        assert row["local_ms"] > 0 and row["compiled_ms"] > 0
        assert row["compiled_overhead_ms"] == pytest.approx(row["compiled_ms"] - row["local_ms"]) or "n" in row
    assert list(report["targets"]) == ["compiled_eager_n3_overhead_ms<=3"]
