"""The app's prose (About and Theory tabs) and its example prompts.

Written for this app. Scheme descriptions are not written here: each scheme
class carries its own (``WatermarkScheme.explain``), filled from its default
parameters, so the page cannot describe a scheme the code does not run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from wash.detection import Z_THRESHOLD, Z_WASHED

ASSETS = Path(__file__).resolve().parents[2] / "assets"
FALLBACK_EXAMPLES = ASSETS / "examples.json"
#: The paper WASH implements (it does not ship with this project).
PAPER_REFERENCE = ('Z. Wu, G. Gong, Q. Zhu, Y. Chen, R. Zhao, "Linear Ensembles Wash Away Watermarks: On the '
                   'Fragility of Distributional Perturbations in LLMs". The paper is not part of this project; '
                   "this app implements its method and measures its claims on two small offline models.")


def scheme_lines() -> list[str]:
    """One markdown bullet per registered scheme, in registry order."""
    from wash.watermarks import SCHEMES

    return [f"- **{name}**: {cls.explain()}" for name, cls in SCHEMES.items()]


#: What each ``forwards`` setting does (``wash.engine.config.FORWARDS``), for the page.
FORWARDS_LINES = {
    "eager": "every base model runs its forward each step; the token is drawn from the average p̄, "
             "and the distribution view shows every p_i, p̄ and p*.",
    "lazy": "each step picks one provider uniformly at random and draws the token from its p_i alone "
            "(the same law as drawing from p̄); only that provider's model runs, the others catch up "
            "later in one batched forward. Faster, but p̄, p* and the other providers' p_i are never "
            "computed, so the distribution view shows the chosen provider's bars only.",
}


def mode_lines() -> list[str]:
    """One markdown bullet per mode, from the engine's own ``MODE_TABLE``."""
    from wash.engine import MODE_TABLE

    return [f"- **{m.name}**: {m.description}." for m in MODE_TABLE.values()]


def forwards_lines() -> list[str]:
    from wash.engine import FORWARDS

    return [f"- **{f}**: {FORWARDS_LINES.get(f, '')}" for f in FORWARDS]


def mode_info(mode: str | None, forwards: str | None) -> str:
    """The line under the mode and forwards radios: what the chosen pair does."""
    from wash.engine import MODE_TABLE

    spec = MODE_TABLE.get(mode or "")
    what = f"**{spec.name}**: {spec.description}." if spec else ""
    how = FORWARDS_LINES.get(forwards or "", "")
    return f"{what}  \n**{forwards}** forwards: {how}" if how else what


#: Under the live z chart: why the lines fall, and why some do not.
Z_WHY = (
    "**Why the lines fall.** A provider's detector only finds its own perturbation, and in the "
    "average of N providers that perturbation has weight 1/N: its z falls roughly like its "
    "single-provider z divided by N (measured in docs/RESULTS.md). Schemes that pick the token by a "
    "keyed draw (AAR, EXP-Edit, ITS-Edit) put a point mass into the average, which keeps 1/N "
    "of the probability on their chosen token whatever the others do, and SynthID's tournament "
    "concentrates its mass on few keyed tokens, so on small, high-entropy models these can stay above "
    "the red line. With the comparison set to *single*, the dashed line "
    "is provider 1 alone and the dotted one that z divided by N."
)

def null_tail(z: float = Z_THRESHOLD) -> float:
    """P(Z > z) for a standard normal Z: how often an unwatermarked text passes z, if its z is N(0, 1)."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def z_score_markdown() -> str:
    """Beside every z chart: what the number is, in two to four sentences."""
    tail = null_tail(Z_THRESHOLD)
    return (
        "**What is a z-score?** A provider's detector, holding its key, scores every token of the text "
        "(KGW: is the token on that step's green list?) and adds the scores up. z says how far that "
        "total lies above what the same number of tokens written without the key would give, counted "
        "in standard deviations: near 0 for unwatermarked text, while a watermark's evidence piles up "
        "with every token, so its z grows with the text's length. "
        f"Above the red line, z = {Z_THRESHOLD:g}, a one-sided normal test would call an unwatermarked "
        f"text watermarked with probability {tail:.1e} (about {tail * 1e5:.0f} in 100,000); detectors "
        "whose total is not normal report the z with that same tail probability."
    )


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "RESULTS.md"


def results_headline(path: Path = RESULTS) -> str:
    """The Headline section of docs/RESULTS.md, verbatim.

    The About tab quotes the results page instead of restating its numbers, so a
    re-run that changes a number changes it in one place.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return "(docs/RESULTS.md is not shipped with this copy of the app.)"
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            if inside:
                break
            inside = line.strip() == "## Headline"
            continue
        if inside:
            lines.append(line)
    body = "\n".join(lines).strip()
    return (body + "\n\nFrom docs/RESULTS.md, where each number's command, date and table are."
            if body else "(docs/RESULTS.md has no Headline section.)")


def washed_line_measured() -> str:
    """`` (measured: 37 of 1,996 unwatermarked scores pass it)`` from the committed results, or nothing."""
    from wash.reporting import null_exceedance

    try:
        e = null_exceedance(Z_WASHED)
    except (OSError, ValueError):
        return ""
    if e is None:
        return ""
    return f" (measured: {e.above:,} of {e.scores:,} unwatermarked scores in `{e.source}` pass it)"


def about_markdown() -> str:
    """The About tab: what WASH is, how to read each view, where the measurements are, the paper."""
    return "\n".join([
        "## What WASH is",
        "A watermarking LLM provider nudges its next-token distribution with a secret key, and a "
        "detector holding that key finds the nudge again as a high z-score. WASH samples every token "
        "from the **average** of several providers' distributions. Each provider pushes in its own "
        "random direction and the pushes partly cancel: a provider's own detector sees its push at "
        "weight 1/N, so its z falls roughly like its single-provider z divided by N. What the "
        "measurements show on this project's small models: the per-text signals fade as N grows, "
        "schemes that pick the token by a keyed draw fade more slowly, and probing the model itself "
        "(the Identify tab) still finds several watermarks. The **Results** tab and docs/RESULTS.md "
        "hold the numbers, beside the paper's.",
        "",
        "## Reading each view",
        "- **Generate, text**: plain tokens were drawn from the average p̄; coloured tokens belong to "
        "routed spans (orange: the span's first token, drawn from p̄ but missing from some vocabularies; "
        "other colours: the specialist that produced it). Click a token for its origin and distribution.",
        "- **Generate, live z chart**: each provider's own detector run on the text so far. Above the red "
        f"line (z = {Z_THRESHOLD:g}) a provider would claim the text; below the green line (z = {Z_WASHED:g}) "
        f"its z is in the range of unwatermarked text{washed_line_measured()}. With the comparison switch "
        "on, the dashed line is provider 1 serving alone.",
        "- **Generate, distribution chart**: for one token, the probability each provider gave to the top "
        "candidates (p_i), their average p̄ (what WASH samples from) and the consensus p* (the average of "
        "the providers' unwatermarked distributions). ‖p̄ − p*‖∞ is the largest gap over the whole "
        "vocabulary: the smaller it is, the less watermark is left. A step drawn from one provider (lazy "
        "forwards, or a specialist inside a routed span) computed only that provider's distribution: the "
        "chart then shows its bars alone and says why the rest is missing.",
        "- **Generate, detection table; Detect**: each provider's detector on a finished text, "
        "re-tokenised with its own tokenizer, as a third party would run it.",
        "- **Identify**: is a served system watermarked at all, without a key (Water-Probe), with a verdict "
        "calibrated on the same system without watermarks.",
        "- **Theory**: the paper's bound on the gap between the average and the unwatermarked law, "
        "measured on random tilts.",
        "- **Results**: the committed experiments, \"is this text watermarked?\" and \"is this model "
        "watermarked?\", beside the paper's tables.",
        "",
        "## Reference",
        PAPER_REFERENCE,
    ])


def reference_markdown() -> str:
    """The schemes, modes and forwards the engine runs, each in its own words (About, folded)."""
    return "\n".join([
        "### Watermark schemes",
        *scheme_lines(),
        "",
        "### Modes",
        *mode_lines(),
        "",
        "### Forwards",
        *forwards_lines(),
    ])


def theory_markdown() -> str:
    return "\n".join([
        "Every provider serves p_i(v) ∝ p*(v)·exp(δ_i(v)): the shared distribution p* tilted by "
        "its watermark δ_i, at most ξ per token. Theorem 1 says that if the tilts are independent "
        "and average to zero, the mixture p̄_N of N providers is close to p*: the gap shrinks like "
        "sqrt(log|V| / N), down to a small floor η² set by how much the tilts vary where p* "
        "puts its mass.",
        "",
        "This tab draws tilts at random and measures the gap directly (p* here is a Zipf law, "
        "a rough picture of a language model):",
        "- **independent**: a fresh ±ξ sign per token and provider. The gap keeps falling with N.",
        "- **coordinated**: all providers share one tilt, as if they used the same key. Averaging "
        "identical copies changes nothing: the gap stays where it started. This is why a "
        "coordinated watermark survives WASH.",
        "- **biased**: half of every tilt is a pattern common to all providers. The private half "
        "averages out, the common half does not: the gap levels off.",
        "",
        "The dashed curve is the theorem's shape, c·(sqrt(log|V| / N) + η²), with c fitted to the "
        "independent curve (the theorem bounds the gap up to constants, so only the shape is "
        "meaningful). Shaded bands span the 10th to 90th percentile over the trials.",
    ])


def example_prompts(limit: int = 10) -> list[str]:
    """The project's prompt set (one per domain first), else the app's own few examples."""
    try:
        from wash.content.prompts import load_prompts

        prompts = [p.text for p in load_prompts(limit=limit)]
        if prompts:
            return prompts
    except (ImportError, OSError, ValueError, KeyError):
        pass
    try:
        return list(json.loads(FALLBACK_EXAMPLES.read_text(encoding="utf-8")))[:limit]
    except (OSError, ValueError):
        return ["The old lighthouse keeper had kept a diary for forty years, and in it"]
