"""Base-logit processing and seeded draws.

Temperature and top-p shape the *base* logits before any watermark is applied:
that is how a provider serves its model (the watermark sees the distribution the
user asked for). Every random draw of a generation goes through one
``torch.Generator``, so a seed fixes the whole run.
"""

from __future__ import annotations

import torch


def process_logits(logits: torch.Tensor, invalid: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Mask non-text rows, apply temperature (0 = greedy) and top-p; float64 out."""
    x = logits.to(torch.float64).masked_fill_(invalid, float("-inf"))
    valid = ~invalid if temperature <= 0.0 else None
    if temperature <= 0.0:
        keep = torch.zeros_like(valid)
        keep[int(torch.argmax(x))] = True
        return x.masked_fill(~keep, float("-inf")).masked_fill(keep, 0.0)
    if temperature != 1.0:
        x.div_(temperature)
    if top_p < 1.0:
        probs = torch.softmax(x, dim=-1)
        sorted_p, order = torch.sort(probs, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p
        drop_sorted = before >= top_p  # keep the smallest prefix whose mass reaches top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        x = x.masked_fill(drop, float("-inf"))
    return x


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
