"""EXP-Edit (Kuditipudi et al. 2023): exponential-minimum sampling with a fixed key sequence.

Key element k is a vector xi_k of V uniforms. The provider emits
``argmax_t log(xi_k[t]) / p_t`` (= argmax xi_k[t] ** (1/p_t), evaluated in logs so
small p do not underflow; p_t = 0 never wins). Like AAR this is an exponential
race: deterministic given key and position, so p_i is a point mass
(``point_mass = True``), and over a random key token t wins with probability
exactly p_t, so the scheme is unbiased over keys. Unlike AAR the randomness is
indexed by the position in the generation (plus a per-generation offset), not by
the context; see ``keyseq`` for the key sequence and the alignment test.

Forms (``form``), as AAR's (``race.race_law``): ``gumbel`` (default) is the point
mass above, the paper's and MarkLLM's EXPEdit rule. ``soft`` serves the law
xi_k[t] ** (1/p_t) / sum_s xi_k[s] ** (1/p_s), sampled: what the WASH release's
EXP-Edit ("kth": ``xi[(shift + count) % keylen] ** (1/p)``, L1-normalised, a random
shift per generation, the index advancing per token, as our offset and key index
do) and Water-Probe's sampler serve. A point mass keeps 1/N of the WASH average on
one keyed token; the soft law spreads it, and like AAR's soft law it is flatter
than p on average over keys, not unbiased. The detector is the same for both forms.

Detectors (``detector``): ``ours`` (default) is the Gumbel-tail z below (see
``keyseq``); ``release`` is the WASH release's verdict on the same statistic (its
``kth_detector.py``: the same alignment cost log(1 - xi), gap 0, every shift, T
random key sequences): the permutation p-value (1 + #{random keys at or below}) /
(T + 1) alone, ``keyseq.release_detection``. With T = 100 it cannot go below
1/101, z = 2.33: it never crosses z = 4; the release's own line is p < 0.05.

Matching cost (their ``gumbel_edit_score``): cost(y, xi_l) = log(1 - xi_l[y]) <= 0,
very negative when the token was chosen because its uniform was large. Gap
penalty gamma = 0.0, the value their experiments use for EXP-edit (and MarkLLM's
EXPEdit). Under random keys xi_l[y] is uniform, independently for each (l, distinct
token), which is how ``null_cost`` draws it.

Not interoperable with MarkLLM's EXPEdit on purpose: MarkLLM draws all 420 x V
uniforms from a pure-Python Mersenne twister seeded with the key (minutes for a
large vocabulary); we derive each row from ``hashing`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import check_choice
from wash.watermarks.keyseq import EditScheme
from wash.watermarks.race import RACE_FORMS, race_law, race_winner


@register
class EXPEdit(EditScheme):
    name = "exp-edit"
    title = "EXP-Edit"
    rank = 3
    paper_columns = {1: 4, 2: 4}
    form_param = "form"
    release_form = "soft"
    summary = "Kuditipudi EXP-edit: exponential-minimum sampling on a 420-long key sequence"
    description = (
        'Kuditipudi et al. EXP-Edit: exponential-minimum sampling on a secret sequence of '
        '{keylen} keyed numbers, so each step is a point mass; the detector aligns the text with '
        'the sequence (edit-robust) and calibrates by permutation. With form=soft it serves the WASH '
        'release\'s soft law (xi^(1/p), normalised, then sampled) instead of the point mass.')

    @dataclass(frozen=True)
    class Params(EditScheme.Params):
        keylen: int = 420
        gamma: float = 0.0
        n_permutations: int = 100
        #: ``gumbel``: the point mass on argmax xi_k ** (1/p); ``soft``: the law xi_k ** (1/p), normalised.
        form: str = "gumbel"

        def __post_init__(self) -> None:
            super().__post_init__()
            check_choice(self, "form", RACE_FORMS)

    def __init__(self, key: int, vocab_size: int, params: "EXPEdit.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        self.point_mass = self.params.form == "gumbel"

    def _draw_row(self, k: int) -> torch.Tensor:
        return hashing.draw_uniforms(self.row_seed(k), self.vocab_size)

    def _row_values(self, row: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return row[tokens]

    def _law(self, probs: torch.Tensor, k: int) -> torch.Tensor:
        return race_law(probs, self.row(k), self.params.form)

    def _pick(self, probs: torch.Tensor, k: int) -> int:
        return int(race_winner(probs, self.row(k)))

    def element_picks(self, probs: torch.Tensor, table: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return race_winner(probs, torch.where(valid, table, 0.0))  # padding draws u = 0: it never wins

    def observed_cost(self, unique_tokens: torch.Tensor) -> torch.Tensor:
        return torch.log1p(-self.key_values(unique_tokens.tolist()))

    def null_cost(self, n_unique: int, n_keys: int, gen: torch.Generator) -> torch.Tensor:
        return torch.log1p(-torch.rand(n_keys, self.params.keylen, n_unique, generator=gen))
