"""The test statistics over per-token evidence, and their p-values from simulated nulls.

Every statistic here turns per-token quantities into one number per prefix of the
text, larger meaning more evidence of the key, and its p-value is read against
draws of the same statistic under the null with the same per-token model
quantities (``keyed.KeyedLaw.simulate`` or a pivot's known null law):
p = (1 + #{null >= observed}) / (n + 1), which is exact for exchangeable draws.

* ``glr_from``: the generalised likelihood ratio of a sparse mixture,
  max over w in a fixed grid of sum_t log((1 - w) + w rho_t) (``log_ratio_sums``).
  The grid covers [0, 1] evenly; no knob is fitted to watermarked text. Given each
  position's r_t = q(x_t) / p(x_t), the law of the tokens the provider did not serve
  over its own plain law (the line-up-aware ratio, ``lineup``), each term is
  log((w rho_t + (1 - w) r_t) / (w + (1 - w) r_t)) instead (``ratio_terms``): the same
  where r = 1.
* ``mixture_from``: the same ratio averaged over a uniform prior on the grid's w > 0 (a
  Bayes factor): no atom at w = 0, so its simulated p is not conservative;
* ``higher_criticism``: Donoho and Jin's HC* over per-token p-values (pivots),
  the largest standardised excess of small p-values among the smallest half.
* ``weighted_count``: a green count weighted by each position's served entropy
  (SWEET/EWD-style: a low-entropy position cannot carry a watermark).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import logsumexp

#: The mixture weights the generalised LR maximises over (0 = no watermark).
W_GRID = np.linspace(0.0, 1.0, 41)
#: Higher criticism looks at the smallest this share of the p-values.
HC_FRACTION = 0.5


def prefix_sums(terms: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Sums of ``terms`` over its last axis up to each cut (exclusive index): (..., len(cuts))."""
    csum = np.concatenate([np.zeros((*terms.shape[:-1], 1)), np.cumsum(terms, axis=-1)], axis=-1)
    return csum[..., cuts]


def ratio_terms(rho: np.ndarray, w: np.ndarray | float, r: np.ndarray | None = None) -> np.ndarray:
    """log((w rho + (1 - w) r) / (w + (1 - w) r)), broadcast over ``rho``, ``w`` and ``r``; 0 at w = 0.

    The log likelihood ratio of one token between "a share w of the tokens from the
    provider's watermarked law, the rest from q" and "the same share from its plain law",
    in units of its plain probability p: rho = p_wm / p, r = q / p. ``r`` None is q = p,
    log((1 - w) + w rho), computed without the rounding of a denominator that is 1.
    Where r = 0 (no other law serves the token) a token that the keyed law cannot give
    (rho = 0) is -inf at every w > 0: under the alternative only the provider served it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if r is None:
            out = np.log((1.0 - w) + w * rho)
        else:
            out = np.log(w * rho + (1.0 - w) * r) - np.log(w + (1.0 - w) * r)
    return np.where(np.asarray(w) == 0.0, 0.0, out)


def glr_terms(rho: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
    """(..., T, W) ``ratio_terms`` of each position for each w of ``W_GRID`` (``r``: (T,) or None)."""
    return ratio_terms(rho[..., None], W_GRID, None if r is None else np.asarray(r, dtype=float)[:, None])


def log_ratio_sums(rho: np.ndarray, cuts: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
    """(..., C, W) the summed log ratios of each prefix, for each w of ``W_GRID``.

    What ``glr`` and ``mixture`` both read: computed once, a text's null draws serve
    both. Positions where rho is 1 in every row add 0 for every w (whatever r) and are
    skipped. ``r``: (T,) q / p of each position (``ratio_terms``), None for q = p."""
    rho = np.asarray(rho, dtype=float)
    live = np.flatnonzero((rho != 1.0).reshape(-1, rho.shape[-1]).any(axis=0))
    terms = glr_terms(rho[..., live], None if r is None else np.asarray(r, dtype=float)[live])  # (..., L, W)
    # prefix sums at the cuts over the live positions only: each cut keeps the live positions before it
    ends = np.searchsorted(live, cuts, side="left")
    segments = [terms[..., a:b, :].sum(axis=-2) for a, b in zip(np.r_[0, ends[:-1]], ends)]
    return np.cumsum(np.stack(segments, axis=-2), axis=-2)


def point_mass_sums(wins: np.ndarray, ratio: np.ndarray, live: np.ndarray, cuts: np.ndarray,
                    r: np.ndarray | None = None) -> np.ndarray:
    """``log_ratio_sums`` of a point-mass law's rho, from its wins alone: (..., C, W).

    A point-mass law gives rho_t = ``ratio[t]`` (1/p of the observed token) where the
    keyed law put its mass on the observed token (``wins``) and 0 where it did not; a
    position that is not ``live`` has rho = 1. Each term is then one of two numbers
    per (t, w), a win's and a loss's (``ratio_terms`` at rho = ratio and at rho = 0), so
    a prefix's sum is its losses' sum plus the wins times a (T, W) table of the
    differences: what makes a null over hundreds of keyed laws per draw (EXP-Edit's and
    ITS-Edit's offsets) affordable. A loss that is -inf (w = 1; with ``r``, r_t = 0) is
    counted instead: the sum is -inf unless every such position before the cut is a win.
    Equal to ``log_ratio_sums`` of that rho (tested).
    """
    idx = np.flatnonzero(live)
    ends = np.searchsorted(idx, cuts, side="left")  # live positions before each cut
    hits = np.asarray(wins, dtype=float)[..., idx]
    q = None if r is None else np.asarray(r, dtype=float)[idx]
    win = glr_terms(np.asarray(ratio, dtype=float)[idx], q)  # (L, W)
    loss = glr_terms(np.zeros(len(idx)), q)
    must = np.isneginf(loss)  # a loss the alternative cannot give
    base = np.where(must, 0.0, loss)
    counted = np.flatnonzero(must.any(axis=0))  # the w whose sums need the win count (w = 1 at least)
    table = np.concatenate([win - base, must[:, counted].astype(float)], axis=1)  # (L, W + |counted|)
    starts = np.r_[0, ends[:-1]]
    # torch's matmul on the (draws x laws, L) wins: the null's largest cost, a third less than numpy's here
    flat = torch.from_numpy(hits.reshape(int(np.prod(hits.shape[:-1])), len(idx)))  # (draws x laws, L), L >= 0
    tab = torch.from_numpy(table)
    per_segment = torch.stack([flat[:, a:b] @ tab[a:b] for a, b in zip(starts, ends)], dim=-2)
    acc = torch.cumsum(per_segment, dim=-2).numpy().reshape(*hits.shape[:-1], len(ends), -1)  # (..., C, W + k)
    W = len(W_GRID)
    out = acc[..., :W] + prefix_sums(base.T, ends).T  # (..., C, W): every loss plus each win's difference
    needed = prefix_sums(must[:, counted].T.astype(float), ends).T  # (C, |counted|)
    out[..., counted] = np.where(acc[..., W:] == needed, out[..., counted], -np.inf)
    return out


def glr_from(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(statistic, w-hat) from ``log_ratio_sums``: the maximum over ``W_GRID``."""
    return np.max(sums, axis=-1), W_GRID[np.argmax(sums, axis=-1)]


def mixture_from(sums: np.ndarray) -> np.ndarray:
    """log of the mean over the grid's w > 0 of the ratio, from ``log_ratio_sums``.

    The likelihood ratio averaged over a fixed uniform prior on w instead of maximised:
    it has no atom at "no evidence" (the maximum sits at w = 0 on most unwatermarked
    texts, which makes the generalised LR's simulated p conservative), and it still
    adapts to the unknown share of the provider's tokens.
    """
    return log_mean_exp(sums[..., 1:], axis=-1)


def over_laws(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, C) ``glr_from``'s value and ``mixture_from``'s log mean, each then reduced over the J keyed laws,
    from (n, J, C, W) null sums.

    The same numbers as the four passes (maximum over w, then over laws; log mean over w > 0, then
    over laws), computed as one maximum and one log-sum-exp over both axes: the mean over laws of
    a mean over w is the mean over every (law, w) pair. For EXP-Edit's and ITS-Edit's hundreds of
    offsets these reductions were most of a text's null (torch's, single-threaded, about 4x
    faster than scipy's here)."""
    t = torch.from_numpy(np.ascontiguousarray(sums))
    glr = t.amax(dim=(1, 3)).numpy()
    mix = (torch.logsumexp(t[..., 1:], dim=(1, 3)) - np.log(sums.shape[1] * (sums.shape[3] - 1))).numpy()
    return glr, mix


def log_mean_exp(x: np.ndarray, axis: int) -> np.ndarray:
    """log(mean(exp(x))) along ``axis`` (scipy's ``logsumexp``); -inf where every entry is -inf."""
    return logsumexp(x, axis=axis) - np.log(x.shape[axis])


def higher_criticism(pivots: np.ndarray, valid: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """HC* of the valid pivots in each prefix: (..., len(cuts)); 0 with no valid pivot."""
    out = np.zeros((*pivots.shape[:-1], len(cuts)))
    for j, c in enumerate(cuts):
        p = np.where(valid[..., :c], pivots[..., :c], np.inf)
        n = int(valid[..., :c].sum(-1).max()) if c else 0
        if n == 0:
            continue
        p = np.sort(p, axis=-1)[..., :n]
        m = valid[..., :c].sum(-1)[..., None]
        i = np.arange(1, n + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            hc = np.sqrt(m) * (i / m - p) / np.sqrt(p * (1.0 - p))
        keep = (i <= np.maximum(1, HC_FRACTION * m)) & (p >= 1.0 / np.maximum(m, 1)) & np.isfinite(hc) & (p < 1)
        out[..., j] = np.max(np.where(keep, hc, -np.inf), axis=-1, initial=0.0)
    return out


def weighted_count(green: np.ndarray, weights: np.ndarray, rate: float, cuts: np.ndarray) -> np.ndarray:
    """sum_t e_t (g_t - rate) / sqrt(rate (1 - rate) sum_t e_t^2) for each prefix (0 where no weight)."""
    num = prefix_sums(weights * (green - rate), cuts)
    den = np.sqrt(rate * (1.0 - rate) * prefix_sums(np.broadcast_to(weights ** 2, green.shape), cuts))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, 0.0)


def simulated_p(observed: np.ndarray, null: np.ndarray) -> np.ndarray:
    """p = (1 + #{null >= observed}) / (n + 1) per column; ``null`` is (n, ...) draws of the statistic."""
    tol = 1e-9 * np.maximum(1.0, np.abs(observed))
    return (1.0 + (null >= observed[None] - tol).sum(0)) / (null.shape[0] + 1.0)
