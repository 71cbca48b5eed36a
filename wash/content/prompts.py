"""The project's own prompt set and arithmetic set, shipped under ``assets/``.

The paper continues 30-token prefixes of natural text for 200 new tokens; these
prefixes were written for this project (no data set can be downloaded offline),
spread over five domains so that routing and detection can be reported per domain.
The arithmetic set measures whether watermarking and WASH hurt a task with a
checkable answer (the paper's GSM8K column), at a size a CPU can run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[2] / "assets"
PROMPTS_FILE = ASSETS / "prompts.jsonl"
ARITHMETIC_FILE = ASSETS / "arithmetic.jsonl"
DOMAINS = ("news", "law", "medicine", "fiction", "how-to")


@dataclass(frozen=True)
class Prompt:
    """One text prefix to continue."""

    id: str
    domain: str
    text: str


@dataclass(frozen=True)
class ArithmeticProblem:
    """A short word problem whose answer is one integer."""

    id: str
    question: str
    answer: int


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    return rows


@lru_cache(maxsize=None)
def _all_prompts() -> tuple[Prompt, ...]:
    return tuple(Prompt(id=r["id"], domain=r["domain"], text=r["text"]) for r in _read_jsonl(PROMPTS_FILE))


def load_prompts(domain: str | None = None, limit: int | None = None) -> list[Prompt]:
    """Prompts of one domain (or all), in file order; with ``limit``, the first ones.

    Without a domain and with a limit, prompts are interleaved across domains
    (news-01, law-01, medicine-01, ...) so that any prefix of the list covers
    every domain evenly.
    """
    prompts = list(_all_prompts())
    if domain is not None:
        if domain not in DOMAINS:
            raise ValueError(f"unknown domain '{domain}' (accepted: {', '.join(DOMAINS)})")
        prompts = [p for p in prompts if p.domain == domain]
    else:
        by_domain = [[p for p in prompts if p.domain == d] for d in DOMAINS]
        prompts = [group[i] for i in range(max(map(len, by_domain))) for group in by_domain if i < len(group)]
    if limit is not None:
        prompts = prompts[: max(0, int(limit))]
    return prompts


def load_arithmetic(limit: int | None = None) -> list[ArithmeticProblem]:
    """The arithmetic word problems, in file order."""
    rows = [ArithmeticProblem(id=r["id"], question=r["question"], answer=int(r["answer"]))
            for r in _read_jsonl(ARITHMETIC_FILE)]
    return rows if limit is None else rows[: max(0, int(limit))]


_INT = re.compile(r"-?\d[\d,]*")


def extract_last_integer(text: str) -> int | None:
    """The last integer written in ``text`` (thousands separators allowed), or None."""
    found = None
    for m in _INT.finditer(text):
        digits = m.group(0).rstrip(",").replace(",", "")
        if digits not in ("", "-"):
            found = int(digits)
    return found


def check_answer(problem: ArithmeticProblem, text: str) -> bool:
    """True when the last integer of the model's answer equals the expected one."""
    return extract_last_integer(text) == problem.answer
