"""Which providers a job runs: derived keys, provider specs, ensembles, scheme rotations, prompts.

Every experiment builds its ensembles here, so that two experiments asking for
"N providers over these models with independent keys" get exactly the same
providers (and can share stored generations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from wash.engine import ProviderSpec

if TYPE_CHECKING:
    from wash.experiments.config import ExperimentConfig
    from wash.content.prompts import Prompt

#: Base of the derived secret keys (KGW's reference hash key).
KEY_BASE = 15485863


def derive_key(seed: int, index: int, salt: int = 0) -> int:
    """Distinct, reproducible secret keys: provider ``index`` of run ``seed``."""
    return KEY_BASE + 1000 * int(seed) + 97 * int(salt) + int(index)


def spec(model: str, scheme: str, key: int, **params: Any) -> ProviderSpec:
    """One provider, through the same parser as the CLI's ``--provider`` (so it is validated)."""
    extra = ",".join(f"{k}={v}" for k, v in params.items())
    return ProviderSpec.parse(f"{model}:{scheme}:{key}" + (f":{extra}" if extra else ""))


#: How an ensemble's providers are watermarked. ``independent``: every provider carries its
#: own watermark and key (the paper's text). ``anchor``: provider 1 alone is watermarked and
#: providers 2..N serve the same base models without any watermark (the WASH release's attack
#: configuration, "the others dilute it"). For a provider's own per-text detector the two
#: differ little; for a keyless model test (Water-Probe) they differ a lot: it sees the sum
#: of every fixed perturbation, which shrinks like 1/N for one anchor but only like
#: 1/sqrt(N) for N independent ones.
LINEUPS = ("independent", "anchor")
INDEPENDENT, ANCHOR = LINEUPS


def scheme_variant(token: str) -> tuple[str, dict[str, str]]:
    """An experiment's scheme token, e.g. ``aar:form=soft+detector=release``: the scheme's name and params.

    Experiments name the schemes they run by such tokens (``--schemes kgw aar:form=soft``),
    so one run can hold a scheme in two forms side by side, each its own ``scheme`` label
    in the CSV. Parameters are joined by ``+`` (a ``,`` separates list items in ``--set``).
    """
    name, _, rest = token.strip().partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split("+"))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"scheme '{token}': parameter '{item}' is not of the form name=value "
                             "(e.g. aar:form=soft)")
        params[key.strip()] = value.strip()
    return name.strip().lower(), params


def check_lineup(lineup: str) -> str:
    if lineup not in LINEUPS:
        raise ValueError(f"unknown line-up '{lineup}' (accepted: {', '.join(LINEUPS)})")
    return lineup


def make_ensemble(n: int, models: Sequence[str], schemes: Sequence[str], seed: int, salt: int = 0,
                  shared_key: bool = False, lineup: str = INDEPENDENT, **params: Any) -> list[ProviderSpec]:
    """N providers: provider ``i`` serves ``models[i % len]`` with ``schemes[i % len]``.

    Keys are independent across providers (and across ``salt``, e.g. the prompt
    index, so that every run draws a new key combination) unless ``shared_key``.
    A scheme may be a variant token (``scheme_variant``). Under the ``anchor``
    line-up providers 2..N keep their base models but serve no watermark.
    """
    out = []
    for i in range(n):
        model = models[i % len(models)]
        if check_lineup(lineup) == ANCHOR and i > 0:
            out.append(spec(model, "none", 0))
            continue
        name, variant = scheme_variant(schemes[i % len(schemes)])
        out.append(spec(model, name, derive_key(seed, 0 if shared_key else i, salt), **{**params, **variant}))
    return out


def rotate(items: Sequence[str], offset: int) -> list[str]:
    """``items`` rotated left by ``offset``: a different scheme mix for every run."""
    k = offset % len(items)
    return list(items[k:]) + list(items[:k])


def prompt_set(config: "ExperimentConfig", domain: str | None = None) -> list["Prompt"]:
    """The first ``config.prompts`` prompts (interleaved across domains, or of one ``domain``)."""
    from wash.content.prompts import load_prompts

    return load_prompts(domain=domain, limit=config.prompts)


def specs_text(specs: Sequence[ProviderSpec]) -> str:
    """Providers as one CSV cell, e.g. ``smollm2:kgw:1|gemma3:aar:2``."""
    return "|".join(str(s) for s in specs)
