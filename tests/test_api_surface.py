"""The ways in use the packages' declared exports, never the modules behind them.

The app, the UI's helpers, the command line, the experiments, the reporting and the
tools import a lower package only through what it declares (its ``__init__``'s
``__all__``: ``from wash.engine import GenerationConfig``) or through ``wash.api``, so the
surface the packages declare is the one the project itself runs on, and a module behind
it can be split or renamed without touching its callers. Their own package's modules
stay theirs (``wash.ui.handlers`` for ``app.py``, which wires the UI's helpers), and so
do the packages that declare no exports (``wash.core``, ``wash.content``,
``wash.bench``).

The benchmark commands (``wash/bench/``) are not held to it: they time the
engine's own parts (members, forwards side by side, the served laws) from
inside.

The file is read (``ast``): every ``import`` and ``from ... import`` counts, also those
inside functions. ``python tests/test_api_surface.py`` prints each import that reaches
behind a package's exports.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The ways in and the layers over the engine: files and folders, relative to the repository.
WAYS_IN = ("app.py", "wash/cli.py", "wash/__main__.py", "wash/ui", "wash/experiments", "wash/content",
           "wash/reporting", "wash/publish/facts.py", "tools")
#: The packages the ways in reach only through their declared exports.
PACKAGES = ("wash.watermarks", "wash.engine", "wash.detection", "wash.baselines", "wash.experiments",
            "wash.reporting")
#: Files whose own package is not the folder they stand in.
OWN = {"app.py": "wash.ui"}
#: Imports behind a package's exports that stay, each with its reason.
EXCEPTIONS = {
    ("tools/bench_profile.py", "wash.engine.ensemble"):
        "times the loop's parts by swapping the module's own functions for timed ones while it runs",
    ("tools/score_cost.py", "wash.experiments.see_through"):
        "times one see-through row as the scoring runs it (its cells and ``score_row``), which no layer "
        "above the experiment calls",
}


def way_in_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of the ways in."""
    out = []
    for entry in WAYS_IN:
        path = root / entry
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else [])
    return out


def own_package(rel: str) -> str | None:
    """The package a file belongs to (``wash/ui/run.py``: ``wash.ui``); None for a module directly in
    ``wash`` and for the tools."""
    if rel in OWN:
        return OWN[rel]
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:2]) if parts[0] == "wash" and len(parts) > 2 else None


def _absolute(node: ast.ImportFrom, rel: str) -> str:
    """The module a ``from`` import names, with a relative one resolved against the file's package."""
    if not node.level:
        return node.module or ""
    package = rel.removesuffix(".py").split("/")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _package_of(module: str) -> str | None:
    """The declaring package that ``module`` is, or lies behind (None for any other module)."""
    return next((p for p in PACKAGES if module == p or module.startswith(p + ".")), None)


def reaches(root: Path = ROOT, declared: dict[str, set[str]] | None = None) -> list[str]:
    """``file: import`` for each import of a module behind another package's declared exports."""
    if declared is None:
        declared = {p: set(importlib.import_module(p).__all__) for p in PACKAGES}
    found = []
    for path in way_in_files(root):
        rel = path.relative_to(root).as_posix()
        own = own_package(rel)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = [(_absolute(node, rel), a.name) for a in node.names]
            else:
                continue
            for module, name in targets:
                package = _package_of(module)
                if package is None or package == own or (rel, module) in EXCEPTIONS:
                    continue
                if module != package:  # a module behind the package
                    found.append(f"{rel}:{node.lineno}: {module}" + (f" ({name})" if name else ""))
                elif name is not None and name not in declared[package]:
                    found.append(f"{rel}:{node.lineno}: {package}.{name} (not in {package}.__all__)")
    return sorted(found)


def test_the_ways_in_import_only_declared_exports():
    assert reaches() == []


def test_every_declared_export_resolves_and_none_is_shadowed_by_a_module():
    """Each name in a package's ``__all__`` is there on first read (a module declared whole, once
    imported); a name loaded on first use may not be a module's name too, since importing that
    module would replace it in the package."""
    for package in PACKAGES:
        module = importlib.import_module(package)
        submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
        lazy = getattr(module, "_EXPORTS", {})
        assert not set(lazy) & submodules, package
        for name in module.__all__:
            if name in submodules:
                importlib.import_module(f"{package}.{name}")
            assert getattr(module, name) is not None, (package, name)


def test_the_reader_refuses_a_module_behind_the_exports_and_an_undeclared_name(tmp_path):
    """Each way in is read: a module behind a package (also relative, also in a function) and a name
    the package does not declare fail; the package's declared names, ``wash.api`` and the file's
    own package pass."""
    (tmp_path / "wash" / "ui").mkdir(parents=True)
    (tmp_path / "tools").mkdir()
    (tmp_path / "app.py").write_text("from wash.ui.handlers import make\n"
                                     "from wash.engine import GenerationConfig\n")
    (tmp_path / "wash" / "ui" / "run.py").write_text(
        "from wash.api import generate\nfrom wash.ui import texts\n"
        "def f():\n    from ..engine.config import X\n")
    (tmp_path / "tools" / "t.py").write_text("import wash.detection.thresholds\n"
                                             "from wash.engine import hidden\n")
    declared = {p: set() for p in PACKAGES} | {"wash.engine": {"GenerationConfig"}}
    assert reaches(tmp_path, declared) == [
        "tools/t.py:1: wash.detection.thresholds",
        "tools/t.py:2: wash.engine.hidden (not in wash.engine.__all__)",
        "wash/ui/run.py:4: wash.engine.config (X)",
    ]


@pytest.mark.parametrize("rel, own", [("wash/ui/run.py", "wash.ui"), ("app.py", "wash.ui"),
                                      ("wash/experiments/tpr.py", "wash.experiments"), ("wash/cli.py", None),
                                      ("tools/latency.py", None)])
def test_own_package(rel, own):
    assert own_package(rel) == own


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT))
    for line in reaches():
        print(line)
