"""Serving settings: the order mask, temperature, top-k, top-p, and the named profiles.

A provider's watermark perturbs what it would serve, so a wrong order or a leaked
masked row changes what every experiment measures.
"""

from __future__ import annotations

import math
import shlex

import pytest
import torch

from wash.baselines.demark import DeMark, Prober
from wash.baselines.randomwalk import RandomWalk, _Walk
from wash.cli import build_parser, command_line
from wash.detection.statistics.served_text import read_ids
from wash.engine.aggregation import Mean
from wash.engine.config import PROFILES, GenerationConfig, ProviderSpec, profile_name
from wash.engine.ensemble import generate, generate_stream
from wash.engine.providers import build_providers
from wash.engine.served import ServedSystem
from wash.core.errors import WashInputError
from wash.engine.events import StepEvent
from wash.engine.sampling import ServedRows, process_logits
from wash.engine.vocab import align, model_vocab, served_mask

PROMPT = "The committee met on Tuesday to discuss"


def kept(x: torch.Tensor) -> list[int]:
    return [i for i, v in enumerate(x.tolist()) if v > -math.inf]


def logits_of(probs: list[float]) -> torch.Tensor:
    return torch.log(torch.tensor(probs, dtype=torch.float64))


# -- process_logits ---------------------------------------------------------------------
def test_top_k_keeps_the_k_largest():
    x = logits_of([0.05, 0.3, 0.1, 0.25, 0.2, 0.1])
    none = torch.zeros(6, dtype=torch.bool)
    assert kept(process_logits(x, none, 1.0, 1.0, top_k=3)) == [1, 3, 4]
    assert kept(process_logits(x, none, 1.0, 1.0, top_k=0)) == list(range(6))  # 0: off
    assert kept(process_logits(x, none, 1.0, 1.0, top_k=99)) == list(range(6))  # more than the rows


def test_top_k_keeps_rows_tied_with_the_kth():
    x = logits_of([0.4, 0.2, 0.2, 0.2])
    assert kept(process_logits(x, torch.zeros(4, dtype=torch.bool), 1.0, 1.0, top_k=2)) == [0, 1, 2, 3]


def test_masked_rows_never_survive_top_k():
    x = logits_of([0.5, 0.2, 0.15, 0.1, 0.05])
    invalid = torch.tensor([True, False, False, False, False])  # the likeliest row is a special token
    assert kept(process_logits(x, invalid, 1.0, 1.0, top_k=2)) == [1, 2]


def test_top_p_applies_to_the_top_k_distribution():
    # Top-k 2 leaves (2/3, 1/3); top-p 0.5 then keeps one row. Top-p first would keep
    # two rows of the full distribution (0.4 + 0.2 reaches 0.5), and top-k would keep both.
    x = logits_of([0.4, 0.2, 0.1, 0.1, 0.1, 0.1])
    out = process_logits(x, torch.zeros(6, dtype=torch.bool), 1.0, 0.5, top_k=2)
    assert kept(out) == [0]


def test_temperature_comes_before_top_p():
    # At temperature 0.5 row 0 holds 0.16/0.26 = 0.62 of the mass and top-p 0.6 keeps
    # it alone; at temperature 1 (0.4, then 0.2) top-p 0.6 keeps two rows.
    x = logits_of([0.4, 0.2, 0.2, 0.1, 0.1])
    none = torch.zeros(5, dtype=torch.bool)
    assert kept(process_logits(x, none, 1.0, 0.6, top_k=0)) == [0, 1]
    out = process_logits(x, none, 0.5, 0.6, top_k=0)
    assert kept(out) == [0]
    assert torch.allclose(out[0], x[0] / 0.5)


# -- profiles ---------------------------------------------------------------------------
# -- the rows a remote member sends (ServedRows) -------------------------------------------
def _masks(size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A non-text mask and the same plus an end-of-text row, as ``ServedSystem`` builds them."""
    invalid = torch.rand(size, generator=generator) < 0.05
    no_eos = invalid.clone()
    no_eos[int(torch.argmax(torch.where(invalid, -1.0, torch.rand(size, generator=generator))))] = True
    return invalid, no_eos


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 10, 1.0), (0.7, 3, 0.9), (1.3, 50, 0.5),
                                                     (0.0, 0, 1.0), (0.0, 10, 1.0), (1.0, 1, 1.0)])
def test_the_rows_sent_serve_exactly_as_the_whole_row(temperature, top_k, top_p):
    """Rebuilt from the rows a truncating profile can keep, the row serves bit for bit as the full
    one, under either mask, with ties at the k-th (float32 logits rounded to force some)."""
    g = torch.Generator().manual_seed(7)
    for trial in range(40):
        size = 500
        x = (torch.randn(size, generator=g) * 3).round(decimals=1).to(torch.float32)
        invalid, no_eos = _masks(size, g)
        if trial % 2:  # the end-of-text row on top: the mask before min_new_tokens must drop it
            x[no_eos & ~invalid] = x.max() + 1
        rows = ServedRows.of([invalid, no_eos], temperature, top_k)
        assert rows is not None
        sent, values = rows.select(x)
        assert len(sent) < size // 4
        rebuilt = ServedRows.rebuild(sent, values, size)
        for mask in (invalid, no_eos):
            full = process_logits(x, mask, temperature, top_p, top_k)
            assert torch.equal(process_logits(rebuilt, mask, temperature, top_p, top_k), full)


def test_the_rows_sent_would_be_wrong_without_the_end_of_text_margin():
    """With the end-of-text row among the top k, a selection that ignored the second mask sends
    too few rows for it: the margin is what makes the rebuilt row exact."""
    x = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    invalid = torch.zeros(6, dtype=torch.bool)
    no_eos = invalid.clone()
    no_eos[0] = True  # row 0 is end of text
    rows = ServedRows.of([invalid, no_eos], 1.0, 2)
    assert rows.extra == 1 and rows.select(x)[0].tolist() == [0, 1, 2]
    narrow = ServedRows(invalid, 0, 2)
    rebuilt = ServedRows.rebuild(*narrow.select(x), 6)
    assert kept(process_logits(rebuilt, no_eos, 1.0, 1.0, 2)) == [1]  # the whole row keeps rows 1 and 2
    assert kept(process_logits(x, no_eos, 1.0, 1.0, 2)) == [1, 2]


def test_a_profile_without_top_k_sends_whole_rows():
    """Top-p alone reads every row (its softmax does): nothing may be cut, so no selection."""
    none = torch.zeros(100, dtype=torch.bool)
    assert ServedRows.of([none, none], 1.0, 0) is None
    assert ServedRows.of([none, none], 0.8, 0) is None
    assert ServedRows.of([none, none], 1.0, 100) is None  # top-k keeps every row
    assert ServedRows.of([none, none], 0.0, 0).keep == 1  # greedy keeps one


def test_profiles_and_their_names():
    spec = [ProviderSpec.parse("tiny-smollm2:kgw:1")]
    paper = GenerationConfig.from_profile("paper", providers=spec, prompt="x")
    assert (paper.temperature, paper.top_k, paper.top_p) == (1.0, 10, 1.0)
    assert paper.profile == "paper"
    assert GenerationConfig(providers=spec, prompt="x").profile == "open"
    assert GenerationConfig.from_profile("paper", providers=spec, prompt="x", top_k=20).profile == "custom"
    assert profile_name(1.0, 0, 1.0) == "open"
    with pytest.raises(WashInputError, match="unknown serving profile 'fast'.*paper, open"):
        GenerationConfig.from_profile("fast", providers=spec, prompt="x")


@pytest.mark.parametrize("field,value,message", [
    ("top_k", -1, "top-k must be an integer from 0"),
    ("top_k", 5000, "top-k must be an integer from 0"),
    ("top_k", 2.5, "top-k must be an integer from 0"),
    ("view_k", 0, "candidate count must be 1..50"),
])
def test_bad_serving_settings_are_refused(field, value, message):
    cfg = GenerationConfig(providers=[ProviderSpec.parse("tiny-smollm2:kgw:1")], prompt="x", **{field: value})
    with pytest.raises(WashInputError, match=message):
        cfg.validate()


def test_command_line_round_trips_through_the_parser():
    specs = [ProviderSpec.parse("tiny-smollm2:kgw:1:gamma=0.25"), ProviderSpec.parse("tiny-gemma3:aar:2")]
    for serving, expect in [(dict(), None), (dict(top_k=10), "paper"), (dict(top_k=7, top_p=0.9), "custom")]:
        cfg = GenerationConfig(providers=specs, prompt="It's a \"quoted\" prompt", mode="naive", seed=5,
                               max_new_tokens=12, forwards="lazy", **serving)
        line = command_line(cfg)
        args = build_parser().parse_args(shlex.split(line)[3:])
        assert args.prompt == cfg.prompt and args.seed == 5 and args.mode == "naive"
        assert args.provider == [str(s) for s in specs] and args.forwards == "lazy"
        settings = PROFILES[args.profile].settings()
        settings.update({k: getattr(args, k) for k in settings if getattr(args, k) is not None})
        assert settings == {"temperature": cfg.temperature, "top_k": cfg.top_k, "top_p": cfg.top_p}
        if expect == "paper":
            assert "--profile paper" in line


# -- the engine serves with them --------------------------------------------------------
def test_top_k_one_is_greedy(tiny_smollm2):
    spec = [ProviderSpec.parse("tiny-smollm2:none")]
    a = generate(GenerationConfig(providers=spec, prompt=PROMPT, max_new_tokens=12, top_k=1, seed=3))
    b = generate(GenerationConfig(providers=spec, prompt=PROMPT, max_new_tokens=12, temperature=0.0, seed=4))
    assert a.text == b.text and a.settings["top_k"] == 1 and a.settings["profile"] == "custom"


def test_watermark_only_reorders_the_served_top_k(tiny_smollm2):
    """Under top-k 3 a KGW provider's distribution has at most 3 rows: its boost cannot add any."""
    cfg = GenerationConfig(providers=[ProviderSpec.parse("tiny-smollm2:kgw:1:delta=8")], prompt=PROMPT,
                           mode="single", max_new_tokens=10, top_k=3, view_k=8, seed=1)
    events = [e for e in generate_stream(cfg) if isinstance(e, StepEvent)]
    assert events
    for e in events:
        assert sum(1 for p in e.provider_probs[0] if p > 0) <= 3
        assert e.candidate_ids.index(e.union_id) < 3


# -- one serving function, every site ---------------------------------------------------
#: (temperature, top_k, top_p): the two named profiles, greedy with and without top-k, and top-p
#: alone and after top-k.
SITE_PROFILES = [(1.0, 10, 1.0), (1.0, 0, 1.0), (0.0, 0, 1.0), (0.0, 10, 1.0), (0.7, 50, 0.9), (1.3, 0, 0.5)]


def _logits(rows: int, size: int, eos: list[int], seed: int) -> torch.Tensor:
    """float32 logits as a model gives them, rounded to force ties, an end-of-text row on top of some rows."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(rows, size, generator=g) * 3).round(decimals=1).to(torch.float32)
    x[::2, eos] = x.max() + 1
    return x


@pytest.mark.parametrize("temperature,top_k,top_p", SITE_PROFILES)
def test_a_batch_serves_as_its_rows_under_real_masks(tiny_smollm2, tiny_gemma3, temperature, top_k, top_p):
    """The statistics serve a text's positions in one batch, generation one row at a time: both
    must be bit for bit the same law, under either mask of a real tokenizer."""
    for lm in (tiny_smollm2, tiny_gemma3):
        vocab = model_vocab(lm)
        x = _logits(5, vocab.size, sorted(vocab.eos_ids), seed=len(vocab.token_bytes))
        for end_of_text in (True, False):
            mask = served_mask(vocab, end_of_text)
            batch = process_logits(x, mask, temperature, top_p, top_k)
            assert batch.dtype == torch.float64
            assert torch.equal(batch, torch.stack([process_logits(r, mask, temperature, top_p, top_k) for r in x]))
            assert not torch.isfinite(batch[:, mask]).any()


def test_a_models_mask_is_the_same_alone_and_in_a_line_up(tiny_smollm2, tiny_gemma3):
    """Rows served alone (the baselines, the statistics) are the rows served in a line-up; before the
    end of text may come, every row that spells no text is masked."""
    vocabs = [model_vocab(lm) for lm in (tiny_smollm2, tiny_gemma3)]
    lineup = align(vocabs)
    for v in vocabs:
        no_text = torch.tensor([b is None for b in v.token_bytes])
        for end_of_text in (True, False):
            assert torch.equal(lineup.served_mask(v.name, end_of_text), served_mask(v, end_of_text))
        assert torch.equal(served_mask(v, end_of_text=False), no_text)
        assert not served_mask(v)[sorted(v.eos_ids)].any()


@pytest.mark.parametrize("temperature,top_k,top_p", SITE_PROFILES)
def test_the_baselines_serve_as_the_served_system(tiny_smollm2, temperature, top_k, top_p):
    """De-mark's prober and RandomWalk's rewriter serve a row exactly as ``ServedSystem.serve`` does
    before the end of text may come."""
    spec = ProviderSpec.parse("tiny-smollm2:kgw:1")
    pset = build_providers([spec])
    member = pset.members["tiny-smollm2"]
    system = ServedSystem(pset, pset.providers, True, Mean(), temperature, top_p, top_k)
    cfg = GenerationConfig(providers=[spec], prompt=PROMPT, temperature=temperature, top_p=top_p, top_k=top_k)
    prober = Prober(pset.providers[0], cfg, DeMark(), seed=0)
    walk = _Walk(RandomWalk(rewriter="tiny-smollm2", judge="tiny-smollm2"), cfg, "A text.", member, member)
    for x in _logits(4, member.vocab.size, sorted(member.vocab.eos_ids), seed=11):
        want = system.serve("tiny-smollm2", x, end_of_text=False)
        assert torch.equal(prober.serve(x), want)
        assert torch.equal(walk.serve(x), want)


@pytest.mark.parametrize("name", ["paper", "open"])
def test_the_statistics_read_a_text_as_the_served_system_serves_it(tiny_smollm2, name):
    """Re-reading a text, the statistics keep at each position the law generation drew from."""
    pset = build_providers([ProviderSpec.parse("tiny-smollm2:kgw:1")])
    member = pset.members["tiny-smollm2"]
    prof = PROFILES[name]
    system = ServedSystem(pset, pset.providers, True, Mean(), prof.temperature, prof.top_p, prof.top_k)
    ids = member.encode(PROMPT)
    st = read_ids(member, ids, name)
    lead = [] if member.bos_id is None else [member.bos_id]
    logits = member.position_logits((lead + ids)[:-1])  # logits[j] is the law of (lead + ids)[j + 1]
    for t in range(1 - len(lead), len(ids)):
        assert torch.equal(st.full_row(t), system.serve("tiny-smollm2", logits[len(lead) - 1 + t]))
