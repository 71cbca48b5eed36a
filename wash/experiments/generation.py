"""Generating a text for a job: through the engine's public API, or from the generation store.

Every generation goes through ``wash.engine.ensemble.generate`` with the engine config
``ExperimentConfig.generation`` makes: live detection off (faster; texts are scored
afterwards), the config's ``forwards`` and ``aggregate`` and the serving settings of the
config's profile. A job may override any engine setting (quality's arithmetic sets its own
temperature); the profile's top-k and top-p still apply unless overridden too.

``generation_job`` is the job function most experiments use: generate (or reuse)
one text, then one row per provider's detector on it. It runs in whichever
process the driver chooses and returns the new generation for the parent to
store (``JobOutput.generations``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import wash.baselines  # noqa: F401  (registers the baseline modes)
from wash.engine import ProviderSpec, ProviderDetection, RunResult
from wash.experiments.config import ExperimentConfig
from wash.experiments.jobs import JobOutput
from wash.experiments.scoring import detect, detection_rows, perplexity_fields
from wash.experiments.store import GenerationStore, store_of


def generate_run(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
                 max_new_tokens: int | None = None, **overrides: Any) -> RunResult:
    """One generation through the engine's public API."""
    from wash.engine import generate

    return generate(config.generation(specs, prompt, mode, seed, max_new_tokens, **overrides))


def run_fields(result: RunResult) -> dict[str, Any]:
    """What every generation row records besides detection: length, routing, entropy, speed, text.

    ``mean_entropy`` is the mean served base entropy per token (nats, ``RunResult.mean_entropy``):
    how much room the base distributions left the watermarks (``None`` for an empty text).
    """
    r = result.routing
    h = result.mean_entropy()
    return {"tokens_generated": int(r.tokens), "routed_token_fraction": float(r.routed_token_fraction),
            "mean_routed_span_length": float(r.mean_routed_span_length), "routed_spans": int(r.routed_spans),
            "routed_tokens": int(sum(1 for t in result.tokens if t.routed)),
            "mean_entropy": None if h is None else float(h), "per_token_ms": float(result.timing.per_token_ms),
            "total_s": float(result.timing.total_s), "attack_costs": attack_costs(result),
            "finish_reason": result.finish_reason, "text": result.text}


def attack_costs(result: RunResult) -> str | None:
    """A baseline mode's own cost counters (``settings["baseline"]``) as JSON: numbers and
    per-model dicts of numbers only (texts and nested records stay in the run's own JSON)."""
    costs = result.settings.get("baseline") if isinstance(result.settings, dict) else None
    if not isinstance(costs, dict):
        return None

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    kept = {k: v for k, v in costs.items()
            if number(v) or (isinstance(v, dict) and v and all(number(x) for x in v.values()))}
    return json.dumps(kept, sort_keys=True)


#: Fields a stored generation must have to be reused: one stored before the engine
#: recorded them (possible only while the engine's source is unchanged) is made again.
STORED_SINCE = frozenset({"mean_entropy", "total_s", "attack_costs"})


@dataclass(frozen=True)
class Generated:
    """One generation's ``run_fields``, how it came about, and what the store should gain."""

    fields: dict[str, Any]
    #: The engine's own detections of a fresh generation (``None`` for a stored one).
    detections: list[ProviderDetection] | None
    #: ``(key, fields)`` for the store when the text is new and the config caches; else ``None``.
    new_entry: tuple[dict[str, Any], dict[str, Any]] | None


def generated(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
              **overrides: Any) -> Generated:
    """The text of one generation: from the store if it is there, else generated now (not stored here).

    A fresh generation also returns the engine's detections of its providers (the
    same detectors ``detect`` would build), so they are not computed twice.
    """
    store = store_of(config)
    key = GenerationStore.key(specs, prompt, mode, config, seed, **overrides) if store else None
    hit = store.get(key) if store is not None else None
    if hit is not None and STORED_SINCE <= hit.keys():
        return Generated(hit, None, None)
    result = generate_run(specs, prompt, mode, config, seed, **overrides)
    fields = run_fields(result)
    return Generated(fields, result.detection, (key, fields) if store is not None else None)


def generation_job(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: ExperimentConfig, seed: int,
                   scorers: Sequence[str] = (), **overrides: Any) -> JobOutput:
    """A job: generate in ``mode``, then one row per provider's detector on the text.

    In ``unwatermarked`` mode the text is scored by the watermarked providers of
    ``specs`` (the calibration negatives of a TPR at fixed FPR). Every row also
    carries the run's length, routing and speed, and for each model in
    ``scorers`` the continuation's perplexity under that unwatermarked model
    (columns ``ppl_<model>``, ``nll_<model>``, ``scored_tokens_<model>``).
    """
    gen = generated(specs, prompt, mode, config, seed, **overrides)
    extra = dict(gen.fields)
    dets = gen.detections
    if dets is None:  # a stored text: scored afresh by these specs' detectors
        dets = detect(specs[:1] if mode == "single" else specs, extra["text"], config.z_threshold)
    extra.update(perplexity_fields(scorers, prompt, extra["text"]))
    rows = detection_rows(dets)
    if any(row["provider_scheme"] != "none" for row in rows):
        # a provider serving no watermark (the ``anchor`` line-up's partners) has no detector:
        # its constant z = 0 would enter every per-provider statistic as a sample
        rows = [row for row in rows if row["provider_scheme"] != "none"]
    return JobOutput(rows=[{**row, **extra} for row in rows],
                     generations=[gen.new_entry] if gen.new_entry else [])
