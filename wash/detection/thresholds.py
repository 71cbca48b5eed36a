"""The z-score lines every figure, table and verdict in WASH is drawn against.

They live here once so the app, the CLI, the experiments and the docs cannot
drift apart. ``Z_THRESHOLD`` is the one-sided detection line the paper and the
KGW reference use (p about 3e-5 under the null); ``Z_HIGH`` is Water-Probe's
"high confidence" band for model identification, where ``Z_THRESHOLD`` is its
"low confidence" band. ``FPR_CALIBRATED`` is the false-positive rate at which a
per-text threshold is calibrated on unwatermarked texts (the paper's "TPR at 5% FPR");
the thresholds themselves are measured, per scheme and model set, and live in the
results (``wash.reporting.results_tables.detection_table``, column ``threshold``).
``Z_WASHED`` is only a reading aid for the live chart. Its justification is measured:
on the committed unwatermarked texts of ``results/tpr-paper`` no more than
``FPR_CALIBRATED`` of the (text, provider) scores exceed it
(``wash.reporting.results_tables.null_exceedance``; tests/test_results_tables.py checks it),
so a provider below it is within the range of unwatermarked text.
``ALPHA_IDENTIFY`` is the level of the identification verdict: a system is called
watermarked when its permutation p against the measured unwatermarked null, Holm-adjusted
over the systems sharing that null, is below it (``wash.detection.identify_stats``);
Water-Probe's z bands are shown beside it, never as the verdict.
"""
from __future__ import annotations

# A text (or a model) is called watermarked when its z exceeds Z_THRESHOLD: every detector's verdict
# uses it, so it is defined with the detectors and read from here with the other lines.
from wash.watermarks.scoring import Z_THRESHOLD as Z_THRESHOLD

#: Water-Probe's high-confidence band for "this model is watermarked".
Z_HIGH = 10.0
#: The live chart's guide line: unwatermarked texts rarely exceed it (see the module docstring).
Z_WASHED = 2.0
#: The false-positive rate per-text thresholds are calibrated at ("TPR at 5% FPR").
FPR_CALIBRATED = 0.05
#: Level of the calibrated identification verdict ("identified at 5%").
ALPHA_IDENTIFY = 0.05
