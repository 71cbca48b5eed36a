"""The words the README's table and the classroom handout use, said once for a reader who is no
statistician: both documents print this one list, so a definition cannot differ between them.

The app's verdict (z above ``Z_THRESHOLD``) and the tables' (a threshold that flags ``FPR_LEVEL`` of
unwatermarked texts) are two rules; the entry ``detected`` names both, so no page calls one the other.
"""

from __future__ import annotations

import math

from wash.detection import Z_THRESHOLD
from wash.reporting.fmt import FPR_LEVEL

#: The heading both documents give the list; ``ANCHOR`` is the link GitHub makes of it.
HEADING = "Words used here"
ANCHOR = "#words-used-here"

def z_line_rate() -> str:
    """How often unwatermarked text passes the app's z line (a one-sided normal tail): ``3 in 100,000``."""
    tail = 0.5 * math.erfc(Z_THRESHOLD / math.sqrt(2))
    return f"{tail * 100_000:.0f} in 100,000"


#: (term, definition), in the order a reader meets them.
TERMS: tuple[tuple[str, str], ...] = (
    ("watermark", "a hidden nudge a provider gives its model's choice of every next token, so that its "
                  "text can be recognised later; the words read as usual"),
    ("key", "the provider's secret number that decides the nudge; only its holder can look for it"),
    ("N", "how many providers WASH averages; N = 1 is one provider alone"),
    ("z", "the detector's score: how far a text's evidence for the key lies above what text without the "
          "watermark gives, in standard deviations; unwatermarked text stays near 0"),
    ("p", "the chance that text without the watermark scores at least this high; small p, strong evidence"),
    ("false positive rate (FPR)", "the share of unwatermarked texts a detector wrongly flags"),
    ("detection rate (TPR)", "the share of watermarked texts a detector flags"),
    ("detected", f"in the results tables: flagged by a threshold set so that {FPR_LEVEL} of unwatermarked texts "
                 f"are flagged (an FPR of {FPR_LEVEL}). In the app: z above {Z_THRESHOLD:g}, a line of its own, "
                 f"stricter than the tables' {FPR_LEVEL} FPR (about {z_line_rate()} unwatermarked texts pass it)"),
    ("Water-Probe", "a test that needs no key: it asks the model, not a text, whether it behaves as a "
                    "watermarked one; a permutation test against unwatermarked runs gives its verdict"),
    ("perplexity", "how surprised an unwatermarked model is by a text; lower reads as more fluent"),
)


def definition(term: str) -> str:
    """One entry's text, as the list prints it."""
    return dict(TERMS)[term]


def lines() -> list[str]:
    """The list as markdown bullets, term in bold."""
    return [f"* **{term}**: {text}." for term, text in TERMS]


def section(level: str = "##") -> list[str]:
    """The heading and the list."""
    return [f"{level} {HEADING}", "", *lines()]
