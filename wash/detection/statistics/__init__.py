"""Detection statistics beside each scheme's own: one registry, one scoring entry point.

Why: every scheme's own detector is a sum over tokens, which spreads its weight
evenly; under WASH a provider's watermark sits in full on about 1/N of the tokens
(the average of N laws is the law of one provider picked at random), so a sum needs
about N^2 times the tokens. The statistics here ask whether the signal is gone or
only diluted (docs/DETECTORS.md, "Can a detector see through the wash?"):

* ``sum`` (default): the scheme's own detector, unchanged;
* ``lr``: the model-aware likelihood ratio: the provider re-reads the text with its
  own model (one forward, ``served_text``) and key, and each token contributes
  log((1 - w) + w rho_t), rho_t its watermarked over its plain served probability
  of the token (``keyed``); a generalised LR over w in [0, 1] (and, for Water-Bag,
  over the lists of its bag a generation may have drawn; for EXP-Edit and ITS-Edit,
  over the key offset a generation started at);
* ``lr-mix``: the same ratio averaged over a fixed uniform prior on w (and on
  Water-Bag's lists, the Edit schemes' offsets) instead of maximised (no atom at w = 0, so its p is not
  conservative);
* ``lr-lineup``: ``lr-mix`` with the line-up's other base models as the law q of the
  tokens the provider did not serve, (w p_wm + (1 - w) q) / (w p + (1 - w) q) per token
  (``lineup``: the others re-read the text, aligned on bytes); lr-mix is the case q = p.
  It knows the line-up's public base models, not their keys or schemes;
* ``hc``: higher criticism over the per-token pivots of a scheme that has them
  (AAR's 1 - r): the model-free sparse-mixture baseline;
* ``entropy``: a green count weighted by each position's served entropy
  (SWEET/EWD-style), for the green-count schemes.

The model-aware and model-free statistics get their p-value from ``N_NULL`` draws of
the same statistic under the null with the same per-token model quantities
(``tests.simulated_p``); ``sum`` keeps its scheme's own null. None of them knows N, except
through the line-up ``lr-lineup`` is handed (which slots q averages over; w stays unknown).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from wash.detection.statistics import tests
from wash.detection.statistics.keyed import keyed_law
from wash.detection.statistics.lineup import LineupRatio, read_lineup
from wash.detection.statistics.served_text import ServedText, served_text
from wash.watermarks.base import Detection, WatermarkScheme
from wash.watermarks.hashing import derive_seed, masks_kept
from wash.watermarks.scoring import z_from_p

#: Null draws per text for a simulated p-value (the threshold's null scores).
N_NULL = 1000
DEFAULT_STATISTIC = "sum"


@dataclass
class Evidence:
    """A text's ids and its scheme's own detector read once: what every statistic starts from."""

    scheme: WatermarkScheme
    ids: list[int]
    #: The scheme's own per-token scores (``None``: not scored).
    per_token: list[float | None]
    scored: np.ndarray
    #: The scheme's own p at each cut.
    sum_p: np.ndarray
    sum_value: np.ndarray
    #: The whole text's verdict (``None``: not read, no ``sum`` asked for).
    final: Detection | None
    #: Quantities several statistics share (the keyed ratios, under the key and simulated).
    cache: dict[str, Any] = field(default_factory=dict)
    #: r = q / p at each token from the line-up's other base models (``lr-lineup``; ``None``: not given).
    lineup: LineupRatio | None = None


@dataclass
class StatisticScore:
    """One statistic on one text: value and p at each prefix cut, per-token weights on the whole text."""

    statistic: str
    cuts: np.ndarray
    value: np.ndarray
    p: np.ndarray
    tokens_scored: np.ndarray
    per_token: list[float | None]
    #: Null draws behind p (0: the scheme's own analytic null).
    null_scores: int
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def detection(self, scheme: str) -> Detection:
        """The whole text's verdict as a ``Detection`` (the CLI's and the app's currency).

        p is the simulated p itself; z reads it as Phi^-1(1 - p) with p kept within
        the draws' resolution [1/(n+1), n/(n+1)], so "no evidence at all" (p = 1) shows
        as about -3, not as the cap of -38.
        """
        p = float(self.p[-1])
        if self.null_scores:
            step = 1.0 / (self.null_scores + 1)
            z = z_from_p(min(max(p, step), 1.0 - step))
        else:
            z = z_from_p(p)
        return Detection(scheme=scheme, z=z, p=p, tokens_scored=int(self.tokens_scored[-1]),
                         per_token=list(self.per_token), statistic=float(self.value[-1]), note=self.note)


@dataclass(frozen=True)
class Statistic:
    name: str
    summary: str
    #: Whether it needs the provider's model to re-read the text (one forward per text and model).
    needs_model: bool
    applies: Callable[[WatermarkScheme], bool]
    run: Callable[[Evidence, ServedText | None, np.ndarray, np.random.Generator, int], StatisticScore]
    #: Whether it needs the line-up's other base models to re-read the text as well (``lineup``).
    needs_lineup: bool = False


def read_evidence(scheme: WatermarkScheme, ids: Sequence[int], cuts: np.ndarray, verdicts: bool = True) -> Evidence:
    """One pass of the scheme's own detector, with its result at each cut (a prefix of ``cuts[j]`` tokens).

    ``verdicts`` False skips the results (the statistics other than ``sum`` read only which
    tokens are scored and their per-token scores): for the Edit schemes a result is a
    permutation test of 100 alignments, most of the cost of a text."""
    det = scheme.make_detector()
    p, v = [], []
    want = set(int(c) for c in cuts) if verdicts else set()
    if det.scores_in_result and len(want) > 1:
        _whole_key_columns(scheme, ids)
    if 0 in want:
        p.append(1.0)
        v.append(0.0)
    for i, t in enumerate(ids, start=1):
        det.push(t)
        if i in want:
            r = det.result()
            p.append(r.p)
            v.append(r.z)
    final = det.result() if verdicts else None
    if final is not None and final.token_null is None and det.token_null is not None:
        final.token_null = det.token_null
    per_token = list(det.per_token)
    if det.scores_in_result:  # the Edit schemes' alignment scores every token, in its result
        per_token = list(final.per_token) if final is not None else per_token
        scored = np.ones(len(per_token), dtype=bool)
    else:
        scored = np.array([s is not None for s in per_token], dtype=bool)
    return Evidence(scheme, [int(i) for i in ids], per_token, scored, np.array(p), np.array(v), final)


def _whole_key_columns(scheme: WatermarkScheme, ids: Sequence[int]) -> None:
    """Every distinct token's key values drawn at once, before the verdicts at each cut.

    Why: an Edit scheme caches each token's values under the keylen key elements, but
    draws the tokens it lacks with one pass over all keylen elements (``key_values``;
    ITS-Edit: a permutation of the whole vocabulary per element). Cut by cut, each
    prefix brings new tokens and so another pass: 9 passes of 420 permutations of
    Gemma-3's 262,144 ids were most of a see-through row's time. One pass over the
    whole text gives the same values (each is fixed by the key and the token)."""
    key_values = getattr(scheme, "key_values", None)
    if key_values is not None:
        key_values(sorted({int(t) for t in ids}))


def _scored_counts(ev: Evidence, cuts: np.ndarray) -> np.ndarray:
    return tests.prefix_sums(ev.scored.astype(float), cuts).astype(int)


def _run_sum(ev, served, cuts, rng, n_null):
    return StatisticScore("sum", cuts, ev.sum_value, ev.sum_p, _scored_counts(ev, cuts), list(ev.per_token), 0,
                          note=ev.final.note)


def _lr_per_token(ev: Evidence, rho: np.ndarray, w: float, r: np.ndarray | None = None) -> list[float | None]:
    """Each scored token's log ratio at w (``tests.ratio_terms``): what the statistic leans on (at w = 0.5
    when w-hat is 0)."""
    terms = tests.ratio_terms(rho, w if w > 0 else 0.5, r)
    return [float(max(terms[t], -10.0)) if ev.scored[t] else None for t in range(len(rho))]


def _variants_note(rho: np.ndarray, best: int) -> str:
    return f"; best of {rho.shape[0]} keyed laws: {best}" if rho.shape[0] > 1 else ""


def _ratio_sums(ev: Evidence, served: ServedText, cuts: np.ndarray, n_null: int,
                r: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """rho under the provider's key, (J, T); the summed log ratios under it (``tests.log_ratio_sums``),
    (J, C, W); and under ``n_null`` random keys the generalised LR and the mixture, each (n, C), best of
    and averaged over the J keyed laws. Computed once per text, key and q: ``lr`` and ``lr-mix`` read the
    same draws (reduced block by block, so hundreds of keyed laws per draw fit in memory), and
    ``lr-lineup`` (``r`` = q / p) the same draws again: its null is the same key simulation."""
    key = f"sums{n_null}:{cuts.tolist()}:{'lineup' if r is not None else 'own'}"
    if key not in ev.cache:
        law = keyed_law(ev.scheme)
        own = null_rng(ev.scheme, ev.ids, "rho")  # the same draws whichever LR statistic asks first
        rho = law.observed(served, ev.scored)
        glr, mix = [], []
        for block in law.null_sums(served, ev.scored, own, n_null, cuts, r):
            block_glr, block_mix = tests.over_laws(block)
            glr.append(block_glr)
            mix.append(block_mix)
        ev.cache[key] = (rho, tests.log_ratio_sums(rho, cuts, r), np.concatenate(glr), np.concatenate(mix))
    return ev.cache[key]


def _glr_over_laws(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per prefix: the generalised LR's value, its w and the keyed law (row) it picks, from (J, C, W) sums."""
    values, w_hats = tests.glr_from(sums)  # (J, C)
    best = np.argmax(values, axis=0)
    return values.max(axis=0), w_hats[best, np.arange(sums.shape[1])], best


def _run_lr(ev, served, cuts, rng, n_null):
    """The generalised LR over w and, where a generation drew one of several keyed laws, over the law."""
    rho, sums, null_glr, _null_mix = _ratio_sums(ev, served, cuts, n_null)
    value, w_hat, best = _glr_over_laws(sums)
    p = tests.simulated_p(value, null_glr)
    j, w = int(best[-1]), float(w_hat[-1])
    return StatisticScore("lr", cuts, value, p, _scored_counts(ev, cuts), _lr_per_token(ev, rho[j], w), n_null,
                          note=(f"generalised LR {value[-1]:.3g} at w = {w:.3g}{_variants_note(rho, j)}; p from "
                                f"{n_null} null draws with the same served laws"),
                          extra={"w_hat": w_hat})


def _mixture_score(name: str, ev: Evidence, served: ServedText, cuts: np.ndarray, n_null: int,
                   r: np.ndarray | None = None, about: str = "") -> StatisticScore:
    """The LR averaged over a uniform prior on w and on the keyed law a generation drew (a Bayes factor),
    with q = p (``r`` None) or r = q / p of the line-up."""
    rho, sums, _null_glr, null_mix = _ratio_sums(ev, served, cuts, n_null, r)
    value = tests.log_mean_exp(tests.mixture_from(sums), 0)
    p = tests.simulated_p(value, null_mix)
    _value, w_hat, best = _glr_over_laws(sums)
    j, w = int(best[-1]), float(w_hat[-1])
    return StatisticScore(name, cuts, value, p, _scored_counts(ev, cuts), _lr_per_token(ev, rho[j], w, r),
                          n_null, note=(f"likelihood ratio averaged over w (log {value[-1]:.3g})"
                                        f"{_variants_note(rho, j)}{about}; p from {n_null} null draws with "
                                        "the same served laws"))


def _run_lr_mix(ev, served, cuts, rng, n_null):
    return _mixture_score("lr-mix", ev, served, cuts, n_null)


def _run_lr_lineup(ev, served, cuts, rng, n_null):
    """``lr-mix`` with q the line-up's other base models (``lineup``); its null is lr-mix's key simulation."""
    lineup = ev.lineup
    score = _mixture_score("lr-lineup", ev, served, cuts, n_null, lineup.r, f"; {lineup.note()}")
    score.extra.update(q_slots=lineup.slots, q_same_model=lineup.same_model, q_matched=lineup.matched,
                       q_fallback=lineup.fallback)
    return score


def _aar_pivots(ev: Evidence) -> np.ndarray:
    """Per-token p-values exp(-score) of Exp(1) scores (``Detector.exp_scores``; AAR's 1 - r), uniform
    without the key."""
    return np.array([np.exp(-s) if s is not None else 1.0 for s in ev.per_token])


def _run_hc(ev, served, cuts, rng, n_null):
    piv = _aar_pivots(ev)
    value = tests.higher_criticism(piv, ev.scored, cuts)
    null = tests.higher_criticism(rng.random((n_null, len(piv))), np.broadcast_to(ev.scored, (n_null, len(piv))),
                                  cuts)
    p = tests.simulated_p(value, null)
    per_token = [float(-np.log(piv[t])) if ev.scored[t] else None for t in range(len(piv))]
    return StatisticScore("hc", cuts, value, p, _scored_counts(ev, cuts), per_token, n_null,
                          note=f"higher criticism {value[-1]:.3g} over 1 - r; p from {n_null} uniform draws")


def _green_rate(scheme: WatermarkScheme) -> float:
    return float(scheme.make_detector().null_rate)


def _run_entropy(ev, served, cuts, rng, n_null):
    rate = _green_rate(ev.scheme)
    green = np.array([s if s is not None else 0.0 for s in ev.per_token])
    weights = np.where(ev.scored, served.entropy(), 0.0)
    value = tests.weighted_count(green, weights, rate, cuts)
    null_green = (rng.random((n_null, len(green))) < rate).astype(float)
    null = tests.weighted_count(null_green, weights, rate, cuts)
    p = tests.simulated_p(value, null)
    per_token = [float(weights[t] * (green[t] - rate)) if ev.scored[t] else None for t in range(len(green))]
    return StatisticScore("entropy", cuts, value, p, _scored_counts(ev, cuts), per_token, n_null,
                          note=f"entropy-weighted green z {value[-1]:.3g}; p from {n_null} null draws")


def _counts_green(scheme: WatermarkScheme) -> bool:
    return scheme.make_detector().counts_green


def _has_exp_scores(scheme: WatermarkScheme) -> bool:
    return scheme.make_detector().exp_scores


STATISTICS: dict[str, Statistic] = {s.name: s for s in (
    Statistic("sum", "the scheme's own detector (a sum over tokens)", False, lambda s: True, _run_sum),
    Statistic("lr", "model-aware likelihood ratio: the provider re-reads the text with its model and key "
                    "(one forward per text)", True, lambda s: keyed_law(s) is not None, _run_lr),
    Statistic("lr-mix", "the model-aware likelihood ratio averaged over a uniform prior on w (a Bayes factor; "
                        "one forward per text)", True, lambda s: keyed_law(s) is not None, _run_lr_mix),
    Statistic("lr-lineup", "lr-mix with the line-up's other base models as the law of the tokens the "
                           "provider did not serve (one forward per text and base model of the line-up)",
              True, lambda s: keyed_law(s) is not None, _run_lr_lineup, needs_lineup=True),
    Statistic("hc", "higher criticism over per-token pivots (model-free sparse-mixture test)", False, _has_exp_scores,
              _run_hc),
    Statistic("entropy", "green count weighted by the served entropy (SWEET/EWD-style; one forward per text)",
              True, _counts_green, _run_entropy),
)}


def statistic(name: str) -> Statistic:
    from wash.core.errors import WashInputError

    try:
        return STATISTICS[name]
    except KeyError:
        raise WashInputError(f"unknown statistic '{name}' (accepted: {', '.join(STATISTICS)})") from None


def null_rng(scheme: WatermarkScheme, ids: Sequence[int], name: str) -> np.random.Generator:
    """The simulated null's generator: fixed by the statistic, the key and the text (reproducible p)."""
    return np.random.default_rng(derive_seed("null", name, scheme.key, len(ids), *ids[:16]))


def score_ids(scheme: WatermarkScheme, ids: Sequence[int], names: Sequence[str], served: ServedText | None = None,
              cuts: Sequence[int] | None = None, n_null: int = N_NULL,
              evidence: Evidence | None = None,
              lineup: LineupRatio | None = None) -> dict[str, StatisticScore]:
    """Each named statistic that applies to ``scheme`` on ``ids`` (prefix cuts default to the whole text).

    ``lineup``: r = q / p from the line-up's other base models (``lineup.lineup_ratio``), for
    ``lr-lineup``."""
    cuts_arr = np.array(sorted(set(min(int(c), len(ids)) for c in (cuts or [len(ids)]))), dtype=int)
    out: dict[str, StatisticScore] = {}
    with masks_kept():  # the detector and the keyed law read the same green lists
        ev = evidence or read_evidence(scheme, ids, cuts_arr, verdicts="sum" in names)
        if lineup is not None:
            ev.lineup = lineup
        for name in names:
            stat = statistic(name)
            if not stat.applies(scheme):
                continue
            if stat.needs_model and served is None:
                raise ValueError(f"statistic '{name}' needs the provider's model to re-read the text")
            if stat.needs_lineup and ev.lineup is None:
                raise ValueError(f"statistic '{name}' needs the line-up's other base models to re-read the "
                                 "text")
            out[name] = stat.run(ev, served, cuts_arr, null_rng(scheme, ids, name), n_null)
    return out


def detect_with(provider: Any, text: str, name: str = DEFAULT_STATISTIC, cache_dir: str | None = None,
                profile: str = "paper", lineup: Sequence[Any] = ()) -> Detection:
    """``provider``'s verdict on ``text`` under statistic ``name`` (the CLI's and the app's entry point).

    ``sum`` is the scheme's own detector; the others re-read the text with the
    provider's model under the serving ``profile`` (one forward, cached per text and model).
    ``lineup``: the members of the line-up's other slots (one per slot), which ``lr-lineup``
    re-reads the text with too; every one must give ``position_logits``, checked before any forward.
    """
    stat = statistic(name)
    if not stat.applies(provider.scheme):
        from wash.core.errors import WashInputError

        raise WashInputError(f"statistic '{name}' does not apply to scheme '{provider.scheme.name}'")
    ids = provider.scheme_ids(provider.member.encode(text))
    if name == "sum":
        return provider.scheme.detect(ids)
    ratio = read_lineup(provider.member, text, lineup, profile, cache_dir) if stat.needs_lineup else None
    served = served_text(provider.member, text, profile, cache_dir)
    result = score_ids(provider.scheme, ids, [name], served, lineup=ratio)[name]
    return result.detection(provider.scheme.name)


__all__ = ["DEFAULT_STATISTIC", "N_NULL", "STATISTICS", "Evidence", "ServedText", "Statistic", "StatisticScore",
           "detect_with", "read_evidence", "score_ids", "served_text", "statistic"]
