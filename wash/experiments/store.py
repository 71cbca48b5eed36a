"""Finished generations on disk, shared across jobs and experiments, keyed by what the text depends on.

The same WASH text needed by two experiments (decay's mixed N = 3 and tpr's WASH
N = 3, say) or an unwatermarked text scored by the detectors of several schemes is
generated once. The key is everything the text depends on: mode, providers (for
``unwatermarked`` only their base models, since no key or scheme touches the
text), prompt, seed, length, the serving settings (temperature, top-k, top-p),
forwards (``eager`` and ``lazy`` draw different seeded texts), the aggregation rule
(only when it is not ``mean``; a ``single`` text has none) and the engine's
fingerprint (``wash.core.version.engine_fingerprint``: a hash of the source of the
modules that determine a text), so a text made by another version of the engine
is a miss, never silently reused. Each file also records the git commit that
wrote it. A stored value is ``run_fields`` of the generation, JSON-exact, so a row
built from it equals the row of a fresh generation.

Worker processes only read the store; the driver's parent process writes the
generations they return (``JobOutput.generations``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from wash.engine import ProviderSpec
from wash.experiments.config import rule_key
from wash.experiments.ensembles import specs_text
from wash.core.version import engine_fingerprint, git_commit

if TYPE_CHECKING:
    from wash.experiments.config import ExperimentConfig


#: Scheme parameters that only a detector reads: the text does not depend on them, so a text's
#: key leaves them out and one text is scored by every detector variant (``aar:detector=release``
#: re-scores the texts of ``aar``). A spec without them keeps the key it always had.
DETECTOR_ONLY_PARAMS = ("detector",)


def text_spec(spec: ProviderSpec) -> ProviderSpec:
    """``spec`` as far as the text depends on it (``DETECTOR_ONLY_PARAMS`` dropped)."""
    kept = tuple((k, v) for k, v in spec.params if k not in DETECTOR_ONLY_PARAMS)
    return spec if kept == spec.params else dataclasses.replace(spec, params=kept)


class GenerationStore:
    """One JSON file per generation under ``root``, named by a hash of its key."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @staticmethod
    def key(specs: Sequence[ProviderSpec], prompt: str, mode: str, config: "ExperimentConfig", seed: int,
            **overrides: Any) -> dict[str, Any]:
        """What the text of this generation depends on (``overrides`` as given to the engine)."""
        providers = ("|".join(s.model for s in specs) if mode == "unwatermarked"
                     else specs_text([text_spec(s) for s in (specs[:1] if mode == "single" else specs)]))
        overrides = dict(overrides)
        aggregate = overrides.pop("aggregate", config.aggregate)
        # One provider is its own aggregate under every rule: a ``single`` text is the same text.
        rule = {} if mode == "single" else rule_key(config.generation(aggregate=aggregate).rule)
        return {"mode": mode, "providers": providers, "prompt": prompt, "seed": int(seed),
                "tokens": int(overrides.pop("max_new_tokens", None) or config.tokens),
                "temperature": overrides.pop("temperature", config.temperature),
                "top_k": int(overrides.pop("top_k", config.top_k)),
                "top_p": overrides.pop("top_p", config.top_p),
                "forwards": overrides.pop("forwards", config.forwards), **rule,
                "engine": engine_fingerprint(),
                **{k: overrides[k] for k in sorted(overrides)}}

    def _path(self, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:32]
        return self.root / f"{digest}.json"

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.exists():
            return None
        stored = json.loads(path.read_text(encoding="utf-8"))
        return stored["value"] if stored.get("key") == key else None  # a hash collision is a miss

    def put(self, key: dict[str, Any], value: dict[str, Any]) -> None:
        """Write atomically: a reader (a worker) sees the whole file or none."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "code": git_commit(), "value": value}), encoding="utf-8")
        os.replace(tmp, path)


def store_of(config: "ExperimentConfig") -> GenerationStore | None:
    """The config's store (``config.store_root()``), or ``None`` when ``cache`` is off."""
    return GenerationStore(config.store_root()) if config.cache else None
