"""Each provider's own detector on the ids or the text of a generation: its verdict and its live trace.

The decoding loop records both (``decode.Generation``: the live z per step, the final
``ProviderDetection`` per provider), and detection (``wash.detection.per_text``) runs
the same functions on any text, so they live here with the providers, below both.
A verdict is computed the way a third party would: on the text alone, re-tokenised by
the provider's tokenizer. A live trace uses the ids its model actually holds (prompt as
hashing context), which is what a provider watching its own output stream would see.
"""

from __future__ import annotations

from typing import Sequence

from wash.engine.events import ProviderDetection
from wash.engine.providers import Provider
from wash.engine.settings import check_text
from wash.watermarks.scoring import Z_THRESHOLD

#: Permutation-test schemes refresh their live z every this many tokens.
SLOW_REFRESH = 16


def verdict(provider: Provider, detection, threshold: float, tokens: list[str],
            detected: bool | None = None) -> ProviderDetection:
    """A provider's verdict on one text; ``detected`` overrides the z line for a statistic whose
    decision is its own p (``wash.detection.per_text.detect_text``)."""
    return ProviderDetection(provider=provider.label, model=provider.model, scheme=provider.spec.scheme,
                             key=provider.spec.key, z=detection.z, p=detection.p,
                             tokens_scored=detection.tokens_scored,
                             detected=detection.detected(threshold) if detected is None else detected,
                             per_token=list(detection.per_token), tokens=tokens,
                             token_null=detection.token_null)


def detect_ids(provider: Provider, ids: Sequence[int], threshold: float = Z_THRESHOLD) -> ProviderDetection:
    detection = provider.scheme.detect(provider.scheme_ids(ids))
    tokens = [provider.member.decode_id(i) for i in ids]
    return verdict(provider, detection, threshold, tokens)


def own_verdicts(providers: Sequence[Provider], text: str, threshold: float = Z_THRESHOLD) -> list[ProviderDetection]:
    """Each provider's own detector (its scheme's sum) on ``text`` tokenised by that provider's own tokenizer.

    The engine's part of ``wash.detection.per_text.detect_text``, which adds the model-aware statistics."""
    check_text(text, "the text to score")
    return [detect_ids(p, p.member.encode(text), threshold) for p in providers]


class LiveDetector:
    """A provider's incremental detector, fed the ids its model commits."""

    def __init__(self, provider: Provider, prefix: Sequence[int]) -> None:
        self.provider = provider
        self.detector = provider.make_detector(prefix)
        self.cheap = provider.scheme.cheap_result
        self._z: float | None = None
        self._since = 0

    def feed(self, ids: Sequence[int]) -> None:
        for i in self.provider.scheme_ids(ids):
            self.detector.push(i)
        self._since += len(ids)

    def z(self, force: bool = False) -> float | None:
        if len(self.detector.per_token) == 0:
            return None
        if self.cheap or force or self._z is None or self._since >= SLOW_REFRESH:
            self._z = self.detector.result().z
            self._since = 0
        return self._z
