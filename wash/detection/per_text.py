"""Running each provider's own detector on text, and reading the text and providers a run recorded.

Final verdicts are computed the way a third party would: on the generated text
alone, re-tokenised by the provider's tokenizer. Live traces during generation use
the ids each model actually holds (prompt as hashing context), which is what a
provider watching its own output stream would see. Both are a provider's own
detector on ids, which the decoding loop records too: ``detect_ids``, ``own_verdicts``
and ``LiveDetector`` live with the providers in ``wash.engine.detectors``; this module,
the detection layer's way in, re-exports two of them, and its ``detect_text`` adds the
statistics of ``wash.detection.statistics`` (which the engine cannot import) to
``own_verdicts``: the one function that scores a text, whatever the statistic.

Coordinated providers hash in the union vocabulary of the *generation's* model
set, so detecting them later needs that set, not just the models of the
providers one happens to name: ``build_providers(specs, union_models=...)``.
A run JSON records it (``settings["models"]``; older runs: their providers'
models), and ``read_run`` gives the text, providers and model set of one, for
``python -m wash detect --run`` and the app's Detect tab.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from wash.detection.thresholds import FPR_CALIBRATED, Z_THRESHOLD
from wash.engine import detectors
from wash.engine.detectors import SLOW_REFRESH, LiveDetector, detect_ids
from wash.engine.events import ProviderDetection
from wash.engine.providers import Provider
from wash.engine.settings import ProviderSpec, check_text
from wash.core.errors import WashInputError

__all__ = ["SLOW_REFRESH", "LiveDetector", "detect_ids", "detect_text", "statistic_used", "parse_models",
           "generation_models", "spec_from_dict", "RecordedRun", "recorded_run", "read_run"]


def detect_text(providers: Sequence[Provider], text: str, threshold: float = Z_THRESHOLD,
                statistic: str = "sum") -> list[ProviderDetection]:
    """Each provider's detector on ``text`` tokenised by that provider's own tokenizer.

    ``statistic`` other than ``sum`` (the scheme's own) re-reads the text with each
    provider's model (one forward per text and model, ``wash.detection.statistics``);
    a provider whose scheme it does not cover keeps its own sum. Such a statistic reads p
    against its simulated null draws, whose floor (1 / (draws + 1)) lies above z = 4's p,
    so it flags at p < ``FPR_CALIBRATED``. ``lr-lineup`` takes ``providers`` as the line-up:
    each provider's q is the mean of the other providers' base models.
    """
    if statistic == "sum":
        return detectors.own_verdicts(providers, text, threshold)
    check_text(text, "the text to score")
    from wash.detection import statistics

    stat = statistics.statistic(statistic)
    out = []
    for p in providers:
        ids = p.member.encode(text)
        if statistic_used(p, statistic) == "sum":
            out.append(detect_ids(p, ids, threshold))
            continue
        lineup = [q.member for q in providers if q is not p] if stat.needs_lineup else ()
        detection = statistics.detect_with(p, text, statistic, lineup=lineup)
        tokens = [p.member.decode_id(i) for i in ids]
        out.append(detectors.verdict(p, detection, threshold, tokens,
                                     detected=detection.tokens_scored > 0 and detection.p < FPR_CALIBRATED))
    return out


def statistic_used(provider: Provider, statistic: str) -> str:
    """The statistic ``detect_text`` scores ``provider`` with: ``statistic``, or ``sum`` where it does not
    cover the provider's scheme or the provider hashes in a union vocabulary (coordinated).

    One place for the fallback, so what a verdict says it used (the Detect tab's tokens-for-80% line)
    is what scored it."""
    from wash.detection import statistics

    if statistic == "sum" or provider.space is not None:
        return "sum"
    return statistic if statistics.statistic(statistic).applies(provider.scheme) else "sum"


# -- what a generation recorded ----------------------------------------------------------
def parse_models(value: str | Sequence[str] | None) -> list[str]:
    """Model names from ``"m1,m2"`` or a list (blanks and repeats dropped, order kept)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return list(dict.fromkeys(m.strip() for m in items if m and m.strip()))


def generation_models(run: Mapping[str, Any]) -> list[str]:
    """The base models a generation ran (its union vocabulary), from its run JSON.

    ``settings["models"]`` where the run records it; otherwise (runs written before
    it did) the models of its ``providers``, which is the same set: the engine loads
    exactly the active providers' models.
    """
    recorded = (run.get("settings") or {}).get("models")
    if recorded:
        return parse_models(recorded)
    return parse_models([p.get("model", "") for p in run.get("providers") or [] if isinstance(p, Mapping)])


def spec_from_dict(d: Mapping[str, Any]) -> ProviderSpec:
    """A provider as a run JSON lists it (``ProviderSpec.to_dict``), parsed and validated again."""
    try:
        params = tuple(sorted((str(k), str(v)) for k, v in dict(d.get("params") or {}).items()))
        spec = ProviderSpec(model=str(d["model"]), scheme=str(d["scheme"]), key=int(d.get("key", 0)),
                            params=params, coordinated=bool(d.get("coordinated", False)))
    except (KeyError, TypeError, ValueError):
        raise WashInputError(f"a provider in the run JSON is not MODEL/SCHEME/KEY: {dict(d)!r}") from None
    return ProviderSpec.parse(str(spec))


@dataclass
class RecordedRun:
    """What detection needs from a finished generation."""

    text: str
    specs: list[ProviderSpec]
    #: The generation's model set: the union vocabulary of its coordinated providers.
    models: list[str]


def recorded_run(doc: Mapping[str, Any]) -> RecordedRun:
    """The text, providers and model set of a run JSON.

    Accepts ``python -m wash generate --json`` output (``RunResult.to_dict()``) and
    the app's "Download run (JSON)" file, whose last ``finished`` event holds the
    same object.
    """
    run: Any = doc
    if isinstance(doc, Mapping) and "text" not in doc and isinstance(doc.get("events"), list):
        finished = [e.get("result") for e in doc["events"]
                    if isinstance(e, Mapping) and e.get("event") == "finished"]
        run = finished[-1] if finished else None
    if not isinstance(run, Mapping) or not isinstance(run.get("text"), str) \
            or not isinstance(run.get("providers"), list):
        raise WashInputError("not a run JSON: expected the output of 'python -m wash generate --json' "
                             "or the app's run download (a finished run with text and providers)")
    specs = [spec_from_dict(p) for p in run["providers"] if isinstance(p, Mapping)]
    return RecordedRun(text=run["text"], specs=specs, models=generation_models(run))


def read_run(path: str) -> RecordedRun:
    """``recorded_run`` of a JSON file; unreadable or malformed files are input errors."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as err:
        raise WashInputError(f"cannot read {path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise WashInputError(f"{path} is not JSON ({err.msg} at line {err.lineno})") from None
    return recorded_run(doc)
