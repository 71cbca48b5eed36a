"""What one identification probe costs: seconds, distributions read and S, for one system.

Why: a stateful ensemble (EXP-Edit, ITS-Edit, Water-Bag at WASH N = 3, 5) draws a
fresh key offset per sample, so a probe reads hundreds of thousands of per-state laws;
that, not the base models' forwards (cached on disk), is what its time goes into.
Run it from the repository root on an idle machine, once per code version to compare
(a worktree per commit), and quote the median of ``--repeats``::

    OMP_NUM_THREADS=1 python -m tools.probe_cost --scheme exp-edit --n 3 --samples 1000 --runs 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="exp-edit")
    parser.add_argument("--n", type=int, default=3, help="providers (1: the single model)")
    parser.add_argument("--samples", type=int, default=1000, help="samples per prompt and run")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="smollm2,gemma3")
    parser.add_argument("--rows", default="runs/identify-rows", help="base rows cached on disk ('' for none)")
    args = parser.parse_args(argv)

    from wash.detection import SERVED_ROWS, Probe, identify
    from wash.experiments import make_ensemble

    SERVED_ROWS.use_directory(args.rows or None)
    specs = make_ensemble(args.n, tuple(args.models.split(",")), [args.scheme], 0)
    mode = "single" if args.n == 1 else "wash"
    probe = Probe(version="v2", samples=args.samples, runs=args.runs, seed=0, serving="open", min_path=3)
    identify(specs, mode, Probe(version="v2", samples=20, runs=2, seed=1, serving="open"))  # load and warm
    seconds, result = [], None
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = identify(specs, mode, probe)
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"scheme": args.scheme, "n": args.n, "samples": args.samples, "runs": args.runs,
                      "seconds": [round(s, 2) for s in seconds], "median_s": round(statistics.median(seconds), 2),
                      "distributions": result.distributions, "s": result.s, "scores": result.scores}))


if __name__ == "__main__":
    main()
