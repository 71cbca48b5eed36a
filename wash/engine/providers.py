"""Providers: a base model served with a watermark scheme and a secret key.

Providers on the same base model share that model's forward pass: the base logits
are computed once per step and each provider perturbs its own copy, so the cost
per token grows with the number of distinct base models, not with N.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from wash import env
from wash.engine.members import LocalMember, Member
from wash.engine.parallel import parallel_enabled
from wash.engine.models import LoadedModel, load_model
from wash.engine.settings import Backend, ProviderSpec
from wash.engine.vocab import VocabAlignment, align, model_vocab
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
    lm: LoadedModel
    scheme: WatermarkScheme
    #: Set for coordinated providers: the scheme runs on union-vocabulary ids.
    space: UnionSpace | None
    state: Any = None

    @property
    def model(self) -> str:
        return self.lm.name

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


def build_provider(index: int, spec: ProviderSpec, lm: LoadedModel, alignment: VocabAlignment) -> Provider:
    """Instantiate one provider (use ``build_providers``, which loads and aligns, instead)."""
    space = None
    size = lm.vocab_size
    if spec.coordinated:
        space = UnionSpace(alignment.union_map(lm.name))
        size = alignment.size
    scheme = build_scheme(spec.scheme, spec.key, size, dict(spec.params))
    return Provider(index=index, spec=spec, lm=lm, scheme=scheme, space=space)


@dataclass
class ProviderSet:
    """Providers with their loaded base models and the union of those models' vocabularies."""

    providers: list[Provider]
    models: dict[str, LoadedModel]
    alignment: VocabAlignment
    #: The base models as the engine uses them (``members.py``), by name, in ``models``' order;
    #: a model without one here is served in this process (``LocalMember``).
    members: dict[str, Member] = field(default_factory=dict)
    #: Whether this set's local members compute side by side (``LocalMember.parallel_forwards``).
    parallel_forwards: bool = field(default_factory=env.parallel_forwards)

    def __post_init__(self) -> None:
        for name, lm in self.models.items():
            if name not in self.members:
                self.members[name] = LocalMember(lm, parallel_forwards=self.parallel_forwards)


def member_of(name: str, backend: Backend | str = Backend.LOCAL, ray_address: str = "",
              progress: Callable[[str], None] | None = None) -> Member:
    """The base model ``name`` as a member on ``backend``: loaded here, or the process's Ray actor for it.

    For a model a caller needs beside the providers (RandomWalk's rewriter and judge,
    perplexity scorers, the plain-decode bench), so it runs where the providers run."""
    if Backend(backend) == Backend.RAY:
        from wash.engine.ray_members import ray_members

        return ray_members([name], ray_address, progress=progress)[name]
    return LocalMember(load_model(name, progress=progress))


def build_providers(specs: Sequence[ProviderSpec], union_models: Sequence[str] | None = None,
                    progress: Callable[[str], None] | None = None, backend: Backend | str = Backend.LOCAL,
                    ray_address: str = "", parallel_forwards: bool | None = None) -> ProviderSet:
    """The one place providers are built: for generation, for the CLI's and the app's
    detection, and for the experiments.

    ``union_models`` names the model set whose union vocabulary coordinated providers
    hash in (a generation's own model set); by default the specs' own models. A
    detector of a coordinated provider must use the same set as the generation,
    or its token space differs from the one the text was watermarked in.

    ``backend="ray"`` puts every model in a Ray actor of its own (``ray_members``, joining
    the cluster at ``ray_address``); this process then holds the tokenizers only, and
    ``models`` are their weightless descriptions.

    ``parallel_forwards``: the run's choice of lanes for its members (``parallel.py``; ``None``:
    ``WASH_PARALLEL_FORWARDS``).
    """
    parallel_forwards = parallel_enabled(parallel_forwards)
    say = progress or (lambda _m: None)
    names = list(dict.fromkeys(list(union_models or []) + [s.model for s in specs]))
    members: dict[str, Member] = {}
    if Backend(backend) == Backend.RAY:
        from wash.engine.ray_members import ray_models

        remote, lms = ray_models(names, ray_address, progress=say, parallel_forwards=parallel_forwards)
        members.update(remote)
    else:
        lms = {n: load_model(n, progress=say) for n in names}
    if len(names) > 1:
        say("aligning vocabularies")
    alignment = align([model_vocab(lms[n]) for n in names])
    providers = [build_provider(i, s, lms[s.model], alignment) for i, s in enumerate(specs)]
    return ProviderSet(providers=providers, models=lms, alignment=alignment, members=members,
                       parallel_forwards=parallel_forwards)
