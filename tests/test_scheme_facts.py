"""Scheme facts are attributes of the scheme classes, and every list of schemes is derived from the registry.

Two ways to fail: a scheme registered here (with a title, a form, a release form, a column
in the paper's Table 1, a rank and a per-generation state) must show up wherever the
reports and experiments list schemes by those facts; and, read from the source (``ast``),
no module outside ``wash/watermarks/`` may hold a literal naming two or more schemes,
except an experiment's chosen subset (a field default or preset of its ``Config``) and
the exceptions ``LISTED`` names with why.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from wash.watermarks import (SCHEMES, default_forms, form_params, paper_schemes, published_schemes,
                             rank, register, release_forms, stateful_schemes, title)
from wash.watermarks.base import check_choice
from wash.watermarks.none import NoWatermark

# imported before any test registers a scheme: module-level lists are read at import
from wash.reporting import results_tables as rt
from wash.experiments import identify
from wash.reporting import release
from wash.reporting.headline import name

ROOT = Path(__file__).resolve().parents[1]
#: Literals naming several schemes outside ``wash/watermarks/`` that stay, ``path:name`` -> why.
LISTED = {
    "wash/reporting/results_tables.py:_TABLE2_PERCENT":
        "the paper's reported numbers, keyed as the paper prints them",
    "wash/experiments/see_through.py:SCHEME_ORDER": "the order this experiment reads its committed cells, "
                                                     "form variants included (its choice, not a fact)",
    "wash/reporting/classroom.py:HOW": "the handout's plain words for the four schemes the Lesson shows "
                                       "(a teaching text and its choice of schemes, not a scheme's fact)",
}


@dataclass(frozen=True)
class _ShadeParams:
    shade: str = "dark"

    def __post_init__(self) -> None:
        check_choice(self, "shade", ("dark", "pale"))


class Shaded(NoWatermark):
    """A test's scheme: the base law, in two shades, one state per generation."""

    name = "test-shaded"
    title = "Shaded"
    form_param = "shade"
    release_form = "pale"
    paper_columns = {1: 6}
    rank = 8
    Params = _ShadeParams

    def new_state(self, generation_seed: int) -> Any:
        return generation_seed


@pytest.fixture
def shaded():
    register(Shaded)
    try:
        yield Shaded.name
    finally:
        del SCHEMES[Shaded.name]


def test_a_registered_scheme_is_in_every_list_its_facts_put_it_in(shaded):

    assert shaded in published_schemes() and shaded in stateful_schemes()
    assert default_forms()[shaded] == "dark" and "shade" in form_params() and release_forms()[shaded] == "pale"
    assert paper_schemes(1)[-1] == shaded and shaded not in paper_schemes(2)
    assert name(shaded) == "Shaded" and name(f"{shaded}:shade=pale") == "Shaded (shade=pale)"
    assert rt.default_form(shaded) == "dark"
    assert rt.scheme_and_form(f"{shaded}:shade=pale") == (shaded, "pale")
    assert release.system_of(shaded, "dark", "independent", "WASH N=3") == release.OURS
    assert release.system_of(shaded, "pale", "independent", "WASH N=3") == release.RELEASE_FORM
    assert release._ordered(["none", shaded, "synthid", "kgw"]) == ["kgw", "synthid", shaded, "none"]
    config = identify.Config(schemes=(shaded, "kgw"), ns=(2,), version="v2", models=("tiny-smollm2", "tiny-gemma3"))
    plan = [job.key for job in identify.jobs(config)]
    last = [k["scheme"] for k in plan if k["n"] == 2 and k["mode"] != "null"][-1]
    assert last == shaded  # a stateful scheme's ensembles are probed last


def test_the_facts_of_the_schemes_as_the_project_has_them():
    assert set(stateful_schemes()) == {"waterbag", "its-edit", "exp-edit"}  # read off new_state
    assert set(published_schemes()) == set(SCHEMES) - {"none", "biased-kgw"}
    assert default_forms() == {"aar": "gumbel", "its-edit": "per-position", "exp-edit": "gumbel"}
    assert release_forms() == {"aar": "soft", "its-edit": "shared", "exp-edit": "soft"}
    assert paper_schemes(1) == ("aar", "dipmark", "its-edit", "kgw", "exp-edit", "waterbag")
    assert paper_schemes(2) == ("dipmark", "kgw", "aar", "its-edit", "exp-edit")
    assert title("waterbag") == "Water-Bag" and title("none") == "unwatermarked" and title("mix") == "mix"
    # a variant names itself: it takes none of its parent's facts but what its code says
    assert title("biased-kgw") == "biased-kgw" and "biased-kgw" not in paper_schemes(1)
    assert rank("biased-kgw") == (99, "biased-kgw")


def test_the_papers_tables_and_the_experiments_agree_with_the_classes():
    from wash.experiments.config import ALL_SCHEMES

    assert ALL_SCHEMES == published_schemes()
    assert set(rt.paper_table2()["scheme"]) == set(paper_schemes(2))
    assert set(rt.paper_table1()["scheme"]) == set(paper_schemes(1))


def _literals(tree: ast.Module) -> list[tuple[str, int, list[str]]]:
    """``(owner, line, names)`` of every literal naming two or more schemes, outside experiment ``Config``s."""
    names = set(SCHEMES)
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Config":
            continue
        owner = (stmt.name if isinstance(stmt, (ast.FunctionDef, ast.ClassDef))
                 else getattr((stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)),
                              "id", "?"))
        for node in ast.walk(stmt):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                elts = node.elts
            elif isinstance(node, ast.Dict):
                elts = [k for k in node.keys if k is not None]
            else:
                continue
            hits = sorted({e.value for e in elts if isinstance(e, ast.Constant) and e.value in names})
            if len(hits) >= 2:
                found.append((owner, node.lineno, hits))
    return found


def literal_scheme_lists(root: Path = ROOT) -> dict[str, list[str]]:
    """``path:owner`` -> its literals' scheme names, for every module outside ``wash/watermarks/``."""
    out: dict[str, list[str]] = {}
    for path in sorted((root / "wash").rglob("*.py")) + [root / "app.py"]:
        rel = path.relative_to(root).as_posix()
        if rel.startswith("wash/watermarks/") or not path.exists():
            continue
        for owner, line, hits in _literals(ast.parse(path.read_text(encoding="utf-8"))):
            out.setdefault(f"{rel}:{owner}", []).extend(hits)
    return out


def test_no_list_of_schemes_outside_the_watermarks_but_the_listed_ones():
    found = literal_scheme_lists()
    assert {k: v for k, v in found.items() if k not in LISTED} == {}
    assert set(LISTED) <= set(found), "a listed exception is gone: drop it from LISTED"


def test_the_reader_finds_a_restated_fact(tmp_path):
    (tmp_path / "wash" / "experiments").mkdir(parents=True)
    (tmp_path / "wash" / "experiments" / "x.py").write_text(
        "STATEFUL = ('exp-edit', 'waterbag')\nNAMES = {'kgw': 'KGW', 'aar': 'AAR'}\nONE = ('kgw',)\n"
        "class Config:\n    schemes = ('kgw', 'aar')\n"
        "def order(s):\n    return ['kgw', 'unigram'].index(s)\n")
    assert literal_scheme_lists(tmp_path) == {"wash/experiments/x.py:STATEFUL": ["exp-edit", "waterbag"],
                                              "wash/experiments/x.py:NAMES": ["aar", "kgw"],
                                              "wash/experiments/x.py:order": ["kgw", "unigram"]}
