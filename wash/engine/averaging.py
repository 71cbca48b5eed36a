"""The WASH average: every provider's distribution scattered onto the union vocabulary.

A token absent from a provider's vocabulary gets probability 0 from that provider,
so a token present in k of N vocabularies has average weight (1/N) * (sum of those
k providers' probabilities). Two rows of one model that spell the same bytes add
up in the same union entry.

For speed, providers on the same base model are summed in that model's own
vocabulary first, so one scatter per distinct model builds p̄ (vectors here have
~260k entries and a CPU step must stay a few milliseconds); the engine runs each
model's scatter in that model's own thread (``parallel.py``) and adds the results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

if TYPE_CHECKING:
    from wash.engine.vocab import UnionMap


def mixture(parts: Sequence[tuple["UnionMap", torch.Tensor]], n: int) -> torch.Tensor:
    """(1/n) Σ over ``(union_map, model_vector)`` parts, each projected onto the union (the formula
    itself; the engine sums each model's providers in its own vocabulary first, ``average``)."""
    return average([union_map.project(values) for union_map, values in parts], n)


def average(union_vectors: Sequence[torch.Tensor], n: int) -> torch.Tensor:
    """(1/n) Σ of union-space vectors, each already summed over one model's providers.

    The parallel engine projects each model's providers onto the union in that
    model's own thread (``vocab.UnionMap.project``) and only this sum runs on the caller's.
    """
    total = union_vectors[0]
    for v in union_vectors[1:]:
        total = total + v
    return total / n if n != 1 else total
