"""The app's prose (About and Theory tabs) and its example prompts.

Written for this app; the scheme list is checked against the engine's registry so
a new scheme shows up (with the engine's own summary) even before it gets a line
here.
"""

from __future__ import annotations

import json
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[2] / "assets"
FALLBACK_EXAMPLES = ASSETS / "examples.json"
PAPER_REFERENCE = ("*WASH: watermarks wash out when watermarked LLMs are averaged* "
                   "(the paper shipped with this project; Section 2 defines the method, "
                   "Theorem 1 bounds ‖p̄_N − p*‖∞).")

SCHEME_LINES = {
    "none": "no watermark: the provider serves its base model unchanged.",
    "kgw": "Kirchenbauer et al.: the previous token seeds a green half of the vocabulary, "
           "green tokens get a logit bonus; the detector counts green tokens.",
    "biased-kgw": "a KGW variant whose green list never changes with context: every key shares "
                  "part of it, so the perturbations are not zero-mean (the paper's stress test).",
    "unigram": "Zhao et al.: one fixed green list per key, independent of context.",
    "waterbag": "Water-Bag: each generation picks one key from a bag of KGW keys (and one of two "
                "complementary lists); the detector tries the whole bag.",
    "dipmark": "Wu et al. DiPmark: reweights probability mass along a keyed permutation without "
               "changing the expected distribution.",
    "aar": "Aaronson's scheme: picks the token by keyed Gumbel-max, so each step is a point mass; "
           "the detector sums the keyed scores of the observed tokens.",
    "its-edit": "Kuditipudi et al. inverse-transform sampling driven by a secret key sequence; "
                "detection aligns the text with that sequence.",
    "exp-edit": "Kuditipudi et al. exponential-minimum sampling on a secret key sequence; "
                "detection aligns the text with it, robust to edits.",
    "synthid": "SynthID-Text: keyed tournament sampling over several g-value layers; the detector "
               "averages the g-values of the observed tokens.",
}


def scheme_lines() -> list[str]:
    """One markdown bullet per registered scheme, in registry order."""
    from wash.watermarks import SCHEMES

    return [f"- **{name}**: {SCHEME_LINES.get(name, cls.summary)}" for name, cls in SCHEMES.items()]


def about_markdown() -> str:
    return "\n".join([
        "## What WASH is",
        "A watermarking LLM provider nudges its next-token distribution with a secret key, and a "
        "detector holding that key finds the nudge again as a high z-score. WASH asks what happens "
        "when a user samples every token from the **average** of several providers' distributions. "
        "Each provider pushes in its own random direction; in the average these pushes cancel, and "
        "the text follows the providers' shared, unwatermarked behaviour. Alone, a provider is "
        "detected (z > 4); averaged with three or more independent others, its z typically stays "
        "below 2.",
        "",
        "Models with different tokenizers do not share every token. WASH averages over the *union* "
        "of the vocabularies; when the sampled token is missing from some of them, the models that "
        "have it (the **specialists**) finish the word, one picked uniformly per token (**routing**), "
        "and the finished word is then re-tokenised for every model (**re-synchronisation**).",
        "",
        "## The watermark schemes",
        *scheme_lines(),
        "",
        "## Reading the Generate tab",
        "- **Text**: plain tokens were drawn from the average p̄; coloured tokens belong to routed "
        "spans (orange: the span's first token, drawn from p̄ but missing from some vocabularies; "
        "other colours: the specialist that produced it). Click a token for its origin and "
        "distribution.",
        "- **Live z chart**: each provider's own detector run on the text so far. Above the red "
        "line (z = 4) a provider would claim the text; below the green line (z = 2) its watermark is "
        "washed out. With the comparison switch on, the dashed line is provider 1 serving alone.",
        "- **Distribution chart**: for one token, the probability each provider gave to the top "
        "candidates (p_i), their average p̄ (what WASH samples from) and the consensus p* (the "
        "average of the providers' unwatermarked distributions). ‖p̄ − p*‖∞ is the largest gap "
        "over the whole vocabulary: the smaller it is, the less watermark is left.",
        "- **Detection table**: each provider's detector on the finished text, re-tokenised with "
        "its own tokenizer, as a third party would run it.",
        "",
        "## Modes",
        "- **wash**: average, route, re-synchronise (the method).",
        "- **naive**: average over the union without routing (a missing token is re-tokenised for "
        "the other models at once).",
        "- **single**: provider 1 alone, the watermarked baseline.",
        "- **unwatermarked**: the base models averaged with no watermark.",
        "",
        "## Reference",
        PAPER_REFERENCE,
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
        from wash.prompts import load_prompts

        prompts = [p.text for p in load_prompts(limit=limit)]
        if prompts:
            return prompts
    except (ImportError, OSError, ValueError, KeyError):
        pass
    try:
        return list(json.loads(FALLBACK_EXAMPLES.read_text(encoding="utf-8")))[:limit]
    except (OSError, ValueError):
        return ["The old lighthouse keeper had kept a diary for forty years, and in it"]
