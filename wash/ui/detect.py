"""The Detect tab: score any text with chosen providers' own detectors.

Providers are built exactly as ``python -m wash detect`` builds them (same
loader, same union vocabulary for coordinated providers), and the verdicts come
from ``wash.detection.detect_text``: each detector sees the text re-tokenised by
its provider's tokenizer.

The tab's statistic choice is the CLI's ``--statistic``: ``sum`` (each scheme's own
detector, the default) or a statistic of ``wash.detection.statistics``; those
re-read the text with each provider's model (one forward per text and model) and
their per-token view shows the token's share of the statistic.

The tab's "models of the generation" field is the CLI's ``--models``: the model
set whose union vocabulary coordinated providers hash in. Left empty it is the
providers' own models; "Send text to Detect" fills it with the last generation's
set, so a coordinated provider scores the same whichever providers are listed.
"""

from __future__ import annotations

from typing import Any, Sequence

from wash.core.errors import WashInputError
from wash.engine import ProviderDetection, RunResult
from wash.ui.providers import rows_to_specs
from wash.ui.settings import MAX_DETECT_CHARS, check_app_model
from wash.detection import Z_THRESHOLD


#: What the tab says beside its statistic choice.
STATISTIC_NOTE = ("**Statistic.** `sum` is each scheme's own detector. `lr` and `lr-mix` (model-aware "
                  "likelihood ratio, maximised or averaged over the share of the provider's tokens), "
                  "`lr-lineup` (`lr-mix` with the other providers' base models as the law of the tokens a "
                  "provider did not serve), `hc` (higher criticism, AAR) and `entropy` (entropy-weighted "
                  "green count) re-read the text with each provider's own model (`lr-lineup`: with every "
                  "model of the line-up): one forward of that model per text, then p from 1,000 simulated "
                  "null draws (flagged at p < 0.05). A scheme a statistic does not cover keeps its sum. See "
                  "docs/DETECTORS.md, \"Can a detector see through the wash?\".")


def statistic_choices() -> list[str]:
    """The statistics the tab offers, ``sum`` first."""
    from wash.detection import STATISTICS

    return list(STATISTICS)


def detect(text: str, table: Any, threshold: float = Z_THRESHOLD, choices: list[str] | None = None,
           models: str | Sequence[str] | None = None, statistic: str = "sum") -> list[ProviderDetection]:
    """Each provider's verdict with its per-token scores.

    ``models``: the generation's model set (a list or ``"m1,m2"``); empty or None
    means the providers' own models. ``statistic``: ``sum`` or one of
    ``wash.detection.statistics.STATISTICS``.
    """
    from wash.detection import detect_text, parse_models, statistic as check_statistic
    from wash.engine import build_providers

    if not text or not text.strip():
        raise WashInputError("the text to score is empty")
    if len(text) > MAX_DETECT_CHARS:
        raise WashInputError(f"the text is too long ({len(text)} characters; at most {MAX_DETECT_CHARS})")
    specs = rows_to_specs(table, choices)
    if not specs:
        raise WashInputError("no provider given (add at least one row: model, scheme, key)")
    try:
        threshold = float(threshold)
    except (TypeError, ValueError):
        raise WashInputError(f"the z threshold must be a number, got {threshold!r}") from None
    union = parse_models(models)
    for name in union:
        try:
            check_app_model(name, choices)
        except WashInputError as err:
            raise WashInputError(f"models of the generation: {err}") from None

    name = check_statistic(statistic or "sum").name
    providers = build_providers(specs, union_models=union).providers
    return detect_text(providers, text, threshold, statistic=name)


def result_models(result: RunResult | None) -> list[str]:
    """The model set of a finished generation (for the Detect tab's field); [] when none."""
    from wash.detection import generation_models

    if result is None:
        return []
    return generation_models({"settings": result.settings, "providers": result.providers})
