"""Each scheme's keyed law at the observed token, under its key and under random keys.

For a model-aware likelihood ratio a provider needs, at every scored position t,
rho_t = p_wm(x_t) / p(x_t): how much more likely its watermarked law made the
observed token x_t than its plain served law did.

A token outside the rows the provider serves at its position (its re-read law,
without the prompt the text was written after, puts it outside the top-k) gets
rho = 1, no evidence either way: its ratio would be 0 under every key alike, so it
carries nothing about the key, and the test is conditional on the text (the null
is over keys). Counting it as 0 would only punish any text the provider reads
differently from how it was written. Under WASH a token comes from the provider's watermarked law with
weight w (about 1/N) and from elsewhere otherwise, so the token's likelihood ratio
is (1 - w) + w rho_t. For AAR's point mass rho_t is 1/p(x_t) when x_t won the
keyed race and 0 otherwise: the exact ratio when every uniform of the race is
known, which the key holder knows.

``observed`` computes rho under the provider's own key with the scheme's own
functions (``boost_green``, ``race_law``, ``alpha_reweight``, SynthID's
``distribution``) on the served rows. ``simulate`` draws rho under n random keys
from the same served rows: what a random key does on a position's k rows is, for
each family, a known draw (a green list colours each row green with probability
gamma; an exponential race draws one uniform per row; DiPMark permutes the rows;
SynthID draws g-values Bernoulli(q) per layer and row). Positions are treated as
independent, which holds for distinct contexts (the scheme's own detector already
skips repeats); Unigram's one list per key colours a token the same at every
position, and its simulation keeps that. EXP-Edit and ITS-Edit read key element
(offset + position) with an offset per generation: each offset is one keyed law
(``EditLaw``), and their null is drawn as wins of the observed token. The tests
compare the simulated null with real random keys on real text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator

import numpy as np
import torch

from wash.detection.statistics.tests import log_ratio_sums, point_mass_sums
from wash.detection.statistics.served_text import ServedText
from wash.watermarks.base import _race_scores, race_law
from wash.watermarks.dipmark import alpha_reweight
from wash.watermarks.greenlist import boost_green
from wash.watermarks.its_edit import ITSEdit
from wash.watermarks.keyseq import EditState


def _ratio_at(law: torch.Tensor, probs: torch.Tensor, col: int) -> float:
    # SynthID's closed form can round a vanishing probability to -1e-17: it is a 0
    return 1.0 if col < 0 else max(float(law[col] / probs[col]), 0.0)


def _gather_observed(laws: torch.Tensor, probs: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(n, T) rho from (n, T, K) laws: the observed column's law over its plain probability (0 if unserved)."""
    idx = torch.as_tensor(np.maximum(cols, 0))[None, :, None].expand(laws.shape[0], -1, 1)
    at = torch.gather(laws, 2, idx).squeeze(2).numpy()
    base = probs[np.arange(len(cols)), np.maximum(cols, 0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.maximum(at / base[None, :], 0.0)  # a law's -1e-17 (SynthID's rounding) is a 0
    return np.where(cols[None, :] >= 0, rho, 1.0)


class KeyedLaw(ABC):
    """rho_t of one family: under the provider's key (``observed``) and under random keys (``simulate``).

    A generation may have been served by one of several keyed laws (Water-Bag draws
    one of its bag's lists per generation): ``variants`` lists them, and rho gets one
    row per variant, (J, T); the statistics take the best or the average over rows."""

    def variants(self, scheme: Any) -> list[Any]:
        """What ``compact_law`` is called with, one per law a generation may have drawn."""
        return [scheme]

    @abstractmethod
    def compact_law(self, scheme: Any, st: ServedText, t: int, probs: torch.Tensor) -> torch.Tensor:
        """The watermarked law of a variant on position t's served rows (same order as ``st.rows[t]``)."""

    def simulate_laws(self, scheme: Any, st: ServedText, probs: torch.Tensor, rng: np.random.Generator,
                      n: int) -> torch.Tensor:
        """(n, T, K) the watermarked laws under n random keys, or (n, J, T, K) with one per variant.

        What ``simulate`` reads; a family that draws rho another way (``EditLaw``) overrides ``simulate``."""
        raise NotImplementedError(f"{type(self).__name__} draws its null in simulate()")

    def null_sums(self, scheme: Any, st: ServedText, scored: np.ndarray, rng: np.random.Generator, n: int,
                  cuts: np.ndarray) -> Iterator[np.ndarray]:
        """``tests.log_ratio_sums`` of rho under n random keys, in blocks of draws: (n_block, J, C, W) each.

        One block here; a family with many variants per draw yields several, so that the
        caller reduces each block over its variants before the next is drawn."""
        yield log_ratio_sums(self.simulate(scheme, st, scored, rng, n), cuts)

    def observed(self, scheme: Any, st: ServedText, scored: np.ndarray) -> np.ndarray:
        """(J, T) rho under the scheme's own key; 1 where a position is not scored or its token not served."""
        cols = st.observed()
        probs = st.probs()
        variants = self.variants(scheme)
        rho = np.ones((len(variants), len(st)))
        for t in np.flatnonzero(scored & (cols >= 0)):
            k = st.rows[t] >= 0
            p = torch.as_tensor(probs[t][k])
            laws = self.compact_laws(variants, st, int(t), p)
            for j in range(len(variants)):
                rho[j, t] = _ratio_at(laws[j], p, int(cols[t]))
        return rho

    def compact_laws(self, variants: list[Any], st: ServedText, t: int, probs: torch.Tensor) -> torch.Tensor:
        """(J, K) ``compact_law`` of every variant at position t (one batched call where a family can)."""
        return torch.stack([self.compact_law(v, st, t, probs) for v in variants])

    def simulate(self, scheme: Any, st: ServedText, scored: np.ndarray, rng: np.random.Generator,
                 n: int) -> np.ndarray:
        """(n, J, T) rho under n random keys; 1 where a position is not scored."""
        probs = st.probs()
        laws = self.simulate_laws(scheme, st, torch.as_tensor(probs), rng, n)
        if laws.dim() == 3:
            laws = laws[:, None]
        J = laws.shape[1]
        rho = _gather_observed(laws.reshape(n * J, *laws.shape[2:]), probs, st.observed()).reshape(n, J, -1)
        return np.where(scored[None, None, :], rho, 1.0)


class GreenListLaw(KeyedLaw):
    """KGW, Unigram and the other single-list schemes: +delta on a keyed green list (``boost_green``)."""

    def compact_law(self, scheme, st, t, probs):
        mask = scheme.green_mask(st.ids[:t], None)
        rows = st.rows[t][st.rows[t] >= 0]
        green = torch.zeros(len(rows), dtype=torch.bool) if mask is None else mask[torch.as_tensor(rows)]
        return boost_green(torch.log(probs), green, scheme.delta)

    def simulate_laws(self, scheme, st, probs, rng, n):
        if scheme.list_id([0] * len(st.ids)) == scheme.list_id([1] * len(st.ids)):
            # one list per key (context-free): a token has one colour at every position
            ids, inv = np.unique(st.rows, return_inverse=True)
            colour = rng.random((n, len(ids))) < scheme.gamma
            green = colour[:, inv.reshape(st.rows.shape)]
        else:
            green = rng.random((n, *st.rows.shape)) < scheme.gamma
        return boost_green(torch.log(probs)[None], torch.as_tensor(green), scheme.delta)


class RaceLaw(KeyedLaw):
    """AAR (either form): the keyed exponential race over the served rows (``race_law``)."""

    def compact_law(self, scheme, st, t, probs):
        rows = st.rows[t][st.rows[t] >= 0]
        u = scheme.keyed_uniforms(st.ids[:t])[torch.as_tensor(rows)]
        return race_law(probs, u, scheme.params.form)

    def simulate_laws(self, scheme, st, probs, rng, n):
        u = torch.as_tensor(rng.random((n, *st.rows.shape)))
        scores = _race_scores(probs[None], u)
        if scheme.params.form == "gumbel":
            return torch.zeros_like(scores).scatter_(2, scores.argmax(2, keepdim=True), 1.0)
        return torch.softmax(scores, dim=2)


def reweight_rows(probs: torch.Tensor, rank: torch.Tensor, alpha: float) -> torch.Tensor:
    """``alpha_reweight`` over the last axis for a batch: ``rank`` gives each row's place in the order.

    Rows with probability 0 (padding) add nothing to the cumulative mass wherever
    they sit, so reweighting a position's served rows equals reweighting the whole
    vocabulary under the same keyed order (the tests compare it with ``alpha_reweight``).
    """
    order = torch.argsort(rank, dim=-1)
    in_order = torch.gather(probs.expand_as(rank), -1, order)
    cdf = torch.cumsum(in_order, dim=-1)
    new_cdf = (cdf - alpha).clamp_min(0.0) + (cdf - (1.0 - alpha)).clamp_min(0.0)
    inc = torch.diff(new_cdf, dim=-1, prepend=torch.zeros_like(new_cdf[..., :1]))
    out = torch.empty_like(inc).scatter_(-1, order, inc)
    return out / out.sum(-1, keepdim=True)


class DiPMarkLaw(KeyedLaw):
    """DiPMark: the alpha-reweight along the keyed permutation, restricted to the served rows."""

    def compact_law(self, scheme, st, t, probs):
        ids = st.ids[:t]
        if len(ids) < scheme.context_width or scheme.repeated_context(ids, 0):
            return probs
        perm = scheme.order([int(i) for i in ids[len(ids) - scheme.context_width:]])
        rows = torch.as_tensor(st.rows[t][st.rows[t] >= 0])
        place = torch.empty_like(perm)
        place[perm] = torch.arange(perm.numel())
        return alpha_reweight(probs, torch.argsort(place[rows]), scheme.alpha)

    def simulate_laws(self, scheme, st, probs, rng, n):
        rank = torch.as_tensor(rng.random((n, *st.rows.shape)))
        return reweight_rows(probs[None], rank, scheme.alpha)


class SynthIDLaw(KeyedLaw):
    """SynthID: the tournament's closed form, p * (1 + g - E_p[g]) layer by layer."""

    def compact_law(self, scheme, st, t, probs):
        full = scheme.distribution(st.full_row(t), st.ids[:t], 0, None)
        rows = torch.as_tensor(st.rows[t][st.rows[t] >= 0])
        return full[rows]

    def simulate_laws(self, scheme, st, probs, rng, n):
        p = probs[None].expand(n, -1, -1).clone()
        q = scheme.g_mean
        for _ in range(scheme.params.depth):
            g = torch.as_tensor((rng.random(p.shape) < q).astype(np.float64))
            p = p * (g + (1.0 - (g * p).sum(-1, keepdim=True)))
        return p / p.sum(-1, keepdim=True).clamp_min(1e-300)


class WaterBagLaw(GreenListLaw):
    """Water-Bag: a generation is served by one of its bag's KGW lists or that list's complement.

    The 2 x bag_size variants are (bag key b, complement c); a random key is a bag of
    bag_size independent random lists, each with its complement, so the simulated
    variants keep the pairing (variant (b, 1) is green exactly where (b, 0) is not)."""

    def variants(self, scheme):
        return [(kgw, complement, scheme.delta) for kgw in scheme.bag for complement in (False, True)]

    def compact_law(self, variant, st, t, probs):
        return self.compact_laws([variant], st, t, probs)[0]

    def compact_laws(self, variants, st, t, probs):
        rows = torch.as_tensor(st.rows[t][st.rows[t] >= 0])
        masks: dict[int, torch.Tensor] = {}  # a bag key's list serves it and its complement
        green = []
        for kgw, complement, _delta in variants:
            if id(kgw) not in masks:
                mask = kgw.green_mask(st.ids[:t])
                masks[id(kgw)] = torch.zeros(len(rows), dtype=torch.bool) if mask is None else mask[rows]
            green.append(~masks[id(kgw)] if complement else masks[id(kgw)])
        return boost_green(torch.log(probs)[None], torch.stack(green), variants[0][2])

    def simulate_laws(self, scheme, st, probs, rng, n):
        colour = torch.as_tensor(rng.random((n, len(scheme.bag), *st.rows.shape)) < scheme.gamma)
        green = torch.stack([colour, ~colour], dim=2).flatten(1, 2)  # (n, 2 bag, T, K): (b, c) in order
        return boost_green(torch.log(probs)[None, None], green, scheme.delta)


class EditLaw(KeyedLaw):
    """EXP-Edit (its point mass) and ITS-Edit: key element (offset + position), the offset unknown.

    A generation reads key element k = (offset + t) mod keylen at its t-th token, with
    an offset drawn per generation that the detector does not know. Each of the
    keylen offsets is a variant: under offset o the keyed law at position t is a point
    mass on the served row that element (o + t) picks (EXP-Edit: the exponential race;
    ITS-Edit: the row whose interval in the element's order holds its uniform), so
    rho_t is 1/p(x_t) where that row is the observed token and 0 elsewhere. ``lr``
    takes the best offset, ``lr-mix`` averages over them (the prior on the offset is
    the generation's own: uniform).

    Positions count from the first text token, as the generation counted its own
    tokens; a text whose re-read tokenisation differs from the provider's count (a
    re-synchronised span that merges differently) shifts the offset from there on,
    and the ratio keeps one offset per text.

    Null: under a random key, element k picks the observed token with probability
    exactly p(x_t), independently across the elements of one offset (they are
    independent draws; ITS-Edit's shared permutation leaves each pick's probability
    at p(x_t) whatever the permutation). Two offsets meet at the same element at
    different positions; the simulation draws them independently, and the tests
    compare it with real random keys on real text."""

    #: Null draws per block (each block is draws x keylen x T wins).
    BLOCK = 16

    def variants(self, scheme):
        return [(scheme, o) for o in range(scheme.params.keylen)]

    def compact_law(self, variant, st, t, probs):
        scheme, offset = variant
        full = scheme.distribution(st.full_row(t), st.ids[:t], 0, EditState(offset))
        return full[torch.as_tensor(st.rows[t][st.rows[t] >= 0])].to(probs.dtype)

    @staticmethod
    def live(st: ServedText, scored: np.ndarray) -> np.ndarray:
        """(T,) the positions whose rho can differ from 1: scored, with the observed token served."""
        return scored & (st.observed() >= 0)

    def picks(self, scheme: Any, st: ServedText) -> np.ndarray:
        """(keylen, T) the column among position t's served rows that key element k puts its mass on."""
        rows = st.rows
        valid = rows >= 0
        unique, inverse = np.unique(rows[valid], return_inverse=True)
        values = scheme.key_values(unique.tolist()).to(torch.float64).numpy()  # (keylen, U)
        table = np.full((values.shape[0], *rows.shape), np.nan)
        table[:, valid] = values[:, inverse]
        probs = st.probs()
        if not isinstance(scheme, ITSEdit):  # EXP-Edit: race_winner's race (padding draws u = 0: -inf)
            race = _race_scores(torch.from_numpy(probs), torch.from_numpy(np.where(valid, table, 0.0)))
            return race.argmax(dim=2).numpy()
        # ITS-Edit: rows in the element's order, the first whose CDF passes u * total (``ITSEdit._pick``)
        order = np.argsort(np.where(valid, table, np.inf), axis=2, kind="stable")
        cdf = np.cumsum(np.take_along_axis(np.broadcast_to(probs, table.shape), order, axis=2), axis=2)
        target = scheme.u.to(torch.float64).numpy()[:, None, None] * cdf[..., -1:]
        j = np.minimum((cdf <= target).sum(axis=2), rows.shape[1] - 1)
        return np.take_along_axis(order, j[..., None], axis=2)[..., 0]

    def observed(self, scheme, st, scored):
        cols = st.observed()
        live = self.live(st, scored)
        T, L = len(st), scheme.params.keylen
        picks = self.picks(scheme, st)
        at = (np.arange(L)[:, None] + np.arange(T)[None, :]) % L  # the element offset o reads at t
        won = picks[at, np.arange(T)[None, :]] == cols[None, :]
        return np.where(live[None, :], np.where(won, self._ratio(st), 0.0), 1.0)

    @staticmethod
    def _ratio(st: ServedText) -> np.ndarray:
        """(T,) 1/p of the observed token (1 where it was not served)."""
        cols = st.observed()
        p = st.probs()[np.arange(len(st)), np.maximum(cols, 0)]
        return np.where((cols >= 0) & (p > 0), 1.0 / np.where(p > 0, p, 1.0), 1.0)

    @staticmethod
    def _wins(keylen: int, ratio: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, keylen, T) whether a random key's element picks the observed token: probability p(x_t)."""
        return rng.random((n, keylen, len(ratio))) < 1.0 / ratio

    def simulate(self, scheme, st, scored, rng, n):
        ratio = self._ratio(st)
        wins = self._wins(scheme.params.keylen, ratio, rng, n)
        return np.where(self.live(st, scored), np.where(wins, ratio, 0.0), 1.0)

    def null_sums(self, scheme, st, scored, rng, n, cuts):
        ratio, live = self._ratio(st), self.live(st, scored)
        for start in range(0, n, self.BLOCK):
            wins = self._wins(scheme.params.keylen, ratio, rng, min(self.BLOCK, n - start))
            yield point_mass_sums(wins, ratio, live, cuts)


def keyed_law(scheme: Any) -> KeyedLaw | None:
    """The family of ``scheme``'s keyed law, or ``None`` where no model-aware ratio is built.

    Left out: EXP-Edit's ``soft`` form. Its keyed law is continuous, so each of the
    keylen offsets needs a full race per position and null draw (about 3e9 terms per
    text of 200 tokens at 1,000 draws), which the point mass avoids (``EditLaw``).
    """
    from wash.watermarks.aar import AAR
    from wash.watermarks.dipmark import DiPMark
    from wash.watermarks.greenlist import GreenListScheme
    from wash.watermarks.keyseq import EditScheme
    from wash.watermarks.synthid import SynthID
    from wash.watermarks.waterbag import WaterBag

    if isinstance(scheme, AAR):
        return RaceLaw()
    if isinstance(scheme, DiPMark):
        return DiPMarkLaw()
    if isinstance(scheme, SynthID):
        return SynthIDLaw()
    if isinstance(scheme, WaterBag):
        return WaterBagLaw()
    if isinstance(scheme, GreenListScheme):
        return GreenListLaw()
    if isinstance(scheme, EditScheme) and scheme.point_mass:
        return EditLaw()
    return None
