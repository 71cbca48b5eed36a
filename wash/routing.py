"""Fluency-aware routing: finishing a word that only some vocabularies can spell.

When the token sampled from the average is missing from some providers'
vocabularies, those providers could not take it as context. The word is finished
by "specialists", the providers whose vocabularies contain every token of the word
so far: at each step ONE of them is picked uniformly at random (never by
likelihood, which carries watermark signal) and samples from its own watermarked
distribution; the set narrows to providers that also have the new token.

When is a word complete? When the next token a specialist samples begins with
whitespace (space, newline, tab), punctuation or a symbol (Unicode categories P*
and S*: "." "," "$" "+"...), or is end-of-text, or the span
reaches ``MAX_ROUTED_SPAN`` tokens. That boundary token is discarded, not
committed: the next token is drawn from the full average again.
"""

from __future__ import annotations

import unicodedata
from typing import Sequence

import torch

from wash.sampling import uniform_choice


def starts_new_word(token: bytes) -> bool:
    """True when a token's text begins with whitespace, punctuation or a symbol."""
    if not token:
        return True
    text = token.decode("utf-8", errors="ignore")
    if not text:
        return False  # a continuation byte: still inside a character
    ch = text[0]
    return ch.isspace() or unicodedata.category(ch).startswith("P") or unicodedata.category(ch).startswith("S")


def specialists(candidates: Sequence[int], provider_models: Sequence[str],
                from_union: dict[str, torch.Tensor], union_id: int) -> list[int]:
    """The providers among ``candidates`` whose vocabulary contains ``union_id``."""
    return [i for i in candidates if int(from_union[provider_models[i]][union_id]) >= 0]


def pick_specialist(current: Sequence[int], generator: torch.Generator) -> int:
    """One specialist, uniformly at random."""
    return current[uniform_choice(len(current), generator)]
