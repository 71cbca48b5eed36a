"""The one device-to-host copy of a step: the drawn token and everything the page shows about it.

Why one copy: on a GPU, every value Python reads off a tensor (``int(t)``, ``float(t)``,
``.tolist()``) waits until every kernel queued before it has run, so a step that read
its token, its entropy and each shown probability one by one stalled the device
dozens of times a token (51 host syncs in six steps on the H200 run,
``docs/gpu-h200/``). A step instead computes all it reports where its distributions
are, as tensors, and ``read_step`` reads them back together; the host then knows the
token (to commit it, route it, feed the detectors) and the step's view.

The view is the top ``k`` union ids of each reference distribution (the aggregate
and the consensus, or the drawing provider's own law), most likely first under the
first one, ties in first-seen order, worked out on the
host from the ``len(references) * k`` ids and their values, so the copy has a fixed
size and no step reads a value twice.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch

if TYPE_CHECKING:
    from wash.engine.vocab import UnionMap

_copies = 0


def copies() -> int:
    """How many step copies this process has made (the bench divides a run's by its tokens)."""
    return _copies


@dataclass(frozen=True)
class ShownProvider:
    """A provider whose probabilities a step shows: its law on its model's rows and that model's map, or
    its law already on the union (``union_map`` None)."""

    probs: torch.Tensor
    union_map: "UnionMap | None" = None

    def at(self, ids: torch.Tensor) -> torch.Tensor:
        if self.union_map is None:
            return torch.index_select(self.probs.to(torch.float64), 0, ids)
        return self.union_map.read_at(self.probs, ids)


@dataclass(frozen=True)
class StepReadback:
    """What one step's copy brought back."""

    token: int
    entropy: float
    view: list[int]
    #: Each provider's probabilities on ``view`` (None: a provider the step does not show).
    provider_probs: list[list[float] | None]
    average_probs: list[float] | None
    consensus_probs: list[float] | None
    #: ‖average − consensus‖∞, the distance the paper's Theorem 1 bounds (None without both).
    linf: float | None


def top_ids(references: Sequence[torch.Tensor], k: int) -> torch.Tensor:
    """The top-k union ids of each reference, one after the other (repeats kept: a fixed length)."""
    return torch.cat([torch.topk(r, min(k, r.numel())).indices for r in references])


@dataclass(frozen=True)
class PackedStep:
    """A step's report as one float64 vector on its device, with what ``unpack`` needs to split it."""

    values: torch.Tensor
    #: How many candidate ids (``len(references) * k``, repeats kept).
    ids: int
    #: Which providers were read (in provider order).
    shown: tuple[bool, ...]
    average: bool
    consensus: bool


def pack_step(token: torch.Tensor, entropy: torch.Tensor, references: Sequence[torch.Tensor], k: int,
              providers: Sequence[ShownProvider | None], average: torch.Tensor | None = None,
              consensus: torch.Tensor | None = None) -> PackedStep:
    """Everything a step reports as one vector where its distributions are; no value is read by the host.

    ``token`` and ``entropy`` are 0-d tensors; ``references`` order the view (the first
    one's values rank it); ``providers`` are read on the view in provider order.
    """
    ids = top_ids(references, k)
    parts = [token.reshape(1), entropy.reshape(1), ids, torch.index_select(references[0].to(torch.float64), 0, ids)]
    parts += [p.at(ids) for p in providers if p is not None]
    parts += [torch.index_select(d.to(torch.float64), 0, ids) for d in (average, consensus) if d is not None]
    if average is not None and consensus is not None:
        parts.append((average - consensus).abs().max().reshape(1))
    values = torch.cat([p.reshape(-1).to(torch.float64) for p in parts])
    return PackedStep(values, ids.numel(), tuple(p is not None for p in providers), average is not None,
                      consensus is not None)


def unpack(packed: PackedStep, host: Sequence[float]) -> StepReadback:
    """The host's copy of ``packed`` as the step's token and view (ids ranked, repeats dropped)."""
    c = packed.ids
    cursor = iter(host)

    def take(n: int) -> list[float]:
        return list(itertools.islice(cursor, n))

    (token_id,), (h,), raw, ranking = take(1), take(1), [int(u) for u in take(c)], take(c)
    first: dict[int, int] = {}
    for pos, u in enumerate(raw):
        first.setdefault(u, pos)
    order = sorted(first, key=lambda u: -ranking[first[u]])  # stable: ties keep first-seen order
    pick = [first[u] for u in order]

    def on_view() -> list[float]:
        block = take(c)
        return [block[j] for j in pick]

    provider_probs = [on_view() if shown else None for shown in packed.shown]
    average_probs = on_view() if packed.average else None
    consensus_probs = on_view() if packed.consensus else None
    linf = take(1)[0] if packed.average and packed.consensus else None
    return StepReadback(token=int(token_id), entropy=h, view=order, provider_probs=provider_probs,
                        average_probs=average_probs, consensus_probs=consensus_probs, linf=linf)


def read_step(*args, **kwargs) -> StepReadback:
    """``pack_step``, its one device-to-host copy, ``unpack``."""
    global _copies
    packed = pack_step(*args, **kwargs)
    _copies += 1
    return unpack(packed, packed.values.tolist())
