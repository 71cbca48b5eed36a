"""Interoperability of AAR with MarkLLM 0.1.5's EXP (its name for Aaronson's scheme).

* cheap: for the same key and context our keyed uniforms r equal MarkLLM's
  ``EXPUtils`` draws (both real vocabulary sizes, a zero-product context included);
  our point mass sits on the token MarkLLM's ``exp_sampling`` picks; on the same
  text our score (MarkLLM-exact setting ``skip_repeated=false``) equals MarkLLM's.
* e2e: on the real SmolLM2, text from our provider is flagged by MarkLLM's EXP
  detector (p < 1e-4), by ours and by the release's (the power test of AAR's default
  form: test_watermarks_forms.check_power_of_form), and MarkLLM's EXP-watermarked text
  is flagged by ours (z > 4).

Not tested against MarkLLM on purpose: EXPEdit and ITSEdit. MarkLLM draws their
420 x V key with a pure-Python Mersenne twister (minutes for a 262k vocabulary;
we derive rows from ``hashing`` instead), and its ITSEdit seeds generation from
the global torch RNG, so its own detector misses its text unless the caller seeds
that RNG. MarkLLM's ``evaluation`` package downloads files at import and is never
imported.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace


import pytest
import torch

from wash.watermarks import build_scheme
from support import POWER_KEYS, PROMPT, check_power_of_form, markllm_exp_config, MARKLLM_EXP_KEY as KEY

SMOLLM2_V = 49152
GEMMA3_V = 262144


pytestmark = pytest.mark.usefixtures("single_thread")


def _exp_utils(vocab_size: int, key: int = KEY):
    from markllm.watermark.exp.exp import EXPUtils

    return EXPUtils(SimpleNamespace(prefix_length=4, hash_key=key, vocab_size=vocab_size, top_k=0))


@pytest.mark.parametrize("v", [SMOLLM2_V, GEMMA3_V])
def test_keyed_uniforms_equal_markllm(v: int) -> None:
    ours = build_scheme("aar", KEY, v)
    theirs = _exp_utils(v)
    g = torch.Generator().manual_seed(v)
    contexts = [torch.randint(1, v, (n,), generator=g).tolist() for n in (4, 5, 9, 30)]
    contexts.append([17, 0, 5, 99])  # product 0: seed 0 for every key, in both implementations
    for ids in contexts:
        theirs.seed_rng(torch.tensor(ids))
        assert torch.equal(ours.keyed_uniforms(ids), torch.rand(v, generator=theirs.rng)), ids


def test_point_mass_is_markllm_exp_sampling_choice() -> None:
    v = SMOLLM2_V
    ours = build_scheme("aar", KEY, v)
    theirs = _exp_utils(v)
    g = torch.Generator().manual_seed(0)
    for step in range(25):
        logits = torch.randn(v, generator=g) * 3.0
        ids = torch.randint(1, v, (6,), generator=g).tolist()
        theirs.seed_rng(torch.tensor(ids))
        r = torch.rand(v, generator=theirs.rng)
        probs = torch.softmax(logits, dim=-1)[None]  # MarkLLM works in float32
        expected = int(theirs.exp_sampling(probs, r))
        assert int(ours.distribution(logits, ids, 2, None).argmax()) == expected


def test_same_text_same_score_as_markllm(tmp_path: Path, tiny_smollm2) -> None:
    """With ``skip_repeated=false`` our Gamma-tail p equals MarkLLM's on the same text."""
    from markllm.utils.transformers_config import TransformersConfig
    from markllm.watermark.auto_watermark import AutoWatermark

    lm = tiny_smollm2
    tc = TransformersConfig(model=lm.model, tokenizer=lm.tokenizer, vocab_size=lm.vocab_size, device="cpu")
    config = markllm_exp_config(tmp_path / "exp.json", sequence_length=40)
    markllm = AutoWatermark.load("EXP", algorithm_config=config, transformers_config=tc)
    text = markllm.generate_watermarked_text("A short story about a cat who")
    ids = lm.encode(text)
    ours = build_scheme("aar", KEY, lm.vocab_size, {"skip_repeated": "false"}).detect(ids)
    p_theirs = float(markllm.detect_watermark(text)["score"])
    assert ours.tokens_scored == len(ids) - 4
    assert math.log(ours.p) == pytest.approx(math.log(p_theirs), rel=1e-4)


@pytest.mark.e2e
def test_markllm_detects_our_provider(tmp_path: Path, smollm2) -> None:
    from markllm.utils.transformers_config import TransformersConfig
    from markllm.watermark.auto_watermark import AutoWatermark

    assert POWER_KEYS["aar"] == KEY
    result = check_power_of_form("aar", "", smollm2)  # AAR's default form's power test, same text
    tc = TransformersConfig(model=smollm2.model, tokenizer=smollm2.tokenizer, vocab_size=smollm2.vocab_size,
                            device="cpu")
    config = markllm_exp_config(tmp_path / "exp.json")
    markllm = AutoWatermark.load("EXP", algorithm_config=config, transformers_config=tc)
    verdict = markllm.detect_watermark(result.text)
    n = len(result.model_ids["smollm2"])
    print(f"\nMarkLLM EXP on our AAR text ({n} tokens): p = {verdict['score']:.3g}")
    assert verdict["score"] < 1e-4 and verdict["is_watermarked"]


@pytest.mark.e2e
def test_we_detect_markllm_exp_text(tmp_path: Path, smollm2) -> None:
    from markllm.utils.transformers_config import TransformersConfig
    from markllm.watermark.auto_watermark import AutoWatermark


    tc = TransformersConfig(model=smollm2.model, tokenizer=smollm2.tokenizer, vocab_size=smollm2.vocab_size,
                            device="cpu")
    # 80 tokens, not 200: our z measured 14.2 on MarkLLM's first 80 (22.0 on 200), 3.5 times
    # the threshold; growing as sqrt(n), z reaches 4 near 7 tokens.
    config = markllm_exp_config(tmp_path / "exp.json", sequence_length=80)
    markllm = AutoWatermark.load("EXP", algorithm_config=config, transformers_config=tc)
    text = markllm.generate_watermarked_text(PROMPT)  # deterministic: no sampling randomness
    detection = build_scheme("aar", KEY, smollm2.vocab_size).detect(smollm2.encode(text))
    print(f"\nour AAR detector on MarkLLM EXP text ({detection.tokens_scored} tokens scored): "
          f"z = {detection.z:.2f}")
    assert detection.z > 4
