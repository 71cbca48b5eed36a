"""The Detect tab: score any text with chosen providers' own detectors.

Providers are built exactly as ``python -m wash detect`` builds them (same
loader, same union vocabulary for coordinated providers), and the verdicts come
from ``wash.detection.detect_text``: each detector sees the text re-tokenised by
its provider's tokenizer.

The tab's statistic choice is the CLI's ``--statistic``: ``sum`` (each scheme's own
detector, the default) or a statistic of ``wash.detection.statistics``; those
re-read the text with each provider's model (one forward per text and model) and
their per-token view shows the token's share of the statistic.

Under the verdicts, one line per provider says how many more tokens its statistic
needs for 80% TPR with as many providers as the tab lists, read from the committed
curves of ``results/see-through`` (``wash.reporting.see_through.tokens_needed``): a
verdict of "not detected" on a short text then reads as "too short to tell".

The tab's "models of the generation" field is the CLI's ``--models``: the model
set whose union vocabulary coordinated providers hash in. Left empty it is the
providers' own models; "Send text to Detect" fills it with the last generation's
set, so a coordinated provider scores the same whichever providers are listed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from wash.core.errors import WashInputError
from wash.engine import ProviderDetection, ProviderSpec, RunResult
from wash.reporting import display_name, results_tables, see_through
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


#: Heads the tokens-for-80% lines under the verdicts.
TOKENS_TITLE = ("**Tokens for 80% TPR** (each provider's statistic, with as many providers as listed here; "
                "measured on the committed texts of `results/see-through`, never extrapolated):")


class Verdicts(list):
    """The providers' verdicts (a list of ``ProviderDetection``, as ``detect_text`` gives them) and what
    scored them, which the tokens-for-80% lines need and the rows do not say: the tab's ``statistic``,
    each provider's ``spec`` and the statistic its verdict used (``statistics``: the tab's, or ``sum``
    where it does not cover the scheme or the provider is coordinated, ``wash.detection.statistic_used``).
    A list still, so every caller of ``detect`` reads the rows as before."""

    statistic: str = "sum"
    specs: list[ProviderSpec]
    statistics: list[str]


def statistic_choices() -> list[str]:
    """The statistics the tab offers, ``sum`` first."""
    from wash.detection import STATISTICS

    return list(STATISTICS)


def detect(text: str, table: Any, threshold: float = Z_THRESHOLD, choices: list[str] | None = None,
           models: str | Sequence[str] | None = None, statistic: str = "sum") -> Verdicts:
    """Each provider's verdict with its per-token scores (and what scored it: ``Verdicts``).

    ``models``: the generation's model set (a list or ``"m1,m2"``); empty or None
    means the providers' own models. ``statistic``: ``sum`` or one of
    ``wash.detection.statistics.STATISTICS``.
    """
    from wash.detection import detect_text, parse_models, statistic as check_statistic, statistic_used
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
    verdicts = Verdicts(detect_text(providers, text, threshold, statistic=name))
    verdicts.statistic, verdicts.specs = name, specs
    verdicts.statistics = [statistic_used(p, name) for p in providers]
    return verdicts


def tokens_line(row: ProviderDetection, spec: ProviderSpec, asked: str, used: str, n: int,
                root: Path = results_tables.RESULTS_ROOT) -> str | None:
    """One provider's tokens-for-80% sentence, with what the committed curve does not share with it: a
    statistic that fell back to the sum, non-default parameters. A coordinated provider has no curve (the
    committed texts' providers are independent: each hashes in its own vocabulary under its own key)."""
    line = see_through.tokens_needed(row.scheme, used, n, len(row.tokens), root)
    if line is None or row.scheme == "none":
        return line
    if spec.coordinated:
        curves = see_through.tokens_curves(root)
        return ("a coordinated provider has no committed tokens-for-80% curve "
                f"({see_through.texts_of(curves)}: independent providers)")
    if used != asked:
        line = f"`{asked}` does not cover {display_name(row.scheme)}, whose verdict is its own sum: {line}"
    if spec.params:
        sets = ", ".join(f"{k}={v}" for k, v in spec.params)
        line += f" (measured with the scheme's defaults; this provider sets {sets})"
    return line


def tokens_note(verdicts: Sequence[ProviderDetection], root: Path = results_tables.RESULTS_ROOT) -> str:
    """The lines under the verdicts, one per provider; empty without ``results/see-through`` or verdicts
    (a list that is not ``Verdicts``, as the tab holds before its first score, says nothing)."""
    if not isinstance(verdicts, Verdicts) or not verdicts:
        return ""
    n = len(verdicts)
    lines = [tokens_line(row, spec, verdicts.statistic, used, n, root)
             for row, spec, used in zip(verdicts, verdicts.specs, verdicts.statistics)]
    if any(line is None for line in lines):
        return ""
    return "\n".join([TOKENS_TITLE, "", *(f"* {row.provider}: {line}" for row, line in zip(verdicts, lines))])


def result_models(result: RunResult | None) -> list[str]:
    """The model set of a finished generation (for the Detect tab's field); [] when none."""
    from wash.detection import generation_models

    if result is None:
        return []
    return generation_models({"settings": result.settings, "providers": result.providers})
