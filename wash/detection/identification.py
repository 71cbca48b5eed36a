"""Model identification: is a served model (or a WASH ensemble) watermarked at all?

Per-text detection asks "was this text made with key k?" and needs the key.
Identification (Water-Probe, Liu et al., ICLR 2025) asks whether a served system
is watermarked, with no key, through crafted prompts: two prompts ask for one more
line of a list of "letter, number word, animal, country" answers; in each answer
context c (the line's prefix "D seven tiger") the next token's frequencies are
counted under both prompts, and ``identify_stats`` turns the counts into a z-score.
The paper's Table 1 very probably reports this score (see the project's notes);
our per-text z is a different statistic.

Two procedures, as Water-Probe's: v1 forces about 50 answer prefixes and counts the
token after each; v2 lets the system sample its own prefix (" D seven tiger") and
counts the token after it, grouping samples by the prefix they took and dropping
prefixes seen fewer than ``min_count`` times; samples that leave the format are
counted and reported (``fit``). v2 is the one that sees schemes whose randomness is
drawn per generation (the Edit schemes, Water-Bag): their key offset also shapes the
prefix itself. Both use the white-box shortcut Water-Probe's code also takes: each base model's next-token logits are
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

import hashlib
import math
import os
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from wash.engine.aggregation import Rule
from wash.engine.config import DEFAULT_PROFILE, MODE_TABLE, ProviderSpec, ServingProfile, profile, rule_of
from wash.core.errors import WashInputError
from wash.detection.identify_stats import (NULL_MEAN, TOP, TokenCounts, band, context_bootstrap, identification_z,
                                 matrix_score, pair_matrix)
from wash.engine.members import Member
from wash.engine.providers import Provider, ProviderSet, build_providers
from wash.engine.served import ServedSystem
from wash.engine.backends import Backend
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

VERSIONS = ("v1", "v2")
#: Every answer prefix the format allows (" D seven tiger"), and every start of one.
ALL_CONTEXTS = frozenset(f" {a} {b} {c}" for a in LETTERS for b in NUMBERS for c in ANIMALS)
_PARTIALS = frozenset(c[:i] for c in ALL_CONTEXTS for i in range(len(c) + 1))
#: v2: a prefix that has not completed after this many tokens has left the format.
MAX_PREFIX_TOKENS = 12

#: Memory for base rows kept across systems (float32: 0.2 MB a row for smollm2's 49k
#: vocabulary, 1 MB for gemma3's 262k; a v2 probe of both models visits about 3,000).
ROWS_BUDGET_BYTES = 5 * 2**30

#: Runs Water-Probe's z is computed over (the paper's three); later runs feed S and p only.
WATER_PROBE_RUNS = 3

#: What a system under probe is: the first provider alone, the WASH average, or the
#: average of the base models with every watermark off.
PROBE_MODES = ("single", "wash", "unwatermarked")


class _ServedRows:
    """Base logits by (model, prompt, text), kept for the whole process.

    A base model's logits at a text do not depend on the watermark, the key, the
    serving profile or the other models of a system, so every system probed in one
    process on the same model reuses them: the unwatermarked probe and its null runs,
    each scheme's single provider and every ensemble containing that model. The
    forward is most of a probe's cost. The raw float32 logits are kept (a row of
    gemma3's 262k vocabulary is 1 MB, half the float64 served row) and served on
    each use (mask, temperature, top-k, top-p: exact, and cheap beside a forward).
    Rows stop being kept in memory past ``ROWS_BUDGET_BYTES``; the models' KV
    contexts are kept per (model, prompt).

    With a ``directory`` (``use_directory``) every row is also written to disk and
    read back by any later process. Why: a null of 50 runs x 20,000 samples walks
    a far larger prefix tree than one system (rare branches get sampled), about
    ten thousand nodes per prompt and model, more than memory holds for gemma3;
    on disk the forwards are paid once per (model, prompt, text) for every system,
    null and resumed run of an experiment on the machine. A row read back is the
    float32 logits the forward gave, bit for bit.
    """

    def __init__(self) -> None:
        self.rows: dict[tuple, tuple[torch.Tensor, list[int]]] = {}
        self.bytes = 0
        self.contexts: dict[tuple[str, int], Any] = {}
        self.forwards = 0
        self.directory: Path | None = None

    def use_directory(self, directory: str | Path | None) -> None:
        """Keep rows on disk under ``directory`` too (``None``: memory only)."""
        self.directory = Path(directory) if directory else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, model: str, prompt_index: int, text: str) -> Path | None:
        if self.directory is None:
            return None
        digest = hashlib.sha1(f"{PROMPTS[prompt_index]}\0{text}".encode("utf-8")).hexdigest()[:24]
        return self.directory / model / f"{digest}.pt"

    def get(self, system: ServedSystem, model: str, prompt_index: int,
            text: str) -> tuple[torch.Tensor, list[int]]:
        """``model``'s logits after prompt + ``text`` as ``system`` serves them, with the ids they follow."""
        raw, ids = self.raw(system.members[model], prompt_index, text)
        return system.serve(model, raw), ids

    def raw(self, member: Member, prompt_index: int, text: str) -> tuple[torch.Tensor, list[int]]:
        model = member.name
        key = (model, prompt_index, text)
        cached = self.rows.get(key)
        if cached is not None:
            return cached
        path = self._path(model, prompt_index, text)
        if path is not None and path.exists():
            stored = torch.load(path)
            row = (stored["logits"], list(stored["ids"]))
            self._keep(key, row)
            return row
        ctx = self.contexts.get((model, prompt_index))
        if ctx is None or not ctx.belongs_to(member):
            prompt_ids = member.encode_prompt(PROMPTS[prompt_index])
            ctx = self.contexts[(model, prompt_index)] = member.context(prompt_ids)
        ctx.sync_to(member.encode_prompt(PROMPTS[prompt_index] + text))
        self.forwards += 1
        row = (ctx.next_logits().to(torch.float32).clone(), list(ctx.ids))
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            torch.save({"logits": row[0], "ids": row[1]}, tmp)
            os.replace(tmp, path)
        self._keep(key, row)
        return row

    def _keep(self, key: tuple, row: tuple[torch.Tensor, list[int]]) -> None:
        size = row[0].numel() * row[0].element_size()
        if self.bytes + size <= ROWS_BUDGET_BYTES:
            self.rows[key] = row
            self.bytes += size

    def clear(self) -> None:
        directory = self.directory
        self.__init__()
        self.directory = directory


#: The process's served rows (see ``_ServedRows``).
SERVED_ROWS = _ServedRows()


def forced_contexts(n: int = 50, seed: int = 64) -> list[str]:
    """``n`` distinct answer prefixes (" D seven tiger"), a fixed seeded sample of all 1,040."""
    every = [f" {a} {b} {c}" for a in LETTERS for b in NUMBERS for c in ANIMALS]
    if not 2 <= n <= len(every):
        raise WashInputError(f"the number of contexts must be 2..{len(every)}, got {n}")
    return random.Random(seed).sample(every, n)


@dataclass(frozen=True)
class Probe:
    """How hard to probe: contexts, samples per context and prompt, independent runs."""

    #: ``v1``: forced prefixes; ``v2``: the system samples its own prefixes.
    version: str = "v1"
    #: v1: forced prefixes probed.
    contexts: int = 50
    #: v1: samples per (context, prompt, run); v2: samples per (prompt, run), all prefixes together.
    samples: int = 400
    runs: int = 3
    top: int = TOP
    seed: int = 0
    serving: str = DEFAULT_PROFILE
    #: v2: prefixes sampled fewer times than this in a (prompt, run) are dropped (Water-Probe: 20).
    min_count: int = 20
    #: v2: a run's samples on a token path taken fewer than this many times in that run
    #: (" D", " sev", "en" where the run mostly writes " D", " seven") stop there and count
    #: as off the format. 1 keeps every path, as Water-Probe does; larger values bound
    #: the prefix tree of a many-run null, which otherwise grows with every rare
    #: tokenisation its 10^6 samples find (see ``_System.sampled_counts``).
    min_path: int = 3
    #: How an ensemble combines its providers (``wash.engine.aggregation``; the paper's is the mean),
    #: as written; ``rule`` is it parsed.
    aggregate: str = "mean"
    #: Compute S's bootstrap interval over contexts (a few seconds; off for null runs, which
    #: only need their run scores).
    interval: bool = True

    def validate(self) -> None:
        if self.version not in VERSIONS:
            raise WashInputError(f"unknown probe version '{self.version}' (accepted: {', '.join(VERSIONS)})")
        if self.samples < 1:
            raise WashInputError(f"samples per context must be at least 1, got {self.samples}")
        if self.runs < 2:
            raise WashInputError(f"identification needs at least 2 runs (z uses their sd), got {self.runs}")
        if self.top < 1:
            raise WashInputError(f"top must be at least 1, got {self.top}")
        if self.min_path < 1:
            raise WashInputError(f"min_path must be at least 1, got {self.min_path}")
        profile(self.serving)
        forced_contexts(self.contexts)
        self.rule  # a bad rule fails here, before any model loads

    @cached_property
    def rule(self) -> Rule:
        """``aggregate`` parsed, once per probe (by the engine config's ``rule_of``)."""
        return rule_of(self.aggregate)


@dataclass
class Identification:
    """One system's identification: every run's score, S and its interval, Water-Probe's z and band.

    ``z``, ``band``, ``mean`` and ``sd`` are Water-Probe's, over the first
    ``WATER_PROBE_RUNS`` runs (as the paper), kept for comparison with it; the verdict
    is the calibrated p (``identify_stats.permutation_p``, Holm-adjusted over the systems
    sharing a null), which needs the null runs of the system's line-up and so is
    computed by whoever probed them.
    """

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
    #: v2: share of samples whose prefix kept the format (v1: 1.0, the prefix is forced).
    fit: float
    seconds: float
    probe: dict = field(default_factory=dict)
    #: Base-model forwards this probe ran (rows other probes in the process left are reused).
    forwards: int = 0
    #: S, the mean over every run of the run's mean pair score, and its 95% bootstrap
    #: interval over contexts (``identify_stats.context_bootstrap``).
    s: float = math.nan
    s_low: float = math.nan
    s_high: float = math.nan
    #: Samples counted per kept prefix (v2: how much evidence each context holds).
    samples_per_context: float = math.nan

    def to_dict(self) -> dict:
        return asdict(self)


class _System:
    """A served system's next-token law at a context, probed: a ``served.ServedSystem`` on the probe's rows."""

    def __init__(self, pset: ProviderSet, mode: str, serving: ServingProfile,
                 aggregate: str | Rule = "mean") -> None:
        self.pset = pset
        self.mode = MODE_TABLE[mode]
        self.serving = serving
        rule = rule_of(aggregate)
        providers = pset.providers[:1] if self.mode.first_provider_only else pset.providers
        self.served = ServedSystem(pset, providers, self.mode.watermark, rule, serving.temperature,
                                   serving.top_p, serving.top_k)
        self.providers = self.served.providers
        self.models = self.served.models
        self.rule = rule
        # Under the mean a sample is "pick a provider, draw from it"; any other rule
        # needs every provider's law at once, so samples group by all their states.
        self.robust = self.served.robust
        self._prompt_lens: dict[tuple[int, str], int] = {}
        # A probe serves hundreds of fresh generations at every node, so a keyed
        # sequence is read at every offset again and again: keep the whole key.
        for p in self.providers:
            p.scheme.keep_whole_key()
        #: Providers whose law is a keyed point mass (EXP-Edit, ITS-Edit): v2 reads their
        #: token per state (``EditScheme.picks``) instead of building and drawing from a
        #: one-hot law per state, which took most of a stateful ensemble's probe.
        self._keyed_points = {k for k, p in enumerate(self.providers)
                              if self.mode.watermark and p.space is None
                              and p.scheme.picks_states and p.scheme.point_mass}

    @property
    def distributions(self) -> int:
        """Provider distributions computed so far."""
        return self.served.distributions

    def base_rows(self, prompt_index: int, context: str) -> dict[str, tuple[torch.Tensor, list[int]]]:
        """Each model's served base logits after prompt + context, with the ids they follow."""
        return {m: SERVED_ROWS.get(self.served, m, prompt_index, context) for m in self.models}

    def union_dist(self, provider: Provider, base: torch.Tensor, ids: list[int], state,
                   prompt_len: int | None = None) -> torch.Tensor:
        """One provider's served distribution under ``state``, over the union vocabulary.

        ``prompt_len`` defaults to all of ``ids``: in v1 everything the probe gives is
        prompt and the counted token is the first one generated."""
        return self.served.provider_union(self._index(provider), base, ids,
                                          len(ids) if prompt_len is None else prompt_len, state)

    def _index(self, provider: Provider) -> int:
        return next(i for i, p in enumerate(self.providers) if p is provider)

    def _prompt_len(self, prompt_index: int, model: str) -> int:
        key = (prompt_index, model)
        if key not in self._prompt_lens:
            self._prompt_lens[key] = len(self.served.members[model].encode_prompt(PROMPTS[prompt_index]))
        return self._prompt_lens[key]

    def model_dist(self, provider: Provider, base: torch.Tensor, ids: list[int], state,
                   prompt_len: int) -> torch.Tensor:
        """One provider's served distribution under ``state``, in its model's own vocabulary."""
        return self.served.provider_dist(self._index(provider), base, ids, prompt_len, state)

    def _states(self, picks: random.Random) -> tuple:
        """One fresh generation's provider states (``None`` for stateless schemes and no watermark)."""
        return tuple(p.scheme.new_state(picks.getrandbits(62)) if self.mode.watermark else None
                     for p in self.providers)

    def sampled_counts(self, prompt_index: int, samples: int, gen: torch.Generator, picks: random.Random,
                       runs: int = 1, min_path: int = 1) -> tuple[list[dict[str, TokenCounts]], list[int]]:
        """v2: ``samples`` fresh generations per run that pick their own prefix; counts per run and prefix.

        The samples of every run walk the prefix tree together, node by node, each
        carrying its run and its providers' generation states. At a node the system's
        law is the average of its providers' laws under those states, so each sample's
        next token is drawn as "pick a provider uniformly, draw from it under its own
        state" (the same law, step by step; the states, not the picks, carry over to
        the next node). Samples sharing a (provider, state) at a node share one
        distribution and one multinomial draw, whatever their run: a stateless system
        costs one distribution per node however many runs it is probed for, and the
        Edit schemes' key offsets and Water-Bag's keys take a few hundred values. The
        runs stay independent: every sample is an independent generation, and which
        run it is counted in is fixed before the walk.
        A run's samples go on from a node only where at least ``min_path`` of them
        reached it; the others count as off the format. The rule is applied per run, so
        a run's counts follow the same procedure whether it is walked alone or with 49
        others: the null and the systems it is compared with are probed alike. Why it
        exists: the walk visits every node some sample reaches, and the rare
        tokenisations that 50 runs x 20,000 samples find multiply the nodes (and
        forwards) several times over while adding a sample or two to a context.
        Returns, per run, the counts at each complete prefix and how many samples left
        the format.
        """
        groups: Counter = Counter()
        for run in range(runs):
            for _ in range(samples):
                groups[(run, self._states(picks))] += 1
        a = self.pset.alignment
        parts: list[dict[str, list[TokenCounts]]] = [{} for _ in range(runs)]
        off = [0] * runs
        stack: list[tuple[str, Counter, int]] = [("", groups, 0)]
        while stack:
            text, here, depth = stack.pop()
            children = self.step(prompt_index, text, here, gen)
            if text in ALL_CONTEXTS:  # the prefix is complete: these are the counted tokens
                for run, found in _by_run(children, a.size).items():
                    parts[run].setdefault(text, []).append(found)
                continue
            for u, child in children.items():
                nxt = text + a.token_text(u) if u != a.eos_index else None
                if nxt is not None and nxt in _PARTIALS and depth + 1 < MAX_PREFIX_TOKENS:
                    child = _rare_paths_off(child, min_path, off)
                    if child:
                        stack.append((nxt, child, depth + 1))
                else:
                    for (run, _states), m in child.items():
                        off[run] += m
        # A prefix spelt by two token paths is walked twice: its counts add up.
        counts = [{text: (found[0] if len(found) == 1 else TokenCounts.merge(found, a.size))
                   for text, found in run_parts.items()} for run_parts in parts]
        return counts, off

    def step(self, prompt_index: int, text: str, here: Counter, gen: torch.Generator) -> dict[int, Counter]:
        """Draw the next token of every sample at node ``text``: union id -> its samples by (run, states).

        ``here`` counts the samples at the node by (run, provider states). Each group
        is split uniformly over the providers, and each provider draws its share from
        its own law under its state in that group.
        """
        n = len(self.providers)
        rows = self.base_rows(prompt_index, text)
        if self.robust:
            return self._robust_step(prompt_index, rows, here, gen)
        draws: dict[tuple[int, object], list[tuple[tuple, int]]] = {}
        for key, m in here.items():
            states = key[1]
            split = ([m] if n == 1 else
                     torch.bincount(torch.multinomial(torch.ones(n), m, replacement=True, generator=gen),
                                    minlength=n).tolist())
            for k, mk in enumerate(split):
                if mk:
                    draws.setdefault((k, states[k]), []).append((key, mk))
        maps = self.served.maps
        children: dict[int, Counter] = {}
        points: dict[int, list[tuple[object, list[tuple[tuple, int]]]]] = {}
        for (k, state), members in draws.items():
            p = self.providers[k]
            if k in self._keyed_points:
                points.setdefault(k, []).append((state, members))
                continue
            base, ids = rows[p.model]
            probs = self.model_dist(p, base, ids, state, self._prompt_len(prompt_index, p.model))
            probs = probs.to(torch.float32).clamp_min(0)
            # One draw for all the members (iid), dealt out in order.
            drawn = maps[p.model].union_ids(draw(probs, sum(mk for _, mk in members), gen)).numpy()
            _deal(drawn, members, children)
        # A keyed point mass has one outcome per state: every sample of a group takes it.
        for k, groups in points.items():
            p = self.providers[k]
            base, ids = rows[p.model]
            tokens, read = p.scheme.picks(base, ids, self._prompt_len(prompt_index, p.model),
                                          [state for state, _ in groups])
            self.served.distributions += read
            for token, (_, members) in zip(tokens, groups):
                child = children.setdefault(maps[p.model].union_id(token), Counter())
                for key, mk in members:
                    child[key] += mk
        return children

    def robust_dist(self, prompt_index: int, rows: dict, states: tuple, forced: bool = False) -> torch.Tensor:
        """The aggregation rule over every provider's law under ``states``, on the union.

        ``forced``: v1's context is part of the prompt (nothing generated yet)."""
        union = []
        for p, state in zip(self.providers, states):
            base, ids = rows[p.model]
            union.append(self.union_dist(p, base, ids, state,
                                         None if forced else self._prompt_len(prompt_index, p.model)))
        return self.served.aggregate(union)

    def _robust_step(self, prompt_index: int, rows: dict, here: Counter,
                     gen: torch.Generator) -> dict[int, Counter]:
        by_states: dict[tuple, list[tuple[tuple, int]]] = {}
        for key, m in here.items():
            by_states.setdefault(key[1], []).append((key, m))
        children: dict[int, Counter] = {}
        for states, members in by_states.items():
            dist = self.robust_dist(prompt_index, rows, states).to(torch.float32).clamp_min(0)
            drawn = draw(dist, sum(m for _, m in members), gen).numpy()
            _deal(drawn, members, children)
        return children

    def counts(self, prompt_index: int, context: str, samples: int, gen: torch.Generator,
               picks: random.Random, runs: int = 1) -> list[TokenCounts]:
        """v1: next-token counts of ``samples`` fresh generations per run at one forced context.

        As in v2, samples of every run that share a (provider, state) share one
        distribution and one draw, dealt out to their runs in order."""
        rows = self.base_rows(prompt_index, context)
        size = self.pset.alignment.size
        groups: dict[tuple, Counter] = {}
        for run in range(runs):
            for _ in range(samples):
                if self.robust:  # v1's counted token is the first generated: the rule's law at the prompt's end
                    key: tuple = self._states(picks)
                else:
                    k = picks.randrange(len(self.providers))
                    p = self.providers[k]
                    key = (k, p.scheme.new_state(picks.getrandbits(62)) if self.mode.watermark else None)
                per_run = groups.get(key)
                if per_run is None:
                    per_run = groups[key] = Counter()
                per_run[run] += 1
        drawn_by_run: list[list[np.ndarray]] = [[] for _ in range(runs)]
        for key, per_run in sorted(groups.items(), key=lambda kv: repr(kv[0])):
            if self.robust:
                dist = self.robust_dist(prompt_index, rows, key, forced=True)
            else:
                k, state = key
                p = self.providers[k]
                base, ids = rows[p.model]
                dist = self.union_dist(p, base, ids, state)
            drawn = draw(dist.to(torch.float32).clamp_min(0), sum(per_run.values()), gen).numpy()
            at = 0
            for run in sorted(per_run):
                drawn_by_run[run].append(drawn[at:at + per_run[run]])
                at += per_run[run]
        return [TokenCounts.from_tokens(np.concatenate(d) if d else np.zeros(0, np.int64), size)
                for d in drawn_by_run]


def draw(probs: torch.Tensor, m: int, gen: torch.Generator) -> torch.Tensor:
    """``m`` iid draws from ``probs``: ``torch.multinomial``'s draws, generator stream included.

    Why: the point-mass schemes (EXP-Edit, ITS-Edit, AAR in their original forms)
    make most of a probe's distributions one-hot, and ``torch.multinomial`` still
    pays a pass over the whole vocabulary for them (a single draw fills an
    exponential per entry: 10 ms at Gemma-3's 262k). A one-hot law has one outcome,
    so it is returned directly, and the generator is advanced by exactly what the
    multinomial would have consumed (``_advance``), so every later draw, and so every
    probe's counts, stay the same as before this shortcut.
    """
    if m > 0 and int(torch.count_nonzero(probs)) == 1 and _advance(gen, probs.numel(), m):
        return torch.full((m,), int(torch.argmax(probs)), dtype=torch.long)
    return torch.multinomial(probs, m, replacement=True, generator=gen)


#: Per (vocabulary size, single draw): whether ``_advance`` matches torch.multinomial's consumption.
_ADVANCE_CHECKED: dict[tuple[int, bool], bool] = {}


def _consume(gen: torch.Generator, size: int, m: int) -> None:
    # torch.multinomial (CPU, replacement) draws one double per sample, except for a
    # single sample, where it races exponentials over the whole row (one 64-bit draw each)
    if m == 1:
        torch.empty(size, dtype=torch.int64).random_(generator=gen)
    else:
        torch.rand(m, dtype=torch.float64, generator=gen)


def _advance(gen: torch.Generator, size: int, m: int) -> bool:
    """Advance ``gen`` as ``torch.multinomial`` of ``m`` samples over ``size`` entries would.

    Checked once per (size, m == 1) against the real call on a throwaway generator;
    where torch consumes differently (another version), returns False and advances
    nothing, and the caller draws for real."""
    key = (size, m == 1)
    ok = _ADVANCE_CHECKED.get(key)
    if ok is None:
        one_hot = torch.zeros(size)
        one_hot[size // 2] = 1.0
        real, ours = torch.Generator().manual_seed(12345), torch.Generator().manual_seed(12345)
        torch.multinomial(one_hot, m if m > 1 else 1, replacement=True, generator=real)
        _consume(ours, size, m)
        ok = _ADVANCE_CHECKED[key] = bool(torch.equal(real.get_state(), ours.get_state()))
    if ok:
        _consume(gen, size, m)
    return ok


def _deal(drawn: np.ndarray, members: list[tuple[tuple, int]], children: dict[int, Counter]) -> None:
    """Deal one iid draw out to its members in order: ``children[token][member key] += count``."""
    at = 0
    for key, m in members:
        tokens, numbers = np.unique(drawn[at:at + m], return_counts=True)
        for u, c in zip(tokens.tolist(), numbers.tolist()):
            children.setdefault(u, Counter())[key] += c
        at += m


def _rare_paths_off(child: Counter, min_path: int, off: list[int]) -> Counter:
    """``child`` without the runs that reach it fewer than ``min_path`` times (added to ``off``)."""
    if min_path <= 1:
        return child
    per_run: Counter = Counter()
    for (run, _states), m in child.items():
        per_run[run] += m
    rare = {run for run, m in per_run.items() if m < min_path}
    if not rare:
        return child
    kept: Counter = Counter()
    for key, m in child.items():
        if key[0] in rare:
            off[key[0]] += m
        else:
            kept[key] = m
    return kept


def _by_run(children: dict[int, Counter], size: int) -> dict[int, TokenCounts]:
    """The tokens drawn at a complete prefix, counted per run."""
    flat = [(key[0], u, c) for u, child in children.items() for key, c in child.items()]
    if not flat:
        return {}
    arr = np.asarray(flat, dtype=np.int64)
    out = {}
    for run in np.unique(arr[:, 0]).tolist():
        sel = arr[arr[:, 0] == run]
        ids, inverse = np.unique(sel[:, 1], return_inverse=True)
        out[run] = TokenCounts(ids, np.bincount(inverse, weights=sel[:, 2]).astype(np.int64), size)
    return out


def identify(specs: Sequence[ProviderSpec], mode: str, probe: Probe = Probe(),
             progress: Callable[[int, int], None] | None = None,
             pset: ProviderSet | None = None, backend: Backend | str | None = None) -> Identification:
    """Probe the system made of ``specs`` under ``mode`` and score it.

    ``progress(done, total)`` is called after every (prompt, context) (v1) or prompt
    (v2). A caller probing several systems on the same models can pass their ``pset``
    (built with ``build_providers(specs)``) to load the models once. ``backend`` (default
    ``WASH_BACKEND``, as for generation) says where the models run when no ``pset`` is
    given; every forward goes through the members, so the result is the same on each.
    """
    if mode not in PROBE_MODES:
        raise WashInputError(f"unknown probe mode '{mode}' (accepted: {', '.join(PROBE_MODES)})")
    if not specs:
        raise WashInputError("no provider given")
    probe.validate()
    t0, forwards0 = time.perf_counter(), SERVED_ROWS.forwards
    if pset is None:
        pset = build_providers(specs, backend=backend)
    system = _System(pset, mode, profile(probe.serving), probe.rule)
    contexts = forced_contexts(probe.contexts) if probe.version == "v1" else []
    total, done = len(PROMPTS) * max(len(contexts), 1), 0
    # counts[run][prompt] maps a context to its next-token counts
    counts: list[list[dict[str, TokenCounts]]] = [[{}, {}] for _ in range(probe.runs)]
    off, kept, counted = 0, [], []
    for prompt_index in range(len(PROMPTS)):
        # one random stream per prompt for all runs (runs are split before any draw)
        seed = derive_seed("identify", probe.version, probe.seed, "runs", prompt_index)
        gen = torch.Generator().manual_seed(seed % (2**63))
        picks = random.Random(seed)
        if probe.version == "v2":
            found, left = system.sampled_counts(prompt_index, probe.samples, gen, picks, probe.runs,
                                                probe.min_path)
            off += sum(left)
            for run in range(probe.runs):
                keep = {c: v for c, v in found[run].items() if v.total >= probe.min_count}
                counts[run][prompt_index] = keep
                kept.append(len(keep))
                counted.append(sum(v.total for v in keep.values()))
            done += 1
            if progress:
                progress(done, total)
            continue
        for c in contexts:
            for run, found_c in enumerate(system.counts(prompt_index, c, probe.samples, gen, picks, probe.runs)):
                counts[run][prompt_index][c] = found_c
            done += 1
            if progress:
                progress(done, total)
    scored = sorted(set().union(*(set(r[0]) & set(r[1]) for r in counts)))
    matrices = [pair_matrix(r[0], r[1], scored, probe.top) for r in counts]
    per_run = [matrix_score(m) for m in matrices]
    scores = [s for s, _ in per_run]
    s, s_low, s_high = (context_bootstrap(matrices, seed=probe.seed) if probe.interval
                        else (float(np.nanmean(scores)), math.nan, math.nan))
    first = scores[:WATER_PROBE_RUNS]
    z = identification_z(first)
    values = np.asarray(first)
    return Identification(
        mode=mode, providers=[str(p.spec) for p in system.providers], scores=[float(v) for v in scores],
        pairs=per_run[-1][1], z=z, band=band(z), mean=float(values.mean()),
        sd=float(values.std(ddof=1)) if values.size > 1 else math.nan,
        contexts=len(contexts) if probe.version == "v1" else int(round(float(np.mean(kept)))),
        samples=probe.samples, distributions=system.distributions,
        fit=1.0 if probe.version == "v1" else 1.0 - off / (probe.samples * probe.runs * len(PROMPTS)),
        seconds=time.perf_counter() - t0,
        probe={**asdict(probe), "null_mean": NULL_MEAN}, forwards=SERVED_ROWS.forwards - forwards0,
        s=s, s_low=s_low, s_high=s_high,
        samples_per_context=(probe.samples if probe.version == "v1"
                             else float(sum(counted) / max(1, sum(kept)))))
