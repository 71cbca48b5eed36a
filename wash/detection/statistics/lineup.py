"""The line-up's other base models at each of a provider's tokens: q for the line-up-aware ratio.

Why: under WASH a token provider i did not serve was drawn from the average of the
other providers' laws, q. ``lr-mix`` scores (1 - w) + w p_wm / p, the mixture likelihood
ratio only where q = p (every provider on provider i's own base model). A detector that
knows the line-up's public base models (not the others' keys or schemes, nothing beyond
the line-up) re-reads the text with each of them and scores the exact ratio
(w p_wm + (1 - w) q) / (w p + (1 - w) q): ``tests.ratio_terms`` from rho = p_wm / p and
r = q / p; this module gives r.

q at provider i's token t is the mean over the line-up's other slots j of q_j(x_t): slot
j's base model's served, unwatermarked probability of the token. An unbiased scheme's
law averaged over its unknown key is its plain law, so this is what the others serve on
average over their keys. A slot on provider i's own base model has q_j = p exactly (the
same rows and logits). A slot on another model reads the text in its own tokenisation,
so the positions are aligned on bytes:

* provider i's token t spans bytes [B_t, E_t) of the text (``byte_spans``, from each
  model's token bytes, ``wash.engine.vocab``);
* where model j's tokenisation has token boundaries at both B_t and E_t (and the bytes
  before E_t agree), q_j(x_t) is the product of model j's served probabilities of its
  tokens between them: one token where the two tokenizers cut the same way; otherwise
  its probability of those bytes along its own tokenisation, at the context it reads;
* anywhere else (a token of model j crosses B_t or E_t, a position without a law),
  q_j falls back to p(x_t): lr-mix's term for that slot there. ``LineupRatio`` counts the
  (slot, token) pairs of each kind;
* an aligned q_j is trusted at 1 - ``DEFENSIVE``: q_j' = (1 - DEFENSIVE) q_j + DEFENSIVE p.

Why the defensive share: q_j is not the law the token was drawn from. The generation's
contexts were its own union-token sequence, not each model's tokenisation of the
finished text, and a routed span (``wash.engine.routing``) was written by specialists,
not by the average. A token outside a model's served rows (the profile's top-k) gets
q_j = 0, and where every other slot is on another model a token the keyed law cannot
give (AAR's race lost: rho = 0) would then make the whole text impossible under the
alternative (log ratio -inf at every w), however watermarked the rest. The share is
fixed here, not fitted to watermarked text; it bounds r below by DEFENSIVE times the
other-model slots' share, and leaves a slot on provider i's own model exact.

The null is unchanged: r depends on the text and the models, not on provider i's key, so
the key simulation lr-mix uses (its very draws, ``keyed``) gives a valid p whatever q is;
an approximate q costs power, not calibration.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from wash.detection.statistics.served_text import ServedText, served_text, stored_text
from wash.engine.members import Member, require

#: The share of provider i's own plain law mixed into each aligned other-model q_j (see the module docstring).
DEFENSIVE = 0.1


@dataclass(frozen=True)
class ReadBy:
    """A text as one base model re-read it, with the bytes each of that model's rows spells."""

    served: ServedText
    #: ``ModelVocab.token_bytes`` of the model (``None``: a row that is no text).
    token_bytes: Sequence[bytes | None]


@dataclass(frozen=True)
class LineupRatio:
    """r_t = q(x_t) / p(x_t) at each of provider i's tokens, and where q came from."""

    r: np.ndarray
    #: The other slots of the line-up, and how many of them are on provider i's own base model.
    slots: int
    same_model: int
    #: (slot, token) pairs of the other-model slots over the served tokens: q_j from that model's
    #: law at matching boundaries, or the fallback to p.
    matched: int
    fallback: int

    def note(self) -> str:
        other = self.matched + self.fallback
        share = (f"{self.matched} of {other} (slot, token) pairs aligned" if other
                 else "no slot on another model")
        return f"q over {self.slots} other slots ({self.same_model} on this model; {share}, the rest q = p)"


def byte_spans(ids: Sequence[int],
               token_bytes: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray, bytes]:
    """(starts, ends, text): each token's byte offsets in the concatenation of the tokens' bytes."""
    pieces = [token_bytes[int(i)] or b"" for i in ids]
    lengths = np.fromiter((len(b) for b in pieces), dtype=np.int64, count=len(pieces))
    ends = np.cumsum(lengths)
    return ends - lengths, ends, b"".join(pieces)


def _agreeing_bytes(a: bytes, b: bytes) -> int:
    """Length of the common prefix of two byte strings."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    diff = np.flatnonzero(np.frombuffer(a[:n], np.uint8) != np.frombuffer(b[:n], np.uint8))
    return int(diff[0])


def slot_law(target: ReadBy, other: ReadBy) -> np.ndarray:
    """(T,) q_j(x_t) at each of ``target``'s tokens from ``other``'s re-read; NaN where no boundary pair
    matches.

    q_j is the product of ``other``'s served probabilities of its tokens between the byte
    offsets where ``target``'s token starts and ends (0 if one of them was not served)."""
    t_start, t_end, t_text = byte_spans(target.served.ids, target.token_bytes)
    o_start, o_end, o_text = byte_spans(other.served.ids, other.token_bytes)
    out = np.full(len(t_start), np.nan)
    if not len(o_start) or not len(t_start):
        return out
    bounds = np.r_[o_start, o_end[-1]]  # other's token boundaries: token s starts at bounds[s]
    s0 = np.minimum(np.searchsorted(bounds, t_start, side="left"), len(bounds) - 1)
    s1 = np.minimum(np.searchsorted(bounds, t_end, side="left"), len(bounds) - 1)
    agree = _agreeing_bytes(t_text, o_text)
    aligned = (bounds[s0] == t_start) & (bounds[s1] == t_end) & (s1 > s0) & (t_end <= agree)
    p = other.served.observed_probs()
    law = other.served.has_law
    with np.errstate(divide="ignore"):
        logs = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)
    csum = np.r_[0.0, np.cumsum(logs)]
    zeros = np.r_[0, np.cumsum(law & (p == 0))]
    lawless = np.r_[0, np.cumsum(~law)]
    ok = aligned & (lawless[s1] == lawless[s0])
    product = np.where(zeros[s1] > zeros[s0], 0.0, np.exp(csum[s1] - csum[s0]))
    out[ok] = product[ok]
    return out


def lineup_ratio(target: ReadBy, others: Sequence[ReadBy]) -> LineupRatio:
    """r = q / p at ``target``'s tokens, q the mean over ``others`` (the line-up's other slots, one entry
    each; a slot on ``target``'s base model gives q_j = p). No other slot: r = 1, the ratio is lr-mix's."""
    p = target.served.observed_probs()
    served = p > 0
    same = sum(o.served.model == target.served.model for o in others)
    total = np.full(len(p), float(same))  # sum over slots of q_j / p: 1 per slot on the same model
    matched = fallback = 0
    for o in others:
        if o.served.model == target.served.model:
            continue
        q = slot_law(target, o)
        miss = np.isnan(q)
        with np.errstate(divide="ignore", invalid="ignore"):
            trusted = (1.0 - DEFENSIVE) * q / np.where(served, p, 1.0) + DEFENSIVE
            total += np.where(miss | ~served, 1.0, trusted)
        matched += int((~miss & served).sum())
        fallback += int((miss & served).sum())
    r = total / len(others) if others else np.ones(len(p))
    return LineupRatio(r=np.where(served, r, 1.0), slots=len(others), same_model=same, matched=matched,
                       fallback=fallback)


def read_lineup(member: Member, text: str, others: Sequence[Member], profile: str = "paper",
                cache_dir: str | Path | None = None) -> LineupRatio:
    """``lineup_ratio`` of ``text`` for the provider on ``member``, the line-up's other slots on ``others``
    (one member per slot): each distinct model re-reads the text once (``served_text``, cached).

    Every member must give ``position_logits``; a member that does not is refused in one line
    before any forward."""
    for m in (member, *others):
        require(m, "position_logits", "the line-up-aware ratio 'lr-lineup'")

    def read(m: Member) -> ReadBy:
        return ReadBy(served_text(m, text, profile, cache_dir), m.vocab.token_bytes)

    return lineup_ratio(read(member), [read(m) for m in others])


@lru_cache(maxsize=None)
def tokenizer_bytes(model: str) -> tuple[bytes | None, ...]:
    """The bytes each row of ``model``'s tokenizer spells (``wash.engine.vocab``), without its weights."""
    from wash.engine.models import load_tokenizer
    from wash.engine.vocab import build_model_vocab

    tokenizer = load_tokenizer(model)
    return build_model_vocab(model, tokenizer, len(tokenizer), frozenset()).token_bytes


def stored_lineup(text: str, model: str, others: Sequence[str], profile: str,
                  cache_dir: str | Path) -> LineupRatio:
    """``lineup_ratio`` from the reads ``served_text`` stored under ``cache_dir``: the provider on ``model``,
    the line-up's other slots on ``others`` (one model name per slot). No model is loaded, only tokenizers."""
    def read(m: str) -> ReadBy:
        return ReadBy(stored_text(m, text, profile, cache_dir), tokenizer_bytes(m))

    own = read(model)
    return lineup_ratio(own, [own if m == model else read(m) for m in others])
