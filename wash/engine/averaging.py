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

from typing import Sequence

import torch


def mixture(parts: Sequence[tuple[torch.Tensor, torch.Tensor]], size: int, n: int) -> torch.Tensor:
    """(1/n) Σ over ``(scatter_index, model_vector)`` parts, scattered onto ``size`` union ids.

    ``scatter_index`` is the alignment's map of a model's rows to union ids, with
    non-text rows sent to the extra slot ``size`` (dropped here).
    """
    acc = torch.zeros(size + 1, dtype=torch.float64)
    for index, values in parts:
        acc.scatter_add_(0, index, values.to(torch.float64))
    out = acc[:size]
    return out / n if n != 1 else out


def average(union_vectors: Sequence[torch.Tensor], n: int) -> torch.Tensor:
    """(1/n) Σ of union-space vectors, each already summed over one model's providers.

    The parallel engine scatters each model's providers onto the union in that
    model's own thread (``to_union``) and only this sum runs on the caller's.
    """
    total = union_vectors[0]
    for v in union_vectors[1:]:
        total = total + v
    return total / n if n != 1 else total


def to_union(probs: torch.Tensor, scatter_index: torch.Tensor, size: int) -> torch.Tensor:
    """One model-vocabulary distribution -> union-vocabulary distribution (mass preserved)."""
    return mixture([(scatter_index, probs)], size, 1)


def candidates(reference: Sequence[torch.Tensor], k: int) -> list[int]:
    """Union ids worth showing: the top-k of each reference distribution, in first-one order."""
    seen: dict[int, None] = {}
    for dist in reference:
        for i in torch.topk(dist, min(k, dist.numel())).indices.tolist():
            seen.setdefault(int(i), None)
    first = reference[0]
    return sorted(seen, key=lambda i: -float(first[i]))


def probs_at(dist: torch.Tensor, ids: Sequence[int]) -> list[float]:
    return [float(dist[i]) for i in ids]


def model_probs_at(probs: torch.Tensor, rows_of: dict[int, list[int]], from_union: torch.Tensor,
                   ids: Sequence[int]) -> list[float]:
    """Union-space probabilities of a few union ids, read off a model-space vector.

    ``rows_of`` lists the union ids several rows spell (their masses add up).
    """
    out = []
    for u in ids:
        rows = rows_of.get(u)
        if rows is not None:
            out.append(float(probs[rows].sum()))
        else:
            r = int(from_union[u])
            out.append(float(probs[r]) if r >= 0 else 0.0)
    return out


def linf(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖∞, the distance Theorem 1 bounds."""
    return float((a - b).abs().max())
