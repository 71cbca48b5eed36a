"""Unigram (Zhao et al. 2023, "Provable robust watermarking"): one green list per key.

KGW's list changes with the context, so editing a word also scrambles the lists
of the next few tokens. Unigram drops the context: one fixed green list (a
fraction gamma of the vocabulary, default 0.5) gets +delta (default 2.0) at every
position. Detection counts green tokens with KGW's binomial z (no context needed, so even
the first token is scored); robustness to edits is what it buys, at the price of
a list an observer can learn from enough text. Because the list is fixed, a
recurring word is green (or red) at every occurrence, which inflates the
all-token count's variance on ordinary text (null sd about 1.3 at 50 tokens);
so by default each distinct token id is counted once, as in the authors' later
``unidetect``: the shared ``skip_repeated`` rule of the green-list schemes (see
``greenlist``), for which one fixed list makes a (list, token) pair a token.
``skip_repeated=false`` (formerly ``unique=false``, still accepted) counts every
token, exactly like MarkLLM's detector (our z then equals MarkLLM's score for
the same token ids).

The list is derived exactly as MarkLLM's Unigram does it (``hashing.shuffled_mask``:
numpy's default_rng seeded from sha256 of the int64 key shuffles a mask), so
MarkLLM's detector recognises our providers' text for the same key and gamma,
and ours recognises MarkLLM's.

Unlike ``biased-kgw`` the key is secret per provider, so across independent
providers each token is green with probability gamma: still zero-mean for WASH.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence

import torch

from wash.watermarks import hashing
from wash.watermarks.registry import register
from wash.watermarks.base import check_range
from wash.watermarks.greenlist import GreenListScheme, check_fraction, check_skip_repeated


@register
class Unigram(GreenListScheme):
    name = "unigram"
    title = "Unigram"
    rank = 6
    summary = "Zhao et al. fixed green list per key (+delta on green), context-free"
    description = (
        'Zhao et al.: one fixed green {gamma:.0%} of the vocabulary per key, independent of '
        'context, gets +{delta:g} on its logits. The detector counts distinct green tokens.')
    param_aliases = {"unique": "skip_repeated"}

    @dataclass(frozen=True)
    class Params:
        gamma: float = 0.5
        delta: float = 2.0
        #: count each distinct token once (Zhao et al.'s unidetect); false = MarkLLM's all-token count
        skip_repeated: bool = True

        def __post_init__(self) -> None:
            check_fraction(self, "gamma")
            check_range(self, "delta", lo=0.0)
            check_skip_repeated(self)

    def __init__(self, key: int, vocab_size: int, params: "Unigram.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        self.gamma = float(self.params.gamma)
        self.delta = float(self.params.delta)
        self._mask = hashing.shuffled_mask(self.key, self.vocab_size, self.gamma)

    def list_id(self, ids: Sequence[int]) -> Hashable:
        """One list for every position (even the first): a (list, token) pair is a token."""
        return 0

    def green_mask(self, ids: Sequence[int], state: Any = None) -> torch.Tensor:
        return self._mask
