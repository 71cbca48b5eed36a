"""A small numpy experiment behind Theorem 1 (convergence to the consensus).

Each provider i serves p_i(v) ∝ p*(v)·exp(δ_i(v)) with ‖δ_i‖∞ ≤ ξ, and WASH samples
from p̄_N = (1/N) Σ p_i. The theorem bounds ‖p̄_N − p*‖∞ by a term shrinking like
sqrt(log|V| / N) plus a second-order term η² (the expected p*-weighted variance
of δ_i). Three kinds of perturbation show when it applies:

* ``independent``: δ_i(v) = ±ξ with independent fair signs (zero mean): the
  distance keeps falling with N;
* ``coordinated``: every provider uses the same δ (one shared key): averaging
  copies of one perturbation changes nothing, the distance stays put;
* ``biased``: δ_i = ξ·(b·m + (1 − b)·s_i) with a fixed sign pattern m shared by
  all providers: the zero-mean assumption fails and the distance levels off at
  the shared part's effect.

p* is a Zipf law (p*(v) ∝ (v + 1)^-1.1), a rough stand-in for a language model's
next-token distribution. Everything is seeded; the default size runs in tens of
milliseconds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from wash.core.errors import WashInputError

KINDS = ("independent", "coordinated", "biased")
MAX_VOCAB = 20_000
MAX_N = 64


@dataclass
class TheoryResult:
    ns: list[int]
    mean: dict[str, list[float]]
    low: dict[str, list[float]]
    high: dict[str, list[float]]
    eta2: float
    reference: list[float]
    vocab_size: int
    xi: float
    seconds: float


def consensus(vocab_size: int) -> np.ndarray:
    p = (np.arange(vocab_size, dtype=np.float64) + 1.0) ** -1.1
    return p / p.sum()


def _signs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 2, size=shape, dtype=np.int8).astype(np.float32) * 2.0 - 1.0


def _perturbations(kind: str, rng: np.random.Generator, trials: int, n: int, v: int, xi: float,
                   bias: float) -> np.ndarray:
    """A (trials, n, v) array: row i of each trial is provider i's δ_i."""
    if kind == "independent":
        return xi * _signs(rng, (trials, n, v))
    if kind == "coordinated":
        return np.broadcast_to(xi * _signs(rng, (trials, 1, v)), (trials, n, v))
    if kind == "biased":
        return xi * (bias * _signs(rng, (trials, 1, v)) + (1.0 - bias) * _signs(rng, (trials, n, v)))
    raise WashInputError(f"unknown perturbation kind '{kind}' (accepted: {', '.join(KINDS)})")


#: The running averages are formed on the most likely tokens only (exactly: see below).
_HEAD = 512


def _distances(p_star: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """(trials, n): ‖p̄_N − p*‖∞ for N = 1..n, where p̄_N averages the first N providers.

    Normalisers use the whole vocabulary. Since p_i(v)/p*(v) lies in [e^-2ξ, e^2ξ],
    a token's gap is at most p*(v)·(e^2ξ − 1); p* is sorted, so once that bound at
    the head's edge is below every distance found, the tail cannot hold the maximum
    and is skipped (otherwise the whole vocabulary is used).
    """
    weights = p_star[None, None, :] * np.exp(delta)
    p_i = weights / weights.sum(axis=2, keepdims=True)
    trials, n, v = p_i.shape
    averaging = np.tril(np.ones((n, n), dtype=np.float32)) / np.arange(1, n + 1, dtype=np.float32)[:, None]
    xi = float(np.abs(delta).max())
    for head in (min(_HEAD, v), v):
        stacked = np.ascontiguousarray(p_i[:, :, :head].transpose(1, 0, 2)).reshape(n, trials * head)
        running = (averaging @ stacked).reshape(n, trials, head)  # row N-1: mean of the first N
        dist = np.abs(running - p_star[None, None, :head]).max(axis=2).T
        tail_bound = float(p_star[head]) * math.expm1(2 * xi) if head < v else 0.0
        if tail_bound < dist.min():
            return dist
    return dist


def _eta2(p_star: np.ndarray, delta: np.ndarray) -> float:
    """Mean over providers of Var_{u~p*} δ_i(u)."""
    d = np.asarray(delta, dtype=np.float64).reshape(-1, delta.shape[-1])
    mean = d @ p_star
    return float(np.mean(((d - mean[:, None]) ** 2) @ p_star))


def validate(vocab_size: int, xi: float, max_n: int, trials: int) -> None:
    if not 10 <= vocab_size <= MAX_VOCAB:
        raise WashInputError(f"vocabulary size must be from 10 to {MAX_VOCAB}, got {vocab_size}")
    if not 0.0 < xi <= 1.0:
        raise WashInputError(f"perturbation size ξ must be in (0, 1] (Assumption (a)), got {xi}")
    if not 2 <= max_n <= MAX_N:
        raise WashInputError(f"largest N must be from 2 to {MAX_N}, got {max_n}")
    if not 1 <= trials <= 50:
        raise WashInputError(f"trials must be from 1 to 50, got {trials}")


def simulate(vocab_size: int = 5000, xi: float = 0.5, max_n: int = MAX_N,
             kinds: tuple[str, ...] | list[str] = KINDS, trials: int = 6, bias: float = 0.5,
             seed: int = 0) -> TheoryResult:
    """Distances for N = 1..max_n, averaged over ``trials`` draws, per kind."""
    vocab_size, max_n, trials = int(vocab_size), int(max_n), int(trials)
    validate(vocab_size, float(xi), max_n, trials)
    if not kinds:
        raise WashInputError("choose at least one kind of perturbation")
    start = time.perf_counter()
    p_star = consensus(vocab_size).astype(np.float32)
    rng = np.random.default_rng(seed)
    ns = list(range(1, max_n + 1))
    mean, low, high = {}, {}, {}
    eta2_draws = []
    for kind in kinds:
        delta = _perturbations(kind, rng, trials, max_n, vocab_size, float(xi), bias)
        stack = _distances(p_star, delta).astype(np.float64)
        if kind == "independent" or len(kinds) == 1:
            eta2_draws.append(_eta2(p_star.astype(np.float64), delta[:, :4]))
        mean[kind] = stack.mean(axis=0).tolist()
        low[kind] = np.quantile(stack, 0.1, axis=0).tolist()
        high[kind] = np.quantile(stack, 0.9, axis=0).tolist()
    eta2 = float(np.mean(eta2_draws)) if eta2_draws else float(xi) ** 2
    reference = reference_shape(ns, vocab_size, eta2, mean.get("independent") or next(iter(mean.values())))
    return TheoryResult(ns=ns, mean=mean, low=low, high=high, eta2=eta2, reference=reference,
                        vocab_size=vocab_size, xi=float(xi), seconds=time.perf_counter() - start)


def reference_shape(ns: list[int], vocab_size: int, eta2: float, fit_to: list[float]) -> list[float]:
    """c·(sqrt(log|V| / N) + η²), c chosen so it matches ``fit_to`` on a log scale.

    The theorem is an upper bound up to constants, so only its shape is drawn.
    """
    shape = np.array([math.sqrt(math.log(vocab_size) / n) + eta2 for n in ns])
    target = np.maximum(np.asarray(fit_to, dtype=np.float64), 1e-300)
    scale = float(np.exp(np.mean(np.log(target) - np.log(shape))))
    return (scale * shape).tolist()


def summary(result: TheoryResult) -> str:
    """One markdown line per kind: distance at N = 1 and at the largest N."""
    lines = [f"|V| = {result.vocab_size}, ξ = {result.xi:g}, estimated η² = {result.eta2:.3f}, "
             f"computed in {result.seconds * 1000:.0f} ms.", ""]
    for kind, ys in result.mean.items():
        ratio = ys[-1] / ys[0] if ys[0] > 0 else float("nan")
        lines.append(f"- **{kind}**: {ys[0]:.2e} at N = 1 → {ys[-1]:.2e} at N = {result.ns[-1]} "
                     f"(× {ratio:.2f})")
    return "\n".join(lines)
