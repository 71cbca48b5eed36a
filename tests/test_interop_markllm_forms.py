"""Interoperability of the WASH release's forms with MarkLLM 0.1.5, where MarkLLM has them.

What MarkLLM 0.1.5 has (read in its installed source):

* EXP (AAR) and EXPEdit: Gumbel-max only (``exp_sampling`` is ``argmax u ** (1/p)``
  in both); neither has the soft form (u ** (1/p), normalised, sampled). So no
  MarkLLM text in the soft form exists to read, and none of ours is tested against
  a MarkLLM soft generator. Detection does not depend on the form, though: MarkLLM's
  EXP detector reads the r of each observed token, so it is checked on our soft AAR
  text, and our release-variant AAR detector on MarkLLM's EXP text.
* ITSEdit: ONE permutation per key, shared by every position (``transform_key_func``
  draws one ``randperm`` and the n uniforms from one generator): our
  ``permutation=shared``. Our shared key is drawn as MarkLLM draws it
  (``hashing.markllm_its_key``), so: the keys are equal, our pick is MarkLLM's
  ``transform_sampling`` choice, our detector flags MarkLLM's ITSEdit text, and
  MarkLLM's ITSEdit detector flags ours (and not our per-position text: the form
  matters). MarkLLM's ITSEdit seeds its generation from the global torch RNG: we
  seed it with the key right before generating, as its detector does.

MarkLLM's EXPEdit and ITSEdit modules import a Levenshtein DP compiled for CPython 3.9
only (``cython_files/levenshtein.cpython-39-*.so``), so on our Python they do not
import. For ITSEdit we register a stand-in module under that name before importing:
our own DP of the definition in MarkLLM's ``levenshtein.pyx`` (``A[i][j] = min(A[i-1][j]
+ gamma, A[i][j-1] + gamma, A[i-1][j-1] + |x_i - y_j|)``, borders ``i * gamma``), checked
against a brute-force DP below. MarkLLM's EXPEdit is not tested (no soft form; its
420 x V key comes from a pure-Python Mersenne twister, see test_interop_markllm_sampling).
MarkLLM's ``evaluation`` package downloads files at import and is never imported.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from wash.watermarks import build_scheme, hashing
from support import PROMPT, levenshtein as cost_levenshtein, markllm_exp_config, MARKLLM_EXP_KEY as EXP_KEY


pytestmark = pytest.mark.usefixtures("single_thread")

ITS_KEY = 42  # MarkLLM's default ITSEdit key
STORY = "A short story about a cat who"
_LEVENSHTEIN_MODULE = "markllm.watermark.its_edit.cython_files.levenshtein"


def levenshtein(x, y, gamma: float = 1.0) -> float:
    """Edit-distance DP between two float sequences, substitution cost |x_i - y_j|.

    Row by row: a row's values before left moves are min(up + gamma, diagonal + cost);
    a chain of left moves adds gamma per step, which a running minimum of
    ``value - j * gamma`` resolves at once (gamma >= 0).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    steps = np.arange(len(y) + 1) * float(gamma)
    row = steps.copy()
    for i in range(1, len(x) + 1):
        before_left = np.minimum(row[1:] + gamma, row[:-1] + np.abs(x[i - 1] - y))
        row = np.minimum.accumulate(np.concatenate(([i * gamma], before_left)) - steps) + steps
    return float(row[-1])


def _its_edit_class():
    if _LEVENSHTEIN_MODULE not in sys.modules:
        stand_in = types.ModuleType(_LEVENSHTEIN_MODULE)
        stand_in.levenshtein = levenshtein
        sys.modules[_LEVENSHTEIN_MODULE] = stand_in
    from markllm.watermark.its_edit.its_edit import ITSEdit

    return ITSEdit


def _markllm(lm, algorithm: str, config: Path):
    from markllm.utils.transformers_config import TransformersConfig
    from markllm.watermark.auto_watermark import AutoWatermark

    if algorithm == "ITSEdit":
        _its_edit_class()
    tc = TransformersConfig(model=lm.model, tokenizer=lm.tokenizer, vocab_size=lm.vocab_size, device="cpu")
    return AutoWatermark.load(algorithm, algorithm_config=str(config), transformers_config=tc)


def _its_config(path: Path, keylen: int, length: int, n_runs: int = 20) -> Path:
    path.write_text(json.dumps({"algorithm_name": "ITSEdit", "pseudo_length": keylen, "sequence_length": length,
                                "n_runs": n_runs, "key": ITS_KEY, "p_threshold": 0.1, "top_k": 0}))
    return path


def _markllm_its_text(markllm, prompt: str) -> str:
    """MarkLLM's ITSEdit text of ``sequence_length`` tokens, not cut at the first token id 2.

    Its ``clip`` truncates at id 2, LLaMA's end of text, which in SmolLM2's vocabulary is
    ``<|im_end|>``: where the sampler draws it early (after 39 tokens on an AMD EPYC, whose
    floats differ in the last bits from an Intel Xeon's) the text is too short to show power,
    and its length would depend on the CPU. The tokens past it are still ITSEdit's draws."""
    torch.manual_seed(ITS_KEY)  # MarkLLM's ITSEdit draws its generation seed from the global RNG
    markllm.clip = lambda tokens: tokens
    return markllm.generate_watermarked_text(prompt)


def _our_text(model: str, spec: str, n_new: int, prompt: str = STORY, seed: int = 3) -> str:
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate

    config = GenerationConfig(providers=[ProviderSpec.parse(f"{model}:{spec}")], prompt=prompt, mode="single",
                              max_new_tokens=n_new, min_new_tokens=n_new, seed=seed, live_detection=False)
    return generate(config).text


# -- cheap ----------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [0.0, 0.4, 1.0])
def test_levenshtein_stand_in_is_the_dp(gamma: float) -> None:
    g = torch.Generator().manual_seed(int(gamma * 10))
    for n, m in ((1, 1), (3, 7), (8, 5), (9, 9)):
        x, y = torch.rand(n, generator=g).tolist(), torch.rand(m, generator=g).tolist()
        cost = [[abs(a - b) for b in y] for a in x]
        if n == m:
            assert levenshtein(x, y, gamma) == pytest.approx(cost_levenshtein(cost, gamma), abs=1e-9)
        # a general rectangle, straight from the recurrence
        a = [[0.0] * (m + 1) for _ in range(n + 1)]
        for i in range(n + 1):
            for j in range(m + 1):
                a[i][j] = (i + j) * gamma if i == 0 or j == 0 else min(
                    a[i - 1][j] + gamma, a[i][j - 1] + gamma, a[i - 1][j - 1] + cost[i - 1][j - 1])
        assert levenshtein(x, y, gamma) == pytest.approx(a[n][m], abs=1e-9)


@pytest.mark.parametrize("v", [49152, 262144])
def test_shared_key_equals_markllm_itsedit_key(v: int) -> None:
    from types import SimpleNamespace

    its_edit = _its_edit_class()
    utils_cls = sys.modules[its_edit.__module__].ITSEditUtils
    keylen = 420
    # MarkLLM's detector: seed torch with the key, the first of 2**32-randints seeds the key draw
    torch.manual_seed(ITS_KEY)
    seed = int(torch.randint(2**32, (200,))[0])
    utils = utils_cls(SimpleNamespace(key=ITS_KEY))
    g = torch.Generator()
    g.manual_seed(seed)
    xi, pi = utils.transform_key_func(g, keylen, v)
    ours = build_scheme("its-edit", ITS_KEY, v, {"permutation": "shared"})
    assert torch.equal(ours.row(0), pi) and torch.equal(ours.row(317), pi)
    assert torch.equal(ours.u, xi[:, 0])
    assert torch.equal(hashing.markllm_its_key(ITS_KEY, v, keylen)[1], xi[:, 0])


def test_shared_pick_is_markllm_transform_sampling_choice() -> None:
    from types import SimpleNamespace

    its_edit = _its_edit_class()
    utils = sys.modules[its_edit.__module__].ITSEditUtils(SimpleNamespace(key=ITS_KEY))
    v = 49152
    ours = build_scheme("its-edit", ITS_KEY, v, {"permutation": "shared"})
    state = ours.new_state(0)
    g = torch.Generator().manual_seed(0)
    for step in range(40):
        logits = torch.randn(v, generator=g) * 3.0
        ids = [1] * (3 + step)
        k = ours.key_index(ids, 3, state)
        probs = torch.softmax(logits, dim=-1)[None]  # MarkLLM works in float32
        expected = int(utils.transform_sampling(probs, ours.row(k)[None], ours.u[k].reshape(1, 1)))
        assert int(ours.distribution(logits, ids, 3, state).argmax()) == expected


def test_we_detect_markllm_itsedit_text(tmp_path: Path, tiny_smollm2) -> None:
    lm = tiny_smollm2
    markllm = _markllm(lm, "ITSEdit", _its_config(tmp_path / "its.json", keylen=64, length=120))
    ids = lm.encode(_markllm_its_text(markllm, STORY))
    ours = build_scheme("its-edit", ITS_KEY, lm.vocab_size, {"permutation": "shared", "keylen": "64"}).detect(ids)
    other_key = build_scheme("its-edit", ITS_KEY + 1, lm.vocab_size, {"permutation": "shared", "keylen": "64"})
    print(f"\nour shared ITS detector on MarkLLM ITSEdit text ({len(ids)} tokens): z = {ours.z:.2f}")
    assert ours.z > 4 and other_key.detect(ids).z < 4


def test_markllm_itsedit_detects_our_shared_text(tmp_path: Path, tiny_smollm2) -> None:
    lm = tiny_smollm2
    markllm = _markllm(lm, "ITSEdit", _its_config(tmp_path / "its.json", keylen=64, length=120))
    shared = markllm.detect_watermark(_our_text("tiny-smollm2", f"its-edit:{ITS_KEY}:permutation=shared,keylen=64",
                                                120))
    per_position = markllm.detect_watermark(_our_text("tiny-smollm2", f"its-edit:{ITS_KEY}:keylen=64", 120))
    print(f"\nMarkLLM ITSEdit on our shared text: p = {shared['score']:.3g}; "
          f"on our per-position text: p = {per_position['score']:.3g}")
    assert shared["is_watermarked"] and shared["score"] <= 0.05
    assert not per_position["is_watermarked"]  # one order per position is not MarkLLM's key


def test_markllm_exp_detects_our_soft_aar_text(tmp_path: Path, tiny_smollm2) -> None:
    lm = tiny_smollm2
    markllm = _markllm(lm, "EXP", Path(markllm_exp_config(tmp_path / "exp.json", sequence_length=60)))
    verdict = markllm.detect_watermark(_our_text("tiny-smollm2", f"aar:{EXP_KEY}:form=soft", 60))
    print(f"\nMarkLLM EXP on our soft AAR text: p = {verdict['score']:.3g}")
    assert verdict["is_watermarked"] and verdict["score"] < 1e-4


def test_release_aar_detector_reads_markllm_exp_text(tmp_path: Path, tiny_smollm2) -> None:
    lm = tiny_smollm2
    markllm = _markllm(lm, "EXP", Path(markllm_exp_config(tmp_path / "exp.json", sequence_length=60)))
    ids = lm.encode(markllm.generate_watermarked_text(STORY))
    release = build_scheme("aar", EXP_KEY, lm.vocab_size, {"detector": "release"}).detect(ids)
    print(f"\nrelease AAR detector on MarkLLM EXP text ({release.tokens_scored} scored): z = {release.z:.2f}")
    assert release.z > 4


# -- the default key length ------------------------------------------------------------------
def test_markllm_itsedit_and_we_read_each_other_at_the_default_keylen(tmp_path: Path, tiny_smollm2) -> None:
    """200 tokens each way at MarkLLM's key length 420 (our default), on the tiny model: the
    keys, picks and detectors do not depend on the model (the real SmolLM2's power under the
    shared form is test_watermarks_forms' ``its-edit:permutation=shared`` row). Measured on
    the tiny model: ours z = 6.15 on MarkLLM's 200 tokens (4.67 on 100, too close to 4 to cut),
    1.95 under the next key; MarkLLM's p = 0 on ours.

    MarkLLM's side runs 10 permutation runs, not 20 (its pure-Python DP is the cost, one
    statistic per run). Its p is the share of runs at least as extreme, so ``score <= 0.05``
    needs 0 of 10 (1 of 20): on a text MarkLLM's key does not mark, runs and text are
    exchangeable and that happens with probability 1/11 (2/21 at 20 runs), the same guard."""
    lm = tiny_smollm2
    markllm = _markllm(lm, "ITSEdit", _its_config(tmp_path / "its.json", keylen=420, length=200, n_runs=10))
    theirs = lm.encode(_markllm_its_text(markllm, PROMPT))
    ours_on_theirs = build_scheme("its-edit", ITS_KEY, lm.vocab_size, {"permutation": "shared"}).detect(theirs)
    theirs_on_ours = markllm.detect_watermark(
        _our_text("tiny-smollm2", f"its-edit:{ITS_KEY}:permutation=shared", 200, prompt=PROMPT, seed=1))
    print(f"\nours on MarkLLM ITSEdit ({len(theirs)} tokens): z = {ours_on_theirs.z:.2f}; "
          f"MarkLLM ITSEdit on ours: p = {theirs_on_ours['score']:.3g}")
    assert ours_on_theirs.z > 4
    assert theirs_on_ours["is_watermarked"] and theirs_on_ours["score"] <= 0.05
