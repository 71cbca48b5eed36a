"""Single-provider watermarked generations through the engine, shared by the scheme tests.

Power and interoperability tests need a fixed-length (200-token) watermarked text
per scheme; ``wash.ensemble.generate`` in mode ``single`` with
``min_new_tokens = max_new_tokens`` provides exactly that, through the same code
path the app and the CLI use. Memoised so power and interop tests share one run.
"""

from __future__ import annotations

from functools import lru_cache

#: An open-ended prompt: high-entropy continuations give every scheme room to act.
PROMPT = ("The old lighthouse keeper climbed the stairs one last time, and as the storm rolled in "
          "over the harbour he began to tell the children the story of")


@lru_cache(maxsize=32)
def watermarked_tokens(model_name: str, scheme_name: str, key: int, n_new: int, seed: int,
                       params: str = "") -> tuple[int, ...]:
    """The ids a single watermarked provider generates after ``PROMPT`` (exactly ``n_new``)."""
    from wash.config import GenerationConfig, ProviderSpec
    from wash.ensemble import generate

    spec = ProviderSpec.parse(f"{model_name}:{scheme_name}:{key}" + (f":{params}" if params else ""))
    cfg = GenerationConfig(providers=[spec], prompt=PROMPT, mode="single", max_new_tokens=n_new,
                           min_new_tokens=n_new, seed=seed, live_detection=False)
    result = generate(cfg)
    ids = tuple(result.model_ids[model_name])
    assert len(result.tokens) == n_new
    return ids
