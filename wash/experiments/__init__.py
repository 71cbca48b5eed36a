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

Submodules are imported on demand (``load``, from ``registry``; the declared exports
below on first use), so that importing the package stays cheap and the processes that
``cost`` measures in start clean.
"""

from __future__ import annotations

from wash.core.exports import lazy_exports
from wash.experiments.registry import EXPERIMENTS, load

#: What the layers above (reporting, the ways in, tools) may use, by the module that holds it
#: (loaded on first use, like the experiments themselves).
_EXPORTS = {
    **dict.fromkeys(("FigureSpec", "Panel", "Series", "to_matplotlib_png"), "plots"),
    "power_law_exponent": "stats",
    **dict.fromkeys(("load_note", "markdown_table", "run_header"), "report"),
    "scheme_variant": "ensembles", "make_ensemble": "ensembles", "KEY_BASE": "ensembles",
    **dict.fromkeys(("calibration_negatives", "calibration_cell", "check_negatives"), "key_null_scores"),
    "watermarked_providers": "scoring",
    "machine_description": "driver", "generation_job": "generation", "unique_jobs": "jobs",
    "detect": "scoring", "GenerationStore": "store", "ResultTable": "table",
    "add_parser": "cli",
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ += ["EXPERIMENTS", "load"]
