"""docs/CLASSROOM.md, the teacher's kit: generated from the committed results and the Lesson's
measurement (``docs/bench-lesson.json``) by ``python -m wash report``.

Why generated: the handout quotes a dozen measured numbers to a class; typed by hand they went
stale when the results were re-scored, and nothing noticed. Here every number is read from a
summary CSV, a meta or the Lesson's record, so ``python -m wash report --check`` fails when one
differs. The prose (the idea, the answers, the plan, how to run the app) is fixed text with the
numbers filled in; it says nothing a number could contradict without the number saying it too.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from wash.reporting import results_tables as rt
from wash.detection import Z_THRESHOLD
from wash.core.env import LESSON_READING_SPEED
from wash.reporting import glossary
from wash.reporting.data import Folder
from wash.reporting.fmt import FPR_LEVEL, md_table, num, num_ci, pct, pct_ci, pval
from wash.reporting.headline import name, names
from wash.reporting.page import GENERATED, entropy_ratios

PAGE = "docs/CLASSROOM.md"
#: The Lesson's measurement, relative to the repository.
BENCH = "docs/bench-lesson.json"
#: The schemes of the "what survives" table, and how each watermarks, in words for a class.
HOW = {"kgw": "boosts a keyed green list", "dipmark": "reweights a keyed permutation",
       "aar": "picks the token by a keyed draw: a point mass",
       "synthid": "keyed tournament: its mass concentrates on few tokens"}
#: The line under which the Lesson calls a text washed out (the app draws it green).
WASHED = 2.0
#: A class period, and what each part of it is for: (minutes, what, what the teacher does).
PLAN = ((5, "The idea", "Show the two figures; one provider, one key, one nudge."),
        (5, "The z-score", "Read the glossary's z, p and false positive rate; ask question 1."),
        (5, "Step 1", "Click it; the class watches z climb past the red line, the grey line beside it (the same "
                      "model's text without the watermark). Question 1's answer."),
        (7, "Step 2", "Ask question 2 before the click, then click; compare provider 1 with its dashed line; "
                      "click a token to see the three distributions and their average."),
        (6, "Step 3", "Ask question 3 before the click; the lines sit near the green line."),
        (6, "Step 4", "Ask question 4 before the click: which scheme survives?"),
        (5, "Step 5", "Click; the model is caught though its texts passed. Question 5."),
        (6, "Discussion", "Questions 4 and 5 in groups; each group reports in one sentence."))


def _bench(repo: Path) -> dict | None:
    path = Path(repo) / BENCH
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _span(values) -> str:
    from wash.content.presets import z_span

    values = [v for v in values if math.isfinite(v)]
    return z_span(min(values), max(values))


def _steps(bench: dict | None) -> dict[int, dict]:
    return {s["step"]: s for s in (bench or {}).get("steps", [])}


def header(F: dict[str, Folder]) -> list[str]:
    f = F["tpr-paper"]
    return [GENERATED.replace("the committed results/ folders", f"the committed results/ folders and {BENCH}"), "",
            "# WASH in the classroom: averaging watermarked language models", "",
            "A handout for the app's **Lesson** and **Quiz** tabs, with answers and a plan for the teacher. Every number "
            "below is read from a committed run: a folder under `results/` named beside it (commands and dates on "
            f"[RESULTS.md](RESULTS.md)), or the Lesson's own measurement, [`{BENCH}`](bench-lesson.json). "
            f"Models: SmolLM2-135M and Gemma-3-270M on a CPU; per-text runs use {f.config.get('prompts')} prompts "
            f"x {f.config.get('tokens')} new tokens; brackets are 95% intervals. Words in bold are explained "
            f"under [{glossary.HEADING}]({glossary.ANCHOR}).", ""]


def idea(F: dict[str, Folder]) -> list[str]:
    from wash.reporting.dilution import dilution_fits

    lines = ["## The idea", "",
             "A provider that watermarks its model nudges every next-token distribution with a secret **key**; "
             "its detector, holding the key, finds the nudge again in a text. WASH writes each token from the "
             "**average** of N providers' distributions, each watermarked with its own key. In the average each "
             "nudge weighs 1/N and the other keys push in unrelated directions, so a provider's detector sees "
             "about 1/N of its signal.", "",
             '<img src="figures/decay-kgw-paper.png" alt="KGW\'s z against the number of providers N" width="48%"> '
             '<img src="figures/dilution.png" alt="How the signal shrinks with N: the 1/N law" width="50%">', ""]
    f = F.get("decay-kgw-paper")
    if f is None:
        return lines
    rows = {int(r["n"]): r for _, r in f.select(setting="fixed", scheme="kgw").iterrows()}
    z = {n: num_ci(r["mean"], r["ci_low"], r["ci_high"]) for n, r in rows.items()}
    times = f.select(setting="fixed", scheme="kgw")["mean_times_n"]
    fit = next((x for x in dilution_fits(F) if x.measure.startswith("per-text z") and x.label.startswith("KGW")), None)
    law = (f" *Right (its left panel): the 1/N law.* Fitting that z to N^a gives a = {fit.row[4]}: read as "
           f"{fit.row[5]} (dashed red is 1/N, dashed green 1/sqrt(N))." if fit else "")
    lines += [f"*Left: one base model, N independent KGW keys (`results/{f.name}`).* z {z[1]} alone, {z[3]} at "
              f"N = 3, {z[5]} at N = 5; z x N stays between {num(times.min())} and {num(times.max())}. Texts above "
              f"z = {Z_THRESHOLD:g}: {pct(rows[1]['detected_rate'])} alone, {pct(rows[3]['detected_rate'])} at "
              f"N = 3, {pct(rows[5]['detected_rate'])} at N = 5." + law, ""]
    return lines


def z_score() -> list[str]:
    tail = 0.5 * math.erfc(Z_THRESHOLD / math.sqrt(2))
    return ["## The z-score in two sentences", "",
            "The detector adds up per-token evidence (KGW: how many tokens are on its key's green list) and **z** "
            "says how far that total lies above what text written without the key would give, in standard "
            f"deviations. Unwatermarked text stays near 0; above z = {Z_THRESHOLD:g} a one-sided normal test is "
            f"wrong for about {glossary.z_line_rate()} unwatermarked texts (**p** = {pval(tail)}).", "",
            f"Two lines, two questions. The app marks a text *detected* at z above {Z_THRESHOLD:g}, a strict line "
            f"of its own. The results tables below decide at a **false positive rate** of {FPR_LEVEL}: a threshold "
            f"set so that {FPR_LEVEL} of unwatermarked texts pass it, lower than {Z_THRESHOLD:g}. So a text can "
            "read *not detected* in the app and still count as detected in the tables.", ""]


def _survive_row(t: pd.DataFrame, f: Folder, scheme: str) -> list[str]:
    one = t[(t["scheme"] == scheme) & (t["setting"] == "single")].iloc[0]
    five = t[(t["scheme"] == scheme) & (t["setting"] == "WASH N=5")].iloc[0]
    z1, z5 = f.row(scheme=scheme, mode="single"), f.row(scheme=scheme, mode="wash", n=5)
    return [name(scheme), HOW[scheme], pct_ci(one["tpr"], one["tpr_low"], one["tpr_high"]),
            pct_ci(five["tpr"], five["tpr_low"], five["tpr_high"]),
            f"{num(z1['mean_z_pos'])} -> {num(z5['mean_z_pos'])}"]


def survival(root: Path, F: dict[str, Folder]) -> list[str]:
    f = F.get(rt.DETECTION_FOLDER)
    if f is None:
        return []
    t = rt.detection_table(root)
    rows = [_survive_row(t, f, s) for s in HOW if f.row(scheme=s, mode="single") is not None]
    return ["## What survives, and why", "",
            f"Share of texts a provider's own detector flags (its **detection rate**), at a threshold that flags "
            f"{FPR_LEVEL} of unwatermarked texts (`results/{f.name}`, paper serving, WASH at N = 5):", "",
            *md_table(["scheme", "how it watermarks", "alone", "WASH N = 5", "mean z alone -> N = 5"], rows), "",
            *_point_mass(F), *_probe(root, F)]


def _point_mass(F: dict[str, Folder]) -> list[str]:
    e = F.get("entropy")
    text = ("**Why a keyed point mass fades slowly.** AAR puts all its probability on one token. In the average "
            "that token keeps at least 1/N of the probability whatever the others do, and each time it is drawn "
            "the detector gains a large score at once. KGW's boost is spread thin over half the vocabulary and "
            "diluted to 1/N.")
    if e is not None:
        r = entropy_ratios(e)
        aar, kgw = r[(r["scheme"] == "aar") & (r["n"] == 3)], r[(r["scheme"] == "kgw") & (r["n"] == 3)]
        if len(aar) and len(kgw):
            a = aar.iloc[0]
            text += (f" Measured (`results/{e.name}`, an older engine: read the shape, not the digits): at N = 3 "
                     f"AAR keeps {num(a['mean'])} times its 1/N share of z ({num(a['min'])} to {num(a['max'])} over "
                     f"{int(a['count'])} serving settings), KGW {num(kgw.iloc[0]['mean'])}.")
    return [text, ""]


def _identified_at(root: Path, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    t = rt.identification_table(root)
    full = t[(t["samples"] == t["samples"].max()) & (t["mode"] == "wash") & (t["n"] == n)]
    return full[full["identified"]], full[~full["identified"]]


def _probe(root: Path, F: dict[str, Folder]) -> list[str]:
    if rt.IDENTIFICATION_FOLDER not in F:
        return []
    caught, missed = _identified_at(root, 5)
    null_runs = int(rt.identification_table(root)["null_runs"].max())
    return ["**Asking the model instead of the text.** **Water-Probe** needs no key: it compares how a system "
            "ranks tokens under two different prompts. Under WASH at N = 5, "
            + (f"{names(caught['scheme'])} {'are' if len(caught) > 1 else 'is'} still identified (Holm-corrected "
               f"permutation p {pval(caught['p_holm'].max())} against {null_runs} unwatermarked runs)"
               if len(caught) else "no system is identified")
            + (f"; {names(missed['scheme'])} {'are' if len(missed) > 1 else 'is'} not" if len(missed) else "")
            + f" (`results/{rt.IDENTIFICATION_FOLDER}`).", ""]


def _quietest(bench: dict) -> tuple[float, dict[int, float]]:
    """The least loaded round's 1-minute load and its click-to-done time per step."""
    from wash.content.lesson import load_average

    rounds = [(load_average(r.get("uptime_before", "")), r) for r in bench.get("rounds", [])]
    rounds = [(load, r) for load, r in rounds if math.isfinite(load)]
    if not rounds:
        return math.nan, {}
    load, r = min(rounds, key=lambda x: x[0])
    return load, {s["step"]: s["seconds"] for s in r.get("steps", [])}


def _beside(entry: dict) -> str:
    """The unwatermarked text's detectors beside a step, where it was measured ("" where not)."""
    from wash.content.lesson import unmarked_lines

    values = [v for vs in unmarked_lines(entry.get("z", {})).values() for v in vs]
    return f"; the unwatermarked text beside it: every detector z {_span(values)}" if values else ""


def _step_rows(steps: dict[int, dict]) -> list[list[str]]:
    from wash.content.lesson import run_lines

    rows = []
    if 1 in steps:
        rows.append(["1", "one KGW provider alone", (f"z above {Z_THRESHOLD:g} on every seed "
                     f"({_span(steps[1]['z']['P1 kgw'])})" if min(steps[1]["z"]["P1 kgw"]) > Z_THRESHOLD
                     else f"z {_span(steps[1]['z']['P1 kgw'])}") + _beside(steps[1])])
    for number, n in ((2, 3), (3, 5)):
        if number not in steps:
            continue
        z = run_lines(steps[number]["z"])
        above = sum(v > Z_THRESHOLD for vs in z.values() for v in vs)
        lines = sum(len(vs) for vs in z.values())
        rows.append([str(number), f"WASH over {n} KGW keys, provider 1 alone beside it",
                     f"provider 1 ends around its z alone / {n} ({_span(z['P1 kgw'])}); every line "
                     f"{_span([v for vs in z.values() for v in vs])}, {above} of {lines} above "
                     f"{Z_THRESHOLD:g}" + _beside(steps[number])])
    if 4 in steps:
        z = steps[4]["z"]
        held = all(w > Z_THRESHOLD and w > a / 3 for w, a in zip(z["P1 aar"], z["P1 aar alone"]))
        rows.append(["4", "WASH over AAR + 2 KGW keys, AAR alone beside it",
                     (f"AAR above {Z_THRESHOLD:g} and above its z alone / 3 on every seed " if held else "AAR ")
                     + f"({_span(z['P1 aar'])}; alone {_span(z['P1 aar alone'])}); the KGW lines "
                     f"{_span([v for k, vs in run_lines(z).items() if 'kgw' in k for v in vs])}"
                     + _beside(steps[4])])
    if 5 in steps:
        rows.append(["5", "Water-Probe (fast probe) on step 3's five providers",
                     "; ".join(f"{who}: {_verdict(v)}" for who, v in steps[5].get("identify", {}).items())])
    return rows


def _verdict(text: str) -> str:
    """``watermarked at 5% (p 5.1e-05)``: the Identify tab's verdict and its p, without Water-Probe's own z."""
    found = re.search(r"\(p ([^,)]+)", text)
    return text.split(" (")[0] + (f" (p {found.group(1)})" if found else "")


def lesson(bench: dict | None) -> list[str]:
    steps = _steps(bench)
    if not steps:
        return []
    first = steps[min(steps)]
    load, times = _quietest(bench)
    lines = ["## The five steps of the Lesson tab", "",
             f"Each generation step writes {first.get('tokens')} new tokens on {bench.get('models_text')} after the "
             f"prompt \"{bench.get('prompt')}\"; the click runs seed {first.get('seed')}. Final z over seeds "
             f"{first['seeds'][0]} to {first['seeds'][-1]}:", "",
             *md_table(["step", "what the click runs", "what the class sees"], _step_rows(steps)), ""]
    if times:
        lines += [f"Click to done, live, on {bench.get('machine')} (1-minute load {load:.1f} when the least loaded "
                  f"of {len(bench.get('rounds', []))} rounds began): "
                  + ", ".join(f"{times[s]:.0f}" for s in sorted(times)) + f" s for steps 1 to {max(times)}.", ""]
    speed = LESSON_READING_SPEED
    lines += [f"Those times are of live runs. By default a click replays the step's recorded run (the same seed, "
              f"models and engine, so the same text, z lines and verdicts) at {speed:g} tokens/s: "
              f"{first.get('tokens') / speed:.0f} s for a {first.get('tokens')}-token step, with no model computing "
              "and no wait behind other clicks. The pace control above the status offers *recorded, at once* and "
              "*live*; the line above the status says which run a click shows, and a recording made by another "
              "engine is not replayed (the step runs live).", ""]
    return lines


def quiz() -> list[str]:
    """The Quiz tab, for a class: its questions as ``wash.content.quiz`` defines them, and how to run it."""
    from wash.content.quiz import QUESTIONS, key, letters, mode_of

    rows = [[str(n), q.preset, f"\"{q.prompt()}\"",
             "; ".join(f"{x}: {q.system(mode_of(n, x))}" for x in letters(n)), ", ".join(sorted(key(n))) or "none"]
            for n, q in enumerate(QUESTIONS, start=1)]
    return ["## The blind quiz (the Quiz tab)", "",
            "After the Lesson, each student opens the **Quiz** tab on their own screen. A question shows two or "
            f"three continuations of one prompt ({QUESTIONS[0].tokens} new tokens each, seed {QUESTIONS[0].seed}), "
            "in an order shuffled once per question, so text B is the same text for everyone. The student ticks "
            "the texts made by watermarked providers and submits; the reveal gives each text's system, each "
            f"provider's detector verdict (z above {Z_THRESHOLD:g}) and z, and its z trace. A WASH text counts as "
            "watermarked even when no detector finds it: that is the point to discuss.", "",
            *md_table(["question", "providers (preset)", "prompt", "each text's system", "the answer: watermarked"],
                      rows), "",
            "The texts are recorded runs (`python -m tools.quiz_record`), so the tab runs no model and thirty "
            "students answer at once. The **class tally** under the questions counts each student's first answer "
            "per question (right, wrong, how often each text was ticked); *Refresh the tally* shows the latest. "
            "Show it on the projector, discuss, then *Reset tally* before the next class (set "
            "`WASH_QUIZ_TEACHER_CODE` when the app starts to make the reset ask for a code).", ""]


def answers(root: Path, F: dict[str, Folder], bench: dict | None) -> list[str]:
    steps = _steps(bench)
    hide = math.floor(20 / Z_THRESHOLD) + 1
    wash = math.floor(20 / WASHED) + 1
    step2 = (f" Step 2 shows it: provider 1 alone ends at z {_span(steps[2]['z']['P1 kgw alone'])}, under WASH at "
             f"{_span(steps[2]['z']['P1 kgw'])}." if 2 in steps else "")
    caught, _ = _identified_at(root, 5) if rt.IDENTIFICATION_FOLDER in F else (pd.DataFrame(), None)
    probe = (f" Under WASH at N = 5 the model test still identifies {names(caught['scheme'])}." if len(caught) else "")
    qa = [
        ("A detector counts green tokens. Why does a longer text make it more certain?",
         "Each token adds a little evidence. The watermark's surplus of green tokens grows in proportion to "
         "the length, the chance wobble of the count only with its square root, so z grows with the square root "
         "of the length: step 1's line climbs."),
        ("Why does averaging three watermarks weaken each one instead of adding them up?",
         "Each detector looks only for its own key. In the average its own boost weighs 1/3; the other two keys "
         "boost other, unrelated tokens, which to this detector look like noise, not extra evidence." + step2),
        (f"If z falls like 1/N, how many providers hide a watermark whose z alone is 20?",
         f"20 / N must drop below {Z_THRESHOLD:g}: N = {hide} (20 / {hide} = {20 / hide:.1f}); below the green "
         f"line at {WASHED:g}, N = {wash}. Only for schemes that do fall like 1/N: AAR falls slower."),
        ("Why does a point mass survive averaging better than a boost? What would a provider pay in text "
         "quality to use one?",
         "The average keeps at least 1/N of the probability on the point mass's token whatever the others do, "
         "and each time it is drawn its detector gains a large score at once. The price: the keyed draw, not "
         "chance, picks every token, so the same prompt gives the same text (step 4's AAR alone writes the "
         "same text on every seed); the texts lose their variety."),
        ("Per-text detection and probing the model give different answers under WASH. Which question matters "
         "to whom: a teacher checking an essay, a regulator checking a service?",
         "The teacher has one text and no access to the model: per-text detection, which WASH defeats for most "
         "schemes. The regulator can query the service many times: a model test such as Water-Probe, which "
         "needs no key and sees every key's nudge add up." + probe),
    ]
    lines = ["## Questions, with answers for the teacher", ""]
    for i, (q, a) in enumerate(qa, 1):
        lines += [f"{i}. {q}", f"   *Answer:* {a}", ""]
    return lines


def plan() -> list[str]:
    start, rows = 0, []
    for minutes, what, how in PLAN:
        rows.append([f"{start} to {start + minutes} min", what, how])
        start += minutes
    return [f"## A {start}-minute plan", "", *md_table(["when", "what", "the teacher"], rows), ""]


def running(bench: dict | None) -> list[str]:
    from wash.core.env import APP_CONCURRENCY, GRADIO_SERVER_NAME

    worst = max((s for r in (bench or {}).get("rounds", []) for s in (x["seconds"] for x in r.get("steps", []))),
                default=None)
    click = f" A live click took up to {worst:.0f} s in the measurement above." if worst else ""
    return ["## Running the app for a class", "",
            "* **A projector.** One machine runs the app (`make run`, then http://localhost:7860) and the teacher "
            "clicks the steps while the class watches and answers before each click." + click,
            "* **A duplicated Space.** On the Hugging Face page of the project's Space, *Duplicate this Space* "
            "gives the class its own copy, so it does not queue behind other visitors; build one from this "
            "repository instead with `make space` ([SPACE.md](SPACE.md)). The app runs "
            f"{APP_CONCURRENCY.default.strip('`')} generations at once (`{APP_CONCURRENCY.name}`); on a free CPU "
            "Space thirty students clicking together wait in a queue, so let groups of four or five share a screen.",
            f"* **A local network.** The app listens on every interface (`{GRADIO_SERVER_NAME.name}` defaults to "
            f"{GRADIO_SERVER_NAME.default}): students on the same network open http://THE-TEACHER'S-ADDRESS:7860. "
            "Where they cannot reach the machine, `GRADIO_SHARE=True python app.py` asks Gradio for a public "
            "share link (it needs the internet).", ""]


def on_a_space(repo: Path) -> list[str]:
    check = _space_check(repo)
    served = " + ".join(check["app"].get("status", {}).get("models", [])) if check else ""
    ready = (f" On the committed Space check ([space-check.json](space-check.json), serving {served}) the models "
             f"were ready {check['app']['ready_s']:.0f} s after the start." if check else "")
    return ["## What numbers to expect on a Space", "",
            "On a Space, SmolLM2 comes from the model hub (its original weights), not from the quantised copy "
            "behind this handout's numbers, so its texts, and every z measured on them, differ from the tables "
            "above: expect the same shapes (z about 1/N, AAR above its line in step 4, the model caught in step 5), "
            "not the same digits. Where the hub cannot be reached the Space serves Gemma-3-270M alone and its page "
            "says so; the steps then run on Gemma and the numbers differ again. The first start dequantises the "
            "models before the first click." + ready, ""]


def _space_check(repo: Path) -> dict | None:
    try:
        data = json.loads((Path(repo) / "docs" / "space-check.json").read_text(encoding="utf-8"))
        float(data["app"]["ready_s"])
        return data
    except (OSError, ValueError, KeyError, TypeError):
        return None


def page(root: Path, F: dict[str, Folder], repo: Path) -> str | None:
    """The handout, or None where the results it quotes are missing."""
    if rt.DETECTION_FOLDER not in F:
        return None
    bench = _bench(repo)
    lines = [*header(F), *idea(F), *z_score(), *survival(root, F), *lesson(bench), *quiz(), *answers(root, F, bench),
             *plan(), *glossary.section(), "", *running(bench), *on_a_space(repo)]
    return "\n".join(lines).rstrip() + "\n"
