"""The coordinated control: every provider applies the SAME watermark, through token text.

Independent watermarks cancel when averaged; the paper's control (Fig. 3c) checks
that it is the independence, not the averaging itself, that removes them. Here a
coordinated provider runs its scheme in the *union* vocabulary, whose ids are a
pure function of token bytes: two models that can both spell " the" put the same
green/red status (or the same AAR uniform) on it, so the signal survives the
average. Any scheme works unchanged; only the ids it sees are translated.

Mapping a distribution into the union and back: probabilities of rows that spell
the same bytes are summed, the scheme reweights union entries, and each row gets
its entry's new mass in proportion to its share of the old one.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import torch

from wash.watermarks.base import WatermarkScheme, softmax


class Projection(Protocol):
    """One model's projection onto the union vocabulary (the engine's ``vocab.UnionMap``, its one owner)."""

    size: int

    def ids(self, ids: Sequence[int]) -> list[int]: ...
    def project(self, probs: torch.Tensor) -> torch.Tensor: ...
    def lift(self, union_vector: torch.Tensor, probs: torch.Tensor) -> torch.Tensor: ...


class UnionSpace:
    """A scheme run on union-vocabulary ids: one model's ids and distributions translated there and back."""

    def __init__(self, projection: Projection) -> None:
        self.projection = projection
        self.size = projection.size

    def ids(self, ids: Sequence[int]) -> list[int]:
        return self.projection.ids(ids)

    def distribution(self, scheme: WatermarkScheme, logits: torch.Tensor, ids: Sequence[int],
                     prompt_len: int, state: Any) -> torch.Tensor:
        probs = softmax(logits)
        mass = self.projection.project(probs)
        p_union = scheme.distribution(torch.log(mass), self.ids(ids), prompt_len, state)
        ratio = torch.where(mass > 0, p_union / mass.clamp_min(1e-300), torch.zeros_like(mass))
        out = self.projection.lift(ratio, probs)
        return out / out.sum()
