"""Providers: a base model served with a watermark scheme and a secret key.

Providers on the same base model share that model's forward pass: the base logits
are computed once per step and each provider perturbs its own copy, so the cost
per token grows with the number of distinct base models, not with N.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from wash.config import ProviderSpec
from wash.models import LoadedModel
from wash.vocab import VocabAlignment
from wash.watermarks import build_scheme
from wash.watermarks.base import Detector, WatermarkScheme
from wash.watermarks.coordinated import UnionSpace
from wash.watermarks.hashing import derive_seed


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

    def distribution(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int) -> torch.Tensor:
        """This provider's watermarked next-token distribution over its model's rows."""
        if self.space is not None:
            return self.space.distribution(self.scheme, logits, ids, prompt_len, self.state)
        return self.scheme.distribution(logits, ids, prompt_len, self.state)

    def scheme_ids(self, ids: Sequence[int]) -> list[int]:
        return self.space.ids(ids) if self.space is not None else [int(i) for i in ids]

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return self.scheme.make_detector(self.scheme_ids(prefix))

    def start_generation(self, seed: int) -> None:
        self.state = self.scheme.new_state(derive_seed("generation", seed, self.index))


def build_provider(index: int, spec: ProviderSpec, lm: LoadedModel, alignment: VocabAlignment | None,
                   watermark: bool = True) -> Provider:
    """Instantiate a provider; ``watermark=False`` serves the base model (scheme ``none``)."""
    scheme_name = spec.scheme if watermark else "none"
    params = dict(spec.params) if watermark else {}
    space = None
    size = lm.vocab_size
    if spec.coordinated and watermark:
        if alignment is None:
            raise ValueError("a coordinated provider needs the union vocabulary")
        space = UnionSpace(alignment.to_union[lm.name], alignment.size, alignment.eos_index)
        size = alignment.size
    scheme = build_scheme(scheme_name, spec.key, size, params)
    return Provider(index=index, spec=spec, lm=lm, scheme=scheme, space=space)
