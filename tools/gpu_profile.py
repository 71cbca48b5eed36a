"""Where an eager WASH step spends its time on a GPU, beyond the members' own forwards.

    python -m tools.gpu_profile OUTDIR [--cpu]

Run by tools/gpu_run.sh's second pass (docs/BENCHMARKS.md, "Dummy members at 8B shapes"): the
shape bench found WASH N = 3 on one 8B-shaped member at 1.54x that member's plain decode and
N = 3 over three members at 1.81x their sum. This builds the same dummy members, then for
``one_model_3`` and ``eager_3`` writes (a) a cProfile of the run sorted by own time and by
cumulative time, limited to the package's functions, and (b) the per-token latency with
parallel forwards on and off (``WASH_PARALLEL_FORWARDS``), and (c) torch's profiler table of
the CUDA runtime calls (synchronisations, copies) of the one-model run.
"""
from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import sys

import torch

from wash.bench.models import wash_ms
from wash.bench.shapes import build_members, cases_for, dummy_names

GPU = ["llama-3.1-8b@smollm2", "mistral-7b@gemma3", "qwen2.5-7b@smollm2"]
CPU = ["tiny-llama@smollm2", "tiny-mistral@gemma3", "tiny-qwen2@smollm2"]


def _stats(prof: cProfile.Profile, key: str, n: int = 35) -> str:
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats(key).print_stats(n)
    return buf.getvalue()


def main(out: str, cpu: bool) -> None:
    os.makedirs(out, exist_ok=True)
    device, dtype, tokens = ("cpu", torch.float32, 4) if cpu else ("cuda", torch.bfloat16, 32)
    names = dummy_names(CPU if cpu else GPU)
    build_members(names, device, dtype)
    cases = cases_for(names)
    timings: dict = {}
    for case in ("one_model_3", "eager_3"):
        specs, forwards = cases[case]
        wash_ms(specs, 8, forwards=forwards)  # warm-up
        for parallel in ("1", "0"):
            got = wash_ms(specs, tokens, forwards=forwards, seed=1, parallel_forwards=parallel == "1")
            timings[f"{case} parallel={parallel}"] = got
            print(case, "parallel", parallel, json.dumps(got), flush=True)
        prof = cProfile.Profile()
        prof.enable()
        wash_ms(specs, tokens, forwards=forwards, seed=1, parallel_forwards=True)
        prof.disable()
        with open(os.path.join(out, f"cprofile-{case}.txt"), "w") as fh:
            fh.write(_stats(prof, "tottime") + "\n\n" + _stats(prof, "cumulative"))
    with open(os.path.join(out, "profile-timings.json"), "w") as fh:
        json.dump(timings, fh, indent=2)
    if not cpu:
        specs, forwards = cases["one_model_3"]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as tp:
            wash_ms(specs, 16, forwards=forwards, seed=1)
        with open(os.path.join(out, "torch-profile-one_model_3.txt"), "w") as fh:
            fh.write(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))


if __name__ == "__main__":
    main(sys.argv[1], "--cpu" in sys.argv)
