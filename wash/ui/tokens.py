"""Text as coloured segments: routed spans in the Generate tab, detector scores in Detect.

``gr.HighlightedText`` takes ``(text, label)`` pairs; one pair per committed token
keeps the widget's select index equal to the step number, which is how clicking
a token finds its distribution.
"""

from __future__ import annotations

from typing import Sequence

from wash.events import StepEvent

#: Label of the first token of a routed span: drawn from p̄, missing from some vocabularies.
ROUTED_FROM_AVERAGE = "routed: drawn from p̄"
ROUTED_COLOUR = "#f59e0b"


def specialist_label(index: int) -> str:
    return f"routed: P{index + 1}"


def token_label(step: StepEvent) -> str | None:
    """None for a token every vocabulary holds; otherwise which routed case produced it."""
    if not step.routed:
        return None
    return ROUTED_FROM_AVERAGE if step.chosen is None else specialist_label(int(step.chosen))


def highlight_segments(steps: Sequence[StepEvent]) -> list[tuple[str, str | None]]:
    """One (token text, label) pair per step, in order."""
    return [(s.token, token_label(s)) for s in steps]


def colour_map(palette: Sequence[str], n: int) -> dict[str, str]:
    """Legend colours: the average-drawn case, then each specialist in its z-trace colour."""
    colours = {ROUTED_FROM_AVERAGE: ROUTED_COLOUR}
    for i in range(n):
        colours[specialist_label(i)] = palette[i % len(palette)]
    return colours


def _fmt_z(z: float | None) -> str:
    return "–" if z is None else f"{z:.2f}"


def describe_step(step: StepEvent, labels: Sequence[str], lazy: bool = False) -> str:
    """Markdown: where one token came from, who could produce it, the live z at that point.

    ``lazy``: the run used lazy forwards, so a token may come from one uniformly
    picked provider and its step computed no p̄ or p* (said so plainly).
    """
    n = len(labels)
    head = f"**Token {step.step + 1}** `{step.token!r}`"
    holders = ", ".join(labels[i] for i in step.specialists) or "none"
    who = labels[int(step.chosen)] if step.chosen is not None else None
    if not step.routed and who is None:
        origin = f"drawn from the average p̄ of all {n} provider(s); every vocabulary holds it."
    elif not step.routed:
        origin = (f"drawn from **{who}** alone, picked uniformly at random (lazy forwards: the same law "
                  f"as drawing from p̄ of all {n} provider(s)); every vocabulary holds it.")
    elif who is None:
        origin = (f"first token of routed span {step.span_id}: drawn from p̄ but missing from some "
                  f"vocabularies. Specialists that can continue it: {holders}.")
    elif lazy:
        origin = (f"routed span {step.span_id}: drawn from **{who}** alone (lazy forwards: the uniformly "
                  f"picked provider, or the span's specialist). Specialists holding the span: {holders}.")
    else:
        origin = (f"routed span {step.span_id}: produced by specialist **{who}** alone "
                  f"(picked uniformly). Specialists still holding the span: {holders}.")
    gap = "" if step.linf is None else f" ‖p̄ − p*‖∞ = {step.linf:.4f}."
    missing = ""
    if step.average_probs is None:
        kind = "a lazy step" if (lazy or not step.routed) else "a routed step"
        missing = (f"  \n*Not computed on this step:* p̄, p* and the other providers' distributions "
                   f"({kind} computes only the chosen provider's: the chart shows "
                   f"{who or 'that provider'} alone).")
    zs = ", ".join(f"P{i + 1} {_fmt_z(z)}" for i, z in enumerate(step.live_z or []))
    return f"{head}: {origin}{gap}{missing}  \nLive z after it: {zs}"


def score_segments(tokens: Sequence[str],
                   per_token: Sequence[float | None]) -> list[tuple[str, float | None]]:
    """Detector contributions as HighlightedText scores in [-1, 1].

    Green/red schemes report 1/0 per token: shown as +1 (green) / -1 (red).
    Other schemes report unbounded scores: shown standardised within this text
    (mean 0, one standard deviation = 0.5), so the colours rank tokens against
    each other rather than against the scheme's null distribution.
    """
    scored = [s for s in per_token if s is not None]
    binary = bool(scored) and all(s in (0.0, 1.0) for s in scored)
    mean = sum(scored) / len(scored) if scored else 0.0
    var = sum((s - mean) ** 2 for s in scored) / len(scored) if scored else 0.0
    sd = var ** 0.5 or 1.0
    out: list[tuple[str, float | None]] = []
    for text, s in zip(tokens, per_token):
        if s is None:
            out.append((text, None))
        elif binary:
            out.append((text, 1.0 if s == 1.0 else -1.0))
        else:
            out.append((text, max(-1.0, min(1.0, (s - mean) / (2 * sd)))))
    return out
