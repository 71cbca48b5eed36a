"""Aggregation rules: how WASH combines its N providers' next-token distributions.

The paper's WASH draws every token from the mean p̄ = (1/N) Σ p_i over the union
vocabulary (``mean``, the default, and the only rule lazy forwards can draw from).
Theorem 1 bounds ‖p̄ − p*‖∞ under Assumption 1, whose part (a) says every provider's
perturbation is bounded, ‖δ_i‖∞ ≤ ξ ≤ 1. Sampling-based schemes break (a): AAR,
ITS-Edit and EXP-Edit serve a point mass on their keyed choice, a perturbation of
unbounded size, and the mean hands that choice at least 1/N of every step, so
their detectors keep a signal under WASH. The other rules here are variants that
replace the mean by a robust combination. Each rule's docstring says why it exists;
the rule's strength is its ``xi`` where it has one.

Every rule sees the providers' distributions scattered onto the union, a float64
tensor ``dists`` [N, V] (0 where a provider's vocabulary lacks the token), with a
bool tensor ``present`` [N, V] (the token is in that provider's vocabulary), and
returns a probability vector [V]. Tokens missing from some vocabularies are treated
alike by every robust rule: a token in k of the N vocabularies gets its robust
centre from those k providers only, and its weight is (1/N) × the sum over those k
providers of their (adjusted) values, the mean's own union convention (a token in
one vocabulary gets 1/N of that provider's probability; paper Section 2.3). A
missing provider neither votes 0 (the median of a one-vocabulary token would be 0
and the token banned, the intersection baseline the paper rejects) nor has its vote
filled in. A present provider's 0 (a masked row, a top-k cut, the rest of a point
mass) is a real vote.

A token whose robust centre is 0 (more than half of the providers that have it give
it 0, e.g. it is outside most providers' top-k) gets 0 from every robust rule and every
finite ``xi``. Should that leave no mass at all (providers with disjoint supports),
a rule returns the mean rather than fail.

Rules are written ``NAME[:param=value,...]`` (``median-clip:xi=0.5``); ``parse``
turns the text into a rule and ``str(rule)`` gives its canonical spelling (every
parameter written out), which runs record. The package calls ``parse`` at one site,
``wash.engine.config.rule_of``; everyone else holds the ``Rule`` (or the config that
holds it) and asks it (``rule.is_mean``, ``str(rule)``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from wash.core.errors import WashInputError
from wash.core.options import params_text, parse_params

#: Largest ``xi`` accepted: e^50 already makes a clip rule the mean on every token with a positive centre.
MAX_XI = 50.0


@dataclass(frozen=True)
class Rule:
    """One aggregation rule; its parameters are the dataclass's fields."""

    name: ClassVar[str] = ""
    #: One line for help texts.
    summary: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = float(getattr(self, f.name))
            object.__setattr__(self, f.name, value)  # 1 and 1.0 spell the same rule
            if f.name == "xi" and not 0.0 <= value <= MAX_XI:  # NaN fails this test too
                raise WashInputError(f"aggregate '{self.name}': xi must be from 0 to {MAX_XI:g}, got {value}")

    def __call__(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """The aggregate of ``dists`` [N, V] (``present`` [N, V]): a probability vector [V]."""
        return _normalised(self.combine(dists, present), dists)

    def combine(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """The rule's unnormalised weights [V] (non-negative)."""
        raise NotImplementedError

    @property
    def is_mean(self) -> bool:
        """The paper's mean: the only rule lazy forwards can draw from, and the one runs leave unnamed."""
        return self.name == Mean.name

    def __str__(self) -> str:
        params = params_text(self)
        return self.name + (":" + params if params else "")


@dataclass(frozen=True)
class Mean(Rule):
    """The paper's WASH average (1/N) Σ p_i: the default.

    Why: Theorem 1's estimator; under Assumption 1 it approaches p* at rate
    1/√N, plus the η² bias of averaging in probability space. Missing tokens count
    0, so a token in k of N vocabularies gets (1/N) × the sum of those k providers.
    The engine computes it without stacking the providers (``averaging.average``,
    one scatter per base model); this method is the reference the others are
    compared with.
    """

    name: ClassVar[str] = "mean"
    summary: ClassVar[str] = "the paper's average (1/N) Σ p_i"

    def combine(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        return _mean(dists)


@dataclass(frozen=True)
class Median(Rule):
    """Coordinate-wise median over the providers that have the token, renormalised.

    Why: the textbook robust centre; one outlier (a point mass) among N ≥ 3 cannot
    move it. A token in k of N vocabularies gets (k/N) × the median of those k
    providers (the median of an even count is the midpoint of the two middle values,
    so for N = 2 the rule is the mean). Known failure: with independent
    green/red-list watermarks the median of (0, q1, q2), where one provider is a point
    mass elsewhere, is min(q1, q2), which keeps every provider's suppressed tokens
    suppressed; in the project's runs it raised KGW and DiPMark z over the mean. It is
    ``median-clip`` at xi = 0.
    """

    name: ClassVar[str] = "median"
    summary: ClassVar[str] = "coordinate-wise median over the providers that have the token"

    def combine(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        return _median(dists, present) * present.sum(0) / dists.shape[0]


@dataclass(frozen=True)
class LooClip(Rule):
    """Clip each provider's log-ratio to the mean of the others into [−xi, xi], then average.

    Why: Assumption 1(a) bounds every |δ_i| by ξ; leave-one-out compares each
    provider with the others only, so an outlier is not compared with itself.
    Provider i's value is clipped into [r_i e^−xi, r_i e^xi], r_i the mean of the
    other providers that have the token (a token no other provider has is left as it
    is); the clipped values are averaged as the mean does (missing providers count 0).
    Known failure: the other providers' mean still carries 1/(N−1) of a point mass, so
    with one point mass among three, each smooth provider's value on the point-mass
    token is lifted to about e^−xi/2 and the token keeps a large share.
    """

    name: ClassVar[str] = "loo-clip"
    summary: ClassVar[str] = "clip each p_i to within e^±xi of the other providers' mean, then average"
    xi: float = 1.0

    def combine(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        k = present.sum(0, keepdim=True)
        others = k - present.to(dists.dtype)
        total = dists.sum(0, keepdim=True)
        loo = torch.where(others > 0, (total - dists) / others.clamp_min(1), dists)
        clipped = _clip(dists, loo, self.xi)
        return torch.where(present, clipped, 0.0).sum(0) / dists.shape[0]


@dataclass(frozen=True)
class MedianClip(Rule):
    """Hold each provider to within e^±xi of the median, then average.

    Why: Assumption 1(a) says every perturbation is bounded, |δ_i| ≤ ξ. The median m
    over the providers that have a token is a centre one outlier cannot move; a
    provider whose probability is further than a factor e^xi from it (AAR's or
    EXP-Edit's point mass, and the zeros everywhere else) is clipped into
    [m e^−xi, m e^xi], i.e. held to the bound, and the clipped vectors are averaged as
    the mean does (missing providers count 0, so a token in one vocabulary gets 1/N
    of that provider's value, as under the mean). xi → 0 gives ``median``; xi → ∞ gives
    the mean on every token with a positive median. With one point mass among three
    providers whose smooth q agree, the point-mass token t gets at most
    q(t) (e^xi + 2) / (e^−xi + 2) (≈ 1.4 q(t) at xi = 0.5, never above e^xi q(t)),
    instead of the mean's (1 + 2 q(t)) / 3. Default xi = 1, the paper's largest ξ.
    """

    name: ClassVar[str] = "median-clip"
    summary: ClassVar[str] = "clip each p_i to within e^±xi of the median, then average"
    xi: float = 1.0

    def combine(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        clipped = _clip(dists, _median(dists, present).unsqueeze(0), self.xi)
        return torch.where(present, clipped, 0.0).sum(0) / dists.shape[0]


@dataclass(frozen=True)
class Cap(Rule):
    """The mean, with each token capped at e^xi times its median weight, renormalised.

    Why: the cheapest guard on the mean's one weakness. A single provider can raise a
    token's mean by up to 1/N in absolute terms (a point mass: from q(t) to
    about 1/N), but can lower it by at most a factor (N−1)/N (dropping its own share),
    so only the upward side needs a guard and the cap is one-sided: min(p̄(v),
    e^xi m̃(v)), with m̃ = (k/N) × the median of the k providers that have v (the
    ``median`` rule's weight, the same scale as p̄). Mass a cap removes is spread over
    all tokens by the renormalisation. Weaker than ``median-clip`` at the same xi: the
    rest of the vocabulary keeps the mean's (N−1)/N dilution, so a capped point-mass
    token can still gain up to about e^xi × N/(N−1) over q.
    """

    name: ClassVar[str] = "cap"
    summary: ClassVar[str] = "the mean, each token capped at e^xi times its median"
    xi: float = 1.0

    def combine(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        median = _median(dists, present) * present.sum(0) / dists.shape[0]
        return torch.minimum(_mean(dists), median * math.exp(self.xi))


@dataclass(frozen=True)
class GeoClip(Rule):
    """``median-clip`` in log space: the geometric mean of the clipped distributions.

    Why: the paper's model perturbs in log space, p_i ∝ p* e^δ_i, so the normalised
    geometric mean of the p_i is exactly p* e^(mean δ_i) renormalised. As N grows it
    tends to p* itself, whereas the mean tends to E[p_i] ≠ p* (the η² bias of
    averaging probabilities, Theorem 1's second term). A plain geometric mean lets
    any provider's 0 veto a token (a point mass would veto every other token), so
    each log p_i is first clipped into [log m − xi, log m + xi] around the median m,
    as ``median-clip`` does. A token in k of N vocabularies gets (k/N) × the geometric mean of its k
    providers. With one point mass among three agreeing providers the point-mass
    token gains a factor e^(2 xi/3) over the rest.
    """

    name: ClassVar[str] = "geo-clip"
    summary: ClassVar[str] = "geometric mean of the p_i, each clipped to within e^±xi of the median"
    xi: float = 1.0

    def combine(self, dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        k = present.sum(0)
        centre = _median(dists, present).log().unsqueeze(0)
        logs = torch.minimum(torch.maximum(dists.log(), centre - self.xi), centre + self.xi)
        # A centre of 0 (log −inf) keeps the token at 0; the sum then stays −inf, never NaN.
        logs = torch.where(present, logs, 0.0)
        mean_log = logs.sum(0) / k.clamp_min(1)
        return torch.where(k > 0, mean_log.exp() * k / dists.shape[0], 0.0)


RULES: dict[str, type[Rule]] = {r.name: r for r in (Mean, Median, LooClip, MedianClip, Cap, GeoClip)}


def accepted() -> str:
    """The rules with their parameters' defaults, for error and help texts."""
    return ", ".join(str(r()) for r in RULES.values())


def describe() -> str:
    """Every rule in one line, ``NAME:param=default: summary``, for help texts."""
    return "; ".join(f"{r()}: {r.summary}" for r in RULES.values())


def parse(text: str) -> Rule:
    """The rule ``NAME[:param=value,...]`` names (a one-line ``WashInputError`` otherwise)."""
    raw = str(text).strip()
    name, _, rest = raw.partition(":")
    name = name.strip().lower()
    if name not in RULES:
        raise WashInputError(f"unknown aggregate '{text}' (accepted: {accepted()})")
    cls = RULES[name]
    values = parse_params(cls, f"aggregate '{name}'", rest)
    return cls(**values)


# -- shared pieces ---------------------------------------------------------------------
def _mean(dists: torch.Tensor) -> torch.Tensor:
    return dists.sum(0) / dists.shape[0]


def _median(dists: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """Per token, the median over the providers that have it (0 where none has it).

    An even count takes the midpoint of its two middle values, so two identical
    values give that value exactly.
    """
    k = present.sum(0, keepdim=True)
    ranked = torch.sort(dists.masked_fill(~present, math.inf), dim=0).values
    lo = ((k - 1) // 2).clamp_min(0)
    hi = (k // 2).clamp_max(dists.shape[0] - 1)
    mid = (ranked.gather(0, lo) + ranked.gather(0, hi)) / 2
    return torch.where(k > 0, mid, 0.0).squeeze(0)


def _clip(dists: torch.Tensor, centre: torch.Tensor, xi: float) -> torch.Tensor:
    """Each value clipped into [centre e^−xi, centre e^xi]."""
    return torch.minimum(torch.maximum(dists, centre * math.exp(-xi)), centre * math.exp(xi))


def _normalised(weights: torch.Tensor, dists: torch.Tensor) -> torch.Tensor:
    """``weights`` as a probability vector; the mean when they hold no mass (see the module's docstring)."""
    total = float(weights.sum())
    if not math.isfinite(total) or total <= 0.0:
        weights = _mean(dists)
        total = float(weights.sum())
    return weights / total
