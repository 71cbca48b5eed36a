"""How much the Generate handler's process grows when many threads take its requests (a script, not a test).

    python -m tools.arena_growth --requests 48                      # as the app runs
    WASH_MALLOC_TRIM=0 python -m tools.arena_growth --requests 48   # no malloc_trim after a run
    WASH_MALLOC_ARENAS=2 python -m tools.arena_growth --requests 48 # two malloc arenas

The app's server runs each step of a streaming handler (each ``next()`` of its
generator) on whichever of its worker threads is free; this does the same in
process, without a server: ``--threads`` threads (Gradio's pool), ``--concurrency``
requests at a time (the app's default limit), the page's default preset on the
models of ``WASH_APP_MODELS``, each step on a free pool thread (``--no-hop``: a
request's steps all on one thread). It applies ``limit_malloc_arenas`` as ``app.py``
does, warms up with ``--warmup`` requests, then prints after every 8 requests the
growth of the resident memory and of glibc's heaps (``mallinfo2``: their size, the
part in use, the free part they keep), and one JSON line. Resident memory here is
anonymous memory (``RssAnon``): the models' weights, mapped from files, are left out.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor


def rss_anon_mb(pid: int | str = "self") -> float:
    """Anonymous resident memory of a process (heap, tensors; not file-backed pages), in MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("RssAnon"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no RssAnon in /proc/<pid>/status")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_mb() -> dict[str, float]:
    """glibc's heaps, all arenas: size, in use, free (kept by glibc), and mmap'd chunks, in MB."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {"heap": round(info.arena / 2**20, 1), "in_use": round(info.uordblks / 2**20, 1),
            "free": round(info.fordblks / 2**20, 1), "mmap": round(info.hblkhd / 2**20, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--no-hop", dest="hop", action="store_false",
                        help="run each request's steps on one thread (the server does not)")
    args = parser.parse_args()
    from wash.ui.settings import MALLOC_TRIM_ENV, app_models, limit_malloc_arenas

    cap = limit_malloc_arenas()  # before any thread starts, as app.py does
    from tools.latency import default_request
    from wash.ui.handlers import make_generate

    generate = make_generate(None)
    table, prompt, mode = default_request(app_models())
    gate = threading.Semaphore(args.concurrency)
    pool = ThreadPoolExecutor(args.threads)

    def request(seed: int) -> None:
        with gate:
            steps = generate(table, prompt, args.tokens, 1.0, seed, mode, "off", "eager")
            if not args.hop:
                for _ in steps:
                    pass
                return
            done = object()
            while pool.submit(next, steps, done).result() is not done:
                pass

    # the requests themselves run on threads of their own: the pool is for their steps
    runner = ThreadPoolExecutor(max(args.concurrency * 2, 4))
    list(runner.map(request, range(args.warmup)))
    start, start_heap = rss_anon_mb(), heap_mb()
    growth, heaps = [], []
    futures = [runner.submit(request, s) for s in range(args.warmup, args.warmup + args.requests)]
    for i, future in enumerate(futures):
        future.result()
        if i % 8 == 7:
            growth.append(round(rss_anon_mb() - start, 1))
            heaps.append(heap_mb())
            print(f"{i + 1} requests: +{growth[-1]} MB resident; heaps {heaps[-1]}", flush=True)
    print(json.dumps({"models": app_models(), "malloc_arenas": cap,
                      "malloc_trim": os.environ.get(MALLOC_TRIM_ENV, "1 (default)"), "threads": args.threads,
                      "concurrency": args.concurrency, "hop": args.hop, "tokens": args.tokens,
                      "warmup_requests": args.warmup, "rss_anon_after_warmup_mb": round(start, 1),
                      "heaps_after_warmup_mb": start_heap, "growth_mb_every_8_requests": growth,
                      "heaps_mb_every_8_requests": heaps, "load_average": list(os.getloadavg())}))


if __name__ == "__main__":
    main()
