"""How far the compiled backend's texts and probabilities stand from the local backend's.

    python -m tools.compiled_agreement --out docs/compiled-agreement.json

Runs WASH on the tiny models (real tokenizers) for each seed, forwards mode and line-up, once
on ``local`` and once on each compiled variant (``compiled`` and ``compiled:compile=false``),
and records per run whether the texts are equal and the largest difference in any served
probability (every candidate's, under every provider's distribution, the average and the
consensus, over the steps both runs share). Why a script: the compiled step's float sums may
move a draw, and docs/USAGE.md quotes how often that happens; the test suite checks a
tolerance on one run, this measures many. The line-ups are the fingerprint cases' ``MIXED`` and
``SCHEMES`` (``tests/fingerprint_cases.py``; routed spans re-synchronised across the two tokenizers).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

PROMPT = "The committee met on Tuesday to discuss"
LINEUPS = {"MIXED": ["tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2", "tiny-smollm2:unigram:3"],
           "SCHEMES": ["tiny-smollm2:kgw:11", "tiny-gemma3:aar:12", "tiny-smollm2:dipmark:13:coordinated=true"]}
VARIANTS = ("compiled", "compiled:compile=false")


def _run(specs: list[str], seed: int, forwards: str, tokens: int, backend: str) -> tuple[str, list]:
    from wash.engine import FinishedEvent, GenerationConfig, ProviderSpec, StepEvent, generate_stream

    config = GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT,
                              max_new_tokens=tokens, seed=seed, forwards=forwards, backend=backend,
                              live_detection=False)
    events = list(generate_stream(config))
    text = next(e.result.text for e in events if isinstance(e, FinishedEvent))
    return text, [e for e in events if isinstance(e, StepEvent)]


def _gap(a: list, b: list) -> float:
    """The largest served-probability difference over the steps drawn from the same candidates."""
    gaps = [0.0]
    for x, y in zip(a, b):
        if (x.union_id, x.candidate_ids) != (y.union_id, y.candidate_ids):
            break  # the texts parted here: later steps are not comparable
        for p, q in zip([*x.provider_probs, x.average_probs, x.consensus_probs],
                        [*y.provider_probs, y.average_probs, y.consensus_probs]):
            gaps += [abs(u - v) for u, v in zip(p or [], q or [])]
    return max(gaps)


def measure(seeds: list[int], tokens: int, argv: list[str]) -> dict:
    from wash.core.provenance import command_line, load_average

    started, t0 = load_average(), time.perf_counter()
    runs = []
    for name, specs in LINEUPS.items():
        for forwards in ("eager", "lazy"):
            for seed in seeds:
                text, steps = _run(specs, seed, forwards, tokens, "local")
                row: dict = {"lineup": name, "forwards": forwards, "seed": seed}
                for variant in VARIANTS:
                    other, other_steps = _run(specs, seed, forwards, tokens, variant)
                    row[variant] = {"same_text": other == text, "max_prob_gap": _gap(steps, other_steps)}
                runs.append(row)
                print(f"[agreement] {name} {forwards} seed {seed}: "
                      + ", ".join(f"{v} same={row[v]['same_text']} gap={row[v]['max_prob_gap']:.1e}"
                                  for v in VARIANTS), file=sys.stderr, flush=True)
    summary = {v: {"same_texts": sum(r[v]["same_text"] for r in runs), "runs": len(runs),
                   "max_prob_gap": max(r[v]["max_prob_gap"] for r in runs)} for v in VARIANTS}
    return {"command": command_line(["python", "-m", "tools.compiled_agreement", *argv]),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average_at_start": started, "seconds": round(time.perf_counter() - t0, 1),
            "prompt": PROMPT, "tokens": tokens, "seeds": seeds, "lineups": LINEUPS, "summary": summary, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.compiled_agreement", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2,3,4,5,6,7")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--out", type=Path)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    report = measure([int(s) for s in args.seeds.split(",") if s], args.tokens, argv)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(json.dumps(report["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
