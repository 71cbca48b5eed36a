"""ITS-Edit (Kuditipudi et al. 2023): inverse transform sampling with a fixed key sequence.

Key element k is a pair (u_k, pi_k): a uniform in [0, 1) and a permutation of the
vocabulary. The provider lays the next-token probabilities out in pi_k's order
and emits the token whose CDF interval contains u_k. Deterministic given key and
position, so p_i is a point mass (``point_mass = True``); over a random key u_k is
uniform and token t is emitted with probability exactly p_t (the width of its
interval), so the scheme is unbiased over keys. Zero-probability tokens have empty
intervals and are never emitted (we search for the first CDF value strictly above
u_k * total, so even u_k = 0 lands on a positive-probability token).

One permutation per key element, as the paper's definition of the key
(xi_i = (u_i, pi_i) i.i.d.). Their reference code shares a single permutation
across positions; per-position permutations cost one seeded ``randperm`` per step
(~1 ms at V = 262k) and give independent key elements.

Matching cost (their ``transform_edit_score``): |eta(y) - u_l| with
eta(y) = rank of y in pi_l / V, the token's position in the sampling order
normalised to [0, 1). Watermarked tokens sit near u_l in that order. Gap penalty
gamma = 0.4, the value their experiments use for ITS-edit (MarkLLM's port uses 1).
Under random keys the ranks of a text's distinct tokens at one key element are a
uniformly random injection into range(V), with a fresh uniform u; ``null_cost``
draws exactly that.

Not interoperable with MarkLLM's ITSEdit: MarkLLM 0.1.5 seeds its generation from
the global torch RNG, so even MarkLLM's own detector misses its text unless the
caller seeds that RNG; see ``keyseq`` for the key sequence and the test.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from wash.watermarks import hashing, register
from wash.watermarks.keyseq import EditScheme


@register
class ITSEdit(EditScheme):
    name = "its-edit"
    summary = "Kuditipudi ITS-edit: inverse transform sampling on a 420-long key sequence"
    description = (
        'Kuditipudi et al. ITS-Edit: inverse-transform sampling driven by a secret sequence of '
        '{keylen} keyed numbers, so each step is a point mass; the detector aligns the text with '
        'the sequence (edit-robust) and calibrates by permutation.')

    @dataclass(frozen=True)
    class Params(EditScheme.Params):
        keylen: int = 420
        gamma: float = 0.4
        n_permutations: int = 100

    def __init__(self, key: int, vocab_size: int, params: "ITSEdit.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        self.u = hashing.draw_uniforms(hashing.derive_seed(self.name, self.key, "u"), self.params.keylen)
        self._positions = torch.arange(self.vocab_size)

    def _draw_row(self, k: int) -> torch.Tensor:
        return hashing.draw_permutation(self.row_seed(k), self.vocab_size)

    def _row_values(self, row: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        # rank of each token in the sampling order: the inverse permutation at tokens
        rank = torch.empty_like(row).scatter_(0, row, self._positions)
        return rank[tokens].to(torch.float32)

    def _pick(self, probs: torch.Tensor, k: int) -> int:
        order = self.row(k)
        cdf = torch.cumsum(probs[order], dim=0)
        target = float(self.u[k]) * cdf[-1]
        j = int(torch.searchsorted(cdf, target.reshape(1), right=True))
        return int(order[min(j, len(order) - 1)])

    def observed_cost(self, unique_tokens: torch.Tensor) -> torch.Tensor:
        eta = self.key_values(unique_tokens.tolist()) / self.vocab_size
        return (eta - self.u[:, None]).abs()

    def null_cost(self, n_unique: int, n_keys: int, gen: torch.Generator) -> torch.Tensor:
        ranks = _random_injections((n_keys, self.params.keylen), n_unique, self.vocab_size, gen)
        u = torch.rand(n_keys, self.params.keylen, 1, generator=gen)
        return (ranks.to(torch.float32) / self.vocab_size - u).abs()


def _random_injections(batch: tuple[int, ...], count: int, size: int, gen: torch.Generator) -> torch.Tensor:
    """Uniform random injections of ``count`` items into range(size), one per batch entry.

    Draw with replacement, then redraw every entry that repeats an earlier entry
    (earlier by position, via a stable sort) until none repeat. The procedure
    commutes with any relabelling of range(size), a group that acts transitively
    on injections, so the result is exactly uniform.
    """
    if count > size:
        raise ValueError("more distinct tokens than vocabulary entries")
    out = torch.randint(size, (*batch, count), generator=gen).reshape(-1, count)
    rows = torch.arange(out.shape[0])  # rows that may still hold a repeat
    while count > 1 and len(rows):
        values, order = torch.sort(out[rows], dim=-1, stable=True)
        repeat = torch.zeros_like(values, dtype=torch.bool)
        repeat[:, 1:] = values[:, 1:] == values[:, :-1]
        redraw = torch.zeros_like(repeat).scatter_(-1, order, repeat)
        rows = rows[redraw.any(dim=1)]
        redraw = redraw[redraw.any(dim=1)]
        block = out[rows]
        block[redraw] = torch.randint(size, (int(redraw.sum()),), generator=gen)
        out[rows] = block
    return out.reshape(*batch, count)
