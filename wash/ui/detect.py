"""The Detect tab: score any text with chosen providers' own detectors.

Providers are built exactly as ``python -m wash detect`` builds them (same
loader, same union vocabulary for coordinated providers), and the verdicts come
from ``wash.detection.detect_text``: each detector sees the text re-tokenised by
its provider's tokenizer.
"""

from __future__ import annotations

from typing import Any

from wash.errors import WashInputError
from wash.events import ProviderDetection
from wash.ui.providers import rows_to_specs
from wash.ui.settings import MAX_DETECT_CHARS


def detect(text: str, table: Any, threshold: float = 4.0,
           choices: list[str] | None = None) -> list[ProviderDetection]:
    """Each provider's verdict with its per-token scores."""
    from wash.detection import detect_text
    from wash.providers import build_providers

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
    providers = build_providers(specs).providers
    return detect_text(providers, text, threshold)
