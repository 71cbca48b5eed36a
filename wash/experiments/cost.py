"""What WASH costs: per-token latency and peak memory of each way to run it (paper Table 5).

Variants, all on the same prompts and measured in one invocation (rounds
interleave the variants so that load on a shared machine hits them alike):

* ``unwatermarked`` / ``single``: ``models[0]`` alone, without / with its watermark;
* ``wash-par``: WASH over N providers with every base model resident and the
  parallel forwards of ``wash/engine/parallel.py``: each eager step runs the distinct
  base models' KV-cached forwards concurrently, one executor thread each (the paper's
  WASH-Par.; a step costs about the slowest model's forward, not the sum). Its
  subprocess runs with ``WASH_PARALLEL_FORWARDS=1`` whatever the environment says;
* ``wash-seq``: the same ensemble with every base model's weights offloaded by
  accelerate's hooks (``disk_offload``: weights on disk, loaded module by module
  for each forward and dropped after it; ``cpu_offload`` on a GPU machine), so an
  inactive model occupies no memory: the paper's WASH-Seq., trading latency for
  memory. Its subprocess runs with ``WASH_PARALLEL_FORWARDS=0``, so the models
  really run one after the other and only one model's weights are loaded at a
  time (parallel forwards would load both at once and defeat the offloading);
* ``lazy``: WASH with lazy forwards (``forwards="lazy"``, every model resident):
  each step picks one provider uniformly and draws from its distribution alone,
  the same law as the average; only that model runs a forward, the others catch
  up on the new ids in one batched forward when next picked;
* ``reencode``: WASH-Par. feeding the whole context every step with no KV cache,
  the slow reference loop (parallel forwards as ``wash-par``).

Forwards default to ``eager`` here (``--forwards lazy`` to change): this experiment
measures eager decoding itself, the forwards every model runs each step, and
compares it with lazy in its own variant. The variants ``lazy`` (lazy) and
``reencode`` (eager: lazy forwards need KV caches to catch up with) name their own;
the others use the config's ``forwards``. The effective forwards is part of each
job's key and of every row.

Each (variant, round) runs in a fresh subprocess so that its peak resident memory
(sampled every few ms during generation) counts only the models it loads. Latency
is the engine's per-token time (total decode time / tokens); ratios are taken
against ``single`` from the same invocation. Each row records the forward
settings its subprocess ran with (parallel or not, torch threads per
model).
"""

from __future__ import annotations

import gc
import hashlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from wash.core.env import HF_HUB_OFFLINE, PARALLEL_FORWARDS, TRANSFORMERS_VERBOSITY, child_environment
from wash.experiments.config import ExperimentConfig
from wash.experiments.ensembles import make_ensemble, prompt_set
from wash.experiments.generation import generate_run
from wash.experiments.jobs import Job
from wash.experiments.plots import FigureSpec, Panel, Series

NAME = "cost"
#: Timings and peak memory would be distorted by the driver's worker processes sharing the cores.
PARALLEL = False
VARIANTS = ("unwatermarked", "single", "wash-par", "wash-seq", "lazy", "reencode")
#: ``WASH_PARALLEL_FORWARDS`` forced in a variant's subprocess (others inherit the environment).
PARALLEL_ENV = {"wash-par": "1", "reencode": "1", "wash-seq": "0"}
WARMUP_TOKENS = 4


@dataclass
class Config(ExperimentConfig):
    schemes: tuple[str, ...] = ("kgw",)
    n: int = 3
    variants: tuple[str, ...] = VARIANTS
    rounds: int = 2
    #: Where wash-seq keeps inactive weights: "disk" (accelerate disk_offload) or "cpu" (GPU machines).
    offload: str = "disk"
    prompts: int = 3
    tokens: int = 64

    PRESETS: ClassVar[dict] = {
        "quick": dict(prompts=1, tokens=32, rounds=1),
        "tiny": dict(models=("tiny-smollm2", "tiny-gemma3"), prompts=1, tokens=4, rounds=1, n=2),
    }

    def generations(self) -> dict[str, Any]:
        """The experiment's own settings and each variant's (its mode, forwards, re-encoding)."""
        out = super().generations()
        for variant in self.variants:
            _, mode, extra = variant_setup(variant, self, 0, 0)
            out[f"variant {variant}"] = self.generation(mode=mode, **extra)
        return out


def variant_setup(variant: str, config: Config, seed: int, salt: int) -> tuple[list, str, dict[str, Any]]:
    """(provider specs, engine mode, extra GenerationConfig settings) of a variant.

    The extra settings always name the variant's ``forwards`` (see ``variant_forwards``).
    """
    scheme = config.schemes[0]
    forwards = {"forwards": variant_forwards(variant, config)}
    if variant in ("unwatermarked", "single"):
        return make_ensemble(1, config.models, [scheme], seed, salt), variant, forwards
    specs = make_ensemble(config.n, config.models, [scheme], seed, salt)
    if variant in ("wash-par", "wash-seq", "lazy"):
        return specs, "wash", forwards
    if variant == "reencode":
        return specs, "wash", {**forwards, "reencode_every_step": True}
    raise ValueError(f"unknown cost variant '{variant}' (accepted: {', '.join(VARIANTS)})")


def variant_forwards(variant: str, config: Config) -> str:
    """``lazy`` for the lazy variant, ``eager`` for re-encoding, else the config's ``forwards``."""
    return {"lazy": "lazy", "reencode": "eager"}.get(variant, config.forwards)


def jobs(config: Config) -> list[Job]:
    out = []
    prompts = [p.id for p in prompt_set(config)]
    for r in range(config.rounds):
        for variant in config.variants:
            variant_setup(variant, config, 0, 0)  # validate the name now
            key = config.key(variant=variant, forwards=variant_forwards(variant, config), round=r, prompts=",".join(prompts), n=config.n,
                             scheme=config.schemes[0], models=",".join(config.models),
                             offload=config.offload if variant == "wash-seq" else "none",
                             seeds=",".join(map(str, config.seeds)))
            out.append(Job(key, measure_in_subprocess, (variant, config)))
    return out


def measure_in_subprocess(variant: str, config: Config) -> list[dict]:
    """A job: ``measure`` one variant in a fresh Python process, so its peak memory is its own."""
    payload = json.dumps({"variant": variant, "config": config.to_dict()})
    forced = {PARALLEL_FORWARDS.name: PARALLEL_ENV[variant]} if variant in PARALLEL_ENV else {}
    env = child_environment({HF_HUB_OFFLINE.name: "1", TRANSFORMERS_VERBOSITY.name: "error"}, **forced)
    proc = subprocess.run([sys.executable, "-m", "wash.experiments.cost", "--measure", payload],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"cost measurement of {variant} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the measurement: one variant in a fresh process ----------------------------------
class PeakRss:
    """Samples this process's resident memory in a thread: peak RSS and peak anonymous RSS (bytes).

    Anonymous RSS (RSS minus file-backed and shared pages) leaves out pages that
    are only mapped from files, such as the memory-mapped weight files that
    accelerate's disk offload reads from: those count in RSS while mapped but are
    page cache the kernel can drop at any time.
    """

    def __init__(self, interval_s: float = 0.005) -> None:
        import psutil

        self._proc = psutil.Process()
        self.interval = interval_s
        self.peak = 0
        self.peak_anon = 0
        self._sample()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        info = self._proc.memory_info()
        self.peak = max(self.peak, info.rss)
        self.peak_anon = max(self.peak_anon, info.rss - getattr(info, "shared", 0))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def rss_bytes() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS, so RSS reflects what is live."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def resident_weight_bytes(model) -> int:
    """Bytes of parameters and buffers that are materialised (not on the meta device)."""
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]
               if t.device.type != "meta")


def offload_model(model, folder: Path, kind: str, execution_device) -> None:
    """Attach accelerate's offload hooks: weights live on disk (or CPU) between forwards."""
    from accelerate import cpu_offload, disk_offload

    if kind == "disk":
        disk_offload(model, offload_dir=str(folder), execution_device=execution_device, offload_buffers=False)
    elif kind == "cpu":
        cpu_offload(model, execution_device=execution_device, offload_buffers=False)
    else:
        raise ValueError(f"unknown offload '{kind}' (accepted: disk, cpu)")


def measure(variant: str, config: Config) -> list[dict]:
    """Measure one variant: load, (offload), warm up, then generate every prompt under a RSS sampler."""
    import torch

    from wash.engine import load_model, parallel_enabled

    baseline = rss_bytes()
    prompts = prompt_set(config)
    specs0, mode, extra = variant_setup(variant, config, config.seeds[0], 0)
    models = list(dict.fromkeys(s.model for s in specs0))
    lms = {m: load_model(m) for m in models}
    tmp = None
    if variant == "wash-seq":
        tmp = tempfile.TemporaryDirectory(prefix="wash-offload-")
        for m, lm in lms.items():
            offload_model(lm.model, Path(tmp.name) / m, config.offload, lm.device)
    release_memory()
    weights = sum(resident_weight_bytes(lm.model) for lm in lms.values())
    after_setup = rss_bytes()
    warm = prompts[-1].text
    generate_run(specs0, warm, mode, config, seed=config.seeds[0], max_new_tokens=WARMUP_TOKENS, **extra)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    rows = []
    with PeakRss() as peak:
        for pi, prompt in enumerate(prompts):
            for seed in config.seeds:
                specs, _mode, _extra = variant_setup(variant, config, seed, pi)
                t0 = time.perf_counter()
                result = generate_run(specs, prompt.text, mode, config, seed, **extra)
                wall = time.perf_counter() - t0
                t = result.timing
                rows.append({"prompt_id": prompt.id, "seed": seed, "tokens_generated": result.routing.tokens,
                             "per_token_ms": t.per_token_ms, "median_token_ms": t.median_token_ms,
                             "decode_s": t.total_s, "wall_s": wall,
                             "forward_calls": sum(t.forward_calls.values()),
                             "ids_fed": sum(t.ids_fed.values()),
                             "routed_token_fraction": result.routing.routed_token_fraction,
                             # equal texts across wash-par / wash-seq / reencode show they decode alike
                             # (lazy draws other, identically distributed, texts)
                             "text_sha1": hashlib.sha1(result.text.encode("utf-8")).hexdigest()[:12],
                             "forwards": result.settings.get("forwards"),
                             "parallel_forwards": parallel_enabled(),
                             "threads_per_model": result.settings.get("threads_per_model")})
    gpu_peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
    if tmp is not None:
        tmp.cleanup()
    mb = 1024 * 1024
    for r in rows:
        r.update({"baseline_rss_mb": baseline / mb, "setup_rss_mb": after_setup / mb, "peak_rss_mb": peak.peak / mb,
                  "peak_above_baseline_mb": (peak.peak - baseline) / mb, "peak_anon_mb": peak.peak_anon / mb,
                  "resident_weights_mb": weights / mb,
                  "gpu_peak_mb": gpu_peak / mb, "threads": torch.get_num_threads()})
    return rows


def _measure_main(argv: list[str]) -> int:
    payload = json.loads(argv[argv.index("--measure") + 1])
    raw = payload["config"]
    fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in raw.items()}
    fields["out"] = Path(fields["out"])
    config = Config(**fields)
    print(json.dumps(measure(payload["variant"], config)))
    return 0


# -- summary and figure --------------------------------------------------------------
def summarize(rows: pd.DataFrame, config: Config) -> pd.DataFrame:
    cols = ["variant", "runs", "tokens", "per_token_ms", "median_token_ms", "latency_ratio", "peak_rss_mb",
            "peak_anon_mb", "peak_above_baseline_mb", "resident_weights_mb", "memory_ratio", "anon_memory_ratio",
            "forward_calls_per_token", "ids_fed_per_token", "forwards", "parallel_forwards"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    records = []
    for variant in config.variants:
        g = rows[rows["variant"] == variant]
        if g.empty:
            continue
        tokens = float(g["tokens_generated"].sum())
        records.append({"variant": variant, "runs": len(g), "tokens": int(tokens),
                        "per_token_ms": 1000 * float(g["decode_s"].sum()) / tokens if tokens else float("nan"),
                        "median_token_ms": float(g["median_token_ms"].median()),
                        "peak_rss_mb": float(g["peak_rss_mb"].max()),
                        "peak_anon_mb": float(g["peak_anon_mb"].max()),
                        "peak_above_baseline_mb": float(g["peak_above_baseline_mb"].max()),
                        "resident_weights_mb": float(g["resident_weights_mb"].max()),
                        "forward_calls_per_token": float(g["forward_calls"].sum()) / tokens if tokens else 0.0,
                        "ids_fed_per_token": float(g["ids_fed"].sum()) / tokens if tokens else 0.0,
                        "forwards": g["forwards"].iloc[0] if "forwards" in g else "eager",
                        "parallel_forwards": g["parallel_forwards"].iloc[0] if "parallel_forwards" in g else None})
    table = pd.DataFrame(records)
    ref = table[table["variant"] == "single"]
    if len(ref):
        table["latency_ratio"] = table["per_token_ms"] / float(ref["per_token_ms"].iloc[0])
        table["memory_ratio"] = table["peak_rss_mb"] / float(ref["peak_rss_mb"].iloc[0])
        table["anon_memory_ratio"] = table["peak_anon_mb"] / float(ref["peak_anon_mb"].iloc[0])
    return table.reindex(columns=cols)


def figure(summary: pd.DataFrame, config: Config) -> FigureSpec:
    v = summary["variant"].tolist()
    return FigureSpec(f"Cost per token (N = {config.n}, models {', '.join(config.models)}, {config.tokens} tokens)", [
        Panel("latency", "variant", "ms per token",
              [Series("per-token latency", v, summary["per_token_ms"].tolist(), kind="bar")]),
        Panel("memory", "variant", "MB",
              [Series("peak RSS during generation", v, summary["peak_rss_mb"].tolist(), kind="bar"),
               Series("peak anonymous RSS", v, summary["peak_anon_mb"].tolist(), kind="bar"),
               Series("resident weights", v, summary["resident_weights_mb"].tolist(), kind="bar")]),
    ])


if __name__ == "__main__":
    sys.exit(_measure_main(sys.argv))
