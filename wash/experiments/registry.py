"""The experiments by name, and loading one: the package's plug-ins, imported on demand.

Kept apart from the package's ``__init__`` so that a module the package exports from
(``cli`` lists the experiments) does not import the package that names it back.
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
