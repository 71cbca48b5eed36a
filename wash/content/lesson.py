"""The Lesson: five steps a class follows in order, as plain data (no Gradio here).

Each step is a ``wash.content.presets.Preset`` (providers, mode) plus what the click runs
beside it (new tokens, seed, comparison, or a Water-Probe identification instead
of a generation), what the class should look for and one question to discuss.

Predict, then run: the page shows a step's question before its run and its "what to
look for" (with the measured numbers) only once the run is done, so the card does not
give the outcome away. Every generation step runs, beside its text, the same providers
with every watermark off (the engine's ``unwatermarked`` mode, same prompt and seed):
its detectors' z are what text without a watermark scores, the baseline the class
reads every other line against. Steps 2 to 4 also keep provider 1 alone beside them
(the dashed line their texts speak of): their comparison runs both. Step 2, where
averaging first shows, offers the per-token distribution view.
``wash/ui/lesson.py`` turns a step into the Generate tab's (or the Identify tab's)
inputs and runs it through the same handlers, so a step shows exactly what the
page would show for the same settings.

Token counts are chosen so that each click finishes within ``CLICK_BUDGET_S`` on a
2-core CPU with the real offline models (``tools/lesson_time.py`` measures it). The
hand-written texts say what a step shows in words; the numbers come from the same
script's run over several seeds (``docs/bench-lesson.json``), read at run time by
:func:`measured`. ``tests/test_lesson.py`` checks every outcome a text states against
that file, so a re-run that contradicts a sentence fails a test.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from wash.core.errors import WashInputError
from wash.content.presets import Preset, other_models_note, z_span

#: What one step's click may take, click to finished, on a 2-core CPU with the real models.
CLICK_BUDGET_S = 30.0
#: Where ``tools/lesson_time.py`` writes its timings and the z of every step over several seeds.
MEASURED = Path(__file__).resolve().parents[2] / "docs" / "bench-lesson.json"
#: The comparison values a step runs beside its text (the Generate tab's, ``wash.ui.run.COMPARISONS``):
#: nothing, the unwatermarked run, or provider 1 alone and the unwatermarked run.
OFF, SINGLE, UNMARKED = "off", "single", "unwatermarked"
BOTH = f"{SINGLE}+{UNMARKED}"
#: How ``tools/lesson_time.py`` names a comparison run's lines in ``MEASURED`` (``P1 kgw alone``, ...).
ALONE, UNMARKED_LINE = " alone", " unwatermarked"
#: The Lesson tab's first lines: how to follow it.
INTRO = ("**A lesson in five steps.** Click the steps in order. A click sets the step's providers and "
         "settings and shows their run: the run recorded with the step's seed, replayed at reading speed "
         "(*live* below computes it afresh, each within half a minute on a 2-core CPU, with the same "
         "result). Predict first: the card asks its question before the run; *what to look for* shows once "
         "the run is done. Beside each text is the unwatermarked text: the same providers, prompt and seed "
         "with every watermark off. *Try this step yourself* opens the same settings in the Generate (or "
         "Identify) tab, to change a key, a scheme or N and see what moves.")
#: The identification a step runs instead of a generation: the Identify tab's systems and probe.
IDENTIFY_SYSTEMS = ("provider 1 alone", "WASH ensemble", "unwatermarked models")


@dataclass(frozen=True)
class Step:
    """One step of the lesson: a preset, how the click runs it, and what to say about it."""

    title: str
    preset: Preset
    tokens: int
    seed: int
    #: What runs beside it on the same prompt and seed: ``off``, ``unwatermarked`` (the same providers, every
    #: watermark off), or ``single+unwatermarked`` (provider 1 alone too).
    compare: str
    look_for: str
    question: str
    #: True: the click probes the providers with Water-Probe (the Identify tab) instead of generating.
    identify: bool = False
    #: True: a click on a token of its text shows each provider's distribution, the average and the consensus.
    distributions: bool = False

    @property
    def kind(self) -> str:
        return "identify" if self.identify else "generate"

    def setup(self, models: Sequence[str]) -> str:
        """One line: the providers and what the click runs, with the offered models filled in."""
        rows = self.preset.resolved(models)
        who = ", ".join(f"P{i + 1} {m}/{s}#{k}" for i, (m, s, k, _) in enumerate(rows))
        if self.identify:
            return (f"Providers: {who}. The click probes {', '.join(IDENTIFY_SYSTEMS)} with Water-Probe "
                    "(the Identify tab's fast probe); no key is used.")
        mode = "one provider alone" if self.preset.mode == "single" else f"WASH over {len(rows)} providers"
        shown = {SINGLE: "provider 1 alone", UNMARKED: "the same providers with every watermark off"}
        beside = " and ".join(shown[c] for c in self.compare.split("+") if c in shown)
        beside = f"; beside it, {beside}, on the same prompt and seed" if beside else ""
        return f"Providers: {who}. The click runs {mode}, {self.tokens} new tokens, seed {self.seed}{beside}."


#: Provider 1 is the same KGW provider in steps 1 to 3, so its text alone (step 1) is the
#: dashed line the comparison draws in steps 2 and 3.
_KGW = ("A", "kgw", 101, "")
_FIVE_KGW = (_KGW, ("A", "kgw", 202, ""), ("A", "kgw", 303, ""), ("A", "kgw", 404, ""), ("A", "kgw", 505, ""))

STEPS: tuple[Step, ...] = (
    Step("One watermarked model",
         Preset("Lesson 1: one watermarked model",
                "One provider serves its model with a KGW watermark: a secret key splits the vocabulary "
                "into a green and a red half at every step, and green tokens get a small boost. Its "
                "detector, holding the key, counts the green tokens in the text.",
                (_KGW,), mode="single"),
         tokens=80, seed=0, compare=UNMARKED,
         look_for="The line climbs as the text grows: every token adds a little evidence, and the count of "
                  "green tokens pulls away from what unwatermarked text would give. It crosses the red line "
                  "(z = 4) on every seed measured. The grey line is the same detector on the text "
                  "beside it: the same model, prompt and seed with the watermark off.",
         question="Nobody can see the watermark in the words. How can the detector be so sure?"),
    Step("WASH, N = 3",
         Preset("Lesson 2: WASH over three providers",
                "Three providers serve the same model with KGW, each with its own secret key. WASH draws "
                "every token from the average of their three distributions. Each detector still holds "
                "its own key and scores the same text.",
                (_KGW, ("A", "kgw", 202, ""), ("A", "kgw", 303, ""))),
         tokens=80, seed=0, compare=BOTH, distributions=True,
         look_for="The dashed line is provider 1 alone (step 1's text: same prompt and seed); the dotted "
                  "line is that z divided by 3. Provider 1's line under WASH ends well below the dashed one, "
                  "around the dotted one (a short text's z wanders by about 1 either way): in the average "
                  "its own boost weighs 1/3, and the two other keys push in unrelated directions. The other "
                  "providers fall the same way, though not always below 4: over five seeds, one of the "
                  "fifteen lines ended above it (none on this click's seed).",
         question="Why does averaging three watermarks weaken each one, rather than add them up?"),
    Step("WASH, N = 5",
         Preset("Lesson 3: WASH over five providers",
                "Five providers, the same model, five independent KGW keys: each boost now weighs 1/5 in "
                "the average.",
                _FIVE_KGW),
         tokens=80, seed=0, compare=BOTH,
         look_for="The lines sit lower still: on every seed measured all five end below 4, most of them "
                  "below the green line (z = 2), where unwatermarked text lies. Provider 1 follows its "
                  "dotted line, now its z alone divided by 5: the 1/N law.",
         question="If a provider's z falls like 1/N, how many providers would it take to hide a watermark "
                  "whose z alone is 20?"),
    Step("The survivor",
         Preset("Lesson 4: a watermark that survives",
                "Provider 1 now uses AAR: instead of boosting a list, it picks the next token itself by a "
                "keyed random draw, putting all its probability on one token (a point mass). Two KGW "
                "providers average with it.",
                (("A", "aar", 101, ""), ("A", "kgw", 202, ""), ("A", "kgw", 303, ""))),
         tokens=80, seed=0, compare=BOTH,
         look_for="Provider 1 (AAR) ends above the red line and above its dotted line (its z alone divided "
                  "by 3) on every seed measured: well above on this click's seed, only just on one seed of "
                  "five. The average keeps at least 1/3 "
                  "of the probability on AAR's chosen token whatever the others do, and each time that "
                  "token is drawn its detector gains a lot of evidence at once: a point mass fades more "
                  "slowly than a boost. The KGW providers fall as in step 2 (one of their ten lines over "
                  "five seeds still ended above 4). AAR alone writes the same text whatever the seed: its "
                  "keyed draw, not the seed, picks every token.",
         question="What could a provider change in its watermark to survive averaging, and what would that "
                  "cost the quality of its text?"),
    Step("Is this model watermarked?",
         Preset("Lesson 5: probing the model",
                "The five providers of step 3 again, but now nobody holds a key. Water-Probe asks a system "
                "for the next item of a list under two different prompts and measures how much its token "
                "rankings agree (S): a watermark fixed by a key makes them agree more than the bare model "
                "does. Each system's S is compared with 50 probes of the same model without watermarks: "
                "below p = 5% it is called watermarked.",
                _FIVE_KGW),
         tokens=0, seed=0, compare=OFF, identify=True,
         look_for="The verdicts: provider 1 alone is called watermarked, and so is the WASH ensemble, "
                  "whose texts in step 3 no longer showed the watermark to any detector; the same model "
                  "without watermarks is not. Every key's fixed nudge adds up in how the model behaves, "
                  "where a text's detector sees only its own. The probe is seeded: every click gives this "
                  "answer. Water-Probe's own z, shown for comparison with the paper, is not the verdict: it "
                  "comes out above 2 even for the model without watermarks.",
         question="Step 3's texts passed every detector, yet the model is caught. Who should test texts, "
                  "and who should test the model: a teacher checking an essay, or a regulator checking a "
                  "service?"),
)


def step(number: int) -> Step:
    """Step ``number`` (1-based), or a one-line error naming the accepted numbers."""
    if not 1 <= int(number) <= len(STEPS):
        raise WashInputError(f"unknown lesson step {number} (accepted: 1 to {len(STEPS)})")
    return STEPS[int(number) - 1]


def load_measured(path: Path = MEASURED) -> dict | None:
    """The committed measurement (``tools/lesson_time.py``), or ``None`` where this copy has none."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _z_part(label: str, values: Sequence[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    return f"{label} z {z_span(min(finite), max(finite))}" if finite else f"{label}: no score"


def load_average(uptime: str) -> float:
    """The 1-minute load average of an ``uptime`` line (``nan`` when it has none)."""
    match = re.search(r"load average:\s*([\d.]+)", uptime or "")
    return float(match.group(1)) if match else math.nan


def _quietest_click(data: dict, number: int) -> str:
    """The step's time in the round that started on the least loaded machine, with that load."""
    timed = [(load_average(r.get("uptime_before", "")), s["seconds"]) for r in data.get("rounds", [])
             for s in r.get("steps", []) if s.get("step") == number]
    timed = [(load, seconds) for load, seconds in timed if math.isfinite(load)]
    if not timed:
        return ""
    load, seconds = min(timed)
    return (f" Click to done: {seconds:.0f} s on {data.get('machine', 'the measuring machine')} "
            f"(1-minute load {load:.1f} when timed).")


def measured(number: int, path: Path = MEASURED, models: Sequence[str] | None = None) -> str:
    """One markdown line: what the step gave over the measured seeds and how long its click took."""
    data = load_measured(path)
    entry = next((e for e in (data or {}).get("steps", []) if e.get("step") == number), None)
    if entry is None:
        return "Not measured yet (`python -m tools.lesson_time`)."
    parts = []
    for label, values in entry.get("z", {}).items():
        parts.append(_z_part(label, values))
    for name, verdict in entry.get("identify", {}).items():
        parts.append(f"{name}: {verdict}")
    seeds = entry.get("seeds")
    over = f", seeds {seeds[0]} to {seeds[-1]}" if seeds and len(seeds) > 1 else ""
    took = _quietest_click(data, number)
    who = data.get("models_text", "")
    return (f"Measured ({who}{over}; docs/bench-lesson.json): " + "; ".join(parts) + "." + took
            + other_models_note(who, models))


def run_lines(z: dict[str, list[float]]) -> dict[str, list[float]]:
    """A measured step's lines of its own run: without provider 1 alone's and the unwatermarked run's."""
    return {label: values for label, values in z.items() if not label.endswith((ALONE, UNMARKED_LINE))}


def unmarked_lines(z: dict[str, list[float]]) -> dict[str, list[float]]:
    """A measured step's detectors on the unwatermarked text beside it."""
    return {label: values for label, values in z.items() if label.endswith(UNMARKED_LINE)}
