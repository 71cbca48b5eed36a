"""Base-logit processing and seeded draws.

Temperature, top-k and top-p shape the *base* logits before any watermark is
applied: that is how a provider serves its model (the watermark sees the
distribution the user asked for). The order is the one transformers' sampling
uses: mask, temperature, top-k, top-p. Every random draw of a generation goes through one
``torch.Generator``, so a seed fixes the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


def process_logits(logits: torch.Tensor, invalid: torch.Tensor, temperature: float, top_p: float,
                   top_k: int = 0) -> torch.Tensor:
    """Raw logits as the engine serves them: mask, temperature (0 = greedy), top-k (0 = off), top-p.

    The one serving function: generation, the baselines and the statistics' re-reading
    all call it, so a text is read back under exactly the law it was drawn from.
    ``logits`` is one row (V,) or a batch (T, V) under the same ``invalid`` (V,), as
    ``vocab.served_mask`` builds it; float64 out. Top-k keeps every row tied with
    the k-th largest logit, so the kept set never depends on how a sort breaks ties.

    A batch goes through the mask, temperature, greedy and top-k at once: they act
    element by element or through the k-th largest value, which is the same number
    however many rows are read together. Top-p's softmax and cumulative sum go row by
    row, since a batched reduction need not add in the same order.
    """
    # Out of place: ``to`` returns ``logits`` itself when it is already float64, and the
    # caller's cached logits must stay untouched.
    if invalid.device != logits.device:  # a host mask for logits on a GPU: queued, never waited for
        invalid = invalid.to(logits.device, non_blocking=True)
    x = logits.to(torch.float64).masked_fill(invalid, float("-inf"))
    if temperature <= 0.0:
        # argmax takes the first of tied maxima, a row alone or in a batch
        return torch.full_like(x, float("-inf")).scatter_(-1, torch.argmax(x, dim=-1, keepdim=True), 0.0)
    if temperature != 1.0:
        x.div_(temperature)
    if 0 < top_k < x.shape[-1]:
        kth = torch.topk(x, top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p < 1.0:
        if x.dim() == 1:
            return _nucleus(x, top_p)
        for t in range(x.shape[0]):
            x[t] = _nucleus(x[t], top_p)
    return x


def _nucleus(x: torch.Tensor, top_p: float) -> torch.Tensor:
    """One row cut to the smallest prefix, most likely first, whose mass reaches ``top_p``."""
    probs = torch.softmax(x, dim=-1)
    sorted_p, order = torch.sort(probs, descending=True)
    before = torch.cumsum(sorted_p, dim=-1) - sorted_p
    drop_sorted = before >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
    return x.masked_fill(drop, float("-inf"))


@dataclass(frozen=True)
class ServedRows:
    """The rows of a member's logits that a truncating profile can keep: all a remote member need send.

    Why: under top-k (or greedy decoding) a provider keeps at most k rows of a
    49k-262k row, yet a member in another process (``ray_members``) would otherwise
    send the whole row every step. It sends these rows' raw logits instead, and the
    caller rebuilds the row with -inf elsewhere (``rebuild``).

    Why the rebuilt row serves exactly as the full one (``process_logits``, bit for
    bit), under every mask the caller may apply (non-text rows; end of text too,
    before ``min_new_tokens``): the rows sent are those above the
    (keep + extra)-th largest logit outside the rows every mask hides, ties
    included, where ``extra`` is how many more rows any one mask hides. Whatever the
    mask, its k kept rows and every row tied with its k-th are among them, and the
    rows sent beyond those lie strictly below its k-th; so the rebuilt row's k-th
    largest, its kept set and the values on it are the full row's, and temperature
    and top-p only ever see that set. (Temperature divides, which keeps the order of
    float32 logits in float64 and separates no tie.) Without top-k nothing is cut
    that does not depend on the whole row (top-p's softmax reads every row): such
    a profile gets ``None``, the full row.
    """

    #: Rows every mask hides (never sent).
    hidden: torch.Tensor
    #: At most this many more rows one of the masks hides.
    extra: int
    #: The rows the profile keeps: top-k, 1 when greedy.
    keep: int

    @classmethod
    def of(cls, masks: Sequence[torch.Tensor], temperature: float, top_k: int) -> "ServedRows | None":
        """For a profile served under any of ``masks`` (bool, True = masked); ``None``: send whole rows."""
        hidden = masks[0].clone()
        for mask in masks[1:]:
            hidden &= mask
        extra = max(int((mask & ~hidden).sum()) for mask in masks)
        keep = 1 if temperature <= 0.0 else top_k
        if keep <= 0 or keep + extra >= hidden.numel() - int(hidden.sum()):
            return None
        return cls(hidden, extra, keep)

    def select(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows to send (int32 indices, ascending) and their raw logits."""
        x = logits.masked_fill(self.hidden, float("-inf"))
        kth = torch.topk(x, self.keep + self.extra).values[-1]
        rows = torch.nonzero((x >= kth) & ~self.hidden).squeeze(1)
        return rows.to(torch.int32), logits[rows]

    @staticmethod
    def rebuild(rows: torch.Tensor, values: torch.Tensor, size: int) -> torch.Tensor:
        """A full row of ``size`` logits: ``values`` at ``rows``, -inf (never served) elsewhere."""
        row = torch.full((size,), float("-inf"), dtype=values.dtype)
        row[rows.long()] = values
        return row


def entropy_of(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of softmax(``logits``), as a 0-d tensor where the logits are; rows at -inf
    (masked, truncated) carry no mass.

    Measured on the served base logits (after temperature, top-k, top-p), it says how
    much room a step leaves a watermark. H = log Z - E_p[x], with log Z read off the
    largest entry (x_max - log p_max) instead of a second pass over the vocabulary:
    about a millisecond on a 262k-entry vector, beside a forward of 60-100 ms. The
    largest logit and the largest probability sit on the same row, so no index is read.
    """
    x = logits.to(torch.float64)
    p = torch.softmax(x, dim=-1)
    log_z = x.max() - torch.log(p.max())
    # -inf rows have p = 0: clamping them to the float minimum makes their 0 * x a 0, not a NaN
    return log_z - torch.dot(p, x.clamp_min(torch.finfo(torch.float64).min))


def entropy(logits: torch.Tensor) -> float:
    """``entropy_of`` read by the host."""
    return float(entropy_of(logits))


def uniform(generator: torch.Generator) -> float:
    """The next seeded uniform in [0, 1) of a generation's draws (host-side: a GPU step needs no copy of it)."""
    return float(torch.rand(1, generator=generator, dtype=torch.float64))


def draw(probs: torch.Tensor, u: float) -> torch.Tensor:
    """The index a uniform ``u`` picks from a probability vector, by inverting its CDF; a 0-d tensor on
    the vector's device, so a step on a GPU draws without waiting for the host.

    ``torch.multinomial`` costs ~30 ms on a 262k-entry float64 vector on a CPU; a
    cumulative sum and a binary search cost ~1 ms and draw from the same law. Where u
    lands on a flat stretch the last row with mass before it is taken, as a masked
    maximum rather than a walk back on the host.
    """
    cdf = torch.cumsum(probs.to(torch.float64).clamp_min(0), dim=0)
    n = cdf.numel()
    i = torch.searchsorted(cdf, (cdf[-1] * u).reshape(1), right=True)[0].clamp_max(n - 1)
    rows = torch.arange(n, device=probs.device)
    return torch.where((probs > 0) & (rows <= i), rows, 0).max()


def sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One draw from a probability vector at the generation's next seeded uniform (``draw``)."""
    return int(draw(probs, uniform(generator)))


def uniform_choice(n: int, generator: torch.Generator) -> int:
    """An index in range(n), each with probability 1/n (routing's specialist pick)."""
    return int(torch.randint(n, (1,), generator=generator))
