"""Per-token latency of one WASH run and of one model decoding alone, shared by both benches.

``wash.bench.models`` (the catalog's models on this machine) and ``wash.bench.shapes`` (dummy members
at any shape and device) time the same two things the same way, so their numbers compare;
this module is what both stand on, so neither bench imports the other.
"""

from __future__ import annotations

import statistics
import time

import torch

from wash.core.provenance import cpu_description

PROMPT = ("The committee published its annual report on the state of the regional railways, and the "
          "first chapter explains")


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples[1:] if len(samples) > 2 else samples)


def plain_decode_ms(name: str, tokens: int, backend: str = "local", top_k: int = 0) -> float:
    """Median per-token latency of one model decoding alone (greedy, KV cache), on ``backend``'s member.

    Under ``ray`` every token is one round trip to the model's actor, so the gap to
    ``local`` is the backend's own cost per call. ``top_k``: the context is told that
    only the top-k rows are served, so a Ray actor sends those instead of the whole
    row (``sampling.ServedRows``); the greedy token, the row's maximum, is the same.
    """
    from wash.engine.providers import member_of
    from wash.engine.sampling import ServedRows

    member = member_of(name, backend)
    served = None
    if top_k:
        none = torch.zeros(member.vocab_size, dtype=torch.bool)
        served = ServedRows.of([none], 1.0, top_k)
    ctx = member.context(member.encode_prompt(PROMPT), served=served)
    times = []
    for _ in range(tokens):
        t0 = time.perf_counter()
        nxt = int(torch.argmax(ctx.next_logits()))
        ctx.append([nxt])
        times.append((time.perf_counter() - t0) * 1000)
    return _median_ms(times)


def wash_ms(specs: list[str], tokens: int, reencode: bool = False, forwards: str = "eager", seed: int = 0,
            backend: str = "local", top_k: int = 0, parallel_forwards: bool | None = None) -> dict:
    """One WASH run's per-token latency: median and mean over its tokens, and the median over the
    tokens that every member took (``median_unrouted_ms``: a routed token is finished by its
    specialists alone, a cheaper step, so this is the eager step in which every model computed)
    and the mean without the first step (``mean_after_first_ms``).

    ``parallel_forwards``: the run's lanes (``GenerationConfig.parallel_forwards``); by default one
    shared thread for the re-encoding reference, which runs as mixing methods without caches run
    (one model after the other), and the environment's default otherwise."""
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate_stream
    from wash.engine.events import FinishedEvent, StepEvent

    if parallel_forwards is None and reencode:
        parallel_forwards = False
    lanes = {} if parallel_forwards is None else {"parallel_forwards": parallel_forwards}
    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT,
                           max_new_tokens=tokens, seed=seed, live_detection=False,
                           reencode_every_step=reencode, forwards=forwards, backend=backend, top_k=top_k, **lanes)
    unrouted: list[float] = []
    steps: list[float] = []
    for event in generate_stream(cfg):
        if isinstance(event, StepEvent):
            steps.append(event.elapsed_ms)
            if not event.routed:
                unrouted.append(event.elapsed_ms)
        elif isinstance(event, FinishedEvent):
            result = event.result
    steps_s = result.timing.per_token_ms * len(result.tokens) / 1000
    forward_s = sum(result.timing.forward_s.values())
    return {"median_token_ms": result.timing.median_token_ms, "mean_token_ms": result.timing.per_token_ms,
            "median_unrouted_ms": _median_ms(unrouted) if unrouted else None, "unrouted_tokens": len(unrouted),
            # Without the first step, which also feeds the prompt (a lazy run's mean is its statistic).
            "mean_after_first_ms": statistics.mean(steps[1:]) if len(steps) > 1 else None,
            "tokens": len(result.tokens), "routed_fraction": result.routing.routed_token_fraction,
            "forward_share": forward_s / steps_s,
            # Time beyond the forward passes themselves, relative to them: robust to a
            # shared machine's load, since both are measured inside the same steps.
            "overhead_vs_own_forwards": steps_s / forward_s - 1}


def _median_of(runs: list[dict]) -> dict:
    """Per-key median over rounds of the numeric fields (rounds without one left out), with each
    round's values kept."""
    out: dict = {}
    for key, value in runs[0].items():
        values = [r[key] for r in runs if isinstance(r[key], (int, float)) and not isinstance(r[key], bool)]
        if values:
            out[key] = statistics.median(values)
            if key in ("median_token_ms", "mean_token_ms"):
                out[key + "_rounds"] = values
        else:
            out[key] = value
    return out


def _machine() -> str:
    """The machine's kind and what this process computes on: ``Linux x86_64, 2 logical CPUs (AMD EPYC),
    2 torch threads, cpu``."""
    return (f"{cpu_description()}, {torch.get_num_threads()} torch threads, "
            f"{'cuda' if torch.cuda.is_available() else 'cpu'}")
