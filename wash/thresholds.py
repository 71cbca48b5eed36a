"""The z-score lines every figure, table and verdict in WASH is drawn against.

They live here once so the app, the CLI, the experiments and the docs cannot
drift apart. ``Z_THRESHOLD`` is the one-sided detection line the paper and the
KGW reference use (p about 3e-5 under the null); ``Z_HIGH`` is Water-Probe's
"high confidence" band for model identification, where ``Z_THRESHOLD`` is its
"low confidence" band. ``Z_WASHED`` is only a reading aid for the live chart:
below it a provider's evidence is no stronger than a lucky unwatermarked text.
``ALPHA_IDENTIFY`` is the level of the identification verdict: a system is called
watermarked when its p against the measured unwatermarked null is below it
(``wash.identify_stats.null_p``); Water-Probe's z bands are shown beside it, never
as the verdict.
"""
from __future__ import annotations

#: A text (or a model) is called watermarked when its z exceeds this.
Z_THRESHOLD = 4.0
#: Water-Probe's high-confidence band for "this model is watermarked".
Z_HIGH = 10.0
#: The live chart's "washed out" guide line.
Z_WASHED = 2.0
#: Level of the calibrated identification verdict ("identified at 5%").
ALPHA_IDENTIFY = 0.05
