"""Model identification: is a served model (or a WASH ensemble) watermarked at all?

Per-text detection asks "was this text made with key k?" and needs the key.
Identification (Water-Probe, Liu et al., ICLR 2025) asks whether a served system
is watermarked, with no key, through crafted prompts: two prompts ask for one more
line of a list of "letter, number word, animal, country" answers; in each answer
context c (the line's prefix "D seven tiger") the next token's frequencies are
counted under both prompts, and ``identify_stats`` turns the counts into a z-score.
The paper's Table 1 very probably reports this score (see the project's notes);
our per-text z is a different statistic.

This module implements Water-Probe's v1 procedure (forced answer prefixes) with the
white-box shortcut its code also takes: each base model's next-token logits are
computed once per (prompt, context), with a KV cache shared along the prompt; then
every sample is drawn from those cached rows, as the system would serve them:
- Each sample is a fresh generation, so a scheme's per-generation randomness (the
  Edit schemes' key offset, Water-Bag's key and complement) is drawn anew for it.
- An ensemble's sample comes from the average of its providers' distributions.
  One draw from an average of N distributions has the law of "pick a provider
  uniformly, draw from it", and with per-sample states that stays exact, so the
  samples are grouped by (provider, state) and each group is one multinomial draw
  from a distribution computed once. A stateless scheme costs one distribution per
  context; an Edit scheme up to one per distinct key offset drawn.
Counts are kept over the union vocabulary, so a single model and an ensemble are
counted the same way.

Probing serves every provider with the ``open`` profile by default, as Water-Probe
samples without truncation: under top-k 10 only ten tokens can ever appear and the
top-50 ranks are mostly ties.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from wash.config import DEFAULT_PROFILE, MODE_TABLE, ProviderSpec, ServingProfile, profile
from wash.errors import WashInputError
from wash.identify_stats import NULL_MEAN, TOP, band, identification_z, run_score
from wash.providers import Provider, ProviderSet, build_providers
from wash.resync import ModelContext
from wash.sampling import process_logits
from wash.watermarks.base import softmax
from wash.watermarks.hashing import derive_seed

LETTERS = tuple(chr(c) for c in range(ord("A"), ord("Z") + 1))
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
ANIMALS = ("cat", "dog", "tiger", "lion")

_INSTRUCTIONS = (
    "Add the next entry to the list. Reply with the entry only.\n"
    "Each entry has four parts: a capital letter picked at random from A to Z, a number word "
    "picked at random from zero to nine, one of the animals cat, dog, tiger or lion, and a "
    "country with a large population.\n\n")

#: The two crafted prompts: the same instructions, different worked examples.
PROMPTS: tuple[str, str] = (
    _INSTRUCTIONS + "\n".join(f"Entry {i + 1}: {line}" for i, line in enumerate((
        "K four dog India", "B nine lion China", "S two cat Brazil", "M seven tiger Nigeria",
        "F zero dog Indonesia", "W five cat United States", "C one lion Pakistan", "N eight tiger Mexico",
        "H three dog Bangladesh", "U six lion Japan", "E nine cat Russia"))) + "\nEntry 12:",
    _INSTRUCTIONS + "\n".join(f"Entry {i + 1}: {line}" for i, line in enumerate((
        "R one tiger China", "G six cat India", "Y three lion Ethiopia", "A eight dog United States",
        "O five tiger Philippines", "J two lion Egypt", "T seven cat Brazil", "P zero dog Vietnam",
        "L four tiger Germany", "V nine dog Indonesia", "I three cat Turkey"))) + "\nEntry 12:",
)

#: What a system under probe is: the first provider alone, the WASH average, or the
#: average of the base models with every watermark off.
PROBE_MODES = ("single", "wash", "unwatermarked")


def forced_contexts(n: int = 50, seed: int = 64) -> list[str]:
    """``n`` distinct answer prefixes (" D seven tiger"), a fixed seeded sample of all 1,040."""
    every = [f" {a} {b} {c}" for a in LETTERS for b in NUMBERS for c in ANIMALS]
    if not 2 <= n <= len(every):
        raise WashInputError(f"the number of contexts must be 2..{len(every)}, got {n}")
    return random.Random(seed).sample(every, n)


@dataclass(frozen=True)
class Probe:
    """How hard to probe: contexts, samples per context and prompt, independent runs."""

    contexts: int = 50
    samples: int = 400
    runs: int = 3
    top: int = TOP
    seed: int = 0
    serving: str = DEFAULT_PROFILE

    def validate(self) -> None:
        if self.samples < 1:
            raise WashInputError(f"samples per context must be at least 1, got {self.samples}")
        if self.runs < 2:
            raise WashInputError(f"identification needs at least 2 runs (z uses their sd), got {self.runs}")
        if self.top < 1:
            raise WashInputError(f"top must be at least 1, got {self.top}")
        profile(self.serving)
        forced_contexts(self.contexts)


@dataclass
class Identification:
    """One system's identification: the run scores, z and Water-Probe's band."""

    mode: str
    providers: list[str]
    scores: list[float]
    pairs: int
    z: float
    band: str
    mean: float
    sd: float
    contexts: int
    samples: int
    #: Distinct (provider, state) distributions computed, summed over prompts and contexts.
    distributions: int
    seconds: float
    probe: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


class _System:
    """A served system's next-token law at a context: providers, models, serving."""

    def __init__(self, pset: ProviderSet, mode: str, serving: ServingProfile) -> None:
        self.pset = pset
        self.mode = MODE_TABLE[mode]
        self.serving = serving
        self.providers = pset.providers[:1] if self.mode.first_provider_only else pset.providers
        self.models = list(dict.fromkeys(p.model for p in self.providers))
        a = pset.alignment
        self.invalid = {m: a.to_union[m] < 0 for m in self.models}
        self.contexts: dict[tuple[int, str], ModelContext] = {}
        self.distributions = 0

    def _context(self, prompt_index: int, model: str) -> ModelContext:
        key = (prompt_index, model)
        if key not in self.contexts:
            lm = self.pset.models[model]
            self.contexts[key] = ModelContext(lm, lm.encode_prompt(PROMPTS[prompt_index]))
        return self.contexts[key]

    def base_rows(self, prompt_index: int, context: str) -> dict[str, tuple[torch.Tensor, list[int]]]:
        """Each model's served base logits after prompt + context, with the ids they follow."""
        rows = {}
        for m in self.models:
            ctx = self._context(prompt_index, m)
            ctx.sync_to(self.pset.models[m].encode_prompt(PROMPTS[prompt_index] + context))
            s = self.serving
            rows[m] = (process_logits(ctx.next_logits(), self.invalid[m], s.temperature, s.top_p, s.top_k),
                       list(ctx.ids))
        return rows

    def union_dist(self, provider: Provider, base: torch.Tensor, ids: list[int], state) -> torch.Tensor:
        """One provider's served distribution under ``state``, over the union vocabulary."""
        self.distributions += 1
        if self.mode.watermark:
            provider.state = state
            # Everything the probe gives is prompt: the counted token is the first generated.
            probs = provider.distribution(base, ids, len(ids))
        else:
            probs = softmax(base)
        a = self.pset.alignment
        out = torch.zeros(a.size + 1, dtype=torch.float64)
        out.index_add_(0, a.scatter_index[provider.model], probs)
        return out[: a.size]

    def counts(self, prompt_index: int, context: str, samples: int, gen: torch.Generator,
               picks: random.Random) -> np.ndarray:
        """Next-token counts of ``samples`` fresh generations at one context (union ids)."""
        rows = self.base_rows(prompt_index, context)
        groups: Counter = Counter()
        for _ in range(samples):
            k = picks.randrange(len(self.providers))
            p = self.providers[k]
            state = p.scheme.new_state(picks.getrandbits(62)) if self.mode.watermark else None
            groups[(k, state)] += 1
        total = np.zeros(self.pset.alignment.size, dtype=np.int64)
        for (k, state), n in sorted(groups.items(), key=lambda kv: (kv[0][0], repr(kv[0][1]))):
            p = self.providers[k]
            base, ids = rows[p.model]
            dist = self.union_dist(p, base, ids, state)
            drawn = torch.multinomial(dist.to(torch.float32).clamp_min(0), n, replacement=True, generator=gen)
            total += np.bincount(drawn.numpy(), minlength=total.size)
        return total


def identify(specs: Sequence[ProviderSpec], mode: str, probe: Probe = Probe(),
             progress: Callable[[int, int], None] | None = None,
             pset: ProviderSet | None = None) -> Identification:
    """Probe the system made of ``specs`` under ``mode`` and score it.

    ``progress(done, total)`` is called after every (run, prompt, context). A caller
    probing several systems on the same models can pass their ``pset`` (built with
    ``build_providers(specs)``) to load the models once.
    """
    import time

    if mode not in PROBE_MODES:
        raise WashInputError(f"unknown probe mode '{mode}' (accepted: {', '.join(PROBE_MODES)})")
    if not specs:
        raise WashInputError("no provider given")
    probe.validate()
    t0 = time.perf_counter()
    pset = pset if pset is not None else build_providers(specs)
    system = _System(pset, mode, profile(probe.serving))
    contexts = forced_contexts(probe.contexts)
    total, done = probe.runs * len(PROMPTS) * len(contexts), 0
    scores, pairs = [], 0
    for run in range(probe.runs):
        counts: list[dict[str, np.ndarray]] = [{}, {}]
        for prompt_index in range(len(PROMPTS)):
            seed = derive_seed("identify", probe.seed, run, prompt_index)
            gen = torch.Generator().manual_seed(seed % (2**63))
            picks = random.Random(seed)
            for c in contexts:
                counts[prompt_index][c] = system.counts(prompt_index, c, probe.samples, gen, picks)
                done += 1
                if progress:
                    progress(done, total)
        s, n_pairs = run_score(counts[0], counts[1], probe.top)
        scores.append(s)
        pairs = n_pairs
    values = np.asarray(scores)
    z = identification_z(scores)
    return Identification(
        mode=mode, providers=[str(p.spec) for p in system.providers], scores=[float(s) for s in scores],
        pairs=pairs, z=z, band=band(z) if not math.isnan(z) else "none", mean=float(values.mean()),
        sd=float(values.std(ddof=1)) if values.size > 1 else math.nan, contexts=len(contexts),
        samples=probe.samples, distributions=system.distributions, seconds=time.perf_counter() - t0,
        probe={**asdict(probe), "null_mean": NULL_MEAN})
