"""The WASH loop at any model shape, on any device (``python -m wash bench --dummy ...``).

Speed does not depend on the weights' values, so dummy members (``catalog``:
a published architecture's shape with seeded random weights around a real
tokenizer) measure the engine at the paper's size without its weights. One run
measures, interleaved over ``--rounds`` so that every ratio is taken between
numbers measured side by side:

* each member's plain decode (KV cache, one forward per token, greedy, no watermark);
* WASH eager and lazy over the first 2 and the first 3 members (KGW on every
  provider); with members of different tokenizers the union vocabulary, routing
  and re-synchronisation are real;
* WASH eager with N = 3 providers on the first member alone (three keys, one forward);
* the CPU work of an eager N = 3 step outside the forwards, piece by piece
  (``step_parts``): the watermarks, the union-vocabulary averaging (scatters onto the
  union, p̄ and p*) and the draw;
* on CUDA, the GPU memory the weights take and the peak (``max_memory_allocated``);
* host reads per drawn token in each WASH run (``host_reads``): the step's packed copies,
  and on CUDA every synchronisation torch's sync debug mode reports, with their sites.

The ratios the issue's goals name (``ratios``) stand beside the paper's Table 5:
WASH-Par. at 56.9 ms a token, 1.90x one watermarked 8B model (30.0 ms). The paper
ran its members on parallel GPUs; on one GPU the members' weight reads add up, so
the sum of the members' plain decodes is about the floor for different models (lower
only where decodes wait on kernel launches and the members' threads overlap them), and
the paper's 1.90x is out of reach there by construction: what one GPU shows is the
engine's own overhead above that floor.

Timing: each step ends by copying to the host what it drew (a local member copies its
logits row, a compiled one the step's packed report, ``engine.readback``), which waits
for the GPU, so step times include the GPU work; the device is also
synchronised before each measurement. Every measurement is preceded by a short
warm-up. The report is rewritten to ``--out`` after every stage, so a run stopped
by a time limit still leaves what it measured.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from wash.bench.timing import PROMPT, _machine, _median_of, plain_decode_ms, wash_ms
from wash.engine.parallel import settings as forward_settings
from wash.engine.catalog import tokenizer_family
from wash.core.provenance import command_line, load_average

#: The paper's Table 5 (resource usage and decoding latency, 8B-class members).
PAPER_TABLE5 = {"watermarked_ms": 30.0, "unwatermarked_ms": 29.5, "wash_par_ms": 56.9, "wash_par_vs_watermarked": 1.90,
                "wash_par_peak_gb": 40.87, "watermarked_peak_gb": 15.10,
                "note": "WASH-Par. keeps every specialist resident, on parallel GPUs"}
#: The issue's goals on one GPU (ratio name -> the most it may be).
GOALS = {"eager_n3_vs_sum_of_members": 1.10, "one_model_n3_vs_member": 1.15, "lazy_n3_vs_mean_member": 1.10,
         "lazy_shared_tokenizer_n3_vs_mean_member": 1.30}
#: Issue 57's absolute goals on one H100/H200 at 8B shapes, bf16, batch 1 (``absolute`` in the report).
ABSOLUTE_GOALS = {"plain_decode_ms_max": 7.0, "eager_n3_ms": 20.0, "eager_n3_cuda_syncs_per_token": 2.0}


def environment() -> dict:
    """Versions and the accelerator: what a GPU number must be quoted with."""
    import platform

    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "cuda_available": torch.cuda.is_available()}
    for module in ("tokenizers", "accelerate", "numpy", "safetensors"):
        try:
            env[module] = __import__(module).__version__
        except ImportError:
            env[module] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1),
                   gpu_capability=f"{props.major}.{props.minor}", torch_cuda=torch.version.cuda,
                   bf16_supported=torch.cuda.is_bf16_supported(), driver=_driver())
    return env


def _driver() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _gb(n_bytes: float) -> float:
    return round(n_bytes / 2**30, 3)


def dummy_names(members: list[str]) -> list[str]:
    """``SHAPE@TOKENIZER`` or ``dummy-SHAPE@TOKENIZER`` -> the dummy members' names, checked."""
    from wash.engine.catalog import DUMMY_PREFIX, allow_dummy_members, check_model_name

    allow_dummy_members()
    return [check_model_name(m if m.startswith(DUMMY_PREFIX) else DUMMY_PREFIX + m) for m in members]


def build_members(names: list[str], device: str | None, dtype: torch.dtype | None) -> dict:
    """Build every member where it will run; its size, build time and (CUDA) memory after it."""
    from wash.engine.catalog import parse_dummy, read_shape
    from wash.engine.models import load_model

    built = {}
    for name in names:
        t0 = time.perf_counter()
        lm = load_model(name, device=device, dtype=dtype)
        _sync(lm.device)
        params = list(lm.model.parameters())
        built[name] = {"shape": read_shape(parse_dummy(name).shape)["title"],
                       "architecture": type(lm.model).__name__, "vocab_size": lm.vocab_size,
                       "parameters": sum(p.numel() for p in params),
                       "weights_gb": _gb(sum(p.numel() * p.element_size() for p in params)),
                       "device": str(lm.device), "dtype": str(params[0].dtype).removeprefix("torch."),
                       "build_s": round(time.perf_counter() - t0, 2)}
        if lm.device.type == "cuda":
            built[name]["cuda_allocated_after_gb"] = _gb(torch.cuda.memory_allocated(lm.device))
    return built


def step_parts(specs: list[str], repeats: int = 20) -> dict:
    """The CPU work of one eager step outside the forwards, in milliseconds (medians over ``repeats``).

    On each member's lane, as an eager step runs it: ``model_part_ms`` (its providers'
    watermarks, their scatters onto the union, p* and the served entropy) and, inside it,
    ``watermarks_ms``; on the caller, ``combine_ms`` (p̄ and p* summed over the members)
    and ``sample_ms``. The union-vocabulary averaging is ``model_part - watermarks``
    plus ``combine``; ``averaging_on_critical_path_ms`` takes the slowest lane (the lanes
    run side by side).
    """
    from wash.engine.aggregation import Mean
    from wash.engine.config import ProviderSpec
    from wash.engine.parallel import caller_on_one_thread
    from wash.engine.providers import build_providers
    from wash.engine.sampling import sample
    from wash.engine.served import ServedSystem

    pset = build_providers([ProviderSpec.parse(s) for s in specs])
    system = ServedSystem(pset, pset.providers, True, Mean(), 1.0, 1.0, 0)
    for p in system.providers:
        p.start_generation(0)
    base, ids = {}, {}
    for m in system.models:
        member = pset.members[m]
        ctx = member.context(member.encode_prompt(PROMPT))
        base[m] = system.serve(m, member.run(ctx.next_logits))
        ids[m] = list(ctx.ids)

    def lane(m: str) -> tuple[float, float, object]:
        t0 = time.perf_counter()
        for i in system.by_model[m]:
            system.provider_dist(i, base[m], ids[m], len(ids[m]))
        t1 = time.perf_counter()
        part = system.model_part(m, base[m], ids[m], len(ids[m]))
        return (t1 - t0) * 1000, (time.perf_counter() - t1) * 1000, part

    gen = torch.Generator()
    gen.manual_seed(0)
    times: dict[str, list[float]] = {"combine_ms": [], "sample_ms": []}
    lanes: dict[str, dict[str, list[float]]] = {m: {"watermarks_ms": [], "model_part_ms": []} for m in system.models}
    for _ in range(repeats):
        parts = {}
        for m in system.models:
            wm, mp, parts[m] = pset.members[m].run(lambda m=m: lane(m))
            lanes[m]["watermarks_ms"].append(wm)
            lanes[m]["model_part_ms"].append(mp)
        with caller_on_one_thread():
            t0 = time.perf_counter()
            agg = system.combine(parts)
            t1 = time.perf_counter()
            sample(agg.p_bar, gen)
            t2 = time.perf_counter()
        times["combine_ms"].append((t1 - t0) * 1000)
        times["sample_ms"].append((t2 - t1) * 1000)
    per_model = {m: {k: statistics.median(v) for k, v in d.items()} for m, d in lanes.items()}
    for d in per_model.values():
        d["averaging_ms"] = d["model_part_ms"] - d["watermarks_ms"]
    out = {k: statistics.median(v) for k, v in times.items()}
    out["per_model"] = per_model
    out["union_size"] = system.alignment.size
    out["averaging_on_critical_path_ms"] = max(d["averaging_ms"] for d in per_model.values()) + out["combine_ms"]
    out["cpu_work_on_critical_path_ms"] = (max(d["model_part_ms"] for d in per_model.values())
                                           + out["combine_ms"] + out["sample_ms"])
    return out


def _ratios(plain: dict[str, float], cases: dict[str, dict], names: list[str]) -> dict:
    """The issue's ratios, each where what it needs was measured (a failed run leaves its ratios out)."""
    def eager(case: str) -> float | None:
        """An eager step in which every member computed: the median over the tokens they all took."""
        r = cases.get(case)
        return None if not r else r.get("median_unrouted_ms") or r["median_token_ms"]

    def lazy(case: str) -> float | None:
        """A lazy step is one member's or another's (plus catch-ups): its mean, the prompt's step left out."""
        r = cases.get(case)
        return None if not r else r.get("mean_after_first_ms") or r["mean_token_ms"]

    def ratio(value: float | None, members: list[str], over) -> float | None:
        if value is None or not all(m in plain for m in members):
            return None
        return value / over([plain[m] for m in members])

    ratios: dict = {}
    for n in (3, 2):
        if len(names) >= n:
            group = names[:n]
            ratios[f"eager_n{n}_vs_sum_of_members"] = ratio(eager(f"eager_{n}"), group, sum)
            ratios[f"eager_n{n}_vs_slowest_member"] = ratio(eager(f"eager_{n}"), group, max)
            ratios[f"lazy_n{n}_vs_mean_member"] = ratio(lazy(f"lazy_{n}"), group, statistics.mean)
    ratios["one_model_n3_vs_member"] = ratio(eager("one_model_3"), names[:1], sum)
    family = list(dict.fromkeys(s.split(":")[0] for s in cases_for(names)["lazy_shared_tokenizer_3"][0]))
    ratios["lazy_shared_tokenizer_n3_vs_mean_member"] = ratio(lazy("lazy_shared_tokenizer_3"), family,
                                                              statistics.mean)
    ratios["paper_wash_par_vs_watermarked"] = PAPER_TABLE5["wash_par_vs_watermarked"]
    return {k: v for k, v in ratios.items() if v is not None}


def cases_for(names: list[str]) -> dict[str, tuple[list[str], str]]:
    """The WASH runs measured: name -> (provider specs, forwards)."""
    cases: dict[str, tuple[list[str], str]] = {}
    for n in (2, 3):
        if len(names) >= n:
            specs = [f"{names[i]}:kgw:{1000 + i}" for i in range(n)]
            cases[f"eager_{n}"] = (specs, "eager")
            cases[f"lazy_{n}"] = (specs, "lazy")
    cases["one_model_3"] = ([f"{names[0]}:kgw:{2000 + i}" for i in range(3)], "eager")
    # Lazy forwards where every member shares the first one's tokenizer (no routing): the members
    # of that family in turn, one model's alone if it has no sibling.
    family = [n for n in names if tokenizer_family(n) == tokenizer_family(names[0])]
    cases["lazy_shared_tokenizer_3"] = ([f"{family[i % len(family)]}:kgw:{3000 + i}" for i in range(3)], "lazy")
    return cases


def absolute(report: dict) -> dict:
    """The issue's absolute goals (``ABSOLUTE_GOALS``), each with its measured value, where measured."""
    plain = report.get("plain_decode_ms") or {}
    eager = (report.get("wash") or {}).get("eager_3") or {}
    reads = (report.get("host_reads") or {}).get("eager_3") or {}
    measured = {"plain_decode_ms_max": max(plain.values()) if plain else None,
                "eager_n3_ms": eager.get("median_unrouted_ms") or eager.get("median_token_ms"),
                "eager_n3_cuda_syncs_per_token": reads.get("cuda_syncs_per_token")}
    return {k: {"goal": v, "measured": measured[k], "met": measured[k] <= v}
            for k, v in ABSOLUTE_GOALS.items() if measured[k] is not None}


def host_reads(specs: list[str], tokens: int, forwards: str, backend: str, device: torch.device) -> dict:
    """Per drawn token of one WASH run: the step's packed copies (``engine.readback``) and, on CUDA, every
    synchronisation torch reports (its sync debug mode warns at each one, wherever it happens: the
    members' forwards, the served step, the copies of new ids).

    Why both: the copies are what the engine asks for, the same on every device; the
    synchronisations are what the GPU pays, including any that transformers' code adds."""
    import warnings

    from wash.engine import readback

    before = readback.copies()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
        try:
            got = wash_ms(specs, tokens, forwards=forwards, backend=backend, seed=101)
        finally:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode(0)
    drawn = max(1, got["tokens"])
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    out = {"tokens": got["tokens"], "step_copies_per_token": (readback.copies() - before) / drawn}
    if device.type == "cuda":
        out["cuda_syncs_per_token"] = len(syncs) / drawn
        where = {}
        for w in syncs:
            key = f"{Path(w.filename).name}:{w.lineno}"
            where[key] = where.get(key, 0) + 1
        out["cuda_syncs_by_site"] = dict(sorted(where.items(), key=lambda kv: -kv[1])[:12])
    return out


def run_shape_bench(members: list[str], tokens: int, rounds: int, device: str | None = None,
                    dtype: torch.dtype | None = None, out: str | None = None, warmup_tokens: int | None = None,
                    say: Callable[[str], None] | None = None, backend: str = "local") -> dict:
    """Build the dummy ``members``, then measure (module docstring); the report, also written to ``out``.

    ``backend`` runs every plain decode and WASH run (``local``, or ``compiled``: the members are
    built here once, and a backend that serves models in this process serves those copies); the
    step parts stay local's, since they time the CPU work outside the forwards."""
    from wash.engine.backends import backend_text

    say = say or (lambda msg: print(f"[bench] {msg}", file=sys.stderr, flush=True))
    names = dummy_names(members)
    report: dict = {"command": command_line(["python", "-m", "wash", *sys.argv[1:]]), "backend": backend_text(backend),
                    "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "machine": _machine(), "environment": environment(), "members": names,
                    "tokens": tokens, "rounds": rounds, "load_average_at_start": load_average(),
                    "forwards": forward_settings(), "paper_table5": PAPER_TABLE5, "goals": GOALS,
                    "stage": "building"}

    def save(stage: str) -> None:
        report["stage"] = stage
        if out:
            with open(out, "w") as fh:
                fh.write(json.dumps(report, indent=2) + "\n")

    save("building")
    report["built"] = build_members(names, device, dtype)
    first = report["built"][names[0]]
    dev = torch.device(first["device"])
    report["device"], report["dtype"] = first["device"], first["dtype"]
    say("built " + ", ".join(f"{n} in {b['build_s']} s" for n, b in report["built"].items()))
    save("built")
    cases = cases_for(names)
    errors: list[str] = []

    def attempt(what: str, task: Callable[[], object]) -> object | None:
        """Run one measurement; a failure is recorded and the run goes on to the next."""
        try:
            return task()
        except Exception as err:  # noqa: BLE001 - on a GPU visited once, every other number still counts
            errors.append(f"{what}: {type(err).__name__}: {err}")
            report["errors"] = errors
            say(errors[-1])
            return None

    warmup_tokens = warmup_tokens or min(8, tokens)
    for name in names:  # warm-up: kernels, allocator pools, tokenizers' caches
        attempt(f"warm-up {name}", lambda name=name: plain_decode_ms(name, warmup_tokens, backend))
    for case, (specs, forwards) in cases.items():
        attempt(f"warm-up {case}", lambda specs=specs, forwards=forwards: wash_ms(specs, warmup_tokens,
                                                                                 forwards=forwards, backend=backend))
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    save("warmed up")
    plain_rounds: dict[str, list[float]] = {n: [] for n in names}
    case_rounds: dict[str, list[dict]] = {c: [] for c in cases}
    for r in range(rounds):
        for name in names:
            _sync(dev)
            ms = attempt(f"round {r + 1} plain {name}", lambda name=name: plain_decode_ms(name, tokens, backend))
            if ms is not None:
                plain_rounds[name].append(ms)
        for case, (specs, forwards) in cases.items():
            _sync(dev)
            got = attempt(f"round {r + 1} {case}",
                          lambda specs=specs, forwards=forwards: wash_ms(specs, tokens, forwards=forwards, seed=r,
                                                                         backend=backend))
            if got is not None:
                case_rounds[case].append(got)
        plain = {n: statistics.median(v) for n, v in plain_rounds.items() if v}
        measured = {c: _median_of(v) for c, v in case_rounds.items() if v}
        report.update(rounds_done=r + 1, plain_decode_ms=plain, plain_decode_ms_rounds=plain_rounds,
                      sum_plain_ms=sum(plain.values()), wash=measured, ratios=_ratios(plain, measured, names))
        say(f"round {r + 1}/{rounds}: plain " + ", ".join(f"{n} {v[-1]:.1f}" for n, v in plain_rounds.items() if v)
            + "; " + "; ".join(f"{c} {v[-1]['median_token_ms']:.1f}" for c, v in case_rounds.items() if v))
        save(f"round {r + 1}")
    if dev.type == "cuda":
        report["gpu_memory"] = {"weights_gb": _gb(sum(b["weights_gb"] * 2**30 for b in report["built"].values())),
                                "peak_allocated_gb": _gb(torch.cuda.max_memory_allocated(dev)),
                                "peak_reserved_gb": _gb(torch.cuda.max_memory_reserved(dev))}
    save("timed")
    report["host_reads"] = {c: attempt(f"host reads {c}", lambda specs=specs, forwards=forwards:
                                       host_reads(specs, tokens, forwards, backend, dev))
                            for c, (specs, forwards) in cases.items()}
    save("host reads")
    case = f"eager_{min(3, len(names))}" if len(names) >= 2 else "one_model_3"
    parts = attempt("step parts", lambda: step_parts(cases[case][0]))
    step = report.get("wash", {}).get(case)
    if parts is not None and step:
        step_ms = step.get("median_unrouted_ms") or step["median_token_ms"]
        parts["averaging_share_of_eager_step"] = parts["averaging_on_critical_path_ms"] / step_ms
        parts["cpu_work_share_of_eager_step"] = parts["cpu_work_on_critical_path_ms"] / step_ms
    report["step_parts"] = parts
    ratios = report.get("ratios", {})
    report["targets"] = {f"{k}<={v}": ratios[k] <= v for k, v in GOALS.items() if k in ratios}
    if dev.type == "cuda":  # the goals are an H100/H200's at 8B shapes: a CPU's figures say nothing of them
        report["absolute"] = absolute(report)
    save("done")
    return report
