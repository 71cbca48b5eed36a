"""Which providers a job runs: derived keys, provider specs, ensembles, scheme rotations, prompts.

Every experiment builds its ensembles here, so that two experiments asking for
"N providers over these models with independent keys" get exactly the same
providers (and can share stored generations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from wash.config import ProviderSpec

if TYPE_CHECKING:
    from wash.experiments.config import ExperimentConfig
    from wash.prompts import Prompt

#: Base of the derived secret keys (KGW's reference hash key).
KEY_BASE = 15485863


def derive_key(seed: int, index: int, salt: int = 0) -> int:
    """Distinct, reproducible secret keys: provider ``index`` of run ``seed``."""
    return KEY_BASE + 1000 * int(seed) + 97 * int(salt) + int(index)


def spec(model: str, scheme: str, key: int, **params: Any) -> ProviderSpec:
    """One provider, through the same parser as the CLI's ``--provider`` (so it is validated)."""
    extra = ",".join(f"{k}={v}" for k, v in params.items())
    return ProviderSpec.parse(f"{model}:{scheme}:{key}" + (f":{extra}" if extra else ""))


def make_ensemble(n: int, models: Sequence[str], schemes: Sequence[str], seed: int, salt: int = 0,
                  shared_key: bool = False, **params: Any) -> list[ProviderSpec]:
    """N providers: provider ``i`` serves ``models[i % len]`` with ``schemes[i % len]``.

    Keys are independent across providers (and across ``salt``, e.g. the prompt
    index, so that every run draws a new key combination) unless ``shared_key``.
    """
    return [spec(models[i % len(models)], schemes[i % len(schemes)],
                 derive_key(seed, 0 if shared_key else i, salt), **params) for i in range(n)]


def rotate(items: Sequence[str], offset: int) -> list[str]:
    """``items`` rotated left by ``offset``: a different scheme mix for every run."""
    k = offset % len(items)
    return list(items[k:]) + list(items[:k])


def prompt_set(config: "ExperimentConfig", domain: str | None = None) -> list["Prompt"]:
    """The first ``config.prompts`` prompts (interleaved across domains, or of one ``domain``)."""
    from wash.prompts import load_prompts

    return load_prompts(domain=domain, limit=config.prompts)


def specs_text(specs: Sequence[ProviderSpec]) -> str:
    """Providers as one CSV cell, e.g. ``smollm2:kgw:1|gemma3:aar:2``."""
    return "|".join(str(s) for s in specs)
