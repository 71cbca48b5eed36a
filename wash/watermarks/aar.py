"""AAR: Aaronson's Gumbel-max watermark (MarkLLM calls it EXP).

Why it is a point mass: at each step the provider draws a keyed vector r of V
uniforms, seeded by ``key * (product of the last 4 ids mod V)`` (MarkLLM's "time"
context reduction, ``hashing.reduce_context``), and emits
``argmax_t r_t ** (1 / p_t)`` over the (temperature / top-p processed) base
distribution p. Given the key and the context that choice is deterministic, so the
provider's next-token law p_i is a one-hot vector on that token
(``point_mass = True``; *Forms* below has the release's soft law). Over a
uniformly random key the r_t are i.i.d. uniform and ``argmax r_t ** (1/p_t) =
argmin E_t / p_t`` with E_t = -log r_t ~ Exp(1): an exponential race that token t
wins with probability exactly p_t. The scheme is
therefore unbiased over keys, and an average of several independently keyed AAR
providers tends to the base distribution, which is what WASH exploits.

We evaluate the rule as ``argmax log(r_t) / p_t`` in float64 (the same argmax as
MarkLLM's ``r ** (1/p)``, without float32 underflow for small p); tokens with p = 0
(``-inf`` logits) score ``-inf`` and are never picked.

Detection (MarkLLM's and Aaronson's): each token with at least ``context_width``
ids before it scores ``-log(1 - r_token)``, which is Exp(1) under the null, so the
sum S of n scores is Gamma(n, 1) and ``p = P(Gamma(n, 1) >= S)``
(``scoring.gamma_sum_p``), ``z = Phi^-1(1 - p)``. ``push`` costs O(1) in the text
length (one keyed draw, running sums).

Deviation from MarkLLM, on by default (``skip_repeated``): a (seed, token) pair
that was already scored is not scored again. Its score is a deterministic
function of that pair, so a repeated pair adds a copy of an earlier score, not
fresh evidence; counting it breaks the i.i.d. Exp(1) null and looping text (small
models loop) would otherwise reach large |z| without any watermark. Generation is
unaffected, so MarkLLM's detector still reads our text and ours reads MarkLLM's;
``skip_repeated=false`` gives MarkLLM's exact score.

Forms (``form``). ``gumbel`` (default) is the rule above, the original paper's
and MarkLLM's point mass. ``soft`` serves the law q_t = r_t ** (1/p_t) / sum_s
r_s ** (1/p_s) and the engine samples from it: that is what the WASH release's AAR
(``F.normalize(u ** (1/p), p=1)``, then sampled) and Water-Probe's samplers serve,
so the paper's numbers were measured on it. It matters for WASH: averaged with
N - 1 others, a point mass keeps 1/N of the mixture on one keyed token at every
step, while the soft law spreads its keyed preference over the candidates, a
smaller perturbation that averages out differently. ``soft`` is computed as the
softmax of log(r)/p (``race.race_law``), the exact law without the release's
float32 underflow. Two properties differ from ``gumbel``: it is not a point mass
(``point_mass`` is False), and it is *not* unbiased over keys: averaged over keys
it is flatter than p (p = (0.6, 0.25, 0.1, 0.05) gives (0.562, 0.268, 0.113,
0.057), 200,000 keys; tested). The detector is the same for both forms: it reads
r at the observed token, and the soft law still favours tokens with large r.

Detectors (``detector``). ``ours`` (default) is the Gamma tail above. ``release``
is the WASH release's test (its ``aar_detector.py``): a t statistic
z = (mean - 1) / (s / sqrt(n)) of the per-token scores, with the empirical sd s
(ddof 1), read as Gaussian (``scoring.mean_t_z``). As the release, it scores every
token with a full context, repeats included: the release's detector has no rule
for repeated (seed, token) pairs, so ``skip_repeated`` applies to ``ours`` only.
The t statistic of Exp(1) scores is left-skewed, so its Gaussian reading is
conservative from about 10 scored tokens on (simulated P(z > 4): 1e-5 at
n = 10-20, 0 of 200,000 at n = 40) but not on a handful: 0.8 % at n = 3,
0.1 % at n = 5, where a live trace can spike.

Known property inherited from MarkLLM's seeding: when the context product is
0 mod V (a 0 id in the context, or a product divisible by V) the seed is 0 for
every key, so all AAR providers share r at that step. It is rare and kept for
interoperability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import (BOOL, DETECTOR_VARIANTS, Detection, Detector, WatermarkScheme, check_choice,
                                  check_range, softmax)
from wash.watermarks.laws import KeyedLaw
from wash.watermarks.race import RACE_FORMS, ContextRaceLaw, race_law
from wash.watermarks.scoring import gamma_sum_p, mean_t_z

#: Reduction of the last ``context_width`` ids, as MarkLLM's EXP.
_REDUCTION = "time"


@register
class AAR(WatermarkScheme):
    name = "aar"
    title = "AAR"
    rank = 1
    paper_columns = {1: 0, 2: 2}
    form_param = "form"
    release_form = "soft"
    summary = "Aaronson / EXP: keyed Gumbel-max sampling; Gamma-tail detection"
    description = (
        'Aaronson: the token is picked by a keyed Gumbel-max rule seeded by the last '
        '{context_width} ids, so each step is a point mass. The detector sums the keyed scores of'
        ' the observed tokens. With form=soft it serves the WASH release\'s soft law (r^(1/p), normalised, then'
        ' sampled) instead of the point mass.')
    point_mass = True

    @dataclass(frozen=True)
    class Params:
        #: Ids hashed into each step's seed (MarkLLM's ``prefix_length``).
        context_width: int = 4
        #: Detector ``ours``: score each (seed, token) pair once (see module docstring).
        skip_repeated: bool = True
        #: ``gumbel``: the point mass on argmax r ** (1/p); ``soft``: the law r ** (1/p), normalised.
        form: str = "gumbel"
        #: ``ours``: the Gamma tail of the score sum; ``release``: the WASH release's t statistic.
        detector: str = "ours"

        def __post_init__(self) -> None:
            check_range(self, "context_width", lo=1, integer=True)
            check_choice(self, "skip_repeated", BOOL)
            check_choice(self, "form", RACE_FORMS)
            check_choice(self, "detector", DETECTOR_VARIANTS)

    def __init__(self, key: int, vocab_size: int, params: "AAR.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        self.point_mass = self.params.form == "gumbel"

    def seed_for(self, ids: Sequence[int]) -> int | None:
        """This step's seed, or ``None`` when fewer than ``context_width`` ids precede it."""
        width = self.params.context_width
        if len(ids) < width:
            return None
        return self.key * hashing.reduce_context(ids, width, _REDUCTION, self.vocab_size)

    def keyed_uniforms(self, ids: Sequence[int]) -> torch.Tensor:
        """The r vector the rule uses after ``ids``.

        With a too-short context (the first tokens of a prompt-less generation) the
        draw is seeded from the key and the whole context instead, so the step is
        still a keyed point mass, unbiased over keys; the detector never scores it.
        """
        seed = self.seed_for(ids)
        if seed is None:
            return hashing.uniforms(hashing.derive_seed(self.name, "short", self.key, *ids), self.vocab_size)
        return hashing.uniforms(seed, self.vocab_size)

    def distribution(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int,
                     state: Any) -> torch.Tensor:
        if logits.shape[-1] != self.vocab_size:
            raise ValueError(f"aar: logits have {logits.shape[-1]} entries, scheme expects {self.vocab_size}")
        # log(r)/p: -inf where p == 0 (log r < 0 for r in [0, 1)), so masked tokens get nothing.
        return race_law(softmax(logits), self.keyed_uniforms(ids), self.params.form)

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        if self.params.detector == "release":
            return _AARReleaseDetector(self, prefix)
        return _AARDetector(self, prefix)

    def keyed_law(self) -> KeyedLaw:
        return ContextRaceLaw(self)


class _AARDetector(Detector):
    scheme: AAR

    #: A token's score -log(1 - r) with r uniform is Exp(1) without the key's influence.
    token_null = (1.0, 1.0)
    exp_scores = True

    def __init__(self, scheme: AAR, prefix: Sequence[int] = ()) -> None:
        super().__init__(scheme, prefix)
        #: Score each (seed, token) pair once (``skip_repeated``; the release's test never skips).
        self.skips_repeats = bool(scheme.params.skip_repeated)
        self.total = 0.0
        self.total_sq = 0.0
        self.n = 0

    def _score(self, token_id: int) -> float | None:
        seed = self.scheme.seed_for(self.ids)
        if seed is None:
            return None
        if self.skips_repeats and not self.first_occurrence((seed, token_id)):
            return None
        r = float(hashing.uniforms(seed, self.scheme.vocab_size)[token_id])
        score = -math.log1p(-r)
        self.total += score
        self.total_sq += score * score
        self.n += 1
        return score

    def result(self) -> Detection:
        if self.n == 0:
            return Detection.from_z(self.scheme.name, 0.0, tokens_scored=0, per_token=list(self.per_token),
                                    note="no token with a full context yet")
        p = gamma_sum_p(self.total, self.n)
        return Detection.from_p(
            self.scheme.name, p, tokens_scored=self.n, per_token=list(self.per_token),
            statistic=self.total,
            note=f"sum of -log(1-r) over {self.n} tokens; null Gamma({self.n}, 1)",
        )


class _AARReleaseDetector(_AARDetector):
    """The WASH release's AAR test on the same scores: a t statistic.

    z = (mean - 1) / (s / sqrt(n)) with s the empirical sd of the n scores (ddof 1),
    p = 1 - Phi(z) (``scoring.mean_t_z``). Every token with ``context_width`` ids before
    it is scored, repeated (seed, token) pairs included, as the release's detector
    scores them (it has no repeat rule); ``skip_repeated`` does not apply.
    """

    exp_scores = False  # higher criticism is offered beside our test only

    def __init__(self, scheme: AAR, prefix: Sequence[int] = ()) -> None:
        super().__init__(scheme, prefix)
        self.skips_repeats = False

    def result(self) -> Detection:
        if self.n == 0:
            return Detection.from_z(self.scheme.name, 0.0, tokens_scored=0, per_token=list(self.per_token),
                                    note="no token with a full context yet")
        z, sd = mean_t_z(self.total, self.total_sq, self.n, null_mean=1.0)
        return Detection.from_z(
            self.scheme.name, z, tokens_scored=self.n, per_token=list(self.per_token),
            statistic=self.total / self.n,
            note=(f"release t statistic: mean of -log(1-r) {self.total / self.n:.4g} over {self.n} tokens, "
                  f"empirical sd {sd:.4g}; z = (mean - 1) / (sd / sqrt(n)) read as Gaussian"),
        )
