"""Two per-process costs the suite and the tools pay often: reading a cached tokenizer, and
opening one gradio client connection.

    python -m tools.load_costs [--repeats 5]

For each catalog tokenizer: seconds to read its cached directory with
``AutoTokenizer.from_pretrained`` (the files) and with ``models.read_tokenizer`` once its pickle
exists. For an httpx client, as gradio_client opens one per request: milliseconds with
certificate verification on (the CA bundle is loaded) and off (``tools.app_client`` on http).
Medians of ``--repeats`` in this one process. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from wash.core.provenance import command_line, cpu_description, load_average


def _median_s(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tokenizer_seconds(name: str, repeats: int) -> dict:
    from transformers import AutoTokenizer

    from wash.engine import cache_dir, load_tokenizer, read_tokenizer

    load_tokenizer(name)  # builds the cached directory if this machine has none yet
    directory = cache_dir() / "tokenizers" / name
    read_tokenizer(directory)  # leaves the pickle
    return {"files_s": round(_median_s(lambda: AutoTokenizer.from_pretrained(directory), repeats), 2),
            "pickle_s": round(_median_s(lambda: read_tokenizer(directory), repeats), 2)}


def client_ms(repeats: int) -> dict:
    import httpx

    return {verify: round(1000 * _median_s(lambda: httpx.Client(verify=verify == "verify").close(), repeats), 2)
            for verify in ("verify", "no_verify")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    report = {"command": command_line(["python", "-m", "tools.load_costs", *sys.argv[1:]]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_description(), "load_before": load_average(), "repeats": args.repeats,
              "tokenizer": {name: tokenizer_seconds(name, args.repeats) for name in ("smollm2", "gemma3")},
              "httpx_client_ms": client_ms(max(args.repeats, 20))}
    report["load_after"] = load_average()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
