"""Providers: a base model served with a watermark scheme and a secret key.

Providers on the same base model share that model's forward pass: the base logits
are computed once per step and each provider perturbs its own copy, so the cost
per token grows with the number of distinct base models, not with N.

A provider holds its model as a member (``members.Member``), never the model itself:
whatever reads a provider's model (detection, the statistics, the baselines) goes
through the member's protocol, so it runs on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from wash.engine.backends import Backend, parse_backend
from wash.engine.members import Member
from wash.engine.settings import ProviderSpec
from wash.engine.vocab import VocabAlignment, align
from wash.watermarks import build_scheme
from wash.watermarks.base import Detector, WatermarkScheme
from wash.watermarks.coordinated import UnionSpace
from wash.watermarks.hashing import derive_seed

#: ``Provider.distribution``'s default: the provider's own generation state.
OWN_STATE: Any = object()


@dataclass
class Provider:
    index: int
    spec: ProviderSpec
    member: Member
    scheme: WatermarkScheme
    #: Set for coordinated providers: the scheme runs on union-vocabulary ids.
    space: UnionSpace | None
    state: Any = None

    @property
    def model(self) -> str:
        return self.member.name

    @property
    def label(self) -> str:
        return self.spec.label(self.index)

    def distribution(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int,
                     state: Any = OWN_STATE) -> torch.Tensor:
        """This provider's watermarked next-token distribution over its model's rows.

        ``state``: the scheme's per-generation draw to serve under (default: the
        one ``start_generation`` drew), e.g. a fresh request's.
        """
        state = self.state if state is OWN_STATE else state
        if self.space is not None:
            return self.space.distribution(self.scheme, logits, ids, prompt_len, state)
        return self.scheme.distribution(logits, ids, prompt_len, state)

    def scheme_ids(self, ids: Sequence[int]) -> list[int]:
        return self.space.ids(ids) if self.space is not None else [int(i) for i in ids]

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return self.scheme.make_detector(self.scheme_ids(prefix))

    def start_generation(self, seed: int) -> None:
        self.state = self.scheme.new_state(derive_seed("generation", seed, self.index))


def build_provider(index: int, spec: ProviderSpec, member: Member, alignment: VocabAlignment) -> Provider:
    """Instantiate one provider (use ``build_providers``, which loads and aligns, instead)."""
    space = None
    size = member.vocab_size
    if spec.coordinated:
        space = UnionSpace(alignment.union_map(member.name))
        size = alignment.size
    scheme = build_scheme(spec.scheme, spec.key, size, dict(spec.params))
    return Provider(index=index, spec=spec, member=member, scheme=scheme, space=space)


@dataclass
class ProviderSet:
    """Providers with their base models' members and the union of those models' vocabularies."""

    providers: list[Provider]
    #: The base models as the engine uses them, by name: the providers' models first, in the
    #: union's order, then any model a mode loads beside them (RandomWalk's rewriter and judge).
    members: dict[str, Member]
    alignment: VocabAlignment


def member_of(name: str, backend: Backend | str | None = None,
              progress: Callable[[str], None] | None = None) -> Member:
    """The base model ``name`` as a member on ``backend`` (default ``WASH_BACKEND``, else ``local``).

    For a model a caller needs beside the providers (RandomWalk's rewriter and judge,
    perplexity scorers, the plain-decode bench), so it runs where the providers run."""
    return parse_backend(backend).member(name, progress=progress)


def build_providers(specs: Sequence[ProviderSpec], union_models: Sequence[str] | None = None,
                    progress: Callable[[str], None] | None = None, backend: Backend | str | None = None,
                    parallel_forwards: bool | None = None) -> ProviderSet:
    """The one place providers are built: for generation, for the CLI's and the app's
    detection, and for the experiments.

    ``union_models`` names the model set whose union vocabulary coordinated providers
    hash in (a generation's own model set); by default the specs' own models. A
    detector of a coordinated provider must use the same set as the generation,
    or its token space differs from the one the text was watermarked in.

    ``backend`` (``NAME[:param=value,...]`` or a parsed one; default ``WASH_BACKEND``, else
    ``local``) says where the models run (``backends.py``); this process reads them through
    their members either way. ``parallel_forwards``: the run's choice of lanes for its members
    (``parallel.py``; ``None``: ``WASH_PARALLEL_FORWARDS``).
    """
    say = progress or (lambda _m: None)
    names = list(dict.fromkeys(list(union_models or []) + [s.model for s in specs]))
    members = parse_backend(backend).members(names, progress=say, parallel_forwards=parallel_forwards)
    if len(names) > 1:
        say("aligning vocabularies")
    alignment = align([members[n].vocab for n in names])
    providers = [build_provider(i, s, members[s.model], alignment) for i, s in enumerate(specs)]
    return ProviderSet(providers=providers, members=members, alignment=alignment)
