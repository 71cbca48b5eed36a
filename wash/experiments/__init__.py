"""The paper's experiments, reproduced on the engine's public API.

Each experiment is a module exposing ``NAME``, a ``Config`` dataclass (with
``quick``/``tiny`` presets besides the full settings), ``jobs(config)``,
``summarize(rows, config)`` and ``figure(summary, config)``; the shared driver
``runner.execute`` makes them resumable, seeded and uniformly reported. Run them
with ``python -m wash experiment NAME [--quick]``.

Submodules are imported on demand (``load``), so that importing the package
stays cheap and ``python -m wash.experiments.cost`` workers start clean.
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
    "cost": "per-token latency and peak memory: single, WASH-Par, WASH-Seq, lazy, re-encode (Table 5)",
}


def load(name: str) -> ModuleType:
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment '{name}' (accepted: {', '.join(EXPERIMENTS)})")
    return importlib.import_module(f"wash.experiments.{name}")
