"""Detection: is this text watermarked (each scheme's own detector), is this model watermarked.

* ``per_text``: every provider's own detector on a text, re-tokenised by its tokenizer.
* ``identification``: Water-Probe's key-free probe of a served system;
  ``identify_stats`` its score, the permutation p against the null and Holm's adjustment.
* ``thresholds``: the z lines the app draws and the calibrated FPR.
* ``null``: the detectors' behaviour on unwatermarked and looping text, measured.

The detectors themselves live with their schemes, one file each, in ``wash/watermarks/``.
"""

from wash.core.exports import lazy_exports

#: What the layers above may use, by the module that holds it (loaded on first use).
_EXPORTS = {
    **dict.fromkeys(("Z_THRESHOLD", "Z_WASHED", "FPR_CALIBRATED", "ALPHA_IDENTIFY"), "thresholds"),
    **dict.fromkeys(("detect_text", "statistic_used", "parse_models", "generation_models", "read_run"),
                     "per_text"),
    **dict.fromkeys(("Identification", "Probe", "identify", "SERVED_ROWS"), "identification"),
    **dict.fromkeys(("TEST_NAME", "PERMUTATION_RESAMPLES", "holm_by", "identified", "p_floor",
                     "permutation_p"), "identify_stats"),
    **dict.fromkeys(("STATISTICS", "DEFAULT_STATISTIC", "statistic", "score_ids"), "statistics"),
    "keyed_law": "statistics.keyed",
    "stored_lineup": "statistics.lineup",
    **dict.fromkeys(("served_text", "stored_text", "text_key"), "statistics.served_text"),
}
#: Modules declared whole: their names are read as a namespace (``key_null.COLUMNS``).
_MODULES = ("key_null",)
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _MODULES)
