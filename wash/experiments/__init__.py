"""The paper's experiments, reproduced on the engine's public API.

Each experiment is a module exposing ``NAME``, a ``Config`` dataclass (with
``quick``/``tiny`` presets besides the full settings), ``jobs(config)`` (plain-data
jobs, ``jobs.Job``), ``summarize(rows, config)`` and ``figure(summary, config)``;
the shared driver ``driver.execute`` makes them resumable, seeded and uniformly
reported, in one process or several. Run them with
``python -m wash experiment NAME [--preset quick]``.

The shared parts, one job each: ``config`` (settings, presets, serving profile),
``jobs`` (the job type), ``ensembles`` (providers and prompts of a job),
``generation`` (a text from the engine or the store), ``store`` (stored
generations), ``scoring`` (detection and perplexity), ``table`` (the results
CSV), ``driver`` (running a plan), ``stats``, ``plots`` and ``report``.

Submodules are imported on demand (``load``), so that importing the package
stays cheap and the processes that ``cost`` measures in start clean.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: Experiment name -> one line on what it reproduces.
EXPERIMENTS: dict[str, str] = {
    "decay": "detection z vs ensemble size N per scheme, fixed and mixed base models (Fig. 3a/3b, Tables 1, 9)",
    "coordinated": "providers sharing one coordinated watermark keep it (Fig. 3c)",
    "biased": "biased green list at several biases: z and quality (Appendix C, Table 8)",
    "tpr": "TPR at 5% FPR: single, naive average, WASH (Tables 2, 6)",
    "routing": "routed-token fraction and span length per domain (Table 7)",
    "quality": "perplexity and arithmetic accuracy per mode (Tables 3, 6)",
    "identify": "Water-Probe model identification z: single, WASH N, unwatermarked (Table 1, very probably)",
    "entropy": "detection z vs served base entropy (top-k, temperature) per scheme and N: when washing works",
    "rules": "aggregation rules (mean, median, clipped variants) against each scheme's z and perplexity",
    "baselines": "WASH beside ToBlend, De-mark and RandomWalk: z, TPR at 5% FPR, perplexity, cost (Tables 1-3, 5)",
    "presets": "the app's presets as the page runs them, over seeds: the z ranges their descriptions quote",
    "cost": "per-token latency and peak memory: single, WASH-Par, WASH-Seq, lazy, re-encode (Table 5)",
}


def load(name: str) -> ModuleType:
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment '{name}' (accepted: {', '.join(EXPERIMENTS)})")
    return importlib.import_module(f"wash.experiments.{name}")
