"""ITS-Edit (Kuditipudi et al. 2023): inverse transform sampling with a fixed key sequence.

Key element k is a pair (u_k, pi_k): a uniform in [0, 1) and a permutation of the
vocabulary. The provider lays the next-token probabilities out in pi_k's order
and emits the token whose CDF interval contains u_k. Deterministic given key and
position, so p_i is a point mass (``point_mass = True``); over a random key u_k is
uniform and token t is emitted with probability exactly p_t (the width of its
interval), so the scheme is unbiased over keys. Zero-probability tokens have empty
intervals and are never emitted (we search for the first CDF value strictly above
u_k * total, so even u_k = 0 lands on a positive-probability token).

Permutations (``permutation``). ``per-position`` (default): one permutation per
key element, as the paper's definition of the key (xi_i = (u_i, pi_i) i.i.d.);
it costs one seeded ``randperm`` per step (~1 ms at V = 262k) and gives
independent key elements. ``shared``: ONE permutation for every key element, as
Kuditipudi et al.'s reference code, MarkLLM's ITSEdit and the WASH release run it
(so the WASH paper's ITS-Edit numbers were measured on it). With a shared permutation
the token order is the same at every step, so a token's rank is a fixed keyed
label and only u moves; the scheme is still unbiased over keys. Its key (pi, u) is
drawn as MarkLLM's ITSEdit draws it (``hashing.markllm_its_key``), so the two read
each other's text (tests/test_interop_markllm_forms.py); the WASH release draws the
same pair in another order from the key (the same form, other draws, not
reproduced). The null of our test then draws one random injection of ranks per
random key, reused by every element.

Matching cost (their ``transform_edit_score``): |eta(y) - u_l| with
eta(y) = rank of y in pi_l / V, the token's position in the sampling order
normalised to [0, 1). Watermarked tokens sit near u_l in that order. Gap penalty
gamma = 0.4, the value their experiments use for ITS-edit (MarkLLM's port uses 1).
Under random keys the ranks of a text's distinct tokens at one key element are a
uniformly random injection into range(V), with a fresh uniform u; ``null_cost``
draws exactly that.

Detectors (``detector``). ``ours`` (default): the alignment test above with its
Gumbel-tail z (``keyseq``). ``release``: the WASH release's ``its_detector.py``.
Its cost is log(1 - |eta - u|) (a similarity, <= 0); its Levenshtein DP is fed a
cost that depends on the token only, not on the key element it is matched with, so
its value is the plain diagonal sum (gap >= 0, costs <= 0: matching every token is
cheapest); a text counts as watermarked when the *minimum* of that sum over the
keylen shifts is *large*; and its random keys keep the text's ranks and draw
fresh u: p = (1 + #{random u with a minimum at or above}) / (T + 1).
A watermark raises the sum at one shift, the true one, and the minimum is set by
the others, so this test has (almost) no power: on 200 watermarked SmolLM2 tokens
it measured p = 0.60 (per-position; ours z = 8.7) and p = 0.66 (shared; ours
z = 5.9), and p > 0.05 on six synthetic texts ours flags at z > 5
(tests/test_watermarks_forms.py). We run it as the release does, to measure what
its numbers can mean, not as a detector to rely on.

Interop with MarkLLM's ITSEdit holds for ``permutation=shared`` only (its form):
MarkLLM 0.1.5 seeds its generation from the global torch RNG, so the caller must
seed it with the key, as its detector does; see ``keyseq`` for the key sequence
and the test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import Detection, check_choice, keyed_on
from wash.watermarks.keyseq import EditScheme, release_detection, run_edit_test

#: ``per-position``: a fresh permutation per key element (the paper's definition);
#: ``shared``: one permutation for the whole key sequence (MarkLLM's and the release's code).
PERMUTATIONS = ("per-position", "shared")
#: The release clips |eta - u| below 1 before taking log(1 - |eta - u|).
_RELEASE_CLIP = 1.0 - 1e-7


@register
class ITSEdit(EditScheme):
    name = "its-edit"
    title = "ITS-Edit"
    rank = 4
    paper_columns = {1: 2, 2: 3}
    form_param = "permutation"
    release_form = "shared"
    summary = "Kuditipudi ITS-edit: inverse transform sampling on a 420-long key sequence"
    description = (
        'Kuditipudi et al. ITS-Edit: inverse-transform sampling driven by a secret sequence of '
        '{keylen} keyed numbers, so each step is a point mass; the detector aligns the text with '
        'the sequence (edit-robust) and calibrates by permutation. With permutation=shared one '
        'token order serves every step, as the WASH release and MarkLLM run it.')

    @dataclass(frozen=True)
    class Params(EditScheme.Params):
        keylen: int = 420
        gamma: float = 0.4
        n_permutations: int = 100
        #: ``per-position``: one permutation per key element; ``shared``: one for all (see module docstring).
        permutation: str = "per-position"

        def __post_init__(self) -> None:
            super().__post_init__()
            check_choice(self, "permutation", PERMUTATIONS)

    def __init__(self, key: int, vocab_size: int, params: "ITSEdit.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        self._positions = torch.arange(self.vocab_size)
        self.shared = self.params.permutation == "shared"
        if self.shared:
            self._shared_pi, self.u = hashing.markllm_its_key(self.key, self.vocab_size, self.params.keylen)
            self._shared_rank = self._ranks(self._shared_pi)
        else:
            self.u = hashing.draw_uniforms(hashing.derive_seed(self.name, self.key, "u"), self.params.keylen)

    def _ranks(self, order: torch.Tensor) -> torch.Tensor:
        """Each token's position in the sampling order ``order``: the inverse permutation."""
        return torch.empty_like(order).scatter_(0, order, self._positions)

    def _draw_row(self, k: int) -> torch.Tensor:
        if self.shared:
            return self._shared_pi
        return hashing.draw_permutation(self.row_seed(k), self.vocab_size)

    def _row_values(self, row: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        # rank of each token in the sampling order: the inverse permutation at tokens
        return self._ranks(row)[tokens].to(torch.float32)

    def key_values(self, tokens: Sequence[int]) -> torch.Tensor:
        if not self.shared:
            return super().key_values(tokens)
        # one permutation: every key element ranks a token the same way
        ranks = self._shared_rank[torch.tensor([int(t) for t in tokens], dtype=torch.long)].to(torch.float32)
        return ranks.unsqueeze(0).expand(self.params.keylen, -1)

    def _pick(self, probs: torch.Tensor, k: int) -> int:
        return int(inverse_transform_pick(probs, self.row(k), self.u[k]))

    def element_picks(self, probs: torch.Tensor, table: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        # a position's rows in each element's order (its ranks; padding last)
        order = torch.argsort(torch.where(valid, table, float("inf")), dim=-1, stable=True)
        return inverse_transform_pick(probs, order, self.u[:, None])

    def _law(self, probs: torch.Tensor, k: int) -> torch.Tensor:
        pick = inverse_transform_pick(probs, keyed_on(self.row(k), probs), keyed_on(self.u[k], probs))
        return torch.zeros_like(probs).scatter_(-1, pick.reshape(1), 1.0)

    def observed_cost(self, unique_tokens: torch.Tensor) -> torch.Tensor:
        eta = self.key_values(unique_tokens.tolist()) / self.vocab_size
        return (eta - self.u[:, None]).abs()

    def null_cost(self, n_unique: int, n_keys: int, gen: torch.Generator) -> torch.Tensor:
        # a random key ranks the text's distinct tokens by a uniform injection: a fresh one
        # per key element, or (shared) one per random key that every element reuses
        per_key = 1 if self.shared else self.params.keylen
        ranks = _random_injections((n_keys, per_key), n_unique, self.vocab_size, gen)
        ranks = ranks.expand(n_keys, self.params.keylen, n_unique)
        u = torch.rand(n_keys, self.params.keylen, 1, generator=gen)
        return (ranks.to(torch.float32) / self.vocab_size - u).abs()

    # -- the WASH release's test ------------------------------------------------------
    def aligns(self) -> bool:
        return self.params.detector != "release"

    def edit_test(self, tokens: Sequence[int]) -> Detection:
        if not self.aligns():
            return self.release_test(tokens)
        return run_edit_test(self, tokens)

    def release_statistic(self, tokens: Sequence[int], u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(min over shifts, per-shift scores) of the release's ITS statistic, per row of ``u``.

        ``u``: (B, keylen) key uniforms. Token i at shift j scores
        log(1 - |eta(y_i) - u_(j+i) mod keylen|) (``|.|`` clipped below 1), and the release
        runs its Levenshtein DP on costs that depend on the token only, not on the key
        element it is matched with: with a gap penalty >= 0 and scores <= 0 the cheapest
        path matches every token on the diagonal, so the DP's value is the plain sum over
        tokens (checked against a brute-force DP in tests). Returns the minimum over
        the keylen shifts, (B,), and the scores, (B, keylen).
        """
        n, m = self.params.keylen, len(tokens)
        ids = torch.tensor([int(t) for t in tokens], dtype=torch.long)
        unique, inverse = torch.unique(ids, return_inverse=True)
        eta = self.key_values(unique.tolist()).to(torch.float64) / self.vocab_size  # (n, U)
        at = (torch.arange(n)[:, None] + torch.arange(m)[None, :]) % n  # key element of (shift, token)
        eta_text = eta[at, inverse[None, :]]  # (shifts, m)
        sums = []
        for chunk in u.to(torch.float64).split(8):
            gap = (eta_text[None] - chunk[:, at]).abs().clamp(max=_RELEASE_CLIP)
            sums.append(torch.log1p(-gap).sum(dim=-1))
        scores = torch.cat(sums)
        return scores.min(dim=1).values, scores

    def release_test(self, tokens: Sequence[int]) -> Detection:
        """The WASH release's ITS detector (its ``its_detector.py``), on our key.

        Statistic: the minimum over shifts of ``release_statistic``; evidence is a
        *large* minimum: p = (1 + #{random keys whose minimum >= the key's}) / (T + 1),
        where a random key keeps the text's ranks (the same permutations) and draws
        fresh uniforms u. Reported as ``keyseq.release_detection``.
        """
        m, T = len(tokens), self.params.n_permutations
        if m == 0:
            return Detection.from_z(self.name, 0.0, tokens_scored=0, note="no tokens")
        observed, scores = self.release_statistic(tokens, self.u[None])
        gen = hashing.generator(hashing.derive_seed(self.name, self.key, "release-null", T,
                                                    *[int(t) for t in tokens]))
        null, _ = self.release_statistic(tokens, torch.rand(T, self.params.keylen, generator=gen))
        obs = float(observed[0])
        as_extreme = int((null >= obs).sum())
        j = int(scores[0].argmin())
        at = (j + torch.arange(m)) % self.params.keylen
        ranks = self.key_values([int(t) for t in tokens])[at, torch.arange(m)].to(torch.float64)
        per_token = torch.log1p(-(ranks / self.vocab_size - self.u[at].to(torch.float64)).abs()
                                .clamp(max=_RELEASE_CLIP))
        return release_detection(
            self, as_extreme, m, [float(c) for c in per_token],
            note=(f"release ITS test: min over shifts of sum log(1-|eta-u|) = {obs:.4g} (shift {j}); "
                  f"{as_extreme}/{T} random u at or above; null {float(null.mean()):.4g} +- "
                  f"{float(null.std()):.3g}"))


def inverse_transform_pick(probs: torch.Tensor, order: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """ITS's pick on the last axis: in ``order``, the first token whose cumulative mass passes u times
    the total (``u`` has ``order``'s batch shape, or broadcasts to it)."""
    cdf = torch.cumsum(torch.gather(probs.expand_as(order), -1, order), dim=-1)
    target = u.to(torch.float64)[..., None] * cdf[..., -1:]
    j = torch.searchsorted(cdf, target, right=True).clamp_max(order.shape[-1] - 1)
    return torch.gather(order, -1, j)[..., 0]


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
        redraw = _repeats_of_earlier(out[rows])
        hit = redraw.any(dim=1)
        rows, redraw = rows[hit], redraw[hit]
        block = out[rows]
        block[redraw] = torch.randint(size, (int(redraw.sum()),), generator=gen)
        out[rows] = block
    return out.reshape(*batch, count)


def _repeats_of_earlier(block: torch.Tensor) -> torch.Tensor:
    """Per row, which entries equal an entry at an earlier position (the first of equals is kept).

    Why not one stable sort of every row: with a few dozen draws from a vocabulary, all but a
    fraction of a percent of rows hold no repeat, and torch sorts many short rows slowly. numpy
    finds the rows with a repeat (about 5x faster here); only those are compared pairwise.
    """
    ordered = np.sort(block.numpy(), axis=-1)
    has = torch.from_numpy(np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1)))
    out = torch.zeros_like(block, dtype=torch.bool)
    if len(has):
        sub = block[has]
        earlier = torch.ones(sub.shape[1], sub.shape[1], dtype=torch.bool).tril(-1)  # [j, i]: i < j
        out[has] = ((sub[:, :, None] == sub[:, None, :]) & earlier).any(dim=-1)
    return out
