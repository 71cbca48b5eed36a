"""What one see-through scoring costs: seconds per (text, provider) row of a scheme's committed texts.

Why: EXP-Edit's and ITS-Edit's model-aware null reads all 420 key offsets in each of its
1,000 draws, so a row costs seconds where the other schemes' cost a fraction of one, and
re-scoring their cells is hours of CPU. This times ``see_through.score_row`` on the first
``--rows`` positives of a cell whose forwards are cached (``read`` first), with the
scheme's own verdicts (the alignment test at every cut) and the null's share apart.

Run from the repository root on an idle machine. To compare code versions, run the same
command with ``PYTHONPATH`` at a worktree of each commit, alternating, appending to one file::

    python tools/score_cost.py --scheme exp-edit --rows 3 --out docs/bench-score-cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="exp-edit")
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--out", type=Path, help="a JSON list to append this run's record to")
    parser.add_argument("--label", default="", help="what code this is (kept in the record)")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from wash.core.provenance import cpu_description, load_average
    from wash.core.version import code_version
    from wash.detection import score_ids, stored_text
    from wash.engine import ProviderSpec
    from wash.experiments.see_through import CUTS, PROFILE, SERVED, cells, score_row
    from wash.watermarks import build_scheme

    sub = next(s for _, _, _, s in cells(schemes=(args.scheme,), n_values=(args.n,)))
    rows = sub[(sub["provider_model"] == args.model) & (sub["role"] == "positive")].head(args.rows)
    total, verdicts = [], []
    for _, row in rows.iterrows():
        start = time.perf_counter()
        score_row(row, 1000)
        total.append(time.perf_counter() - start)
        served = stored_text(row["provider_model"], row["text"], PROFILE, SERVED)
        spec = ProviderSpec.parse(row["spec"])
        scheme = build_scheme(spec.scheme, spec.key, served.vocab_size, dict(spec.params))
        start = time.perf_counter()
        score_ids(scheme, served.ids, ("sum",), served, cuts=[*CUTS, len(served.ids)])  # the verdicts alone
        verdicts.append(time.perf_counter() - start)
    record = {"scheme": args.scheme, "n": args.n, "model": args.model, "rows": len(total),
              "label": args.label, "code": code_version(), "machine": cpu_description(),
              "load_average": load_average(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "row_s": [round(s, 2) for s in total], "median_row_s": round(statistics.median(total), 2),
              "median_verdicts_s": round(statistics.median(verdicts), 2)}
    print(json.dumps(record))
    if args.out is not None:
        runs = json.loads(args.out.read_text()) if args.out.exists() else []
        args.out.write_text(json.dumps([*runs, record], indent=2) + "\n")


if __name__ == "__main__":
    main()
