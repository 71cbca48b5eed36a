"""Base-logit processing and seeded draws.

Temperature, top-k and top-p shape the *base* logits before any watermark is
applied: that is how a provider serves its model (the watermark sees the
distribution the user asked for). The order is the one transformers' sampling
uses: mask, temperature, top-k, top-p. Every random draw of a generation goes through one
``torch.Generator``, so a seed fixes the whole run.
"""

from __future__ import annotations

import torch


def process_logits(logits: torch.Tensor, invalid: torch.Tensor, temperature: float, top_p: float,
                   top_k: int = 0) -> torch.Tensor:
    """Mask non-text rows, then temperature (0 = greedy), top-k (0 = off), top-p; float64 out.

    Top-k keeps every row tied with the k-th largest logit, so the kept set never
    depends on how a sort breaks ties.
    """
    # Out of place: ``to`` returns ``logits`` itself when it is already float64, and the
    # caller's cached logits must stay untouched.
    x = logits.to(torch.float64).masked_fill(invalid, float("-inf"))
    if temperature <= 0.0:
        keep = torch.zeros_like(invalid)
        keep[int(torch.argmax(x))] = True
        return x.masked_fill(~keep, float("-inf")).masked_fill(keep, 0.0)
    if temperature != 1.0:
        x.div_(temperature)
    if 0 < top_k < x.numel():
        kth = torch.topk(x, top_k).values[-1]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p < 1.0:
        probs = torch.softmax(x, dim=-1)
        sorted_p, order = torch.sort(probs, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p
        drop_sorted = before >= top_p  # keep the smallest prefix whose mass reaches top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        x = x.masked_fill(drop, float("-inf"))
    return x


def entropy(logits: torch.Tensor) -> float:
    """Shannon entropy (nats) of softmax(``logits``); rows at -inf (masked, truncated) carry no mass.

    Measured on the served base logits (after temperature, top-k, top-p), it says how
    much room a step leaves a watermark. H = log Z - E_p[x], with log Z read off the
    largest entry (x_max - log p_max) instead of a second pass over the vocabulary:
    about a millisecond on a 262k-entry vector, beside a forward of 60-100 ms.
    """
    x = logits.to(torch.float64)
    p = torch.softmax(x, dim=-1)
    top = int(torch.argmax(x))
    log_z = x[top] - torch.log(p[top])
    # -inf rows have p = 0: clamping them to the float minimum makes their 0 * x a 0, not a NaN
    return float(log_z - torch.dot(p, x.clamp_min(torch.finfo(torch.float64).min)))


def sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One draw from a probability vector, by inverting its CDF at one seeded uniform.

    ``torch.multinomial`` costs ~30 ms on a 262k-entry float64 vector on a CPU; a
    cumulative sum and a binary search cost ~1 ms and draw from the same law.
    """
    cdf = torch.cumsum(probs.to(torch.float64).clamp_min(0), dim=0)
    u = float(torch.rand(1, generator=generator, dtype=torch.float64)) * float(cdf[-1])
    i = int(torch.searchsorted(cdf, torch.tensor([u], dtype=torch.float64), right=True))
    i = min(i, cdf.numel() - 1)
    while i > 0 and probs[i] <= 0:  # u landed exactly on a flat stretch of the CDF
        i -= 1
    return i


def uniform_choice(n: int, generator: torch.Generator) -> int:
    """An index in range(n), each with probability 1/n (routing's specialist pick)."""
    return int(torch.randint(n, (1,), generator=generator))
