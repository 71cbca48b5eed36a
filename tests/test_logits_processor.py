"""A project scheme as a transformers logits processor (``wash.watermarks.logits_processor``).

``model.generate`` with ``wash.engine.single_draw.single_processor`` emits, token for token,
what the engine's mode ``single`` generates for the same provider, seed and serving
profile, on tiny random models around the real tokenizers; and without a draw of its own
the processor hands generate the scheme's law as log-probabilities.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessorList

from wash.engine.config import GenerationConfig, ProviderSpec
from wash.engine.ensemble import generate
from wash.engine.single_draw import single_processor
from wash.watermarks import build_scheme
from wash.watermarks.logits_processor import SchemeLogitsProcessor

PROMPT = "The committee met on Tuesday to discuss"
NEW = 24


def _engine_ids(spec: str, seed: int, serving: str, min_new: int) -> list[int]:
    prof = {"paper": dict(top_k=10), "open": {}}[serving]
    config = GenerationConfig(providers=[ProviderSpec.parse(spec)], prompt=PROMPT, mode="single",
                              max_new_tokens=NEW, min_new_tokens=min_new, seed=seed, live_detection=False,
                              **prof)
    result = generate(config)
    return list(result.model_ids[spec.split(":")[0]])


def _generate_ids(spec: str, seed: int, serving: str, min_new: int) -> list[int]:
    processor, lm = single_processor(spec, seed, serving, min_new_tokens=min_new)
    prompt = torch.tensor([lm.encode_prompt(PROMPT)], device=lm.device)
    out = lm.model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=NEW,
                            logits_processor=LogitsProcessorList([processor]), pad_token_id=min(lm.eos_ids),
                            eos_token_id=sorted(lm.eos_ids))
    new = out[0, prompt.shape[1]:].tolist()
    return new[:-1] if new and new[-1] in lm.eos_ids else new  # the engine stops before end of text


@pytest.mark.parametrize("spec,seed,serving,min_new", [
    ("tiny-smollm2:kgw:11", 5, "open", 0),
    ("tiny-gemma3:aar:12", 3, "open", NEW),
    ("tiny-smollm2:dipmark:13", 7, "paper", 0),
    ("tiny-gemma3:synthid:14", 2, "paper", NEW),
    ("tiny-smollm2:exp-edit:15:form=soft", 4, "open", 0),
    ("tiny-gemma3:waterbag:16", 6, "open", 0),
])
def test_generate_with_the_processor_emits_the_engines_single_mode_tokens(spec, seed, serving, min_new):
    engine = _engine_ids(spec, seed, serving, min_new)
    assert len(engine) >= NEW // 2
    assert _generate_ids(spec, seed, serving, min_new) == engine


def test_without_a_draw_the_processor_returns_the_schemes_log_law():
    scheme = build_scheme("kgw", 7, 50)
    processor = SchemeLogitsProcessor(scheme)
    ids = torch.tensor([[3, 9, 4, 1, 5, 2], [8, 8, 1, 7, 0, 6]])
    scores = torch.randn(2, 50, generator=torch.Generator().manual_seed(0))
    out = processor(ids, scores)
    assert processor.prompt_len == 6  # the first call's ids are the prompt
    for b in range(2):
        want = scheme.distribution(scores[b].to(torch.float64), ids[b].tolist(), 6, None)
        torch.testing.assert_close(out[b].exp().to(torch.float64), want, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="scores have 49 entries"):
        processor(ids, scores[:, :49])
