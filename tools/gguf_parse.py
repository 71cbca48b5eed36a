"""How long a cache build spends parsing the packaged GGUF files, with and without ``gguf_parsed_once``.

    python -m tools.gguf_parse [--repeats 3]

For each packaged model: the seconds one ``GGUFReader`` takes to parse the file
(metadata, vocabulary and merges), and how many times a tokenizer-plus-model load
through transformers opens it, counted inside and outside ``cache.gguf_parsed_once``
(the load itself is not timed: it dequantises every tensor). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time


def parse_seconds(path: str, repeats: int) -> list[float]:
    import gguf

    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        gguf.GGUFReader(path)
        out.append(round(time.perf_counter() - start, 2))
    return out


def opens_per_load(directory: str, file: str, once: bool) -> int:
    """Parses a tokenizer-plus-model load makes (each ``GGUFReader`` built counts one)."""
    import torch
    from gguf.gguf_reader import GGUFReader
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from wash.engine import gguf_parsed_once

    counted = {"n": 0}
    init = GGUFReader.__init__

    def counting(self, *args, **kwargs):
        counted["n"] += 1
        init(self, *args, **kwargs)

    GGUFReader.__init__ = counting
    try:
        with gguf_parsed_once() if once else contextlib.nullcontext():
            AutoTokenizer.from_pretrained(directory, gguf_file=file)
            AutoModelForCausalLM.from_pretrained(directory, gguf_file=file, dtype=torch.float32)
    finally:
        GGUFReader.__init__ = init
    return counted["n"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    from wash.engine import gguf_file

    report = {"load_average_start": [round(x, 2) for x in os.getloadavg()], "models": {}}
    for name in ("smollm2", "gemma3"):
        directory, file = gguf_file(name, lambda _m: None)
        seconds = parse_seconds(os.path.join(directory, file), args.repeats)
        report["models"][name] = {
            "parse_s": seconds, "parse_median_s": statistics.median(seconds),
            "parses_per_build_plain": opens_per_load(directory, file, once=False),
            "parses_per_build_once": opens_per_load(directory, file, once=True)}
    report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
