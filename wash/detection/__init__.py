"""Detection: is this text watermarked (each scheme's own detector), is this model watermarked.

* ``per_text``: every provider's own detector on a text, re-tokenised by its tokenizer.
* ``identification``: Water-Probe's key-free probe of a served system;
  ``identify_stats`` its score, the permutation p against the null and Holm's adjustment.
* ``thresholds``: the z lines the app draws and the calibrated FPR.
* ``null``: the detectors' behaviour on unwatermarked and looping text, measured.

The detectors themselves live with their schemes, one file each, in ``wash/watermarks/``.
"""
