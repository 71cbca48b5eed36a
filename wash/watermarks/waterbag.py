"""Water-Bag (Liu et al., ICLR 2025, "Can watermarked LLMs be identified by users via crafted prompts?").

Why it exists: a user who can query a KGW model repeatedly can spot the watermark
from its fixed preference (the same tokens boosted after the same context).
Water-Bag hides that preference: the provider holds a *bag* of ``bag_size`` keys
and, for each generation, draws one key and one of the two complementary splits
of that key's KGW list (indicator 0: the list itself; indicator 1: its
complement). Averaged over generations every token is boosted as often as it is
suppressed, so the provider has no stable bias to observe.

Here: the bag keys are ``hashing.derive_seed("waterbag", key, i)``; each one
drives an ordinary KGW list (same context hashing as ``kgw``, reused through KGW
objects, defaults gamma 0.5, delta 2.0, additive over 4 ids); the per-generation
draw of (key index, indicator) is ``new_state(generation_seed)``.

Detection. The paper's rule "a token is green if it is green under any (key,
indicator)" is trivially true with complementary splits (every token is green
under one of the two), so it cannot give a calibrated test. Instead, for each bag
key k we count the tokens green under its indicator-0 list, g_k of n; a
watermark drawn with indicator 1 shows up as a deficit, so the per-key test is
two-sided: p_k = P(|X - n gamma| >= |g_k - n gamma|), X ~ Binomial(n, gamma),
as a mid-p value (half the probability of the observed deviation itself counts),
which keeps the discrete statistic centred on uniform instead of piling mass at
p = 1 for short texts. The bag_size keys are tested at once, so the smallest p_k
is Sidak-corrected: p = 1 - (1 - min_k p_k)^bag_size, and z = Phi^-1(1 - p).
Under the null the p_k are independent and near-uniform, so z stays close to
N(0, 1) (checked by the null-calibration tests). ``per_token`` reports 1/0 with
respect to the best (key, indicator) at ``result`` time. ``result`` is O(n)
(an exact binomial tail and the per-token relabelling); ``push`` is O(bag_size).

Each (context, token) pair is scored once (``skip_repeated``, default true, the
green-list schemes' shared rule; the pair's identity is the tuple of the bag's
list seeds): a repeated pair repeats all bag_size coins at once, and the Sidak
minimum over keys amplifies the resulting overdispersion. On a 40-token loop
repeated 5 times the all-pairs count gave P(z > 4) = 17 % with no watermark,
82 % on a 12-token loop (docs/DETECTORS.md). ``skip_repeated=false`` counts every
token (the all-pairs count of the KGW detectors it builds on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import numpy as np
import torch
from scipy import stats

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import Detection, Detector, check_range
from wash.watermarks.greenlist import (GreenListLaw, GreenListScheme, boost_green, check_fraction, check_skip_repeated,
                                       is_green, served_green)
from wash.watermarks.kgw import KGW, check_context
from wash.watermarks.laws import KeyedLaw, RereadText, served


#: Largest bag accepted: each key costs a vocabulary-sized permutation in memory.
MAX_BAG_SIZE = 64


@dataclass(frozen=True)
class WaterBagDraw:
    """One generation's choice: which bag key, and whether its list is complemented."""

    key_index: int
    complement: bool


def two_sided_mid_p(hits: int, n: int, gamma: float) -> float:
    """Mid-p of P(|X - n gamma| >= |hits - n gamma|) for X ~ Binomial(n, gamma)."""
    if n <= 0:
        return 1.0
    xs = np.arange(n + 1)
    pmf = stats.binom.pmf(xs, n, gamma)
    dev = np.abs(xs - n * gamma)
    d = abs(hits - n * gamma)
    tol = 1e-9 * max(1.0, n)
    beyond = pmf[dev > d + tol].sum()
    at = pmf[np.abs(dev - d) <= tol].sum()
    return float(min(1.0, beyond + 0.5 * at))


def sidak(p_min: float, m: int) -> float:
    """Family-wise p of the smallest of m independent p-values: 1 - (1 - p_min)^m, stably."""
    if p_min >= 1.0:
        return 1.0
    return float(-np.expm1(m * np.log1p(-p_min)))


class _WaterBagDetector(Detector):
    scheme: "WaterBag"

    def __init__(self, scheme: "WaterBag", prefix: Sequence[int]) -> None:
        super().__init__(scheme, prefix)
        # Tokens are scored against the leading (key, list) pair, picked after seeing
        # the text, so an unwatermarked text leans slightly green on this scale.
        g = float(scheme.gamma)
        self.token_null = (g, (g * (1.0 - g)) ** 0.5)
        k = len(scheme.bag)
        self.hits = [0] * k
        self.scored = 0
        #: per pushed token: a tuple of green flags under each bag key, or None.
        self.flags: list[tuple[bool, ...] | None] = []

    def _score(self, token_id: int) -> float | None:
        list_id = self.scheme.list_id(self.ids)
        if list_id is None or (self.scheme.skip_repeated and not self.first_occurrence((list_id, token_id))):
            self.flags.append(None)
            return None
        masks = [kgw.green_mask(self.ids) for kgw in self.scheme.bag]
        flags = tuple(is_green(m, token_id) for m in masks)
        self.flags.append(flags)
        self.scored += 1
        for i, g in enumerate(flags):
            self.hits[i] += int(g)
        best, complement = self._leader()
        return 1.0 if flags[best] != complement else 0.0

    def _leader(self) -> tuple[int, bool]:
        """The (key index, indicator) whose count deviates most from the null."""
        gamma = self.scheme.gamma
        devs = [abs(h - gamma * self.scored) for h in self.hits]
        best = int(np.argmax(devs))
        return best, self.hits[best] < gamma * self.scored

    def result(self) -> Detection:
        gamma = self.scheme.gamma
        m = len(self.scheme.bag)
        if self.scored == 0:
            # no evidence either way: z = 0 like the binomial detectors (not Phi^-1(0) = -inf)
            return Detection.from_z(self.scheme.name, 0.0, tokens_scored=0,
                                    per_token=list(self.per_token), note="no token scored")
        p_keys = [two_sided_mid_p(h, self.scored, gamma) for h in self.hits]
        p = sidak(min(p_keys), m)
        best, complement = self._leader()
        per_token: list[float | None] = [
            None if f is None else (1.0 if f[best] != complement else 0.0) for f in self.flags
        ]
        hits = self.hits[best] if not complement else self.scored - self.hits[best]
        return Detection.from_p(
            self.scheme.name, p, tokens_scored=self.scored, per_token=per_token,
            statistic=float(hits),
            note=(f"bag key {best}{' (complement)' if complement else ''}: {hits}/{self.scored} green; "
                  f"Sidak over {m} keys"),
        )


@register
class WaterBag(GreenListScheme):
    name = "waterbag"
    title = "Water-Bag"
    rank = 5
    paper_columns = {1: 5}
    summary = "Water-Bag: per generation one of a bag of KGW keys and one of its two complementary lists"
    description = (
        'Water-Bag: each generation draws one of {bag_size} KGW keys (last {context_width} ids '
        'hashed) and one of its two complementary lists; the detector tries the whole bag.')

    @dataclass(frozen=True)
    class Params:
        gamma: float = 0.5
        delta: float = 2.0
        bag_size: int = 4
        context_width: int = 4
        reduction: str = "additive"
        #: Detector: score each (context, token) pair once; false = every token.
        skip_repeated: bool = True

        def __post_init__(self) -> None:
            check_fraction(self, "gamma")
            check_range(self, "delta", lo=0.0)
            # each bag key holds a KGW list (a V-sized permutation) and is tested at detection
            check_range(self, "bag_size", lo=1, hi=MAX_BAG_SIZE, integer=True)
            check_context(self)
            check_skip_repeated(self)

    def __init__(self, key: int, vocab_size: int, params: "WaterBag.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        p = self.params
        self.gamma = float(p.gamma)
        self.delta = float(p.delta)
        list_params = KGW.Params(gamma=p.gamma, delta=p.delta, context_width=p.context_width,
                                 reduction=p.reduction)
        self.bag: list[KGW] = [
            KGW(hashing.derive_seed("waterbag", self.key, i), vocab_size, list_params)
            for i in range(p.bag_size)
        ]

    def new_state(self, generation_seed: int) -> WaterBagDraw:
        draw = hashing.derive_seed("waterbag-draw", self.key, generation_seed)
        size = len(self.bag)
        return WaterBagDraw(key_index=draw % size, complement=bool((draw // size) % 2))

    def list_id(self, ids: Sequence[int]) -> Hashable | None:
        """The seeds of every bag key's list: the detector tests all of them on each token."""
        seeds = tuple(kgw.list_id(ids) for kgw in self.bag)
        return None if seeds[0] is None else seeds

    def green_mask(self, ids: Sequence[int], state: Any) -> torch.Tensor | None:
        """The drawn key's KGW list, or its complement. A ``None`` state means generation seed 0's draw."""
        draw: WaterBagDraw = state if state is not None else self.new_state(0)
        mask = self.bag[draw.key_index].green_mask(ids)
        if mask is None:
            return None
        return ~mask if draw.complement else mask

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return _WaterBagDetector(self, prefix)

    def keyed_law(self) -> KeyedLaw:
        return WaterBagLaw(self)


class WaterBagLaw(GreenListLaw):
    """A generation is served by one of the bag's KGW lists or that list's complement: 2 x bag_size
    variants, (bag key b, complement c) in that order. A random key is a bag of bag_size independent
    random lists, each with its complement, so the simulated variants keep the pairing."""

    scheme: WaterBag

    @property
    def variants(self) -> int:
        return 2 * len(self.scheme.bag)

    def compact_laws(self, text: RereadText, t: int, probs: torch.Tensor) -> torch.Tensor:
        rows = served(text, t)
        green = []
        for kgw in self.scheme.bag:  # a bag key's list serves it and its complement
            mask = served_green(kgw.green_mask(text.ids[:t]), rows)
            green += [mask, ~mask]
        return boost_green(torch.log(probs)[None], torch.stack(green), self.scheme.delta)

    def simulate_laws(self, text: RereadText, probs: torch.Tensor, rng: np.random.Generator,
                      n: int) -> torch.Tensor:
        colour = torch.as_tensor(rng.random((n, len(self.scheme.bag), *text.rows.shape)) < self.scheme.gamma)
        green = torch.stack([colour, ~colour], dim=2).flatten(1, 2)  # (n, 2 bag, T, K): (b, c) in order
        return boost_green(torch.log(probs)[None, None], green, self.scheme.delta)
