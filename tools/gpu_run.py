"""The Python steps of the prepared GPU run (``tools/gpu_run.sh OUTDIR`` calls them in order).

``versions FILE``: python, torch, transformers, the GPU and its driver; that ``wash``,
its bench and this module import without the app's packages (gradio, plotly, gguf,
ray are absent on the GPU machine); that the bundled tokenizers are in the cache.

``smoke FILE``: the catalog models' real architectures (SmolLM2-135M's and
Gemma-3-270M's shapes as dummy members, random weights) in bf16 on the GPU: each
member's parameters and buffers all on the device in the dtype asked for, finite
logits and a distribution that sums to 1; then seeded WASH runs with mixed schemes
(eager twice, to see whether a seed fixes the text there, lazy, and eager under the
paper's top-k 10 profile), every probability an event reports finite and in [0, 1],
every detection z finite; on CUDA, the host-device copies of a few eager steps
counted with torch's profiler; last, a run with the edit-distance schemes, whose
detectors align on CUDA where there is one (never run on a GPU before).

``summary DIR``: the numbers to read first, from the JSON files the steps wrote.

``WASH_GPU_RUN_CPU=1`` swaps in the tiny shapes on the CPU in float32 (the same code),
which is how CI runs every step (tests/test_gpu_run.py). Each step writes its JSON
after every part, so a step stopped by its time limit still leaves what it found.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

#: What each mode runs: the smoke's members, device and dtype, tokens per run.
MODES = {
    "gpu": {"smoke": ["smollm2-135m@smollm2", "gemma-3-270m@gemma3"], "device": "cuda", "dtype": "bfloat16",
            "tokens": 32, "plain_tokens": 24, "profile_tokens": 6, "edit_tokens": 16},
    # float32: bf16 matrix products on a CPU without bf16 units take ~10x longer (tests/test_models.py
    # builds a member in bf16 on the CPU).
    "cpu": {"smoke": ["tiny-llama@smollm2", "tiny-gemma3@gemma3"], "device": "cpu", "dtype": "float32",
            "tokens": 6, "plain_tokens": 4, "profile_tokens": 0, "edit_tokens": 0},
}
#: Modules the app needs and the GPU machine lacks: the bench path must not import them.
APP_ONLY = ("gradio", "plotly", "gguf", "ray")


def mode() -> dict:
    from wash.core.env import gpu_run_cpu

    return MODES["cpu" if gpu_run_cpu() else "gpu"]


def _writer(path: str, report: dict):
    def save() -> None:
        Path(path).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return save


def versions(path: str) -> dict:
    import importlib.util

    report: dict = {"imports": {}}
    save = _writer(path, report)
    for module in ("wash", "wash.cli", "wash.bench.models", "wash.bench.shapes", "wash.engine.ensemble",
                   "wash.engine.compiled_members"):
        try:
            __import__(module)
            report["imports"][module] = "ok"
        except Exception as err:  # noqa: BLE001 - what failed is the finding
            report["imports"][module] = f"{type(err).__name__}: {err}"
    report["app_only_modules_present"] = {m: importlib.util.find_spec(m) is not None for m in APP_ONLY}
    save()
    from wash.engine import cache_dir, marker_ok, shape_names
    from wash.bench.shapes import environment
    from wash.core.version import code_version

    report["environment"] = environment()
    report["code"] = code_version()
    report["shapes"] = shape_names()
    report["tokenizers_cached"] = {t: marker_ok(cache_dir() / "tokenizers" / t) for t in ("smollm2", "gemma3")}
    report["ok"] = (all(v == "ok" for v in report["imports"].values())
                    and all(report["tokenizers_cached"].values()))
    save()
    return report


def _finite(values) -> bool:
    return all(v is None or (math.isfinite(v) and -1e-9 <= v <= 1 + 1e-9) for v in values)


def check_events(events: list) -> dict:
    """What a run's events say about its distributions: every reported probability finite and in [0, 1]."""
    from wash.engine import FinishedEvent, ResyncEvent, StepEvent

    steps = [e for e in events if isinstance(e, StepEvent)]
    result = next(e.result for e in events if isinstance(e, FinishedEvent))
    probs_ok = all(_finite(p for row in e.provider_probs if row for p in row)
                   and _finite(e.average_probs or []) and _finite(e.consensus_probs or []) for e in steps)
    numbers_ok = all((e.linf is None or math.isfinite(e.linf)) and (e.entropy is None or math.isfinite(e.entropy))
                     and all(z is None or math.isfinite(z) for z in e.live_z) for e in steps)
    z_ok = all(math.isfinite(d.z) for d in result.detection)
    return {"tokens": len(steps), "finish": result.finish_reason, "text": result.text[:300],
            "routed_fraction": result.routing.routed_token_fraction,
            "resyncs": sum(isinstance(e, ResyncEvent) for e in events),
            "mean_token_ms": result.timing.per_token_ms, "median_token_ms": result.timing.median_token_ms,
            "z": [round(d.z, 3) for d in result.detection],
            "probabilities_finite_in_0_1": probs_ok, "linf_entropy_z_finite": numbers_ok, "detection_z_finite": z_ok,
            "ok": bool(steps) and probs_ok and numbers_ok and z_ok}


def _member_check(name: str, device: str, dtype, plain_tokens: int) -> dict:
    import itertools

    import torch

    from wash.bench.models import PROMPT, plain_decode_ms
    from wash.engine import LocalMember, load_model

    t0 = time.perf_counter()
    lm = load_model(name, device=device, dtype=dtype)
    if lm.device.type == "cuda":
        torch.cuda.synchronize(lm.device)
    build_s = time.perf_counter() - t0
    tensors = list(itertools.chain(lm.model.parameters(), lm.model.buffers()))
    where = sorted({str(t.device) for t in tensors})
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in lm.model.parameters()})
    member = LocalMember(lm)
    ctx = member.context(member.encode_prompt(PROMPT))
    logits = member.run(ctx.next_logits)
    probs = torch.softmax(logits.double(), -1)
    rec = {"build_s": round(build_s, 2), "architecture": type(lm.model).__name__, "vocab_size": lm.vocab_size,
           "devices": where, "param_dtypes": dtypes, "logits": f"{logits.dtype} on {logits.device}",
           "logits_finite": bool(torch.isfinite(logits).all()), "prob_sum": float(probs.sum()),
           "top_prob": float(probs.max()), "plain_decode_ms": plain_decode_ms(name, plain_tokens)}
    rec["ok"] = (where == [str(lm.device)] and dtypes == [str(dtype).removeprefix("torch.")]
                 and rec["logits_finite"] and abs(rec["prob_sum"] - 1) < 1e-6)
    return rec


def count_transfers(specs: list[str], tokens: int) -> dict:
    """Host-device copies and synchronisations during an eager WASH run of ``tokens`` tokens (torch's
    profiler, CUDA only). By design a forward copies its new ids up and its one logits row down;
    anything beyond that is a tensor the engine (or transformers) moves per step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from wash.bench.models import PROMPT
    from wash.engine import GenerationConfig, ProviderSpec, generate

    cfg = GenerationConfig(providers=[ProviderSpec.parse(s) for s in specs], prompt=PROMPT, max_new_tokens=tokens,
                           seed=0, live_detection=False)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        result = generate(cfg)
        torch.cuda.synchronize()
    events = prof.key_averages()
    copies = {e.key: e.count for e in events if "memcpy" in e.key.lower()}
    waits = {e.key: e.count for e in events if "synchronize" in e.key.lower()}
    return {"tokens": len(result.tokens), "routed_fraction": result.routing.routed_token_fraction,
            "copies": copies, "synchronizations": waits, "forward_calls": result.timing.forward_calls}


def _run(fields: dict, tokens: int) -> dict:
    """One seeded WASH run with these config fields, checked (``check_events``); a failure is the finding."""
    from wash.engine import GenerationConfig, ProviderSpec, generate_stream

    t0 = time.perf_counter()
    try:
        cfg = GenerationConfig(prompt="The committee published its annual report", max_new_tokens=tokens, seed=7,
                               **{**fields, "providers": [ProviderSpec.parse(s) for s in fields["providers"]]})
        out = check_events(list(generate_stream(cfg)))
    except Exception as err:  # noqa: BLE001
        out = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def smoke(path: str) -> dict:
    import torch

    from wash.engine import parse_dtype
    from wash.bench.shapes import dummy_names, environment

    m = mode()
    dtype = parse_dtype(m["dtype"])
    report: dict = {"mode": m, "environment": environment(), "members": {}, "runs": {}, "ok": False}
    save = _writer(path, report)
    save()
    names = dummy_names(m["smoke"])
    for name in names:
        try:
            report["members"][name] = _member_check(name, m["device"], dtype, m["plain_tokens"])
        except Exception as err:  # noqa: BLE001 - a failing member is the finding; the runs still try
            report["members"][name] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        save()
    a, b = names
    mixed = [f"{a}:kgw:11", f"{b}:aar:12", f"{a}:dipmark:13"]
    runs = {"eager-mixed": dict(providers=mixed),
            "eager-mixed-again": dict(providers=mixed),
            "lazy-mixed": dict(providers=mixed, forwards="lazy"),
            "eager-paper-profile": dict(providers=[f"{a}:kgw:21", f"{b}:kgw:22", f"{b}:unigram:23"], top_k=10)}
    for run, fields in runs.items():
        report["runs"][run] = _run(fields, m["tokens"])
        save()
    first, again = report["runs"]["eager-mixed"], report["runs"]["eager-mixed-again"]
    report["seed_fixes_the_text"] = first.get("text") is not None and first.get("text") == again.get("text")
    report["ok"] = (all(r.get("ok") for r in report["members"].values())
                    and all(r.get("ok") for r in report["runs"].values()))
    save()
    if m["profile_tokens"] and torch.cuda.is_available():
        try:
            report["transfers"] = count_transfers(mixed, m["profile_tokens"])
        except Exception as err:  # noqa: BLE001
            report["transfers"] = {"error": f"{type(err).__name__}: {err}"}
        save()
    if m["edit_tokens"]:  # last: the edit-distance detectors' alignment runs on CUDA where there is one
        report["edit-schemes"] = _run({"providers": [f"{a}:exp-edit:31", f"{b}:its-edit:32"]}, m["edit_tokens"])
        save()
    return report


def summary(directory: str) -> str:
    """The lines to read first: each step's verdict and the bench's ratios."""
    out = []
    for name in ("versions", "smoke", "bench", "compiled"):
        f = Path(directory) / f"{name}.json"
        if not f.exists():
            out.append(f"{name}: no JSON")
            continue
        d = json.loads(f.read_text())
        if name == "versions":
            env = d.get("environment", {})
            out.append(f"versions: ok={d.get('ok')} python={env.get('python')} gpu={env.get('gpu')} "
                       f"driver={env.get('driver')} torch={env.get('torch')} transformers={env.get('transformers')}")
        elif name == "smoke":
            out.append(f"smoke: ok={d.get('ok')} seed_fixes_the_text={d.get('seed_fixes_the_text')} " + "; ".join(
                f"{k} {v.get('plain_decode_ms', float('nan')):.1f} ms" for k, v in d.get("members", {}).items()))
        else:
            out.append(f"{name}: backend={d.get('backend')} stage={d.get('stage')} rounds={d.get('rounds_done')} "
                       f"plain={json.dumps(d.get('plain_decode_ms'))}")
            out.append(f"{name} ratios: {json.dumps(d.get('ratios'))}")
            parts = d.get("step_parts") or {}
            out.append(f"{name} averaging share: {parts.get('averaging_share_of_eager_step')} "
                       f"memory: {json.dumps(d.get('gpu_memory'))} targets: {json.dumps(d.get('targets'))}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("versions", "smoke", "summary"):
        print("usage: python -m tools.gpu_run versions|smoke FILE | summary DIR", file=sys.stderr)
        return 2
    step, target = argv
    if step == "summary":
        print(summary(target))
        return 0
    report = versions(target) if step == "versions" else smoke(target)
    print(json.dumps({"ok": report.get("ok")}))
    return 0 if report.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
