"""What a provider's own model says at every position of a text: one forward, cached.

Why: a model-aware statistic weighs each token by how much the provider's watermark
could have moved that choice, which needs the provider's *served* law at each
position (the profile's mask, temperature, top-k and top-p, exactly as
``wash.engine.sampling.process_logits`` serves it during generation). Re-reading a
text costs one forward of the provider's model; under a truncating profile (the
paper's top-k 10) a position's law lives on a handful of rows, so those rows and
their served logits are all that is kept. Scoring the same text under many keys
(the null over keys, every provider of a line-up on one model) then costs no
further forward. ``served_text`` caches the result in memory and, given a folder,
on disk (one ``.npz`` per text and model).

The text is read as a third party reads it (``python -m wash detect``): its ids
under the provider's tokenizer, without the prompt, after the model's BOS where it
has one. A position with nothing before it (the first token of a BOS-less model)
has no law (``has_law`` False) and is never scored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from wash.engine.members import Member, require
from wash.engine.sampling import ServedRows, process_logits
from wash.engine.settings import profile as serving_profile
from wash.engine.vocab import served_mask

_MEMORY: dict[tuple[str, str, str], "ServedText"] = {}


@dataclass
class ServedText:
    """One text under one model and serving profile: ids and each position's served rows."""

    model: str
    profile: str
    ids: list[int]
    #: (T, K) the rows the profile keeps at each position (-1 pads a position with fewer).
    rows: np.ndarray
    #: (T, K) their served logits (float64, -inf on padding).
    logits: np.ndarray
    #: (T,) whether a law precedes the token at all.
    has_law: np.ndarray
    #: Width of the model's logits (a scheme's vocabulary size).
    vocab_size: int

    def __len__(self) -> int:
        return len(self.ids)

    def probs(self) -> np.ndarray:
        """(T, K) the served law at each position on its kept rows (0 on padding)."""
        top = np.max(self.logits, axis=1, keepdims=True)
        e = np.exp(self.logits - np.where(np.isfinite(top), top, 0.0))
        total = e.sum(axis=1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)

    def observed(self) -> np.ndarray:
        """(T,) the column of each observed token among its position's rows, -1 when it was not served."""
        hit = self.rows == np.asarray(self.ids, dtype=np.int64)[:, None]
        col = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
        return np.where(self.has_law, col, -1)

    def observed_probs(self) -> np.ndarray:
        """(T,) the served plain probability of each observed token (0: not served, or no law there)."""
        cols = self.observed()
        p = self.probs()[np.arange(len(self)), np.maximum(cols, 0)]
        return np.where(cols >= 0, p, 0.0)

    def full_row(self, t: int) -> torch.Tensor:
        """Position t's served logits over the whole vocabulary (-inf off its rows), for a scheme's own law."""
        keep = self.rows[t] >= 0
        return ServedRows.rebuild(torch.as_tensor(self.rows[t][keep]), torch.as_tensor(self.logits[t][keep]),
                                  self.vocab_size)

    def entropy(self) -> np.ndarray:
        """(T,) Shannon entropy (nats) of each position's served law (0 where there is none)."""
        p = self.probs()
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        return np.where(self.has_law, h, 0.0)

    def to_npz(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, ids=np.asarray(self.ids, dtype=np.int64), rows=self.rows, logits=self.logits,
                            has_law=self.has_law, vocab_size=self.vocab_size)
        tmp.replace(path)

    @classmethod
    def from_npz(cls, path: Path, model: str, profile: str) -> "ServedText":
        z = np.load(path)
        return cls(model=model, profile=profile, ids=[int(i) for i in z["ids"]], rows=z["rows"],
                   logits=z["logits"], has_law=z["has_law"], vocab_size=int(z["vocab_size"]))


def text_key(model: str, profile: str, text: str) -> str:
    """A file-safe name for (model, profile, text)."""
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:20]
    return f"{model}-{profile}-{digest}"


def read_text(member: Member, text: str, profile: str = "paper") -> ServedText:
    """One forward of ``member``'s model over ``text`` (after its BOS): the served rows and logits at every
    position."""
    return read_ids(member, member.encode(text), profile)


def read_ids(member: Member, ids: list[int], profile: str = "paper") -> ServedText:
    """``read_text`` of ids already in ``member``'s vocabulary; the member must give ``position_logits``."""
    lm = require(member, "position_logits", "a model-aware statistic")
    prof = serving_profile(profile)
    ids = [int(i) for i in ids]
    lead = [lm.bos_id] if lm.bos_id is not None else []
    seq = lead + ids
    T = len(ids)
    has_law = np.array([len(lead) + t > 0 for t in range(T)], dtype=bool)
    invalid = served_mask(lm.vocab)
    rows = np.full((T, 1), -1, dtype=np.int64)
    vals = np.full((T, 1), -np.inf)
    if T and len(seq) > 1:
        logits = lm.position_logits(seq[:-1])
        # logits[j] is the law of seq[j + 1]; the text's token t is seq[len(lead) + t]
        first = int(np.argmax(has_law))
        served = process_logits(logits[len(lead) - 1 + first:], invalid, prof.temperature, prof.top_p,
                                prof.top_k)
        keep = torch.isfinite(served)
        width = max(int(keep.sum(1).max()), 1)
        order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, :width]
        kept = torch.gather(keep, 1, order)
        rows = np.full((T, width), -1, dtype=np.int64)
        vals = np.full((T, width), -np.inf)
        rows[first:] = torch.where(kept, order, -1).numpy()
        vals[first:] = torch.where(kept, torch.gather(served, 1, order),
                                   torch.tensor(float("-inf"), dtype=torch.float64)).numpy()
    return ServedText(model=lm.name, profile=profile, ids=ids, rows=rows, logits=vals, has_law=has_law,
                      vocab_size=int(lm.vocab_size))


def stored_text(model: str, text: str, profile: str, cache_dir: str | Path) -> ServedText:
    """A text ``served_text`` already read and stored under ``cache_dir`` (no model needed: scoring
    under many keys can run where the model is not)."""
    return ServedText.from_npz(Path(cache_dir) / f"{text_key(model, profile, text)}.npz", model, profile)


def served_text(lm: Member, text: str, profile: str = "paper", cache_dir: str | Path | None = None) -> ServedText:
    """``read_text`` cached in memory and, given ``cache_dir``, on disk: one forward per (text, model, profile)."""
    key = (lm.name, profile, text)
    if key in _MEMORY:
        return _MEMORY[key]
    path = Path(cache_dir) / f"{text_key(lm.name, profile, text)}.npz" if cache_dir else None
    if path is not None and path.exists():
        st = ServedText.from_npz(path, lm.name, profile)
    else:
        st = read_text(lm, text, profile)
        if path is not None:
            st.to_npz(path)
    if len(_MEMORY) > 4096:
        _MEMORY.clear()
    _MEMORY[key] = st
    return st
