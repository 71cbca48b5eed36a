"""What a scheme declares for the model-aware statistics: its keyed law on a re-read text, batched.

The statistics (``wash.detection.statistics``) re-read a text with the provider's model
and need, at each position, the scheme's watermarked law on the rows the model served:
under the provider's key (the observed ratio) and under many random keys (its null).
That law is the scheme's own perturbation, so it is written once, in the scheme's module
or its family's (``greenlist``, ``race``, ``dipmark``, ``synthid``, ``keyseq``), with the
same batched function the scheme's ``distribution`` calls; a scheme hands it out with
``WatermarkScheme.keyed_law`` and the statistics never name a scheme.

Two kinds, because the null is drawn two ways:

* ``KeyedLaw``: a law over a position's served rows (``compact_laws``) and the same law
  under n random keys (``simulate_laws``), for the statistics to gather at the observed
  token;
* ``KeyedPicks``: a point mass per variant whose random-key null is known in closed form
  (it picks the observed token with probability p(x_t)): only which served row each
  variant picks (the Edit schemes' key offsets).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol, Sequence

import numpy as np
import torch


class RereadText(Protocol):
    """A text as a provider's model re-read it (``wash.detection.statistics.served_text.ServedText``)."""

    #: The text's token ids.
    ids: Sequence[int]
    #: (T, K) the rows served at each position, -1 padding a position with fewer.
    rows: np.ndarray

    def __len__(self) -> int: ...

    def probs(self) -> np.ndarray:
        """(T, K) the served law on each position's rows (0 on padding)."""

    def full_row(self, t: int) -> torch.Tensor:
        """Position t's served logits over the whole vocabulary (-inf off its rows)."""


def served(text: RereadText, t: int) -> torch.Tensor:
    """Position t's served rows (token ids), padding dropped: the order ``compact_laws`` answers in."""
    return torch.as_tensor(text.rows[t][text.rows[t] >= 0])


class KeyedLaw(ABC):
    """One scheme's watermarked law over a position's served rows, under its key and under random keys.

    A generation may have been served by one of J keyed laws (Water-Bag draws one of
    its bag's lists per generation): every answer then has a variant axis of length J.
    """

    def __init__(self, scheme: Any) -> None:
        self.scheme = scheme

    @property
    def variants(self) -> int:
        """J: how many keyed laws a generation may have drawn."""
        return 1

    @abstractmethod
    def compact_laws(self, text: RereadText, t: int, probs: torch.Tensor) -> torch.Tensor:
        """(J, K') each variant's law at position t on its K' served rows (``served``), given their
        plain law ``probs``."""

    @abstractmethod
    def simulate_laws(self, text: RereadText, probs: torch.Tensor, rng: np.random.Generator,
                      n: int) -> torch.Tensor:
        """(n, T, K) the law under n random keys, or (n, J, T, K) with a variant axis, from the (T, K)
        plain laws ``probs`` (0 on padding)."""


class KeyedPicks(ABC):
    """A keyed point mass per variant: which of a position's served rows each variant's law picks.

    Under a random key a variant picks the observed token with probability exactly its
    plain probability (the law is unbiased over keys), which is all its null needs.
    """

    def __init__(self, scheme: Any) -> None:
        self.scheme = scheme

    @property
    @abstractmethod
    def variants(self) -> int:
        """J: how many keyed laws a generation may have drawn."""

    @abstractmethod
    def picks(self, text: RereadText) -> np.ndarray:
        """(J, T) the column among position t's served rows that variant j's law puts its mass on."""
