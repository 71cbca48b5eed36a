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

from typing import Any, Sequence

import torch

from wash.watermarks.base import WatermarkScheme, softmax


class UnionSpace:
    """Translates one model's ids and distributions to and from union-vocabulary ids."""

    def __init__(self, to_union: torch.Tensor, size: int, unmapped: int) -> None:
        self.to_union = to_union
        self.size = size
        self.keep = to_union >= 0
        #: Where ids that stand for no text (BOS, specials) go, so contexts stay hashable.
        self.unmapped = unmapped

    def ids(self, ids: Sequence[int]) -> list[int]:
        out = []
        for i in ids:
            u = int(self.to_union[i]) if 0 <= i < self.to_union.numel() else -1
            out.append(u if u >= 0 else self.unmapped)
        return out

    def distribution(self, scheme: WatermarkScheme, logits: torch.Tensor, ids: Sequence[int],
                     prompt_len: int, state: Any) -> torch.Tensor:
        probs = softmax(logits)
        idx = self.to_union[self.keep]
        mass = torch.zeros(self.size, dtype=torch.float64).index_add_(0, idx, probs[self.keep])
        p_union = scheme.distribution(torch.log(mass), self.ids(ids), prompt_len, state)
        ratio = torch.where(mass > 0, p_union / mass.clamp_min(1e-300), torch.zeros_like(mass))
        out = torch.zeros_like(probs)
        out[self.keep] = probs[self.keep] * ratio[idx]
        return out / out.sum()
