"""Time the app's Generate handler in process, without a browser or server (a script, not a test).

    WASH_APP_MODELS=tiny-smollm2,tiny-gemma3 python -m tools.handler_time --tokens 16 --repeats 3

Runs the page's default preset through ``make_generate`` and reports the median seconds
per generation (after one warm-up): the engine's time plus what the handler spends
building the live views (plots, highlighted text). Compare commits on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from tools.latency import default_request
    from wash.ui.handlers import make_generate
    from wash.ui.settings import app_models

    generate = make_generate(None)
    table, prompt, mode = default_request(app_models())

    def once(seed: int) -> float:
        started = time.perf_counter()
        for _ in generate(table, prompt, args.tokens, 1.0, seed, mode, "off", "eager"):
            pass
        return time.perf_counter() - started

    once(0)
    runs = [once(seed) for seed in range(1, args.repeats + 1)]
    print(json.dumps({"models": app_models(), "tokens": args.tokens, "runs_s": [round(r, 3) for r in runs],
                      "median_s": round(statistics.median(runs), 3), "load_average": list(os.getloadavg())}))


if __name__ == "__main__":
    main()
