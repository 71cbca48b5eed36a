"""Where an eager step's time goes (``python -m tools.bench_profile``): the figures behind
the explanations in docs/BENCHMARKS.md, printed as JSON.

* ``forward_cost``: one model's cached forward, 1 torch thread, median ms, for one new id
  with and without the output layer, for three ids without it, and each model's forward
  while the other runs beside it on the second core;
* ``eager_step``: WASH over gemma3 alone and over smollm2/gemma3/smollm2 (KGW), median ms
  of the whole step, of the forward inside gemma3's task, of gemma3's whole task (forward
  plus watermarks and union scatters) and of the parallel part of the step; what remains
  is the generation thread's own work.

It wraps engine internals with timers, so run it alone on an idle machine.
"""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from wash.bench.models import PROMPT, providers_for
from wash.core.provenance import cpu_description, load_average


def _forward_ms(lm, head: bool, ids_per_step: int = 1, steps: int = 20) -> float:
    from transformers import DynamicCache

    ids = lm.encode_prompt(PROMPT)
    cache = DynamicCache(config=lm.model.config)
    times = []
    with torch.no_grad():
        lm.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True, logits_to_keep=1)
        for _ in range(steps):
            x = torch.tensor([[ids[-1]] * ids_per_step])
            t0 = time.perf_counter()
            if head:
                lm.model(input_ids=x, past_key_values=cache, use_cache=True, logits_to_keep=1)
            else:
                lm.model.get_decoder()(input_ids=x, past_key_values=cache, use_cache=True)
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def forward_cost(lms: dict) -> dict:
    torch.set_num_threads(1)
    out = {m: {"with_output_layer_1_id": _forward_ms(lm, True), "decoder_only_1_id": _forward_ms(lm, False),
               "decoder_only_3_ids": _forward_ms(lm, False, 3)} for m, lm in lms.items()}
    with ThreadPoolExecutor(2, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        futures = {m: pool.submit(_forward_ms, lm, True, 1, 40) for m, lm in lms.items()}
        for m, f in futures.items():
            out[m]["with_output_layer_1_id_beside_the_other"] = f.result()
    return out


def eager_step(specs: list[str], tokens: int = 40) -> dict:
    import wash.engine.ensemble as engine
    from wash.engine import GenerationConfig, ProviderSpec, Generation

    spans: dict[str, list[float]] = {"gemma3_task": [], "gemma3_forward": [], "parallel_part": []}
    model_step, run_all = Generation.model_part, engine.side_by_side

    def timed_model_step(self, m):
        t0, f0 = time.perf_counter(), self.contexts[m].forward_s
        out = model_step(self, m)
        if m == "gemma3":
            spans["gemma3_task"].append((time.perf_counter() - t0) * 1000)
            spans["gemma3_forward"].append((self.contexts[m].forward_s - f0) * 1000)
        return out

    def timed_run_all(tasks):
        t0 = time.perf_counter()
        out = run_all(tasks)
        spans["parallel_part"].append((time.perf_counter() - t0) * 1000)
        return out

    Generation.model_part, engine.side_by_side = timed_model_step, timed_run_all
    try:
        result = engine.generate(GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs],
                                                  prompt=PROMPT, max_new_tokens=tokens, seed=0,
                                                  live_detection=False))
    finally:
        Generation.model_part, engine.side_by_side = model_step, run_all
    report = {k: statistics.median(v[1:]) for k, v in spans.items()}  # the first step holds the prompt
    report["step"] = result.timing.median_token_ms
    report["generation_thread_after_the_models"] = report["step"] - report["parallel_part"]
    return report


def main() -> None:
    from datetime import datetime, timezone

    from wash.engine import load_model

    lms = {m: load_model(m) for m in ("smollm2", "gemma3")}
    report = {"command": "python -m tools.bench_profile",
              "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": cpu_description(), "load_average_at_start": load_average(),
              "eager_step": {"gemma3 alone": eager_step(["gemma3:kgw:1"]),
                             "smollm2, gemma3, smollm2": eager_step(providers_for(3, ("smollm2", "gemma3")))},
              "forward_cost_ms": forward_cost(lms)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
