"""Green/red-list family: kgw, biased-kgw, unigram, waterbag, dipmark.

What is checked, and why it could fail:
* every scheme's distribution is a float64 probability vector at the real
  vocabulary sizes (SmolLM2 49,152, Gemma 3 262,144), masked logits stay at 0,
  and it is pure (same inputs, same output, inputs untouched);
* the perturbation is the documented one (KGW's green/red odds ratio is e^delta,
  Water-Bag's complement draw boosts the complement, DiPMark's repeated-context
  rule returns the base distribution);
* null calibration: on text not generated with the key (uniform random ids and
  ordinary English prose tokenised by the real SmolLM2 tokenizer), 500 sequences
  give mean z ~ 0, sd ~ 1 and at most 2 of 500 above z = 4;
* each (list, token) pair is scored once (``skip_repeated``, the default), a KGW
  pair being identified by its list seed (colliding contexts count once), and
  ``skip_repeated=false`` scores every token (the looping-text null of every
  scheme is in test_detectors.py);
* DiPMark is unbiased over keys (Monte Carlo mean of p_i = the base distribution)
  while KGW, checked the same way, is measurably not (so the check has power);
* power (e2e): 200 tokens from the real SmolLM2 watermarked by one provider give
  z > 4 for every scheme (kgw and unigram in test_interop_markllm_greenlist.py, whose
  test reads the same generation with MarkLLM's detector too).
Torch runs single-threaded here: on this shared 2-core machine the small
per-token ops (randperm of the vocabulary, softmax) are ~20x slower with 2 threads.
"""

from __future__ import annotations

import math


import numpy as np
import pytest
import torch

from wash.core.errors import WashInputError
from wash.watermarks import build_scheme, scheme_names
from wash.watermarks.base import softmax

GREEN_SCHEMES = ["kgw", "biased-kgw", "unigram", "waterbag", "dipmark"]
SMOLLM2_V = 49152
GEMMA3_V = 262144
KEY = 15485863


pytestmark = pytest.mark.usefixtures("single_thread")


def _logits(v: int, seed: int, masked: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(v, generator=g) * 3.0
    if masked:
        logits[torch.randperm(v, generator=g)[:masked]] = float("-inf")
    return logits


# -- construction ---------------------------------------------------------------------
def test_all_registered() -> None:
    names = scheme_names()
    for name in GREEN_SCHEMES:
        assert name in names


def test_defaults_are_the_paper_release() -> None:
    kgw = build_scheme("kgw", KEY, SMOLLM2_V)
    assert (kgw.gamma, kgw.delta, kgw.context_width, kgw.reduction) == (0.5, 2.0, 4, "additive")
    dip = build_scheme("dipmark", KEY, SMOLLM2_V)
    assert (dip.alpha, dip.context_width) == (0.45, 4)
    bag = build_scheme("waterbag", KEY, SMOLLM2_V)
    assert len(bag.bag) == 4 and (bag.gamma, bag.delta) == (0.5, 2.0)
    assert build_scheme("biased-kgw", KEY, SMOLLM2_V).delta == 2.0


def test_params_override_and_validation() -> None:
    s = build_scheme("kgw", KEY, SMOLLM2_V, {"gamma": "0.25", "delta": "1.5", "context_width": "2",
                                             "reduction": "min"})
    assert (s.gamma, s.delta, s.context_width, s.reduction) == (0.25, 1.5, 2, "min")
    assert build_scheme("biased-kgw", KEY, SMOLLM2_V, {"bias": "6"}).delta == 6.0
    bad = [("kgw", {"reduction": "xor"}), ("kgw", {"gamma": "1.5"}), ("kgw", {"context_width": "-1"}),
           ("kgw", {"context_width": "0", "reduction": "skip"}), ("waterbag", {"bag_size": "0"}),
           ("dipmark", {"alpha": "0.6"}), ("dipmark", {"context_width": "0"}), ("unigram", {"gamma": "0"}),
           ("biased-kgw", {"bias": "inf"}), ("kgw", {"nope": "1"})]
    for name, params in bad:
        with pytest.raises(WashInputError):
            build_scheme(name, KEY, SMOLLM2_V, params)


# -- the perturbation -------------------------------------------------------------------
@pytest.mark.parametrize("name", GREEN_SCHEMES)
@pytest.mark.parametrize("v", [SMOLLM2_V, GEMMA3_V])
def test_distribution_is_a_probability_vector(name: str, v: int) -> None:
    scheme = build_scheme(name, KEY, v)
    state = scheme.new_state(3)
    logits = _logits(v, seed=1, masked=v // 3)
    ids = [17, 4242, 9, 31337 % v, 5, 77]
    snapshot_logits, snapshot_ids = logits.clone(), list(ids)
    p = scheme.distribution(logits, ids, 2, state)
    assert p.shape == (v,) and p.dtype == torch.float64
    assert abs(float(p.sum()) - 1.0) < 1e-9
    assert float(p.min()) >= 0.0
    assert float(p[torch.isinf(logits)].max()) == 0.0
    # the watermark does act here (enough context), and purity: same call, same answer
    assert float((p - softmax(logits)).abs().max()) > 1e-4
    assert torch.equal(p, scheme.distribution(logits, ids, 2, state))
    assert torch.equal(logits, snapshot_logits) and ids == snapshot_ids


@pytest.mark.parametrize("name", ["kgw", "waterbag", "dipmark"])
def test_too_little_context_leaves_the_distribution_alone(name: str) -> None:
    scheme = build_scheme(name, KEY, SMOLLM2_V)
    logits = _logits(SMOLLM2_V, seed=2)
    p = scheme.distribution(logits, [1, 2, 3], 0, scheme.new_state(0))
    assert torch.equal(p, softmax(logits))
    assert scheme.detect([5, 6, 7], prefix=[1, 2]).per_token[:2] == [None, None]


def test_kgw_boost_is_an_odds_ratio_of_e_delta() -> None:
    scheme = build_scheme("kgw", KEY, SMOLLM2_V, {"delta": "1.7"})
    logits = _logits(SMOLLM2_V, seed=3)
    ids = [100, 200, 300, 400, 500]
    ratio = scheme.distribution(logits, ids, 0, None) / softmax(logits)
    mask = scheme.green_mask(ids)
    assert int(mask.sum()) == SMOLLM2_V // 2
    green, red = ratio[mask], ratio[~mask]
    assert float(green.std() / green.mean()) < 1e-9 and float(red.std() / red.mean()) < 1e-9
    assert math.isclose(float(green.mean() / red.mean()), math.exp(1.7), rel_tol=1e-9)
    # the list depends on the last 4 ids only, and on the key
    assert torch.equal(mask, scheme.green_mask([7] + ids[1:]))
    assert not torch.equal(mask, scheme.green_mask(ids[:-1] + [501]))
    assert not torch.equal(mask, build_scheme("kgw", KEY + 1, SMOLLM2_V).green_mask(ids))


def test_biased_kgw_uses_one_list_everywhere() -> None:
    scheme = build_scheme("biased-kgw", KEY, SMOLLM2_V)
    first = scheme.green_mask([])
    assert torch.equal(first, scheme.green_mask([1, 2, 3, 4, 5, 6]))
    assert int(first.sum()) == SMOLLM2_V // 2
    # every token is scored from the first one; repeats are scored once by default
    det = scheme.detect([10, 11, 10, 12])
    assert det.tokens_scored == 3 and det.per_token[2] is None
    every = build_scheme("biased-kgw", KEY, SMOLLM2_V, {"skip_repeated": "false"})
    assert every.detect([10, 11, 10, 12]).tokens_scored == 4


def test_unigram_counts_distinct_tokens_unless_told_otherwise() -> None:
    scheme = build_scheme("unigram", KEY, SMOLLM2_V)
    green = int(np.flatnonzero(scheme.green_mask([]).numpy())[0])
    unique = scheme.detect([green] * 10)
    assert unique.tokens_scored == 1 and unique.per_token == [1.0] + [None] * 9
    every = build_scheme("unigram", KEY, SMOLLM2_V, {"skip_repeated": "false"}).detect([green] * 10)
    assert every.tokens_scored == 10 and math.isclose(every.z, math.sqrt(10))


@pytest.mark.parametrize("name", ["kgw", "waterbag"])
def test_repeated_context_token_pairs_are_scored_once_unless_told_otherwise(name: str) -> None:
    loop = [int(t) for t in np.random.default_rng(3).integers(0, SMOLLM2_V, 12)]
    text = loop * 5
    det = build_scheme(name, KEY, SMOLLM2_V).detect(text)
    # positions 4..11, and 12..15 whose contexts span the seam; every later pair repeats one
    assert det.tokens_scored == 12
    assert det.per_token[:4] == [None] * 4 and det.per_token[16:] == [None] * 44
    every = build_scheme(name, KEY, SMOLLM2_V, {"skip_repeated": "false"}).detect(text)
    assert every.tokens_scored == len(text) - 4


def test_kgw_pairs_are_identified_by_their_list_seed_not_the_raw_context() -> None:
    # additive reduction: two contexts with the same sum get the same list, so the same
    # token after either one is the same coin, counted once
    scheme = build_scheme("kgw", KEY, SMOLLM2_V)
    a, b = [10, 20, 30, 40], [40, 30, 20, 10]
    assert scheme.list_id(a) == scheme.list_id(b) and torch.equal(scheme.green_mask(a), scheme.green_mask(b))
    det = scheme.detect([7, *b, 7], prefix=a)
    assert det.per_token[0] is not None and det.per_token[-1] is None


def test_waterbag_draws_keys_and_complements_per_generation() -> None:
    scheme = build_scheme("waterbag", KEY, SMOLLM2_V)
    draws = {(d.key_index, d.complement) for d in (scheme.new_state(s) for s in range(64))}
    assert draws == {(k, c) for k in range(4) for c in (False, True)}
    assert scheme.new_state(5) == scheme.new_state(5)
    logits = _logits(SMOLLM2_V, seed=4)
    ids = [3, 1, 4, 1, 5, 9]
    for draw in (scheme.new_state(s) for s in range(8)):
        boosted = scheme.distribution(logits, ids, 0, draw) / softmax(logits)
        kgw_list = scheme.bag[draw.key_index].green_mask(ids)
        promoted = ~kgw_list if draw.complement else kgw_list
        assert float(boosted[promoted].min()) > float(boosted[~promoted].max())
    # the bag keys are distinct lists
    assert not torch.equal(scheme.bag[0].green_mask(ids), scheme.bag[1].green_mask(ids))


def test_waterbag_detects_either_indicator_and_labels_tokens() -> None:
    scheme = build_scheme("waterbag", KEY, SMOLLM2_V)
    rng = np.random.default_rng(0)
    for key_index, complement in [(2, False), (1, True)]:
        ids = [int(t) for t in rng.integers(0, SMOLLM2_V, 4)]
        for _ in range(120):  # always pick a token green under the chosen (key, indicator)
            mask = scheme.bag[key_index].green_mask(ids)
            pool = np.flatnonzero((~mask if complement else mask).numpy())
            ids.append(int(rng.choice(pool)))
        det = scheme.detect(ids[4:], prefix=ids[:4])
        assert det.z > 8 and det.tokens_scored == 120
        assert det.per_token == [1.0] * 120
        assert f"bag key {key_index}" in det.note and ("complement" in det.note) == complement


def test_dipmark_reweight_moves_mass_to_the_permutation_tail() -> None:
    v = 1000
    scheme = build_scheme("dipmark", KEY, v)
    logits = torch.zeros(v)  # uniform: the first alpha of the order loses, the last alpha doubles
    ids = [1, 2, 3, 4]
    order = scheme.order(ids)
    p = scheme.distribution(logits, ids, 0, None)[order]
    assert torch.allclose(p[:450], torch.zeros(450, dtype=torch.float64), atol=1e-15)
    assert torch.allclose(p[450:550], torch.full((100,), 1e-3, dtype=torch.float64))
    assert torch.allclose(p[550:], torch.full((450,), 2e-3, dtype=torch.float64))


def test_dipmark_repeated_context_rule() -> None:
    scheme = build_scheme("dipmark", KEY, SMOLLM2_V)
    logits = _logits(SMOLLM2_V, seed=5)
    base = softmax(logits)
    ngram = [11, 12, 13, 14]
    # the n-gram was the context of a generated token (position 9 >= prompt_len 4): unmodified
    ids = [1, 2, 3, 4] + ngram + [99] + [7] + ngram
    assert torch.equal(scheme.distribution(logits, ids, 4, None), base)
    # the same n-gram only inside the prompt does not count
    assert not torch.equal(scheme.distribution(logits, ids, 9, None), base)
    # detector: the second use of a context is not scored
    det = scheme.detect(ngram + [99, 7] + ngram + [5], prefix=[1, 2, 3, 4])
    scored = [i for i, s in enumerate(det.per_token) if s is not None]
    assert det.per_token[10] is None and 4 in scored and det.tokens_scored == len(scored)


@pytest.mark.parametrize("name", GREEN_SCHEMES)
def test_incremental_detection_matches_counts(name: str) -> None:
    scheme = build_scheme(name, KEY, SMOLLM2_V)
    ids = [int(t) for t in np.random.default_rng(1).integers(0, SMOLLM2_V, 60)]
    det = scheme.make_detector(prefix=ids[:4])
    pushed = [det.push(t) for t in ids[4:]]
    final = det.result()
    assert final.tokens_scored == sum(s is not None for s in final.per_token) == len(ids) - 4
    if name != "waterbag":  # Water-Bag relabels tokens w.r.t. the final best key
        assert pushed == final.per_token
        assert final.statistic == sum(s for s in pushed if s is not None)
    assert final.z == scheme.detect(ids[4:], prefix=ids[:4]).z
    assert math.isclose(final.p, 0.5 * math.erfc(final.z / math.sqrt(2)), rel_tol=1e-6, abs_tol=1e-12)


@pytest.mark.parametrize("name", GREEN_SCHEMES)
def test_nothing_scored_means_no_evidence(name: str) -> None:
    det = build_scheme(name, KEY, SMOLLM2_V).detect([])
    assert (det.z, det.p, det.tokens_scored, det.detected()) == (0.0, 0.5, 0, False)


# -- null calibration ---------------------------------------------------------------------
N_SEQ = 500


def _seq_len(name: str) -> int:
    # Water-Bag costs 4 green lists a token; 30 tokens keeps it fast and is the harder
    # case for its discrete (mid-p, Sidak) statistic.
    return 30 if name == "waterbag" else 50


def _check_null(zs: np.ndarray) -> None:
    mean, sd = float(zs.mean()), float(zs.std(ddof=1))
    # se(mean) = 0.045 and se(sd) ~ 0.032 for 500 N(0,1) draws: ~4.5 and ~3.7 se margins.
    assert abs(mean) < 0.2, f"null mean z {mean:.3f}"
    assert abs(sd - 1.0) < 0.12, f"null sd z {sd:.3f}"
    assert int((zs > 4.0).sum()) <= 2, f"{int((zs > 4).sum())} of {len(zs)} null texts above z=4"


@pytest.mark.parametrize("name", GREEN_SCHEMES)
def test_null_calibration_uniform_ids(name: str) -> None:
    scheme = build_scheme(name, KEY, SMOLLM2_V)
    rng = np.random.default_rng(2024)
    seqs = rng.integers(0, SMOLLM2_V, size=(N_SEQ, _seq_len(name)))
    zs = np.array([scheme.detect(seq.tolist()).z for seq in seqs])
    _check_null(zs)


@pytest.fixture(scope="module")
def english_windows() -> list[list[int]]:
    """500 disjoint 50-token windows of English prose (Python's own help topics)."""
    from pydoc_data.topics import topics

    from wash.engine.models import load_tokenizer

    tokenizer = load_tokenizer("smollm2")
    text = "\n\n".join(topics[k] for k in sorted(topics))
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) >= N_SEQ * 50
    return [ids[i * 50:(i + 1) * 50] for i in range(N_SEQ)]


@pytest.mark.parametrize("name", GREEN_SCHEMES)
def test_null_calibration_english_text(name: str, english_windows: list[list[int]]) -> None:
    # One key per window: each z then measures the detector against text it has never
    # seen, not one key's accidental affinity with frequent English tokens.
    n = _seq_len(name)
    zs = np.array([build_scheme(name, 1000 + i, SMOLLM2_V).detect(w[:n]).z
                   for i, w in enumerate(english_windows)])
    _check_null(zs)


# -- unbiasedness over keys -------------------------------------------------------------------
def _mc_over_keys(name: str, v: int, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    logits = torch.randn(v, generator=torch.Generator().manual_seed(6)) * 1.5
    ids = [3, 14, 15, 9, 26]
    samples = np.stack([build_scheme(name, k, v).distribution(logits, ids, 0, None).numpy()
                        for k in range(n_keys)])
    return softmax(logits).numpy(), samples


def test_dipmark_is_unbiased_over_keys() -> None:
    base, samples = _mc_over_keys("dipmark", 50, 6000)
    se = samples.std(axis=0, ddof=1) / math.sqrt(len(samples))
    t = np.abs(samples.mean(axis=0) - base) / np.maximum(se, 1e-12)
    assert float(t.max()) < 4.5, f"max |mean - base| / se = {t.max():.2f}"
    # each key does change the distribution a lot: unbiased on average only
    assert float(np.abs(samples - base).max()) > 0.05


def test_kgw_is_not_unbiased_over_keys() -> None:
    # The same Monte Carlo must see KGW's softmax (second-order) bias: the check has power.
    base, samples = _mc_over_keys("kgw", 50, 3000)
    se = samples.std(axis=0, ddof=1) / math.sqrt(len(samples))
    t = np.abs(samples.mean(axis=0) - base) / np.maximum(se, 1e-12)
    assert float(t.max()) > 10.0


# -- power on the real model ------------------------------------------------------------------
# (the ``smollm2`` fixture is conftest's: the real SmolLM2-135M, loaded once per session)
@pytest.mark.e2e
@pytest.mark.parametrize("name", [n for n in GREEN_SCHEMES if n not in ("kgw", "unigram")])  # those: interop
def test_single_provider_is_detected(name: str, smollm2) -> None:
    from support import key_and_next_key_z, watermarked_tokens

    z, other = key_and_next_key_z(smollm2, name, KEY, watermarked_tokens("smollm2", name, KEY, 200, seed=7))
    print(f"{name}: z={z:.2f}, next key z={other:.2f}")
    assert z > 4.0
    assert other < 4.0  # another key sees nothing
