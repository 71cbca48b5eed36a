"""Facts the docs list, generated from the code that defines them, so a list cannot drift.

Each block of the README or docs/APP.md between ``<!-- facts:NAME -->`` and
``<!-- /facts:NAME -->`` is ``BLOCKS[NAME]()``, written by
``python -m wash.facts --write`` and checked by ``tests/test_facts.py``:

* ``schemes`` (README): every registered watermark scheme, its summary, its
  defaults as a provider spec writes them, and what its p_i is;
* ``modes`` (README): every registered mode, from its strategy's class facts;
* ``presets`` (docs/APP.md): every preset's measured z per provider, read from
  ``results/presets/presets_summary.csv`` (``python -m wash experiment presets``).

The app's helper list in ``wash.ui``'s docstring is built the same way, from each
module's own docstring, when the package is imported.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
#: Which file holds each block.
FILES = {"schemes": "README.md", "modes": "README.md", "presets": "docs/APP.md"}


def _value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def schemes() -> str:
    """The README's scheme table."""
    from wash.watermarks import SCHEMES

    rows = ["| name | scheme | defaults (`:name=value,...` overrides them) | p_i |", "|---|---|---|---|"]
    for name, cls in SCHEMES.items():
        params = cls.Params()
        fields = [f.name for f in dataclasses.fields(params)]
        defaults = ", ".join(f"`{f}={_value(getattr(params, f))}`" for f in fields) or "none"
        law = "point mass" if cls.point_mass else "full distribution"
        if cls.point_mass and "form" in fields:
            law += " (`form=soft`: the keyed law, normalised)"
        rows.append(f"| `{name}` | {cls.summary} | {defaults} | {law} |")
    return "\n".join(rows)


def modes() -> str:
    """The README's mode table."""
    from wash.modes import STRATEGIES

    rows = ["| mode | providers | watermarks | routing | parameters (`--baseline-options`) | what it does |",
            "|---|---|---|---|---|---|"]
    for name, cls in STRATEGIES.items():
        who = "provider 1" if cls.scope == "first" else "all"
        params = f"`{cls()}`" if dataclasses.fields(cls) else "none"
        rows.append(f"| `{name}` | {who} | {'on' if cls.watermark else 'off'} | {'on' if cls.routing else 'off'} "
                    f"| {params} | {cls.summary} |")
    return "\n".join(rows)


def presets(path: Path | None = None) -> str:
    """docs/APP.md's table of every preset's measured z."""
    from wash.presets import MEASURED, PRESETS

    with (path or MEASURED).open(newline="", encoding="utf-8") as handle:
        found = list(csv.DictReader(handle))
    rows = ["| preset | run | provider | z (lowest to highest seed) | detected (of 3) | perplexity |",
            "|---|---|---|---|---|---|"]
    for p in PRESETS:
        for r in (r for r in found if r["preset"] == p.name):
            run = "provider 1 alone" if r["condition"] == "alone" else "as the preset runs"
            detected = round(float(r["detected_rate"]) * int(r["texts"]))
            ppl = float(r["ppl_mean"] or "nan")
            rows.append(f"| {p.name} | {run} | P{int(r['provider']) + 1} {r['scheme']} "
                        f"| {float(r['z_min']):.1f} to {float(r['z_max']):.1f} | {detected} "
                        f"| {f'{ppl:.0f}' if math.isfinite(ppl) else 'n/a'} |")
    return "\n".join(rows)


BLOCKS: dict[str, Callable[[], str]] = {"schemes": schemes, "modes": modes, "presets": presets}


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"<!-- facts:{name} -->\n(?:(.*?)\n)?<!-- /facts:{name} -->", re.S)


def _block(name: str, body: str) -> str:
    return f"<!-- facts:{name} -->\n{body}\n<!-- /facts:{name} -->"


def written(name: str) -> str | None:
    """The block as the file holds it (None when the file has no such block)."""
    found = _pattern(name).search((ROOT / FILES[name]).read_text(encoding="utf-8"))
    return (found.group(1) or "") if found else None


def write() -> list[str]:
    """Rewrite every block from the code; returns the names of the blocks that changed."""
    changed = []
    for name, make in BLOCKS.items():
        path = ROOT / FILES[name]
        text = path.read_text(encoding="utf-8")
        body = make()
        new = _pattern(name).sub(lambda _m: _block(name, body), text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(name)
    return changed


if __name__ == "__main__":
    if "--write" in sys.argv:
        print("rewrote: " + (", ".join(write()) or "nothing (all in sync)"))
    else:
        for name, make in BLOCKS.items():
            print(f"<!-- facts:{name} ({FILES[name]}) -->\n{make()}\n")
