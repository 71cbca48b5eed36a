"""The Detect tab: score any text with chosen providers' own detectors.

Providers are built exactly as ``python -m wash detect`` builds them (same
loader, same union vocabulary for coordinated providers), and the verdicts come
from ``wash.detection.detect_text``: each detector sees the text re-tokenised by
its provider's tokenizer.
"""

from __future__ import annotations

from typing import Any

from wash.errors import WashInputError
from wash.ui.providers import rows_to_specs
from wash.ui.settings import MAX_DETECT_CHARS


def detect(text: str, table: Any, threshold: float = 4.0, choices: list[str] | None = None) -> list[dict]:
    """Each provider's verdict with its per-token scores, as plain dictionaries."""
    from wash.detection import detect_text
    from wash.ensemble import model_vocab
    from wash.models import load_model
    from wash.providers import build_provider
    from wash.vocab import align

    if not text or not text.strip():
        raise WashInputError("the text to score is empty")
    if len(text) > MAX_DETECT_CHARS:
        raise WashInputError(f"the text is too long ({len(text)} characters; at most {MAX_DETECT_CHARS})")
    specs = rows_to_specs(table, choices)
    if not specs:
        raise WashInputError("no provider given (add at least one row: model, scheme, key)")
    try:
        threshold = float(threshold)
    except (TypeError, ValueError):
        raise WashInputError(f"the z threshold must be a number, got {threshold!r}") from None
    lms = {s.model: load_model(s.model) for s in specs}
    alignment = align([model_vocab(lm) for lm in lms.values()]) if any(s.coordinated for s in specs) else None
    providers = [build_provider(i, s, lms[s.model], alignment) for i, s in enumerate(specs)]
    return [d.to_dict(with_tokens=True) for d in detect_text(providers, text, threshold)]
