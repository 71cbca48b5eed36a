"""A scheme written outside the project plugs in by registering it, and nothing else.

Why: a new scheme must be its module plus one registry line. This file is such a module:
a green list drawn from ``torch.rand`` under the key, a law no project module knows. Once
registered it runs through every path a project scheme runs through, with no other file
touched: WASH generation with the live detector, per-text detection with the scheme's own
sum and with a model-aware statistic (its keyed law, batched, from the green-list family), and
transformers' ``generate`` through the logits-processor adapter, token for token as the
engine's single mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import pytest
import torch
from transformers import LogitsProcessorList

from wash.detection import detect_text
from wash.engine.config import GenerationConfig, ProviderSpec
from wash.engine.ensemble import generate
from wash.engine.providers import build_providers
from wash.engine.single_draw import single_processor
from wash.watermarks import SCHEMES, register
from wash.watermarks.greenlist import GreenListScheme, check_fraction, check_skip_repeated

PROMPT = "The committee met on Tuesday to discuss"


class RandGreen(GreenListScheme):
    """A test's scheme: one green list per key, ``torch.rand`` under a generator seeded by the key."""

    name = "test-rand-green"
    title = "Rand-green"
    summary = "a test's context-free green list drawn by torch.rand"
    description = "A test's scheme: a fixed green {gamma:.0%} per key gets +{delta:g}."

    @dataclass(frozen=True)
    class Params:
        gamma: float = 0.5
        delta: float = 4.0
        skip_repeated: bool = False

        def __post_init__(self) -> None:
            check_fraction(self, "gamma")
            check_skip_repeated(self)

    def __init__(self, key: int, vocab_size: int, params: "RandGreen.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        self.gamma = float(self.params.gamma)
        self.delta = float(self.params.delta)
        g = torch.Generator().manual_seed(self.key)
        self._mask = torch.rand(self.vocab_size, generator=g) < self.gamma

    def list_id(self, ids: Sequence[int]) -> Hashable:
        return 0

    def green_mask(self, ids: Sequence[int], state: Any = None) -> torch.Tensor:
        return self._mask


@pytest.fixture(scope="module")
def rand_green():
    register(RandGreen)  # the one registry line
    try:
        yield RandGreen.name
    finally:
        del SCHEMES[RandGreen.name]


def _single(spec: str, seed: int, new: int):
    config = GenerationConfig(providers=[ProviderSpec.parse(spec)], prompt=PROMPT, mode="single",
                              max_new_tokens=new, seed=seed, live_detection=True)
    return generate(config)


def test_a_registered_scheme_generates_under_wash_with_its_live_detector(rand_green):
    specs = [f"tiny-smollm2:{rand_green}:7", "tiny-gemma3:kgw:9"]
    config = GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT, mode="wash",
                              max_new_tokens=24, seed=3, live_detection=True)
    result = generate(config)
    assert len(result.tokens) >= 12
    ours = result.detection[0]
    assert ours.scheme == rand_green and ours.tokens_scored > 0
    again = detect_text(build_providers([ProviderSpec.parse(s) for s in specs]).providers, result.text)
    assert again[0].z == pytest.approx(ours.z)  # the live detector and per-text detection agree


def test_its_text_is_detected_by_its_own_sum_and_by_the_model_aware_ratio(rand_green):
    spec = f"tiny-smollm2:{rand_green}:21"
    result = _single(spec, seed=5, new=80)
    providers = build_providers([ProviderSpec.parse(spec)]).providers
    own = detect_text(providers, result.text)[0]
    assert own.z > 4  # delta = 4 on a random model: most tokens green
    lr = detect_text(providers, result.text, statistic="lr")[0]
    assert lr.detected and lr.tokens_scored > 0
    other_key = build_providers([ProviderSpec.parse(f"tiny-smollm2:{rand_green}:22")]).providers
    assert not detect_text(other_key, result.text, statistic="lr")[0].detected  # another key sees nothing


def test_transformers_generate_with_the_adapter_emits_the_engines_tokens(rand_green):
    spec, seed, new = f"tiny-gemma3:{rand_green}:31", 4, 24
    engine = list(_single(spec, seed, new).model_ids["tiny-gemma3"])
    processor, lm = single_processor(spec, seed, "open", min_new_tokens=0)
    prompt = torch.tensor([lm.encode_prompt(PROMPT)], device=lm.device)
    out = lm.model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=new,
                            logits_processor=LogitsProcessorList([processor]), pad_token_id=min(lm.eos_ids),
                            eos_token_id=sorted(lm.eos_ids))
    ids = out[0, prompt.shape[1]:].tolist()
    ids = ids[:-1] if ids and ids[-1] in lm.eos_ids else ids
    assert len(engine) >= new // 2 and ids == engine
