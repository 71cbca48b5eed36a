"""The WASH step where the logits are: nothing read by the host but the step's one packed copy.

A GPU is not lent to CI, so the step runs here on the ``meta`` device, whose tensors
have shapes and no values: any op that mixes a host tensor into the step (a mask, a
keyed list or an index table left on the CPU) raises, and so does any read of a value
by Python (``int(t)``, ``float(t)``, ``.tolist()``), each of which would stall a GPU
until its queue drains. Every registered scheme is served this way on the tiny models'
real vocabularies, through the eager step (every provider, the union, the average, the
consensus, the draw) and a routed or lazy step's own draw; then ``pack_step`` builds the
one vector the step copies. On the CPU the same code gives the texts and the reported
numbers bit for bit (``tests/test_fingerprint.py``), and the functions that replaced host
reads are checked here against the host forms they replaced.
"""

from __future__ import annotations

import pytest
import torch

from wash.engine.aggregation import Mean
from wash.engine.config import ProviderSpec
from wash.engine.ensemble import generate
from wash.engine.providers import build_providers
from wash.engine.readback import ShownProvider, pack_step, read_step, unpack
from wash.engine.sampling import draw, entropy, entropy_of, uniform
from wash.engine.served import ServedSystem
from wash.watermarks import SCHEMES

META = torch.device("meta")


def _reference_sample(probs: torch.Tensor, u: float) -> int:
    """The host walk ``draw`` replaced: a binary search, then back over rows without mass."""
    cdf = torch.cumsum(probs.to(torch.float64).clamp_min(0), dim=0)
    i = int(torch.searchsorted(cdf, torch.tensor([u * float(cdf[-1])], dtype=torch.float64), right=True))
    i = min(i, cdf.numel() - 1)
    while i > 0 and probs[i] <= 0:
        i -= 1
    return i


def test_draw_picks_what_the_host_walk_picked():
    gen = torch.Generator().manual_seed(0)
    for trial in range(300):
        probs = torch.rand(50, generator=gen, dtype=torch.float64)
        probs[torch.rand(50, generator=gen) < 0.6] = 0.0  # flat stretches of the CDF
        if trial % 7 == 0:
            probs[:] = 0.0
            probs[int(torch.randint(50, (1,), generator=gen))] = 1.0  # a point mass
        probs /= probs.sum()
        for u in (0.0, float(torch.rand(1, generator=gen)), 1.0 - 1e-17, 0.9999999):
            assert int(draw(probs, u)) == _reference_sample(probs, u)


def test_entropy_needs_no_index_read():
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        x = torch.randn(1000, generator=gen, dtype=torch.float64)
        x[torch.rand(1000, generator=gen) < 0.3] = float("-inf")
        p = torch.softmax(x, dim=-1)
        top = int(torch.argmax(x))
        host = float(x[top] - torch.log(p[top]) - torch.dot(p, x.clamp_min(torch.finfo(torch.float64).min)))
        assert entropy(x) == host  # bit for bit: the largest logit and probability share a row


def _system(specs: list[str], watermark: bool = True, **profile) -> tuple:
    pset = build_providers([ProviderSpec.parse(s) for s in specs])
    system = ServedSystem(pset, pset.providers, watermark, Mean(), profile.get("temperature", 1.0),
                          profile.get("top_p", 1.0), profile.get("top_k", 0))
    for p in system.providers:
        p.start_generation(7)
    return pset, system


def _context(pset, model: str) -> list[int]:
    return pset.members[model].encode_prompt("The committee met on Tuesday to discuss the")


def candidates(reference: list[torch.Tensor], k: int) -> list[int]:
    """The host form of the view: each reference's top-k, ranked by the first one, ties first-seen."""
    seen: dict[int, None] = {}
    for dist in reference:
        for i in torch.topk(dist, min(k, dist.numel())).indices.tolist():
            seen.setdefault(int(i), None)
    return sorted(seen, key=lambda i: -float(reference[0][i]))


def probs_at(dist: torch.Tensor, ids: list[int]) -> list[float]:
    return [float(dist[i]) for i in ids]


def linf(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def test_read_step_reports_what_the_host_reads_gave(tiny_smollm2, tiny_gemma3):
    """The packed copy's view and probabilities are those the step used to read one by one."""
    pset, system = _system(["tiny-smollm2:kgw:1", "tiny-gemma3:aar:2", "tiny-smollm2:synthid:3"], top_k=40)
    parts = {}
    for m in system.models:
        ids = _context(pset, m)
        member = pset.members[m]
        ctx = member.context(ids, use_cache=True, served=system.served_rows(m))
        parts[m] = system.model_part(m, system.serve(m, ctx.next_logits()), ids, len(ids))
    agg = system.combine(parts)
    token = draw(agg.p_bar, 0.37)
    shown = read_step(token, agg.entropy, [agg.p_bar, agg.p_star], 8,
                      [ShownProvider(d, system.maps[pm]) for d, pm in zip(agg.dists, system.prov_model)],
                      average=agg.p_bar, consensus=agg.p_star)
    view = candidates([agg.p_bar, agg.p_star], 8)
    assert shown.token == int(token) and shown.view == view and shown.entropy == float(agg.entropy)
    assert shown.average_probs == probs_at(agg.p_bar, view) and shown.consensus_probs == probs_at(agg.p_star, view)
    assert shown.linf == linf(agg.p_bar, agg.p_star)
    assert shown.provider_probs == [system.maps[pm].read(d, view) for d, pm in zip(agg.dists, system.prov_model)]
    alone = unpack(pack_step(token, agg.entropy, [agg.p_bar], 3, [None, ShownProvider(agg.p_bar), None]),
                   pack_step(token, agg.entropy, [agg.p_bar], 3,
                             [None, ShownProvider(agg.p_bar), None]).values.tolist())
    assert alone.provider_probs[0] is None and alone.provider_probs[1] == probs_at(agg.p_bar, alone.view)
    assert alone.linf is None and alone.average_probs is None


def _meta_step(pset, system) -> None:
    """One eager step and one provider's own draw on the meta device, up to the packed vector."""
    parts = {}
    for m in system.models:
        ids = _context(pset, m)
        logits = torch.empty(pset.members[m].vocab.size, device=META)
        parts[m] = system.model_part(m, system.serve(m, logits, end_of_text=False), ids, len(ids))
    agg = system.combine(parts)
    packed = pack_step(draw(agg.p_bar, 0.5), agg.entropy, [agg.p_bar, agg.p_star], 8,
                       [ShownProvider(d, system.maps[pm]) for d, pm in zip(agg.dists, system.prov_model)],
                       average=agg.p_bar, consensus=agg.p_star)
    assert packed.values.device == META and packed.values.dim() == 1
    own = system.provider_union(0, system.serve(system.prov_model[0], torch.empty(
        pset.members[system.prov_model[0]].vocab.size, device=META)), _context(pset, system.prov_model[0]), 3)
    assert pack_step(draw(own, 0.5), entropy_of(own), [own], 8, [ShownProvider(own)]).values.device == META


#: The host reads a scheme's law still makes on a device, and why each stays.
KNOWN_READS = {
    # Its tournament hashes only the rows with mass: one read of how many there are per step
    # and provider; hashing every row of a 262k vocabulary at each of 30 layers costs more.
    "synthid": 1,
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_every_scheme_serves_a_step_on_the_device_without_a_host_read(tiny_smollm2, tiny_gemma3, scheme,
                                                                       monkeypatch):
    import torch.fx.experimental._config as fx_config

    reads = []
    nonzero = torch.nonzero

    def counted(*args, **kwargs):
        reads.append("nonzero")  # its output's length is a value read by the host
        return nonzero(*args, **kwargs)

    if scheme in KNOWN_READS:  # let meta assume every row has mass, and count the reads instead
        monkeypatch.setattr(fx_config, "meta_nonzero_assume_all_nonzero", True)
        monkeypatch.setattr(torch, "nonzero", counted)
    pset, system = _system([f"tiny-smollm2:{scheme}:11", f"tiny-gemma3:{scheme}:12"], top_k=50)
    _meta_step(pset, system)
    # the eager step's two providers and the one drawing alone
    assert len(reads) == 3 * KNOWN_READS.get(scheme, 0)


@pytest.mark.parametrize("profile", [dict(temperature=0.7, top_p=0.9), dict(temperature=0.0),
                                     dict(temperature=1.0)])
def test_every_profile_serves_on_the_device(tiny_smollm2, tiny_gemma3, profile):
    pset, system = _system(["tiny-smollm2:kgw:1", "tiny-gemma3:dipmark:2"], **profile)
    _meta_step(pset, system)
    pset, system = _system(["tiny-smollm2:kgw:1", "tiny-gemma3:dipmark:2"], watermark=False, **profile)
    _meta_step(pset, system)


def test_a_generation_makes_one_copy_per_drawn_token(tiny_smollm2, tiny_gemma3):
    """One copy per draw: each committed token's, plus at most the draw that ended the run and the
    boundary draw that closed each routed span (drawn, read, not committed)."""
    from wash.engine import readback
    from wash.engine.config import GenerationConfig

    for forwards in ("eager", "lazy"):
        config = GenerationConfig(providers=[ProviderSpec.parse(s) for s in
                                             ("tiny-smollm2:kgw:1", "tiny-gemma3:aar:2", "tiny-smollm2:unigram:3")],
                                  prompt="The committee met on Tuesday to discuss", max_new_tokens=40, seed=3,
                                  forwards=forwards)
        before = readback.copies()
        result = generate(config)
        copies, tokens = readback.copies() - before, len(result.tokens)
        assert tokens <= copies <= tokens + result.routing.routed_spans + 1, (forwards, copies, tokens)
