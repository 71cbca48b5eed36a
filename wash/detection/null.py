"""Null test of every detector on looping text (``python -m wash.detection.null``).

Why: small models loop. A detector that counts a repeated (context, token) pair
again adds a copy of evidence it already has, so on looping text its z-score
spreads far wider than N(0, 1) without any watermark, and z > 4 stops meaning a
false-positive rate of 3e-5. This measures, for each registered scheme, how the
detector's z behaves on unwatermarked looping text: natural English spans (real
tokenizer) repeated back to back, each scored with its own key.

Construction (fixed seeds, so every run gives the same numbers): the English text
is the standard library's pydoc topics (always present offline), tokenised by the
real tokenizer of ``--tokenizer`` (default smollm2). For a loop ``PxR`` (period P,
R repeats), ``--keys`` disjoint P-token windows are picked at random (seed
``LOOP_SEED``); key i scores window i repeated R times, with no prompt prefix.
Keys are ``KEY_BASE + i``. Each scheme is built with its defaults, overridden by
``--set SCHEME:NAME=VALUE`` (e.g. ``--set kgw:skip_repeated=false`` restores the
all-pairs count) and, for the permutation tests, ``--permutations``.

Output: one row per (scheme, loop) and one pooled row per scheme: keys, mean and
sd of z, the largest z and how many keys exceeded z = 4. ``--out`` also writes
it all (with every z) as JSON. docs/DETECTORS.md records a run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from wash.detection.thresholds import Z_THRESHOLD
from wash.core.provenance import command_line

#: Keys scored per loop construction are KEY_BASE, KEY_BASE + 1, ...
KEY_BASE = 7_000_001
#: Seed of the choice of English windows.
LOOP_SEED = 2024
#: Threshold whose false-positive rate is reported.
Z_LINE = Z_THRESHOLD


@dataclass(frozen=True)
class Loop:
    """A span of ``period`` natural tokens repeated ``repeats`` times back to back."""

    period: int
    repeats: int

    @property
    def label(self) -> str:
        return f"{self.period}x{self.repeats}"

    @classmethod
    def parse(cls, text: str) -> "Loop":
        try:
            period, repeats = (int(x) for x in text.lower().split("x"))
        except ValueError:
            raise ValueError(f"loop '{text}' is not PERIODxREPEATS, e.g. 40x5") from None
        if period < 1 or repeats < 1:
            raise ValueError(f"loop '{text}' needs a period and a repeat count >= 1")
        return cls(period, repeats)


#: The default constructions: the issue's 40-token loop repeated 5 times, a tight
#: 12-token loop (16 repeats), and a long span seen twice; about 200 tokens each.
LOOPS: tuple[Loop, ...] = (Loop(40, 5), Loop(12, 16), Loop(100, 2))


@lru_cache(maxsize=4)
def english_ids(tokenizer: str = "smollm2") -> tuple[int, ...]:
    """The pydoc topics (real English prose, always installed) tokenised by ``tokenizer``."""
    from pydoc_data.topics import topics

    from wash.engine.models import load_tokenizer

    text = "\n\n".join(topics[k] for k in sorted(topics))
    return tuple(load_tokenizer(tokenizer).encode(text, add_special_tokens=False))


def looping_texts(ids: Sequence[int], loop: Loop, count: int, seed: int = LOOP_SEED) -> list[list[int]]:
    """``count`` texts: disjoint ``loop.period``-token windows of ``ids``, each repeated."""
    windows = len(ids) // loop.period
    if windows < count:
        raise ValueError(f"only {windows} windows of {loop.period} tokens for {count} keys")
    starts = np.random.default_rng([seed, loop.period, loop.repeats]).choice(windows, count, replace=False)
    return [list(ids[s * loop.period:(s + 1) * loop.period]) * loop.repeats for s in starts.tolist()]


def scheme_params(name: str, overrides: dict[str, dict[str, str]],
                  permutations: int | None) -> dict[str, str]:
    """The ``name=value`` parameters a scheme is measured with (its defaults plus overrides)."""
    from dataclasses import fields

    from wash.watermarks import scheme_class

    params = dict(overrides.get(name, {}))
    accepted = {f.name for f in fields(scheme_class(name).Params)}
    if permutations is not None and "n_permutations" in accepted:
        params.setdefault("n_permutations", str(permutations))
    return params


def null_zs(name: str, params: dict[str, str], texts: Sequence[Sequence[int]], vocab_size: int,
            key_base: int = KEY_BASE) -> list[float]:
    """z of text i under scheme ``name`` with key ``key_base + i`` (one fresh scheme per key)."""
    from wash.watermarks import build_scheme

    return [build_scheme(name, key_base + i, vocab_size, params).detect(list(t)).z
            for i, t in enumerate(texts)]


@dataclass
class Row:
    """One scheme on one loop construction (or pooled over them: ``loop == "all"``)."""

    scheme: str
    loop: str
    keys: int
    mean_z: float
    sd_z: float
    max_z: float
    above: int
    seconds: float
    params: dict[str, str] = field(default_factory=dict)
    zs: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.above / self.keys if self.keys else float("nan")

    @classmethod
    def of(cls, scheme: str, loop: str, zs: Sequence[float], seconds: float,
           params: dict[str, str]) -> "Row":
        z = np.asarray(zs, dtype=np.float64)
        return cls(scheme=scheme, loop=loop, keys=len(z), mean_z=float(z.mean()),
                   sd_z=float(z.std(ddof=1)) if len(z) > 1 else float("nan"), max_z=float(z.max()),
                   above=int((z > Z_LINE).sum()), seconds=seconds, params=dict(params),
                   zs=[round(float(v), 4) for v in z])


def measure(schemes: Sequence[str], loops: Sequence[Loop], keys: int, tokenizer: str = "smollm2",
            overrides: dict[str, dict[str, str]] | None = None, permutations: int | None = None,
            echo: Callable[[str], None] | None = None) -> list[Row]:
    """Every (scheme, loop) row, then one pooled row per scheme (loop ``all``)."""
    from wash.engine.models import load_tokenizer

    vocab_size = len(load_tokenizer(tokenizer))
    ids = english_ids(tokenizer)
    texts = {loop: looping_texts(ids, loop, keys) for loop in loops}
    rows: list[Row] = []
    for name in schemes:
        params = scheme_params(name, overrides or {}, permutations)
        per_scheme: list[Row] = []
        for loop in loops:
            t0 = time.perf_counter()
            zs = null_zs(name, params, texts[loop], vocab_size)
            per_scheme.append(Row.of(name, loop.label, zs, time.perf_counter() - t0, params))
            if echo:
                echo(format_row(per_scheme[-1]))
        pooled = Row.of(name, "all", [z for r in per_scheme for z in r.zs],
                        sum(r.seconds for r in per_scheme), params)
        rows.extend(per_scheme + [pooled])
    return rows


def format_row(r: Row) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted(r.params.items()))
    return (f"{r.scheme:11} {r.loop:7} {r.keys:5d} {r.mean_z:7.2f} {r.sd_z:6.2f} {r.max_z:7.2f} "
            f"{r.above:4d} {100 * r.rate:6.1f}%  {r.seconds:7.1f}  {extra}")


HEADER = (f"{'scheme':11} {'loop':7} {'keys':>5} {'mean z':>7} {'sd z':>6} {'max z':>7} "
          f"{'z>4':>4} {'P(z>4)':>7}  {'seconds':>7}  params")


def registered_schemes() -> list[str]:
    """The project's own schemes, in the order users see them."""
    from wash.watermarks import SCHEMES

    return [n for n, cls in SCHEMES.items() if cls.__module__.startswith("wash.watermarks.")]


def _overrides(values: Sequence[str]) -> dict[str, dict[str, str]]:
    """``--set SCHEME:NAME=VALUE`` options as {scheme: {name: value}}."""
    out: dict[str, dict[str, str]] = {}
    for v in values:
        scheme, sep, rest = v.partition(":")
        name, eq, value = rest.partition("=")
        if not sep or not eq or not name:
            raise ValueError(f"--set '{v}' is not SCHEME:NAME=VALUE")
        out.setdefault(scheme.strip().lower(), {})[name.strip()] = value.strip()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wash.detection.null", description=(
        "Each detector's z on unwatermarked looping text (natural spans repeated), many keys."))
    parser.add_argument("--keys", type=int, default=100, help="keys (and texts) per scheme and loop")
    parser.add_argument("--schemes", default="", help="comma-separated schemes (default: all registered)")
    parser.add_argument("--loops", default=",".join(loop.label for loop in LOOPS),
                        help="comma-separated PERIODxREPEATS constructions")
    parser.add_argument("--tokenizer", default="smollm2", help="whose real tokenizer builds the texts")
    parser.add_argument("--set", action="append", default=[], metavar="SCHEME:NAME=VALUE",
                        help="override a scheme parameter (repeatable)")
    parser.add_argument("--permutations", type=int, default=None,
                        help="n_permutations of the permutation-test schemes (default: theirs)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest for these ops)")
    parser.add_argument("--out", default=None, help="write the rows (with every z) as JSON")
    args = parser.parse_args(argv)
    try:
        loops = [Loop.parse(x) for x in args.loops.split(",") if x.strip()]
        overrides = _overrides(args.set)
    except ValueError as err:
        parser.error(str(err))
    import torch

    torch.set_num_threads(max(1, args.threads))
    schemes = [s.strip().lower() for s in args.schemes.split(",") if s.strip()] or registered_schemes()
    from wash.core.errors import WashInputError
    from wash.watermarks import scheme_class

    try:  # unknown schemes or parameters fail now, not after minutes of scoring
        for name in schemes:
            scheme_class(name).parse_params(scheme_params(name, overrides, args.permutations))
    except WashInputError as err:
        parser.error(str(err))
    started = datetime.now(timezone.utc)
    print(HEADER, flush=True)
    rows = measure(schemes, loops, args.keys, args.tokenizer, overrides, args.permutations,
                   echo=lambda line: print(line, flush=True))
    print()
    print("pooled over the loops:")
    print(HEADER)
    for r in rows:
        if r.loop == "all":
            print(format_row(r))
    if args.out:
        given = list(argv) if argv is not None else sys.argv[1:]
        doc = {"command": command_line(["python", "-m", "wash.detection.null", *given]),
               "date": started.strftime("%Y-%m-%d %H:%M UTC"), "tokenizer": args.tokenizer,
               "loops": [loop.label for loop in loops], "keys": args.keys, "key_base": KEY_BASE,
               "loop_seed": LOOP_SEED, "z_line": Z_LINE, "rows": [asdict(r) for r in rows]}
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
    return 0 if all(math.isfinite(r.mean_z) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
