"""What is measured on a text: each provider's detection, and perplexity under a base model.

Texts are scored the way ``python -m wash detect`` scores them: each provider's
own detector on the text re-tokenised by that provider's tokenizer. The helpers
at the end read those measurements back from a results CSV for the summaries.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import pandas as pd

from wash.engine import ProviderSpec, ProviderDetection
from wash.experiments.ensembles import specs_text
from wash.detection import Z_THRESHOLD

_DETECTORS: dict[str, list] = {}


def watermarked_providers(specs: Sequence[ProviderSpec]) -> list:
    """The providers of ``specs`` with their watermarks (cached per process): detectors for any text."""
    from wash.engine import build_providers

    k = specs_text(specs)
    if k not in _DETECTORS:
        _DETECTORS[k] = build_providers(specs).providers
    return _DETECTORS[k]


def detect(specs: Sequence[ProviderSpec], text: str, threshold: float = Z_THRESHOLD) -> list[ProviderDetection]:
    """Each provider's own detector on ``text`` (re-tokenised by that provider's tokenizer)."""
    from wash.detection import detect_text

    return detect_text(watermarked_providers(specs), text, threshold)


def detection_rows(detections: Iterable[ProviderDetection]) -> list[dict[str, Any]]:
    """One row per provider: its index, base model, scheme, key and verdict."""
    return [{"provider": i, "provider_model": d.model, "provider_scheme": d.scheme, "provider_key": d.key,
             "z": float(d.z), "p": float(d.p), "tokens_scored": int(d.tokens_scored),
             "detected": bool(d.detected)} for i, d in enumerate(detections)]


def continuation_nll(model: str, prompt: str, text: str, backend: str | None = None) -> tuple[float, int]:
    """Summed negative log-likelihood (nats) of ``text`` after ``prompt`` under ``model``, and its length.

    The model reads ``prompt`` as the engine feeds it (with its BOS where it has one),
    then the continuation tokenised by its own tokenizer; only continuation tokens count.
    It runs as a member on ``backend`` (default ``WASH_BACKEND``, where the generations ran).
    """
    from wash.engine import member_of, require

    member = require(member_of(model, backend), "token_nll", "perplexity")
    prompt_ids = member.encode_prompt(prompt)
    cont = member.encode(text)
    if not cont:
        return 0.0, 0
    return float(member.token_nll(prompt_ids, cont).sum().item()), len(cont)


def perplexity(nll: float, n: int) -> float:
    return math.exp(nll / n) if n > 0 else float("nan")


def repeated_ngram_share(text: str, n: int = 3) -> float:
    """Share of a text's word ``n``-grams that repeat an earlier one (0: none; NaN: fewer than ``n`` words).

    Perplexity rewards a model that loops on its own likeliest phrase: a text caught in
    a loop scores better than a fluent one. Reported beside perplexity so that a low
    value can be read for what it is.
    """
    words = str(text).split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return float("nan")
    return 1.0 - len(set(grams)) / len(grams)


def perplexity_fields(scorers: Sequence[str], prompt: str, text: str) -> dict[str, Any]:
    """``nll_<model>``, ``scored_tokens_<model>`` and ``ppl_<model>`` of the text under each scorer."""
    fields: dict[str, Any] = {}
    for scorer in dict.fromkeys(scorers):
        nll, n = continuation_nll(scorer, prompt, text)
        fields.update({f"nll_{scorer}": nll, f"scored_tokens_{scorer}": n,
                       f"ppl_{scorer}": perplexity(nll, n)})
    return fields


# -- reading the measurements back ------------------------------------------------------
def as_bool(values) -> pd.Series:
    """A column of booleans whether it holds bools or their CSV spelling."""
    return pd.Series(values).astype(str).str.strip().str.lower().isin(("true", "1", "1.0"))


def first_per_job(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per job (a generation), for the per-text fields repeated on its provider rows."""
    return rows.drop_duplicates("job").reset_index(drop=True)


def perplexity_long(rows: pd.DataFrame, scorers: Sequence[str], by: Sequence[str]) -> pd.DataFrame:
    """Per-text perplexities in long form: the ``by`` columns, ``scorer`` and ``ppl``."""
    texts = first_per_job(rows)
    parts = []
    for scorer in dict.fromkeys(scorers):
        col = f"ppl_{scorer}"
        if col in texts:
            part = texts[[*by, col, f"scored_tokens_{scorer}"]].rename(
                columns={col: "ppl", f"scored_tokens_{scorer}": "scored_tokens"})
            parts.append(part[part["scored_tokens"] > 0].assign(scorer=scorer))
    if not parts:
        return pd.DataFrame(columns=[*by, "ppl", "scored_tokens", "scorer"])
    return pd.concat(parts, ignore_index=True)
