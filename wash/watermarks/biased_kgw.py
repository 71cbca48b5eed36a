"""The WASH paper's "biased" green-list watermark (Appendix C): one green list everywhere.

Purpose: stress-test the paper's zero-mean assumption. WASH's guarantee needs each
provider's perturbation delta_i(v | x) to average to nothing across providers:
with KGW and independent secret keys a token is green for a provider with
probability gamma in every context, so E_i[delta_i(v)] is the same for every v
and the average of the providers' distributions converges to the base model.

This scheme breaks that on purpose. Its green list does not depend on the
context at all (a fixed set of tokens is always promoted by ``bias``), and the
experiment gives every provider the *same* key. Then delta_i is identical for all
providers, E_i[delta_i(v)] = bias * 1[v green] - const != 0, and averaging cannot
remove it: the ensemble keeps a residual bias B(x) (the paper's grouped-setting
bound), so detection z-scores fall under WASH but do not reach zero. The paper
sweeps ``bias`` from 2 to 10.

Implementation: KGW with a context width of 0. MarkLLM's additive reduction of an
empty context is 0, so the fixed list is KGW's list for f = prf[0]; MarkLLM's KGW
configured with prefix_length 0 and f_scheme "additive" (delta = bias) therefore
generates this watermark exactly and, with ``skip_repeated=false``, scores it
exactly as we do. By default each distinct token id is scored once, KGW's
``skip_repeated`` rule with a context of width 0 (one list, so a (list, token)
pair is a token): with one list for every context a recurring word is green or
red every time, which inflates the all-token count's null variance on ordinary
text (see ``unigram``). ``unique``, the parameter's former name, is still accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from wash.watermarks.registry import register
from wash.watermarks.base import check_range
from wash.watermarks.greenlist import check_fraction, check_skip_repeated
from wash.watermarks.kgw import KGW


@register
class BiasedKGW(KGW):
    name = "biased-kgw"
    published = False  # the paper's construction (App. C), not a watermark of the literature
    summary = "one fixed, context-free green list (+bias): breaks the zero-mean assumption (paper App. C)"
    description = (
        'a stress test (paper App. C): one fixed green list that every key partly shares gets '
        '+{bias:g}, so the perturbations do not average to zero across providers.')
    param_aliases = {"unique": "skip_repeated"}

    @dataclass(frozen=True)
    class Params:
        bias: float = 2.0
        gamma: float = 0.5
        #: count each distinct token once (as ``unigram``); false = KGW's all-token count
        skip_repeated: bool = True

        def __post_init__(self) -> None:
            check_range(self, "bias", lo=0.0)  # a logit boost, as KGW's delta
            check_fraction(self, "gamma")
            check_skip_repeated(self)

    def __init__(self, key: int, vocab_size: int, params: "BiasedKGW.Params | None" = None) -> None:
        # Skip KGW.__init__'s reading of KGW.Params; configure the same machinery directly.
        super(KGW, self).__init__(key, vocab_size, params)
        p = self.params
        self._configure(gamma=p.gamma, delta=p.bias, context_width=0, reduction="additive")
