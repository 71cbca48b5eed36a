"""The unwatermarked provider: p_i is the base distribution itself.

Its detector scores nothing and always reports z = 0, so tables can list an
unwatermarked provider beside the others without special cases.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from wash.watermarks.registry import register
from wash.watermarks.base import Detection, Detector, WatermarkScheme, softmax


class _NullDetector(Detector):
    def _score(self, token_id: int) -> float | None:
        return None

    def result(self) -> Detection:
        return Detection(scheme="none", z=0.0, p=0.5, tokens_scored=0,
                         per_token=list(self.per_token), note="no watermark to detect")


@register
class NoWatermark(WatermarkScheme):
    name = "none"
    title = "unwatermarked"
    published = False
    summary = "no watermark: the base model's own distribution"
    description = (
        'no watermark: the provider serves its base model unchanged.')

    def distribution(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int, state: Any) -> torch.Tensor:
        return softmax(logits)

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return _NullDetector(self, prefix)
