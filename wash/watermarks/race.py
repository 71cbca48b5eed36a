"""The keyed exponential race (AAR, EXP-Edit): its law, batched over positions and keys, written once.

A race serves keyed uniforms u over the base law p. Both forms rank tokens by
``log(u_t) / p_t`` in float64 (the same order as ``u_t ** (1/p_t)``, without float32
underflow for small p; p_t = 0 scores ``-inf``). ``gumbel``: the original papers' point
mass on the top token. ``soft``: the law proportional to ``u_t ** (1/p_t)``, sampled (the
WASH release's and Water-Probe's samplers), i.e. the softmax of those scores, which the
release computes as ``F.normalize(u ** (1/p), p=1)`` in float32 (where every term can
underflow to 0). A ``form`` parameter of the schemes that race (``aar``, ``exp-edit``).

Every function works on the last axis of any batch, so a scheme's ``distribution`` (one
position, the whole vocabulary) and the model-aware statistics (every position's served
rows, under n random keys) call the same code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from wash.watermarks.base import keyed_on
from wash.watermarks.laws import KeyedLaw, RereadText, served

#: How a keyed exponential race serves its uniforms: ``gumbel`` (point mass) or ``soft``.
RACE_FORMS = ("gumbel", "soft")


def race_scores(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``log(u) / p`` in float64: the race's ranking of every token (``-inf`` where p = 0)."""
    return torch.log(keyed_on(u, probs).to(torch.float64)) / probs


def race_winner(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The token (index on the last axis) the ``gumbel`` form puts its mass on, per batch entry."""
    return torch.argmax(race_scores(probs, u), dim=-1)


def race_law(probs: torch.Tensor, u: torch.Tensor, form: str) -> torch.Tensor:
    """The next-token law of a keyed race with uniforms ``u`` over ``probs`` (last axis; broadcasts).

    If every score of a law is ``-inf`` (its only candidates drew u = 0, a 0/0 law) the
    soft form falls back to ``probs`` there.
    """
    scores = race_scores(probs, u)
    if form == "gumbel":
        out = torch.zeros(scores.shape, dtype=probs.dtype, device=probs.device)
        return out.scatter_(-1, scores.argmax(-1, keepdim=True), 1.0)
    if form != "soft":
        raise ValueError(f"unknown race form '{form}' (accepted: {', '.join(RACE_FORMS)})")
    return torch.where(torch.isfinite(scores).any(-1, keepdim=True), torch.softmax(scores, dim=-1),
                       probs.to(scores.dtype))


class ContextRaceLaw(KeyedLaw):
    """A race whose uniforms are keyed by the context (AAR): the scheme's ``keyed_uniforms(ids)``
    over the served rows; a random key draws one uniform per row and position."""

    def __init__(self, scheme: Any) -> None:
        super().__init__(scheme)
        self.form = scheme.params.form

    def compact_laws(self, text: RereadText, t: int, probs: torch.Tensor) -> torch.Tensor:
        u = self.scheme.keyed_uniforms(text.ids[:t])[served(text, t)]
        return race_law(probs, u, self.form)[None]

    def simulate_laws(self, text: RereadText, probs: torch.Tensor, rng: np.random.Generator,
                      n: int) -> torch.Tensor:
        return race_law(probs[None], torch.as_tensor(rng.random((n, *text.rows.shape))), self.form)
