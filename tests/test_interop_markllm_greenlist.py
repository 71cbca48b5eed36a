"""Interoperability with MarkLLM 0.1.5's KGW and Unigram (the reference implementations).

* cheap: our green lists equal MarkLLM's ``KGWUtils`` / ``UnigramUtils`` lists, for
  every context reduction, several context widths and both real vocabulary sizes;
  ``biased-kgw`` equals MarkLLM's KGW with prefix_length 0;
* e2e: text our provider generates is flagged by MarkLLM's detector and by ours (the
  power test of kgw and unigram, test_watermarks_greenlist.py's for the others), and text
  MarkLLM's watermarked generation produces is flagged by ours, on the real
  SmolLM2; on the same token ids our all-token z (``skip_repeated=false``; by default
  each (context, token) pair counts once) equals MarkLLM's score.
MarkLLM's ``evaluation`` package downloads files at import and is never imported.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


import numpy as np
import pytest
import torch

from wash.watermarks import build_scheme

KEY = 15485863
SMOLLM2_V = 49152
GEMMA3_V = 262144


pytestmark = pytest.mark.usefixtures("single_thread")


def _kgw_config(path: Path, gamma: float = 0.5, delta: float = 2.0, prefix_length: int = 4,
                f_scheme: str = "additive", key: int = KEY) -> str:
    path.write_text(json.dumps({
        "algorithm_name": "KGW", "gamma": gamma, "delta": delta, "hash_key": key,
        "prefix_length": prefix_length, "z_threshold": 4.0, "f_scheme": f_scheme, "window_scheme": "left",
    }))
    return str(path)


def _unigram_config(path: Path, key: int = KEY, gamma: float = 0.5) -> str:
    path.write_text(json.dumps({"algorithm_name": "Unigram", "gamma": gamma, "delta": 2.0,
                                "hash_key": key, "z_threshold": 4.0}))
    return str(path)


def _bare_transformers_config(vocab_size: int, model: object = None, tokenizer: object = None, **gen):
    from markllm.utils.transformers_config import TransformersConfig

    return TransformersConfig(model=model, tokenizer=tokenizer, vocab_size=vocab_size, device="cpu", **gen)


# -- green lists, directly ------------------------------------------------------------------
@pytest.mark.parametrize("v", [SMOLLM2_V, GEMMA3_V])
@pytest.mark.parametrize("reduction,width", [("additive", 4), ("additive", 1), ("time", 4), ("time", 2),
                                             ("skip", 4), ("min", 4), ("min", 3)])
def test_kgw_green_list_equals_markllm(tmp_path: Path, v: int, reduction: str, width: int) -> None:
    from markllm.watermark.kgw.kgw import KGWConfig, KGWUtils

    cfg = KGWConfig(_kgw_config(tmp_path / "kgw.json", prefix_length=width, f_scheme=reduction),
                    _bare_transformers_config(v))
    theirs = KGWUtils(cfg)
    ours = build_scheme("kgw", KEY, v, {"context_width": str(width), "reduction": reduction})
    rng = np.random.default_rng(width)
    contexts = [rng.integers(0, v, 6).tolist() for _ in range(3)] + [[0] * 6, [v - 1] * 6]
    for ids in contexts:
        expected = np.sort(theirs.get_greenlist_ids(torch.tensor(ids)).numpy())
        assert np.array_equal(ours.green_ids(ids), expected), (reduction, width, ids)


def test_biased_kgw_list_equals_markllm_kgw_with_no_context(tmp_path: Path) -> None:
    from markllm.watermark.kgw.kgw import KGWConfig, KGWUtils

    cfg = KGWConfig(_kgw_config(tmp_path / "kgw0.json", prefix_length=0),
                    _bare_transformers_config(SMOLLM2_V))
    expected = np.sort(KGWUtils(cfg).get_greenlist_ids(torch.tensor([5, 6, 7])).numpy())
    ours = build_scheme("biased-kgw", KEY, SMOLLM2_V).green_ids([1, 2])
    assert np.array_equal(ours, expected)


@pytest.mark.parametrize("v", [SMOLLM2_V, GEMMA3_V])
@pytest.mark.parametrize("key", [0, 42, KEY, -7, 2**40 + 3])
def test_unigram_green_list_equals_markllm(tmp_path: Path, v: int, key: int) -> None:
    from markllm.watermark.unigram.unigram import UnigramConfig, UnigramUtils

    cfg = UnigramConfig(_unigram_config(tmp_path / "u.json", key=key), _bare_transformers_config(v))
    expected = UnigramUtils(cfg).mask
    ours = build_scheme("unigram", key, v).green_mask([]).numpy()
    assert ours.dtype == np.bool_ and np.array_equal(ours, expected)


# -- generation on the real model ----------------------------------------------------------
# (the ``smollm2`` fixture is conftest's: the real SmolLM2-135M, loaded once per session)
def _markllm(name: str, config: str, lm: object, **gen):
    from markllm.watermark.auto_watermark import AutoWatermark

    tc = _bare_transformers_config(lm.vocab_size, model=lm.model, tokenizer=lm.tokenizer, **gen)
    return AutoWatermark.load(name, algorithm_config=config, transformers_config=tc)


CASES = [("kgw", "KGW", _kgw_config), ("unigram", "Unigram", _unigram_config)]


@pytest.mark.e2e
@pytest.mark.parametrize("ours_name,their_name,write_config", CASES)
def test_our_text_is_detected_by_markllm(tmp_path: Path, smollm2, ours_name: str, their_name: str,
                                         write_config) -> None:
    from support import key_and_next_key_z, watermarked_tokens

    tokens = list(watermarked_tokens("smollm2", ours_name, KEY, 200, seed=7))
    z, other_key_z = key_and_next_key_z(smollm2, ours_name, KEY, tuple(tokens))
    print(f"{ours_name} -> ours: z={z:.2f}, next key z={other_key_z:.2f}")
    assert z > 4.0 and other_key_z < 4.0  # our own power test of this scheme
    text = smollm2.tokenizer.decode(tokens)
    theirs = _markllm(their_name, write_config(tmp_path / "cfg.json"), smollm2)
    verdict = theirs.detect_watermark(text)
    print(f"{ours_name} -> MarkLLM {their_name}: z={verdict['score']:.2f}")
    assert verdict["score"] > 4.0 and verdict["is_watermarked"]
    # MarkLLM with another key sees nothing
    other = _markllm(their_name, write_config(tmp_path / "other.json", key=KEY + 1), smollm2)
    assert other.detect_watermark(text)["score"] < 4.0


@pytest.mark.e2e
@pytest.mark.parametrize("ours_name,their_name,write_config", CASES)
def test_markllm_text_is_detected_by_us(tmp_path: Path, smollm2, ours_name: str, their_name: str,
                                        write_config) -> None:
    from support import PROMPT

    # top_k=0: plain sampling as in our providers (generate's default top-k 50 makes
    # Unigram's fixed list loop on a few green words).
    theirs = _markllm(their_name, write_config(tmp_path / "cfg.json"), smollm2,
                      max_new_tokens=200, min_new_tokens=200, do_sample=True, top_k=0)
    with torch.random.fork_rng():
        torch.manual_seed(11)
        text = theirs.generate_watermarked_text(PROMPT)
    ids = smollm2.encode(text)  # MarkLLM returns prompt + continuation
    prompt = smollm2.encode(PROMPT)
    assert ids[:len(prompt)] == prompt
    ours = build_scheme(ours_name, KEY, smollm2.vocab_size)
    det = ours.detect(ids[len(prompt):], prefix=prompt)
    print(f"MarkLLM {their_name} -> {ours_name}: z={det.z:.2f} over {det.tokens_scored} tokens")
    assert det.z > 4.0
    other = build_scheme(ours_name, KEY + 1, smollm2.vocab_size)
    assert other.detect(ids[len(prompt):], prefix=prompt).z < 4.0
    # Counting every token as MarkLLM does (skip_repeated=false), our z is MarkLLM's score
    # on the same ids.
    all_tokens = build_scheme(ours_name, KEY, smollm2.vocab_size, {"skip_repeated": "false"}).detect(ids)
    assert math.isclose(all_tokens.z, theirs.detect_watermark(text)["score"], rel_tol=1e-9)
