"""The demo's one-click presets: named provider line-ups, and what each was measured to show.

A preset is plain data (providers, mode, aggregation rule); the app's buttons and
``experiment presets`` both read it from here, so the page runs exactly what was
measured. Its description has two parts:

* ``why``: what the line-up is for and the mechanism behind its outcome, written
  by hand;
* the measured part, read at run time from ``results/presets/presets_summary.csv``
  (written by ``python -m wash experiment presets``): the range of final z each
  provider reached over the measured seeds. A re-run changes the page's numbers
  without anyone editing a sentence, and a preset that was never measured says so.

Model slots ``A``/``B`` stand for the first and second model the app offers. A preset with
models of its own (``models``: the larger hub-only ones) fills slots ``A``/``B``/``C`` with them
and is offered only where the app offers them all (``preset_names(models)``: a GPU and the hub).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from wash.engine import ProviderSpec
from wash.core.errors import WashInputError

#: New tokens a preset asks for: long enough that a lone watermark is clearly detected.
DEMO_TOKENS = 200
#: Where ``experiment presets`` writes its summary (the committed results folder).
MEASURED = Path(__file__).resolve().parents[2] / "results" / "presets" / "presets_summary.csv"


@dataclass(frozen=True)
class Preset:
    name: str
    why: str
    #: ``(model slot, scheme, key, params)`` per provider.
    rows: tuple[tuple[str, str, int, str], ...]
    mode: str = "wash"
    aggregate: str = "mean"
    #: Its own models for slots ``A``, ``B``, ``C`` (empty: the first two the app offers).
    models: tuple[str, ...] = ()

    def offered(self, models: Sequence[str]) -> bool:
        """Whether the app offering ``models`` can run it (every model of its own among them)."""
        return set(self.models) <= set(models)

    def resolved(self, models: Sequence[str]) -> list[tuple[str, str, int, str]]:
        """The rows with the slots replaced by the preset's own models, else by the offered ones."""
        if self.models:
            slot = dict(zip("ABC", self.models))
        elif not models:
            raise WashInputError("no model is offered")
        else:
            slot = {"A": models[0], "B": models[1] if len(models) > 1 else models[0]}
        return [(slot[m], scheme, key, params) for m, scheme, key, params in self.rows]

    def specs(self, models: Sequence[str]) -> list[ProviderSpec]:
        return [ProviderSpec.parse(f"{m}:{s}:{k}" + (f":{p}" if p else "")) for m, s, k, p in self.resolved(models)]


_PAPER_MIX = (("A", "kgw", 15485863, ""), ("B", "aar", 42, ""), ("A", "dipmark", 7, ""))

PRESETS: tuple[Preset, ...] = (
    Preset("Paper setting: 3 providers, 2 model families",
           "The paper's example: two base models with different tokenizers (routing and "
           "re-synchronisation at work) and three schemes, each with its own key. Each provider's "
           "detector sees its own perturbation at weight 1/3 of the average, so its z falls to about "
           "a third of what it is alone: KGW and DiPMark end near the threshold (DiPMark crossed it "
           "on one seed of three). AAR picks its token by a keyed draw, a point mass that keeps 1/3 "
           "of the average whatever the others do; on these small, high-entropy models a third of its "
           "single z is still far above 4, so AAR stays detected: the title's claim does not hold "
           "for it here. Turn the comparison to single to see provider 1 alone and its z / 3.",
           _PAPER_MIX),
    Preset("Five providers, five schemes",
           "Five providers over two base models with five different schemes (KGW, DiPMark, "
           "Unigram, AAR, SynthID): each perturbation now weighs 1/5. KGW, DiPMark and Unigram "
           "fall well below the threshold; AAR keeps a point mass of 1/5 and stays detected, and "
           "SynthID (a full distribution concentrated on few keyed tokens) crossed 4 on one seed of three.",
           (("A", "kgw", 101, ""), ("B", "dipmark", 202, ""), ("A", "unigram", 303, ""),
            ("B", "aar", 404, ""), ("A", "synthid", 505, ""))),
    Preset("Point mass under a clipped median (trade-off)",
           "The paper setting again, averaged with the rule median-clip:xi=1 instead of the mean: "
           "each provider's probabilities are clipped to within e^±1 of the per-token median before "
           "averaging, which bounds how far AAR's point mass can pull the average, and AAR falls "
           "below 4. But where AAR gives a token nothing, the median of the three is the smaller of "
           "the other two providers' probabilities, so each keeps the other's suppressed tokens "
           "suppressed and KGW and DiPMark become detectable instead: a robust centre trades one "
           "leak for another. No measured rule beats the mean on every scheme (docs/RESULTS.md), so "
           "the mean stays WASH's rule. Compare with the first preset on the same seed.",
           _PAPER_MIX, aggregate="median-clip:xi=1.0"),
    Preset("One model, 5 independent keys",
           "One base model and one scheme (KGW) served with five secret keys (paper Fig. 3a): five "
           "independent green lists cancel in the average, so each detector sees 1/5 of its signal.",
           tuple(("A", "kgw", k, "") for k in (101, 202, 303, 404, 505))),
    Preset("Coordinated watermark (control)",
           "Every provider applies the same key in the union vocabulary: the perturbations are "
           "identical, so averaging cannot cancel them and detection survives (paper Fig. 3c). "
           "This is why WASH needs independent keys.",
           (("A", "kgw", 42, "coordinated=true"), ("B", "kgw", 42, "coordinated=true"),
            ("A", "kgw", 42, "coordinated=true"))),
    Preset("The release's attack: one watermarked model diluted by two open ones",
           "How the paper's released code attacks: one anchor model keeps its watermark (KGW, as in "
           "the release's configuration) and the two other providers serve the same base models with "
           "no watermark at all. For the anchor's own detector this is the paper setting again: the "
           "average weighs its perturbation 1/3, so its z falls to about a third of its z alone, "
           "whether the partners carry watermarks of their own or none. Where the line-up matters is "
           "a keyless test of the served system (the Identify tab): it sees the sum of every fixed "
           "perturbation, one diluted 1/3 here against three independent ones in the first preset.",
           (("A", "kgw", 15485863, ""), ("B", "none", 0, ""), ("A", "none", 0, ""))),
    Preset("Single watermarked model",
           "One KGW provider served alone: the baseline every detector catches.",
           (("A", "kgw", 15485863, ""),), mode="single"),
    Preset("Paper setting on 0.5-2B instruct models (GPU)",
           "The first preset's three providers on two larger instruct models of two families, "
           "Qwen2.5-0.5B-Instruct (slot A: KGW and DiPMark) and SmolLM2-1.7B-Instruct (AAR), whose "
           "byte-level tokenizers of 151,643 and 49,152 regular tokens split many words differently, "
           "so routing and re-synchronisation are at work. Offered where a GPU and the model hub are "
           "present; compare its z with the first preset's on the small models.",
           _PAPER_MIX, models=("qwen2.5-0.5b", "smollm2-1.7b")),
    Preset("Three families, three tokenizers (GPU)",
           "Qwen2.5-0.5B-Instruct (KGW), SmolLM2-1.7B-Instruct (AAR) and Gemma-3-270M (DiPMark): "
           "three base models whose tokenizers differ (two byte-level BPEs and a SentencePiece "
           "vocabulary of 262,144), each with its own scheme and key, so the average is formed over "
           "the union of three vocabularies and each detector sees its perturbation at weight 1/3. "
           "Offered where a GPU and the model hub are present.",
           (("A", "kgw", 15485863, ""), ("B", "aar", 42, ""), ("C", "dipmark", 7, "")),
           models=("qwen2.5-0.5b", "smollm2-1.7b", "gemma3")),
)


def preset_names(models: Sequence[str] | None = None) -> list[str]:
    """Every preset's name, or those the app offering ``models`` can run (``Preset.offered``)."""
    return [p.name for p in PRESETS if models is None or p.offered(models)]


def preset(name: str) -> Preset:
    for p in PRESETS:
        if p.name == name:
            return p
    raise WashInputError(f"unknown preset '{name}' (accepted: {', '.join(preset_names())})")


def z_span(low: float, high: float) -> str:
    """``"2.3 to 4.1"``, or one number when the range is narrower than its rounding."""
    return f"{low:.1f}" if math.isclose(low, high, abs_tol=0.05) else f"{low:.1f} to {high:.1f}"


def other_models_note(measured_models: str, models: Sequence[str] | None) -> str:
    """A sentence when the page serves other models than the measured ones (then its numbers differ)."""
    served = " + ".join(dict.fromkeys(models or ()))
    return f" This page serves {served}, so its numbers will differ." if served and served != measured_models else ""


def measured(name: str, path: Path = MEASURED, models: Sequence[str] | None = None) -> str:
    """One markdown line: the final z range per provider over the measured seeds, or why there is none.

    ``models``: the models the page serves; when they are not the measured ones the
    line says so, since the numbers then describe other models.
    """
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = [r for r in csv.DictReader(handle) if r.get("preset") == name]
    except OSError:
        rows = []
    if not rows:
        return "Not measured yet (`python -m wash experiment presets`)."
    first = rows[0]
    parts = []
    for r in rows:
        span = z_span(float(r["z_min"]), float(r["z_max"]))
        who = "P1 alone" if r["condition"] == "alone" else f"P{int(r['provider']) + 1} {r['scheme']}"
        parts.append(f"{who} z {span}")
    ppl = [float(r["ppl_mean"]) for r in rows if r["condition"] == "preset" and r.get("ppl_mean")]
    tail = f"; perplexity {ppl[0]:.0f}" if ppl and math.isfinite(ppl[0]) else ""
    line = (f"Measured ({first['models']}, {first['tokens']} tokens, seeds {first['seeds']}, default prompt): "
            + "; ".join(parts) + tail + ".")
    return line + other_models_note(first["models"], models)


def description(name: str, models: Sequence[str] | None = None, path: Path = MEASURED) -> str:
    """What the page shows when the preset is picked: why, then what was measured."""
    p = preset(name)
    return f"**{p.name}.** {p.why}\n\n{measured(name, path, models)}"
