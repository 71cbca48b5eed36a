"""Text as coloured segments: routed spans in the Generate tab, detector scores in Detect.

``gr.HighlightedText`` takes ``(text, label)`` pairs; one pair per committed token
keeps the widget's select index equal to the step number, which is how clicking
a token finds its distribution.
"""

from __future__ import annotations

from typing import Sequence

from wash.engine import StepEvent

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
        origin = (f"first token of routed span {step.span_id + 1}: drawn from p̄ but missing from some "
                  f"vocabularies. Specialists that can continue it: {holders}.")
    elif lazy:
        origin = (f"routed span {step.span_id + 1}: drawn from **{who}** alone (lazy forwards: the uniformly "
                  f"picked provider, or the span's specialist). Specialists holding the span: {holders}.")
    else:
        origin = (f"routed span {step.span_id + 1}: produced by specialist **{who}** alone "
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


#: Per-token evidence reaches full colour at this many null standard deviations.
FULL_COLOUR_SD = 2.0


def score_segments(tokens: Sequence[str], per_token: Sequence[float | None],
                   token_null: Sequence[float] | None = None) -> list[tuple[str, float | None]]:
    """Detector contributions as HighlightedText scores in [-1, 1], on an absolute scale.

    ``token_null`` is the (mean, sd) of one token's score on unwatermarked text
    (``Detection.token_null``). A token is coloured by how far its score is from
    that null, full colour at ``FULL_COLOUR_SD`` sds: green/red schemes (0/1
    scores) give every green token the same colour and every red one the
    opposite, whichever text they are in, so unwatermarked text looks mixed rather
    than marked. Scores with no known null are left uncoloured (a scale made
    within the text would rank its tokens, not measure them against the null).
    """
    out: list[tuple[str, float | None]] = []
    if token_null is None:
        return [(text, None) for text in tokens]
    mean, sd = float(token_null[0]), float(token_null[1]) or 1.0
    for text, s in zip(tokens, per_token):
        if s is None:
            out.append((text, None))
        else:
            out.append((text, max(-1.0, min(1.0, (s - mean) / (FULL_COLOUR_SD * sd)))))
    return out


def evidence_note(detection) -> str:
    """Under the coloured text: whose tokenisation it is and what the colours mean."""
    if detection.token_null is None or not any(s is not None for s in detection.per_token):
        return (f"{detection.provider}'s detector ({detection.scheme}) scores the text as a whole "
                f"(an alignment test), so no token carries a score of its own: nothing is coloured.")
    scored = sum(s is not None for s in detection.per_token)
    return (f"{detection.provider}'s own tokenisation of the final text ({len(detection.tokens)} tokens, "
            f"{scored} scored; uncoloured: not scored, e.g. a repeated context). Red: evidence for its "
            f"watermark, purple: against, full colour at {FULL_COLOUR_SD:g} standard deviations of a token's "
            f"score on unwatermarked text. Its z over the whole text: {detection.z:.2f}.")
