"""How much the Generate handler's process grows when many threads take its requests (a script, not a test).

    WASH_MALLOC_ARENAS=0 python -m tools.arena_growth --requests 48   # glibc's default arenas
    WASH_MALLOC_ARENAS=2 python -m tools.arena_growth --requests 48   # the app's cap

The app's server runs each request on whichever of its worker threads is free; this
does the same in process, without a server: ``--threads`` threads (Gradio's pool),
``--concurrency`` requests at a time (the app's default limit), the page's default
preset on the models of ``WASH_APP_MODELS``. It applies ``limit_malloc_arenas`` as
``app.py`` does, warms up with ``--warmup`` requests, then prints the resident memory
growth after every 8 requests and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    from wash.ui.settings import app_models, limit_malloc_arenas

    cap = limit_malloc_arenas()  # before any thread starts, as app.py does
    from tools.latency import default_request
    from wash.ui.handlers import make_generate

    generate = make_generate(None)
    table, prompt, mode = default_request(app_models())
    gate = threading.Semaphore(args.concurrency)

    def request(seed: int) -> None:
        with gate:
            for _ in generate(table, prompt, args.tokens, 1.0, seed, mode, "off", "eager"):
                pass

    pool = ThreadPoolExecutor(args.threads)
    list(pool.map(request, range(args.warmup)))
    start = rss_mb()
    growth = []
    futures = [pool.submit(request, s) for s in range(args.warmup, args.warmup + args.requests)]
    for i, future in enumerate(futures):
        future.result()
        if i % 8 == 7:
            growth.append(round(rss_mb() - start, 1))
            print(f"{i + 1} requests: +{growth[-1]} MB", flush=True)
    print(json.dumps({"models": app_models(), "malloc_arenas": cap, "threads": args.threads,
                      "concurrency": args.concurrency, "warmup_requests": args.warmup,
                      "rss_after_warmup_mb": round(start, 1), "growth_mb_every_8_requests": growth,
                      "load_average": list(os.getloadavg())}))


if __name__ == "__main__":
    main()
