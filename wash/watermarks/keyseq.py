"""What ITS-Edit and EXP-Edit share (Kuditipudi et al. 2023): a fixed key sequence,
a random offset per generation, and an edit-distance alignment test.

Why a key *sequence*: both schemes decode step t with the t-th element xi_k of a
sequence of ``keylen`` (420) keyed random elements, k = (offset + t) mod keylen,
instead of hashing the text context. The watermark then survives edits that
change contexts, and the detector finds it by aligning the text against the key
sequence. Each generation starts at a random offset (drawn in ``new_state`` from
the generation seed), so repeated generations are not copies of one another.

Why lazily: element k is a full vocabulary-sized draw (a permutation for ITS, V
uniforms for EXP). Materialising 420 x V up front (MarkLLM does, with a Python
Mersenne twister) costs ~440 MB and minutes for a 262k vocabulary. Here element k
is drawn on demand from ``hashing`` with seed ``derive_seed(scheme, key, k)``; the
generator keeps a few recent rows, and the detector keeps only what it needs: the
keylen values of each token id that occurred in a scored text.

The test (Kuditipudi's "edit" statistic). The cost of matching text token y_i with
key element xi_l is scheme-specific (EXP: log(1 - xi_l[y_i]); ITS: the distance
between the token's normalised rank and the key's uniform). For a text of m
tokens and each offset j, a Levenshtein-style alignment of the text against the
key window (j, ..., j+m-1 mod keylen) costs

    A[i][l] = min(A[i-1][l] + gamma, A[i][l-1] + gamma, A[i-1][l-1] + cost(i, l)),
    A[i][0] = A[0][i] = i * gamma,

and the statistic is min_j A[m][m] (one block of length m, their default k = m).
Low cost = watermark. It is compared with the same statistic under ``T``
(``n_permutations``, default 100, as in their code and MarkLLM) fresh random key
sequences, drawn reproducibly from a seed derived from the key and the text.

Why z comes from a fitted Gumbel tail rather than the permutation p-value: the
exact empirical p-value (1 + #{null <= observed}) / (T + 1) is bounded below by
1/(T+1), so with any affordable T it can never reach z > 4; it is kept in
``Detection.note``. Nor from ``(mean(null) - observed) / sd(null)`` with a Gaussian
tail (the previous choice): the statistic is a minimum over keylen offsets, so its
lower tail, where watermarks live, is long (skewness 0.55-0.8) and that z had
P(z > 4) = 0.1-0.3 % under the null and P(p < 0.05) = 6.6 %. A minimum of many
costs is an extreme value, so we fit the minimum-Gumbel law to the T null
statistics of *this* text by moments (mean and sd: two robust estimates, no
global table), take p = F(observed), the fitted probability that a random key
aligns at most as well, and z = Phi^-1(1 - p). Null measurements (T = 99-100;
100,000 draws for m = 24, 10,000 for m = 200, 2,700 English windows of 24 tokens):
mean z -0.10 to +0.04, sd 1.00-1.07, P(p < 0.05) = 4.3-5.0 %, not one z > 4. The
statistic's skewness is below the Gumbel's 1.14, so the far tail is conservative
(P(p < 0.001) measured 0.01-0.07 %, max z 3.9): z > 4 keeps at least its Gaussian
meaning, a false-positive rate of 3e-5 or less. Long English texts repeat tokens,
which lowers the skewness further (0.33-0.4 for 324 windows of 200 tokens): more
conservative there, P(p < 0.05) = 3.1-4.6 %, max z 2.4. A shifted gamma or GEV
fitted by three moments, or a Cornish-Fisher correction, follow the skewness but
must estimate it from T draws: they measured P(z > 4) = 0.02-0.1 % and
P(p < 0.001) = 0.25-0.5 %.

The fit is used on the evidence side only: p is capped at T/(T+1) (z >=
Phi^-1(1/(T+1)), where the permutation test ends), because the Gumbel's upper
tail is far lighter than the statistic's and would turn a merely costly text into
z = -38. Power is lower than under the Gaussian extrapolation (which gave z = 31
and 86 for 200 SmolLM2 tokens) but honest: z = 8.7 (ITS-Edit), 14.7 (EXP-Edit).

Cost: ``push`` only appends. ``result`` runs the whole test, O(T * keylen * m^2)
DP cells (1.7e9 for m = 200, T = 100), vectorised over keys and offsets along
anti-diagonals: measured 0.8 s (EXP-Edit) and 1.3 s (ITS-Edit) for 200 tokens on
one CPU thread of a lightly loaded 2-core machine, 2-5 s when it is busy; it grows
with m^2. Results are cached until the next push.
"""

from __future__ import annotations

import math
import threading
from abc import abstractmethod
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from wash.watermarks import hashing
from wash.watermarks.base import (DETECTOR_VARIANTS, Detection, Detector, WatermarkScheme, check_choice,
                                  check_range, softmax)
from wash.watermarks.laws import KeyedPicks, RereadText
from wash.watermarks.scoring import z_from_p

#: Rows of the key sequence kept for generation (a step may be evaluated twice).
_ROW_CACHE = 4
#: Per-token key columns kept by the detector before the cache is reset.
_COLUMN_CACHE_TOKENS = 20_000
#: Floats per DP buffer chunk (keys x offsets x text length): sized to stay in cache.
_DP_CHUNK_FLOATS = 700_000
_DP_CHUNK_FLOATS_CUDA = 50_000_000
#: Longest key sequence accepted: the detector draws every element for each new token id.
MAX_KEYLEN = 4096
#: Most random key sequences accepted for the null: detection time grows linearly with it.
MAX_PERMUTATIONS = 1000
#: Euler-Mascheroni constant: the Gumbel law's mean is loc -/+ euler * scale.
_EULER = 0.5772156649015329


@dataclass(frozen=True)
class EditState:
    """Per-generation state: where in the key sequence this generation starts."""

    offset: int


class EditScheme(WatermarkScheme):
    """Base of ITS-Edit and EXP-Edit: key sequence, offsets, detector plumbing.

    Subclasses define one key element (``_draw_row``), how a text token reads it
    (``_row_values``), the sampling rule (``_law``) and the matching cost under the
    real key (``observed_cost``) and under random keys (``null_cost``).
    """

    point_mass = True
    cheap_result = False  # result() runs the permutation test
    picks_states = True

    @dataclass(frozen=True)
    class Params:
        keylen: int = 420
        gamma: float = 0.0
        n_permutations: int = 100
        #: ``ours``: the Gumbel-tail z of the alignment test; ``release``: the WASH
        #: release's permutation p-value (see ``release_detection``).
        detector: str = "ours"

        def __post_init__(self) -> None:
            check_range(self, "keylen", lo=1, hi=MAX_KEYLEN, integer=True)
            check_range(self, "gamma", lo=0.0)  # gap penalty of the alignment
            # >= 2: the Gumbel tail is fitted to the null statistics' mean and sd
            check_range(self, "n_permutations", lo=2, hi=MAX_PERMUTATIONS, integer=True)
            check_choice(self, "detector", DETECTOR_VARIANTS)

    def __init__(self, key: int, vocab_size: int, params: "EditScheme.Params | None" = None) -> None:
        super().__init__(key, vocab_size, params)
        self._rows: OrderedDict[int, torch.Tensor] = OrderedDict()
        self._row_cache = _ROW_CACHE
        self._columns: dict[int, torch.Tensor] = {}
        # generation and (live or final) detection may run in different threads
        self._lock = threading.Lock()

    # -- the key sequence ---------------------------------------------------
    def row_seed(self, k: int) -> int:
        return hashing.derive_seed(self.name, self.key, "row", k)

    @abstractmethod
    def _draw_row(self, k: int) -> torch.Tensor:
        """Key element k over the whole vocabulary."""

    @abstractmethod
    def _row_values(self, row: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """What the detector needs of row ``row`` for each of ``tokens`` (float)."""

    def keep_whole_key(self) -> None:
        self.keep_rows(self.params.keylen)

    def keep_rows(self, count: int) -> None:
        """Keep up to ``count`` key elements drawn (default 4).

        Generation walks k upwards and needs only the last few; a probe that serves
        hundreds of fresh generations at once (``wash.detection.identification``) visits every
        offset at every node and would draw each row again and again. A row costs
        4 bytes per vocabulary entry (1 MB for Gemma-3), so the whole key is at most
        ``keylen`` of them."""
        with self._lock:
            self._row_cache = max(1, int(count))

    def row(self, k: int) -> torch.Tensor:
        """Key element k, from an LRU cache (see ``keep_rows``)."""
        with self._lock:
            hit = self._rows.get(k)
            if hit is not None:
                self._rows.move_to_end(k)
                return hit
            value = self._draw_row(k)
            self._rows[k] = value
            if len(self._rows) > self._row_cache:
                self._rows.popitem(last=False)
            return value

    def key_values(self, tokens: Sequence[int]) -> torch.Tensor:
        """(keylen, len(tokens)) values of each token under every key element.

        Tokens not seen before cost one pass over the keylen rows (all missing
        tokens together); later texts reuse the per-token columns.
        """
        tokens = [int(t) for t in tokens]
        if not tokens:
            return torch.zeros(self.params.keylen, 0)
        with self._lock:
            missing = sorted({t for t in tokens if t not in self._columns})
            if missing:
                if len(self._columns) + len(missing) > _COLUMN_CACHE_TOKENS:
                    self._columns.clear()
                idx = torch.tensor(missing, dtype=torch.long)
                table = torch.stack([self._row_values(self._draw_row(k), idx)
                                     for k in range(self.params.keylen)])
                for j, t in enumerate(missing):
                    self._columns[t] = table[:, j].clone()
            return torch.stack([self._columns[t] for t in tokens], dim=1)

    # -- generation ---------------------------------------------------------
    def new_state(self, generation_seed: int) -> EditState:
        seed = hashing.derive_seed(self.name, self.key, "offset", generation_seed)
        return EditState(offset=seed % self.params.keylen)

    def key_index(self, ids: Sequence[int], prompt_len: int, state: Any) -> int:
        """Key element used for the next token: offset + tokens generated so far."""
        offset = state.offset if isinstance(state, EditState) else 0
        return (offset + len(ids) - prompt_len) % self.params.keylen

    @abstractmethod
    def _law(self, probs: torch.Tensor, k: int) -> torch.Tensor:
        """The next-token law the keyed sampling rule serves from ``probs`` with key element k."""

    def distribution(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int,
                     state: Any) -> torch.Tensor:
        if logits.shape[-1] != self.vocab_size:
            raise ValueError(f"{self.name}: logits have {logits.shape[-1]} entries, "
                             f"scheme expects {self.vocab_size}")
        return self._law(softmax(logits), self.key_index(ids, prompt_len, state))

    def _pick(self, probs: torch.Tensor, k: int) -> int:
        """The token a point-mass law (``point_mass``) puts its mass on, with key element k."""
        return int(torch.argmax(self._law(probs, k)))

    @abstractmethod
    def element_picks(self, probs: torch.Tensor, table: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """(keylen, T) the column each key element's point mass picks among each position's rows.

        ``probs`` (T, K) is each position's law on its rows (0 on padding), ``table``
        (keylen, T, K) the rows' values under every element (``key_values``; NaN on
        padding), ``valid`` (T, K) which rows are not padding: ``_pick`` batched."""

    def keyed_law(self) -> "EditPicks | None":
        """The point mass per key offset; none for a ``soft`` form (see ``EditPicks``)."""
        return EditPicks(self) if self.point_mass else None

    def picks(self, logits: torch.Tensor, ids: Sequence[int], prompt_len: int,
              states: Sequence[Any]) -> tuple[list[int], int]:
        """The token each of ``states`` serves after ``ids``, for a point-mass law.

        Why: a probe (``wash.detection.identification``) serves hundreds of fresh generations at
        one context, and their states differ only in which key element the next token
        reads. The law is one token per key element, so the base law is computed once
        and each distinct element is read once, with no distribution built. Returns the
        tokens and how many distinct key elements were read."""
        if not self.point_mass:
            raise ValueError(f"{self.name}: picks() needs a point-mass law (this form samples)")
        if logits.shape[-1] != self.vocab_size:
            raise ValueError(f"{self.name}: logits have {logits.shape[-1]} entries, "
                             f"scheme expects {self.vocab_size}")
        probs = softmax(logits)
        by_index: dict[int, int] = {}
        out = []
        for state in states:
            k = self.key_index(ids, prompt_len, state)
            if k not in by_index:
                by_index[k] = self._pick(probs, k)
            out.append(by_index[k])
        return out, len(by_index)

    # -- detection ----------------------------------------------------------
    @abstractmethod
    def observed_cost(self, unique_tokens: torch.Tensor) -> torch.Tensor:
        """(keylen, U) cost of matching each distinct text token with each key element."""

    @abstractmethod
    def null_cost(self, n_unique: int, n_keys: int, gen: torch.Generator) -> torch.Tensor:
        """(n_keys, keylen, U) the same costs under fresh random key sequences."""

    def make_detector(self, prefix: Sequence[int] = ()) -> Detector:
        return EditDetector(self, prefix)

    def edit_test(self, tokens: Sequence[int]) -> Detection:
        """The detector's test on the generated ``tokens`` (``run_edit_test``: ours, or
        the release's p-value on the same statistic; ITS-Edit's release test differs)."""
        return run_edit_test(self, tokens)

    def aligns(self) -> bool:
        """Whether this detector's verdict reads the alignment test (``edit_verdict``).

        ITS-Edit's release detector does not (a sum statistic with its own null)."""
        return True

    def detect_under_keys(self, schemes: Sequence[WatermarkScheme], ids: Sequence[int]) -> list[Detection]:
        """Each of ``schemes`` (this scheme under other keys) on ``ids``, sharing one null draw
        (``align_edit_keys``): the first key's verdict is its detector's own."""
        if not self.aligns() or not ids:
            return super().detect_under_keys(schemes, ids)
        edit = [s for s in schemes if isinstance(s, EditScheme)]
        if len(edit) != len(schemes):
            raise TypeError(f"{self.name}: detect_under_keys needs {self.name} schemes")
        return [edit_verdict(s, a) for s, a in zip(edit, align_edit_keys(edit, ids))]


class EditPicks(KeyedPicks):
    """The point mass a generation that started at key offset o serves at its t-th token: key
    element (o + t) mod keylen's pick (``key_index``), one variant per offset.

    Positions count from the first text token, as the generation counted its own tokens.
    A soft form has no such law: its law is continuous, so each of the keylen offsets would
    need a full race per position and null draw (about 3e9 terms per text of 200 tokens at
    1,000 draws), which the point mass avoids."""

    scheme: EditScheme

    @property
    def variants(self) -> int:
        return self.scheme.params.keylen

    def picks(self, text: RereadText) -> np.ndarray:
        rows, keylen = text.rows, self.scheme.params.keylen
        valid = rows >= 0
        unique, inverse = np.unique(rows[valid], return_inverse=True)
        values = self.scheme.key_values(unique.tolist()).to(torch.float64).numpy()  # (keylen, U)
        table = np.full((keylen, *rows.shape), np.nan)
        table[:, valid] = values[:, inverse]
        element = self.scheme.element_picks(torch.from_numpy(text.probs()), torch.from_numpy(table),
                                            torch.from_numpy(valid)).numpy()
        T = len(rows)
        at = (np.arange(keylen)[:, None] + np.arange(T)[None, :]) % keylen  # the element offset o reads at t
        return element[at, np.arange(T)[None, :]]


class EditDetector(Detector):
    """Appends on ``push``; ``result`` runs the alignment permutation test.

    The prefix is ignored: the key index depends on the position in the
    generation, not on the context, so only the pushed (generated) tokens count.
    """

    scheme: EditScheme
    scores_in_result = True

    def __init__(self, scheme: EditScheme, prefix: Sequence[int] = ()) -> None:
        super().__init__(scheme, prefix)
        self._cached: tuple[int, Detection] | None = None

    def _score(self, token_id: int) -> float | None:
        return None  # scored as a whole in result(): the alignment is global

    def result(self) -> Detection:
        tokens = self.ids[self.n_prefix:]
        if self._cached is not None and self._cached[0] == len(tokens):
            return self._cached[1]
        detection = self.scheme.edit_test(tokens)
        self._cached = (len(tokens), detection)
        return detection


@dataclass(frozen=True)
class EditAlignment:
    """The alignment test on one text: the key's minimum cost, the T random keys' minima,
    and the per-token costs along the key's best offset. Both verdicts (``edit_verdict``:
    ours, or the release's p-value) read only these, so one alignment serves both."""

    m: int
    obs: float
    null_stats: torch.Tensor
    offset: int
    per_token: list[float]


def align_edit(scheme: EditScheme, tokens: Sequence[int]) -> EditAlignment:
    """Kuditipudi's alignment statistic on (non-empty) ``tokens`` against the scheme's key and T random keys."""
    return align_edit_keys([scheme], tokens)[0]


def align_edit_keys(schemes: Sequence[EditScheme], tokens: Sequence[int]) -> list[EditAlignment]:
    """The alignment of (non-empty) ``tokens`` under each of ``schemes`` (one scheme, several keys),
    every key compared with ONE shared draw of T random keys.

    Why: the null over keys (``wash.detection.key_null``) scores a held-out text under
    dozens of keys. A key's verdict compares its cost with the costs of T random key
    sequences drawn independently of it, so the keys of one text can share a single
    draw: each key's verdict keeps exactly the law of its detector's verdict on that
    text, for K + T alignments instead of K (T + 1) (what the keys' verdicts share is
    their null, which makes them more alike: ``key_null.within_text_correlation``
    measures it). The draw is the first scheme's own (seeded by its key and the text),
    so ``align_edit_keys([s], t)[0]`` is ``s``'s detector's alignment."""
    first = schemes[0]
    if any(type(s) is not type(first) or s.params != first.params or s.vocab_size != first.vocab_size
           for s in schemes):
        raise ValueError("align_edit_keys: the schemes must differ in their key only")
    m, K = len(tokens), len(schemes)
    T = first.params.n_permutations
    ids = torch.tensor([int(t) for t in tokens], dtype=torch.long)
    unique, inverse = torch.unique(ids, return_inverse=True)
    with _single_threaded(not torch.cuda.is_available()):
        observed = [s.observed_cost(unique) for s in schemes]
        gen = hashing.generator(hashing.derive_seed(first.name, first.key, "null", T, *ids.tolist()))
        null = first.null_cost(len(unique), T, gen)
        costs = torch.cat([torch.stack(observed).to(torch.float32), null.to(torch.float32)])  # (K+T, n, U)
        costs = costs[:, :, inverse].transpose(1, 2).contiguous()  # (K+T, m, n)
        best, offsets = min_alignment_cost(costs, first.params.gamma)
    null_stats = best[K:].to(torch.float64)
    out = []
    for b, obs in enumerate(observed):
        j = int(offsets[b])
        diag = obs[(j + torch.arange(m)) % first.params.keylen, inverse]
        out.append(EditAlignment(m, float(best[b]), null_stats, j, [float(-c) for c in diag]))
    return out


def edit_verdict(scheme: EditScheme, alignment: EditAlignment) -> Detection:
    """The scheme's verdict (its ``detector``) on an alignment of its key."""
    obs, null_stats, T = alignment.obs, alignment.null_stats, scheme.params.n_permutations
    mean, sd = float(null_stats.mean()), float(null_stats.std())
    at_or_below = int((null_stats <= obs).sum())
    p_perm = (1 + at_or_below) / (T + 1)
    fit = gumbel_min_fit(mean, sd)
    if fit is None:  # degenerate null (all T statistics equal): only the exact p-value is meaningful
        p, fitted = p_perm, "no tail fit (null sd 0)"
    else:
        # the fit extrapolates the evidence side only; on the other side p stops at
        # T/(T+1), i.e. z >= Phi^-1(1/(T+1)), as far as the permutation test reaches
        p = min(gumbel_min_cdf(obs, *fit), T / (T + 1))
        fitted = f"Gumbel-min tail p={p:.3g} (loc {fit[0]:.4g}, scale {fit[1]:.3g})"
    j, per_token = alignment.offset, list(alignment.per_token)
    if scheme.params.detector == "release":
        return release_detection(
            scheme, at_or_below, alignment.m, per_token,
            note=(f"release permutation test: {at_or_below}/{T} random keys align at or below the "
                  f"key's cost {obs:.4g} (null {mean:.4g} +- {sd:.3g}); best offset {j}"))
    return Detection.from_p(
        scheme.name, p, tokens_scored=alignment.m, per_token=per_token,
        statistic=obs,
        note=(f"permutation p={p_perm:.4g} ({at_or_below}/{T} random keys at or below; "
              f"floor {1 / (T + 1):.3g}); alignment cost {obs:.4g} vs null {mean:.4g} +- {sd:.3g}; "
              f"{fitted}; best offset {j}"),
    )


def run_edit_test(scheme: EditScheme, tokens: Sequence[int]) -> Detection:
    """Kuditipudi's alignment statistic on ``tokens`` against the scheme's key and T random keys."""
    if len(tokens) == 0:
        return Detection.from_z(scheme.name, 0.0, tokens_scored=0, note="no tokens")
    return edit_verdict(scheme, align_edit(scheme, tokens))


def release_detection(scheme: EditScheme, as_extreme: int, m: int, per_token: list[float | None],
                      note: str) -> Detection:
    """The WASH release's verdict: the permutation p-value (1 + as_extreme) / (T + 1).

    ``as_extreme`` of the T random keys score at least as watermark-like as the key.
    The release reports this p alone (-log10 p is kept as ``statistic``); z is
    Phi^-1(1 - p) with p = 1 read as T/(T+1), the test's last step, so z stays
    within what T random keys can say: |z| <= Phi^-1(1 - 1/(T+1)), 2.33 for T = 100.
    It never reaches z = 4 for any T this scheme accepts (3.09 at T = 1000): the
    release's own threshold is p < 0.05.
    """
    T = scheme.params.n_permutations
    p = (1 + as_extreme) / (T + 1)
    return Detection(scheme=scheme.name, z=z_from_p(min(p, T / (T + 1))), p=p, tokens_scored=m,
                     per_token=per_token, statistic=-math.log10(p),
                     note=f"{note}; p={p:.4g} (floor {1 / (T + 1):.3g})")


def gumbel_min_fit(mean: float, sd: float) -> tuple[float, float] | None:
    """(loc, scale) of the minimum-Gumbel law with this mean and sd (method of moments).

    Its CDF is F(x) = 1 - exp(-exp((x - loc) / scale)); mean = loc - euler * scale,
    sd = pi * scale / sqrt(6). None when sd is 0 or not finite.
    """
    if not (math.isfinite(mean) and math.isfinite(sd)) or sd <= 0:
        return None
    scale = sd * math.sqrt(6.0) / math.pi
    return mean + _EULER * scale, scale


def gumbel_min_cdf(x: float, loc: float, scale: float) -> float:
    """P(X <= x) under the minimum-Gumbel law, accurate deep in the lower tail
    (~exp((x - loc) / scale) there; 0.0 only past float64's range)."""
    return -math.expm1(-math.exp(min((x - loc) / scale, 700.0)))


def min_alignment_cost(cost: torch.Tensor, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimum over offsets of the edit-alignment cost, for a batch of keys.

    ``cost[b, i, l]`` is the cost of matching text token i with element l of key
    sequence b (length n, circular). For every offset j the text (m tokens) is
    aligned against the window (j, ..., j+m-1 mod n) with gap cost ``gamma``;
    returns the per-key minimum over offsets and the offset attaining it.

    The DP runs along anti-diagonals i + l = d: every cell of a diagonal depends
    only on the two previous diagonals, so one step updates all (key, offset,
    cell) triples at once. Costs are pre-skewed so that a diagonal's costs for all
    offsets are one strided slice.

    Runs on CUDA when available. On CPU it runs single-threaded, in chunks of keys
    sized to stay in cache: each diagonal is a few small element-wise ops, which
    OpenMP cannot amortise; on a shared 2-core machine one thread measured ~2 s
    for m = 200, T = 100 against 15-40 s with two.
    """
    K, m, n = cost.shape
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    per_key = n * (m + 1)
    chunk = max(1, (_DP_CHUNK_FLOATS_CUDA if device.type == "cuda" else _DP_CHUNK_FLOATS) // per_key)
    bests, offsets = [], []
    with _single_threaded(device.type == "cpu"):
        for start in range(0, K, chunk):
            b, o = _min_alignment_chunk(cost[start:start + chunk].to(device), gamma)
            bests.append(b.cpu())
            offsets.append(o.cpu())
    return torch.cat(bests), torch.cat(offsets)


@contextmanager
def _single_threaded(active: bool) -> Iterator[None]:
    """Temporarily run torch CPU ops on one thread (restores the previous setting)."""
    if not active:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _min_alignment_chunk(cost: torch.Tensor, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    K, m, n = cost.shape
    inf = float("inf")
    dev, dt = cost.device, cost.dtype
    span = n + m - 1  # key positions j + l - 1 reached by any window (unwrapped)
    ext = cost[:, :, torch.arange(span, device=dev) % n]  # (K, m, span)
    width = span + m - 1
    # skew[i, b, q] = ext[b, i, q - i]: the cost of cell (i+1, l) of offset j sits at
    # q = j + (i+1) + l - 2, so a diagonal d reads q in [d-2, d-2+n) for all offsets.
    skew = torch.full((m, K, width), inf, dtype=dt, device=dev)
    for i in range(m):
        skew[i, :, i:i + span] = ext[:, i, :]
    # Diagonal buffers indexed [i, key, offset]; only the valid i-range of each
    # diagonal is ever written or read. Scratch is preallocated: fresh large
    # tensors per diagonal cost page faults.
    prev2, prev, new = (torch.full((m + 1, K, n), inf, dtype=dt, device=dev) for _ in range(3))
    gap_buf = torch.empty((m, K, n), dtype=dt, device=dev)
    match_buf = torch.empty((m, K, n), dtype=dt, device=dev)
    prev2[0] = 0.0
    prev[0] = gamma
    prev[1] = gamma
    for d in range(2, 2 * m + 1):
        lo, hi = max(1, d - m), min(d - 1, m)  # interior cells (i >= 1, l >= 1)
        gap, match = gap_buf[:hi - lo + 1], match_buf[:hi - lo + 1]
        torch.minimum(prev[lo - 1:hi], prev[lo:hi + 1], out=gap)
        if gamma:
            gap.add_(gamma)
        torch.add(prev2[lo - 1:hi], skew[lo - 1:hi, :, d - 2:d - 2 + n], out=match)
        torch.minimum(gap, match, out=new[lo:hi + 1])
        if d <= m:  # borders: A[0][d] and A[d][0]
            new[0] = d * gamma
            new[d] = d * gamma
        prev2, prev, new = prev, new, prev2
    final = prev[m]  # (K, n): A[m][m] for each key and offset
    return final.min(dim=1)
