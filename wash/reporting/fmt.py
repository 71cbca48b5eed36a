"""How the generated documents write a number: one place, so the headline test can read them back."""

from __future__ import annotations

import math

from wash.detection import FPR_CALIBRATED

MISSING = "–"
#: The FPR level per-text thresholds are calibrated at, as the documents write it: ``5%``.
FPR_LEVEL = f"{FPR_CALIBRATED:.0%}"


def missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def num(v, digits: int = 2) -> str:
    """``6.95``; ``–`` for a missing value."""
    return MISSING if missing(v) else f"{float(v):.{digits}f}"


def ci(lo, hi, digits: int = 2) -> str:
    """``[6.47, 7.42]``."""
    return MISSING if missing(lo) or missing(hi) else f"[{float(lo):.{digits}f}, {float(hi):.{digits}f}]"


def num_ci(v, lo, hi, digits: int = 2) -> str:
    """``6.95 [6.47, 7.42]``."""
    return num(v, digits) if missing(lo) else f"{num(v, digits)} {ci(lo, hi, digits)}"


def pct(v) -> str:
    """A share as whole percent: ``29%``."""
    return MISSING if missing(v) else f"{float(v) * 100:.0f}%"


def pct_ci(v, lo, hi) -> str:
    """``29% [22, 37]``."""
    if missing(v):
        return MISSING
    return pct(v) if missing(lo) else f"{pct(v)} [{float(lo) * 100:.0f}, {float(hi) * 100:.0f}]"


def paper_pct(v) -> str:
    """The paper's TPR as it prints it, one decimal: ``27.6%``."""
    return MISSING if missing(v) else f"{float(v) * 100:.1f}%"


def pval(p) -> str:
    """``5e-05``, ``0.45``."""
    return MISSING if missing(p) else f"{float(p):.2g}"


def pval_range(values) -> str:
    """``0.68 to 1``, or one value where every p prints the same (``1``, not ``1 to 1``)."""
    low, high = pval(min(values)), pval(max(values))
    return low if low == high else f"{low} to {high}"


def integer(v) -> str:
    """``20,000``."""
    return MISSING if missing(v) else f"{int(v):,}"


def md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
            *("| " + " | ".join(r) + " |" for r in rows)]
