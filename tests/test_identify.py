"""Water-Probe identification: the statistic by hand, the probe on real tokenizers.

The statistic's examples are small enough to check with pencil and paper; the
probe runs on the tiny random models (real tokenizers) and, end to end, on the real
offline smollm2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from wash.engine.config import ProviderSpec
from wash.detection.identification import PROMPTS, Probe, forced_contexts, identify
from wash.detection.identify_stats import band, identification_z, pair_score, ranks, run_score, top_tokens

pytestmark = pytest.mark.usefixtures("single_thread")  # small tiny-model forwards: one torch thread


def a(*values: int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


# -- the statistic ------------------------------------------------------------------------
def test_ranks_share_the_lowest_rank_on_ties():
    assert ranks(a(5, 3, 0, 1)).tolist() == [4, 3, 1, 2]
    assert ranks(a(2, 2, 0, 7)).tolist() == [2, 2, 1, 4]


def test_top_tokens_keeps_seen_tokens_and_breaks_ties_by_id():
    assert top_tokens(a(5, 3, 0, 1), 2) == {0, 1}
    assert top_tokens(a(0, 4, 4, 4), 2) == {1, 2}
    assert top_tokens(a(0, 0, 3, 0), 50) == {2}  # unseen tokens never enter


def test_pair_score_by_hand():
    # T = ({0,1} | {0,1}) & ({0,2} | {1,2}) = {0, 1}. Under P1, token 0 ranks 4 in c1 and
    # 3 in c2 (+1), token 1 ranks 3 and 4 (-1); under P2 the same directions: cos = 1.
    p1c1, p1c2 = a(5, 3, 0, 1), a(2, 4, 0, 1)
    p2c1, p2c2 = a(6, 1, 2, 0), a(1, 5, 2, 0)
    assert pair_score(p1c1, p1c2, p2c1, p2c2, top=2) == pytest.approx(1.0)
    # P2's contexts swapped: every direction flips, cos = -1.
    assert pair_score(p1c1, p1c2, p2c2, p2c1, top=2) == pytest.approx(-1.0)
    # Under P1 token 1 keeps rank 3 in both contexts (c2 = (1, 3, 0, 4): ranks 2, 3, 1, 4), so
    # d1 = (+1, 0) against d2 = (+1, -1) on T = {0, 1}: cos = 1/sqrt(2).
    assert pair_score(p1c1, a(1, 3, 0, 4), p2c1, p2c2, top=2) == pytest.approx(1 / math.sqrt(2))
    # No token in both prompts' top sets: the pair is not scored.
    assert pair_score(a(5, 0, 0, 0), a(5, 0, 0, 0), a(0, 0, 0, 5), a(0, 0, 0, 5), top=1) is None


def test_run_score_is_the_mean_over_pairs_of_shared_contexts():
    p1 = {"x": a(5, 3, 0, 1), "y": a(2, 4, 0, 1), "only-p1": a(1, 1, 1, 1)}
    p2 = {"x": a(6, 1, 2, 0), "y": a(1, 5, 2, 0)}
    assert run_score(p1, p2, top=2) == (pytest.approx(1.0), 1)


def test_identification_z_and_bands():
    assert identification_z([0.5, 0.6, 0.7]) == pytest.approx((0.6 - 0.1) / 0.1)
    assert identification_z([0.3, 0.3, 0.3]) == math.inf  # identical runs above the null mean
    assert identification_z([0.05, 0.05, 0.05]) == -math.inf
    assert math.isnan(identification_z([0.4]))
    assert [band(z) for z in (25.0, 10.0, 4.5, 4.0, -3.0, math.inf)] == ["high", "low", "low", "none", "none",
                                                                          "high"]


# -- the probe --------------------------------------------------------------------------
def test_prompts_and_contexts_have_the_answer_format():
    assert all(p.endswith("Entry 12:") and p.count("\nEntry ") == 12 for p in PROMPTS)
    assert PROMPTS[0] != PROMPTS[1]
    contexts = forced_contexts(50)
    assert len(set(contexts)) == 50 and contexts == forced_contexts(50)
    letter, number, animal = contexts[0].split()
    assert len(letter) == 1 and number in ("zero", "one", "two", "three", "four", "five", "six", "seven",
                                           "eight", "nine") and animal in ("cat", "dog", "tiger", "lion")


def test_probe_is_seeded_and_counts_every_sample(tiny_smollm2):
    spec = [ProviderSpec.parse("tiny-smollm2:kgw:1:delta=4")]
    probe = Probe(contexts=4, samples=30, runs=2, seed=5)
    first, second = identify(spec, "single", probe), identify(spec, "single", probe)
    assert first.scores == second.scores and first.pairs == 6
    # stateless: one distribution per (prompt, context), shared by every run's samples
    assert first.distributions == 2 * 4


def test_tiny_models_cannot_stand_for_an_unwatermarked_model(tiny_smollm2):
    """Why the identified/not-identified check runs on the real smollm2 (last test), not here:
    a tiny random model's next token follows its last tokens whatever the prompt, so even
    without a watermark its rank shifts agree across the two prompts (S far above 0.1)."""
    spec = [ProviderSpec.parse("tiny-smollm2:kgw:1:delta=4")]
    plain = identify(spec, "unwatermarked", Probe(contexts=12, samples=150, runs=3, seed=0))
    assert plain.mean > 0.5


def test_a_point_mass_scheme_gives_identical_runs(tiny_smollm2):
    result = identify([ProviderSpec.parse("tiny-smollm2:aar:1")], "single", Probe(contexts=4, samples=20, runs=3))
    assert result.sd == 0.0 and result.z == math.inf and result.band == "high"


def test_bad_probe_settings_are_refused():
    from wash.core.errors import WashInputError

    with pytest.raises(WashInputError, match="at least 2 runs"):
        identify([ProviderSpec.parse("tiny-smollm2:kgw:1")], "single", Probe(runs=1))
    with pytest.raises(WashInputError, match="unknown probe mode"):
        identify([ProviderSpec.parse("tiny-smollm2:kgw:1")], "naive", Probe())


@pytest.mark.e2e
def test_real_smollm2_is_identified_with_kgw_and_not_without(smollm2):
    """Water-Probe's premise on a real model: the country after "D seven tiger" hardly depends
    on the answer prefix, so without a watermark the prompts' rank shifts do not agree.
    The verdict is the calibrated p against 30 null runs of the unwatermarked model
    (probed with another seed); Water-Probe's z of the same unwatermarked system can pass 4
    on three runs, which is why it is not the verdict."""
    from wash.detection.identify_stats import identified, permutation_p

    spec = [ProviderSpec.parse("smollm2:kgw:15485863")]
    probe = Probe(contexts=20, samples=200, runs=3, seed=0)
    null = identify(spec, "unwatermarked", Probe(contexts=20, samples=200, runs=30, seed=1000, interval=False))
    marked = identify(spec, "single", probe)
    plain = identify(spec, "unwatermarked", probe)
    assert marked.z > 10, marked
    assert marked.s_low > max(null.scores), (marked, null.scores)
    assert identified(permutation_p(marked.scores, null.scores)) and permutation_p(marked.scores, null.scores) < 0.01
    assert not identified(permutation_p(plain.scores, null.scores)), (plain.scores, null.scores)


def test_v2_accounts_for_every_sample(tiny_smollm2):
    """v2 walks the prefix tree with counts: every sample ends counted after a complete
    prefix or off the format (a random tiny model almost never keeps the format)."""
    import random

    import torch

    from wash.engine.config import profile
    from wash.detection.identification import ALL_CONTEXTS, _System
    from wash.engine.providers import build_providers

    pset = build_providers([ProviderSpec.parse("tiny-smollm2:kgw:1")])
    system = _System(pset, "single", profile("open"))
    counts, off = system.sampled_counts(0, 200, torch.Generator().manual_seed(1), random.Random(1), runs=3)
    assert len(counts) == len(off) == 3
    for run_counts, run_off in zip(counts, off):
        assert set(run_counts) <= ALL_CONTEXTS
        assert sum(v.total for v in run_counts.values()) + run_off == 200
    # rare paths stop, per run: every sample still ends counted or off
    counts, off = system.sampled_counts(0, 200, torch.Generator().manual_seed(1), random.Random(1), runs=2,
                                        min_path=3)
    assert [sum(v.total for v in c.values()) + o for c, o in zip(counts, off)] == [200, 200]
    counts, off = system.sampled_counts(0, 200, torch.Generator().manual_seed(1), random.Random(1), runs=2,
                                        min_path=201)
    assert off == [200, 200] and counts == [{}, {}]  # no path is taken 201 times by 200 samples
    result = identify([ProviderSpec.parse("tiny-smollm2:kgw:1")], "single",
                      Probe(version="v2", samples=50, runs=2, min_count=1))
    assert 0.0 <= result.fit <= 1.0 and result.samples == 50


def test_unknown_probe_version_is_refused():
    from wash.core.errors import WashInputError

    with pytest.raises(WashInputError, match="unknown probe version 'v3'"):
        identify([ProviderSpec.parse("tiny-smollm2:kgw:1")], "single", Probe(version="v3"))


def test_v2_node_draws_follow_the_average_of_the_providers(tiny_smollm2):
    """At a node, an ensemble's samples are drawn as "pick a provider, draw from it": with
    two AAR providers (each a point mass at the node) about half the samples take each
    provider's token, as one draw from their average would."""
    from collections import Counter

    import torch

    from wash.engine.config import profile
    from wash.detection.identification import _System
    from wash.engine.providers import build_providers

    pset = build_providers([ProviderSpec.parse("tiny-smollm2:aar:1"), ProviderSpec.parse("tiny-smollm2:aar:2")])
    system = _System(pset, "wash", profile("open"))
    rows = system.base_rows(0, "")
    picks = []
    for p in system.providers:
        base, ids = rows[p.model]
        dist = system.model_dist(p, base, ids, None, system._prompt_len(0, p.model))
        assert float(dist.max()) == pytest.approx(1.0)  # AAR: a point mass
        picks.append(int(pset.alignment.to_union[p.model][int(dist.argmax())]))
    assert picks[0] != picks[1]
    children = system.step(0, "", Counter({(0, (None, None)): 4000}), torch.Generator().manual_seed(3))
    assert set(children) == set(picks)
    first = sum(children[picks[0]].values())
    assert abs(first - 2000) < 6 * 32, first  # binomial(4000, 1/2): sd about 32


def test_a_robust_rule_reins_in_a_point_mass_in_both_probes(tiny_smollm2):
    """With another aggregation rule the ensemble's law is the rule's output: median-clip of an
    AAR point mass and two KGW providers holds the point mass near the others' law."""
    import random
    from collections import Counter

    import torch

    from wash.engine.config import profile
    from wash.detection.identification import _System
    from wash.engine.providers import build_providers

    specs = [ProviderSpec.parse(s) for s in ("tiny-smollm2:aar:1", "tiny-smollm2:kgw:2", "tiny-smollm2:kgw:3")]
    pset = build_providers(specs)
    mean = _System(pset, "wash", profile("open"))
    robust = _System(pset, "wash", profile("open"), "median-clip:xi=0.5")
    assert robust.robust and not mean.robust
    rows = robust.base_rows(0, "")
    dist = robust.robust_dist(0, rows, (None, None, None))
    assert float(dist.sum()) == pytest.approx(1.0)
    point = int(torch.argmax(dist))
    children = mean.step(0, "", Counter({(0, (None, None, None)): 3000}), torch.Generator().manual_seed(0))
    top_mean = max(sum(c.values()) for c in children.values())
    assert top_mean > 900  # the mean keeps about 1/3 of the samples on AAR's token
    children = robust.step(0, "", Counter({(0, (None, None, None)): 3000}), torch.Generator().manual_seed(0))
    assert sum(children.get(point, Counter()).values()) < 3000 * float(dist[point]) + 6 * 30
    assert float(dist.max()) < 0.2
    v1 = robust.counts(0, " D seven tiger", 500, torch.Generator().manual_seed(0), random.Random(0), runs=2)
    assert [c.total for c in v1] == [500, 500]


@pytest.mark.parametrize("size", [7, 49152, 262144])
@pytest.mark.parametrize("m", [1, 2, 9])
def test_a_point_mass_draw_is_the_multinomial_draw_with_its_random_stream(size, m):
    """The one-hot shortcut returns what torch.multinomial returns and leaves the generator
    where it would: every later draw of a probe is unchanged (and a non-one-hot law is drawn
    for real)."""
    import torch

    from wash.detection.identification import draw

    one_hot = torch.zeros(size)
    one_hot[size - 3] = 1.0
    spread = torch.rand(size, generator=torch.Generator().manual_seed(size))
    for probs in (one_hot, spread / spread.sum()):
        ours, real = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
        got = draw(probs, m, ours)
        want = torch.multinomial(probs, m, replacement=True, generator=real)
        assert torch.equal(got, want)
        assert torch.equal(ours.get_state(), real.get_state())
        assert torch.equal(torch.rand(3, generator=ours), torch.rand(3, generator=real))


def test_a_probe_keeps_a_keyed_sequence_whole(tiny_smollm2):
    """An Edit scheme keeps 4 key rows for generation and its whole key while probed, where
    every offset comes back at every node (the rows are the same either way)."""
    from wash.engine.config import profile
    from wash.detection.identification import _System
    from wash.engine.providers import build_providers

    pset = build_providers([ProviderSpec.parse("tiny-smollm2:exp-edit:1:keylen=16")])
    scheme = pset.providers[0].scheme
    first = [scheme.row(k).clone() for k in range(16)]
    assert len(scheme._rows) == 4
    _System(pset, "single", profile("open"))
    again = [scheme.row(k) for k in range(16)]
    assert len(scheme._rows) == 16
    assert all(a.equal(b) for a, b in zip(first, again))


@pytest.mark.parametrize("spec", ["tiny-gemma3:exp-edit:3:keylen=32", "tiny-gemma3:its-edit:4:keylen=32",
                                  "tiny-smollm2:its-edit:5:keylen=32+permutation=shared"])
def test_a_keyed_point_mass_picks_the_token_its_law_puts_its_mass_on(spec):
    """``picks`` (one base law, one read per key element) gives, for every state, the token the
    scheme's own served law is one-hot on, so a probe's counts keep the system's law."""
    import torch

    from wash.watermarks.keyseq import EditState
    from wash.watermarks.registry import build_scheme

    scheme_name, key, params = spec.split(":")[1], int(spec.split(":")[2]), spec.split(":")[3]
    parsed = dict(kv.split("=") for kv in params.split("+"))
    parsed = {k: (int(v) if v.isdigit() else v) for k, v in parsed.items()}
    vocab = 262144 if "gemma" in spec else 49152
    scheme = build_scheme(scheme_name, key, vocab, parsed)
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(key)) * 3
    ids, prompt_len = list(range(12)), 9
    states = [EditState(offset=o) for o in (0, 5, 5, 31, 40, 7)]
    tokens, read = scheme.picks(logits, ids, prompt_len, states)
    assert read == len({(s.offset + 3) % 32 for s in states})
    for state, token in zip(states, tokens):
        law = scheme.distribution(logits, ids, prompt_len, state)
        assert float(law[token]) == 1.0 and float(law.sum()) == 1.0


def test_picks_refuses_a_sampled_form():
    import torch

    from wash.watermarks.keyseq import EditState
    from wash.watermarks.registry import build_scheme

    scheme = build_scheme("exp-edit", 1, 100, {"form": "soft", "keylen": 8})
    with pytest.raises(ValueError, match="point-mass"):
        scheme.picks(torch.zeros(100), [1, 2], 1, [EditState(0)])
