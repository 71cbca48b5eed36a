"""Keyed pseudo-randomness shared by every scheme: context reduction and seeded draws.

One place decides how a key and a context turn into a seed, and how a seed turns
into a permutation, a green list or a vector of uniforms. The draws use
``torch.Generator`` exactly as MarkLLM and the KGW reference code do, so a green
list built here equals theirs for the same key, context and vocabulary size: text
from our providers can be checked by their detectors and vice versa.

Draws are cached by (seed, size): a detector scoring token t under context c
needs the same green list the generator used, and contexts repeat.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

#: How the last ``width`` context ids are folded into one integer (MarkLLM's names).
CONTEXT_REDUCTIONS = ("additive", "time", "skip", "min")


def reduce_context(ids: Sequence[int], width: int, how: str, vocab_size: int) -> int:
    """Fold the last ``width`` ids into one integer in [0, vocab_size).

    ``additive`` sums them, ``time`` multiplies them, ``skip`` takes the
    ``width``-th last, ``min`` the smallest after the base permutation is applied
    by the caller (so here: the smallest id). Callers must ensure
    ``len(ids) >= width``.
    """
    tail = [int(t) for t in ids[len(ids) - width:]]
    if how == "additive":
        value = sum(tail)
    elif how == "time":
        value = 1
        for t in tail:
            value *= t
    elif how == "skip":
        value = tail[0]
    elif how == "min":
        value = min(tail)
    else:
        raise ValueError(f"unknown context reduction '{how}' (accepted: {', '.join(CONTEXT_REDUCTIONS)})")
    return value % vocab_size


def generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(int(seed) % (2**63))
    return g


@lru_cache(maxsize=8)
def base_permutation(key: int, size: int) -> torch.Tensor:
    """The per-key permutation MarkLLM's KGW applies to the reduced context value."""
    return torch.randperm(size, generator=generator(key))


@lru_cache(maxsize=128)
def _green_mask(seed: int, size: int, gamma: float) -> torch.Tensor:
    perm = torch.randperm(size, generator=generator(seed))
    # numpy's fancy assignment sets the entries in half the time of torch's index_put (the
    # permutation itself is most of a mask's cost); the mask is the same
    mask = np.zeros(size, dtype=bool)
    mask[perm[: int(size * gamma)].numpy()] = True
    return torch.from_numpy(mask)


#: Green masks and permutations kept for the length of a ``masks_kept`` block (None outside one).
_KEPT: ContextVar[dict | None] = ContextVar("green_masks_kept", default=None)


@contextmanager
def masks_kept() -> Iterator[None]:
    """Keep every green mask and permutation drawn inside the block, whatever the LRUs hold.

    Why: scoring one text with a model-aware statistic reads each position's lists
    twice, once in the scheme's own detector and once in the keyed law (Water-Bag:
    bag_size lists per position; DiPMark: one permutation), and a text has more
    positions than the LRUs keep. The block bounds the memory to one text's draws
    (tens of MB for 200 tokens of a 49,152-token vocabulary)."""
    token = _KEPT.set({})
    try:
        yield
    finally:
        _KEPT.reset(token)


def _kept(key: tuple, draw: Callable[[], torch.Tensor]) -> torch.Tensor:
    kept = _KEPT.get()
    if kept is None:
        return draw()
    if key not in kept:
        kept[key] = draw()
    return kept[key]


def green_mask(seed: int, size: int, gamma: float) -> torch.Tensor:
    """Boolean mask of the first floor(gamma * size) entries of a seeded permutation."""
    return _kept(("mask", seed, size, gamma), lambda: _green_mask(seed, size, gamma))


@lru_cache(maxsize=16)
def _permutation(seed: int, size: int) -> torch.Tensor:
    return torch.randperm(size, generator=generator(seed))


def permutation(seed: int, size: int) -> torch.Tensor:
    """A seeded permutation of range(size) (DiPMark's token order, ITS's key)."""
    return _kept(("permutation", seed, size), lambda: _permutation(seed, size))


@lru_cache(maxsize=32)
def uniforms(seed: int, size: int) -> torch.Tensor:
    """``size`` seeded uniforms in [0, 1) (AAR's r vector), float32 as torch draws them."""
    return torch.rand(size, generator=generator(seed))


def derive_seed(*parts: int | str) -> int:
    """A 63-bit seed from any tuple of ints/strings (for keys derived from a key).

    Used where no external library fixes the derivation: Water-Bag's bag of keys,
    the EXP-Edit/ITS-Edit key sequences, per-generation state draws.
    """
    text = "|".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") & (2**63 - 1)


@lru_cache(maxsize=16)
def shuffled_mask(key: int, size: int, gamma: float) -> torch.Tensor:
    """Boolean mask of floor(gamma * size) True entries, shuffled by numpy from the key.

    This is how Zhao et al.'s Unigram watermark (and MarkLLM's port of it) fixes its
    one green list: the seed is the first 4 bytes (little endian) of sha256 over the
    key as an 8-byte int64, fed to ``numpy.random.default_rng``, which shuffles a
    mask whose first floor(gamma * size) entries are True. MarkLLM hashes the
    native-endian buffer of ``np.int64(key)``; we spell out little endian, which is
    the same on every platform torch runs on. Keys outside the int64 range wrap
    modulo 2**64 (MarkLLM would reject them).
    """
    as_int64 = ((int(key) + 2**63) % 2**64) - 2**63
    digest = hashlib.sha256(as_int64.to_bytes(8, "little", signed=True)).digest()
    seed = int.from_bytes(digest[:4], "little")
    mask = np.zeros(size, dtype=bool)
    mask[: int(gamma * size)] = True
    np.random.default_rng(seed).shuffle(mask)
    return torch.from_numpy(mask)


# -- sampling family (AAR, ITS-Edit, EXP-Edit, SynthID) ------------------------
# Uncached twins of ``uniforms`` / ``permutation``: the same draws for the same
# seed, for callers that walk through hundreds of seeds once (a 420-row key
# sequence) and would only flush the shared LRU caches above.


def draw_uniforms(seed: int, size: int) -> torch.Tensor:
    """Exactly ``uniforms(seed, size)``, without caching the result."""
    return torch.rand(size, generator=generator(seed))


def draw_permutation(seed: int, size: int) -> torch.Tensor:
    """Exactly ``permutation(seed, size)``, without caching the result."""
    return torch.randperm(size, generator=generator(seed))


@lru_cache(maxsize=4)
def markllm_its_key(key: int, vocab_size: int, keylen: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(pi, u): one permutation of range(vocab_size) and ``keylen`` uniforms, as MarkLLM
    0.1.5's ITSEdit draws its key (ITS-Edit's ``permutation=shared``).

    Its detector seeds torch with the key, takes the first of ``torch.randint(2**32,
    ...)`` as the seed of a fresh generator, then draws ``randperm(vocab_size)`` and
    ``rand(keylen)`` from it, in that order (the WASH release draws the same two
    things from a generator seeded with the key itself, uniforms first). Same key,
    size and length, same (pi, u): MarkLLM's ITSEdit text reads under our detector
    and ours under its.
    """
    seed = int(torch.randint(2**32, (1,), generator=generator(key))[0])
    g = generator(seed)
    pi = torch.randperm(vocab_size, generator=g)
    return pi, torch.rand(keylen, generator=g)


@lru_cache(maxsize=8)
def random_bits(seed: int, size: int) -> torch.Tensor:
    """``size`` seeded fair bits (int64 0/1): SynthID's g-value sampling table.

    ``torch.randint(0, 2)`` from a CPU generator seeded with ``seed``, which is how
    transformers' ``SynthIDTextWatermarkLogitsProcessor`` builds its table from
    ``sampling_table_seed``, so the same seed gives the same table.
    """
    return torch.randint(0, 2, (size,), generator=generator(seed))


#: Multiplier and increment of the linear congruential hash SynthID folds n-grams
#: and layer keys with (newlib/musl LCG constants, as in transformers).
LCG_MULTIPLIER = 6364136223846793005
LCG_INCREMENT = 1


def lcg_fold(state: torch.Tensor, value: torch.Tensor | int) -> torch.Tensor:
    """One step of SynthID's n-gram hash: ``(state + value) * A + 1`` in wrapping int64.

    Broadcasts like ``+``; folding tokens one by one gives the hash of an n-gram,
    folding a layer key after that gives the key of one tournament layer. int64
    overflow wraps (two's complement), as in transformers' implementation.
    """
    return (state + value) * LCG_MULTIPLIER + LCG_INCREMENT
