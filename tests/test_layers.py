"""The package's layers hold: read from the imports, nothing imports upward and no modules import in a circle.

Layers, bottom to top (``LAYERS``): core (``wash.core``: errors, version, provenance, the
environment, exports, the ``NAME:param=value`` parser) -> watermarks -> engine -> detection ->
baselines -> experiments (with ``wash.content``: prompts, presets, the Lesson) -> reporting ->
the ways in (ui, cli, api, bench). A module may import its own layer and the layers below it.
The graph is read from the source (``ast``), so it counts every ``import`` and ``from ...
import`` of ``wash``, also those inside functions and under ``TYPE_CHECKING``: an import that
only a type checker follows still ties the two modules together. Imports by a string count too
(``importlib.import_module`` and ``__import__``): a literal name is the module it names; a
name built from a constant prefix (``f"wash.watermarks.{name}"``) reaches the modules of the
prefix's package that the file spells, or the package itself. A call whose name the reader
cannot spell out, so it cannot tell whether it reaches into ``wash``, fails the test unless
``UNREAD`` gives the reason it adds no edge. A module no layer names fails the test, so a new
one is placed on purpose.

``python tests/test_layers.py`` prints the circles, the upward imports and the string imports it
cannot spell out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

ROOT = Path(__file__).resolve().parents[1]

#: Bottom to top: each layer's modules and packages (a package stands for every module in it).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("wash.core",)),
    ("watermarks", ("wash.watermarks",)),
    ("engine", ("wash.engine",)),
    ("detection", ("wash.detection",)),
    ("baselines", ("wash.baselines",)),
    ("experiments", ("wash.experiments", "wash.content")),
    ("reporting", ("wash.reporting",)),
    ("top", ("wash", "wash.__main__", "wash.api", "wash.cli", "wash.bench", "wash.publish", "wash.ui")),
)
#: The package itself (its ``__init__``) is listed; a module directly in it is not covered by it.
ROOT_PACKAGE = "wash"
#: Modules that import by a name the reader cannot spell out, each with why that adds no edge.
UNREAD = {
    # the loader of declared exports: the graph reads the modules at each package's ``lazy_exports`` call
    "wash.core.exports": "loads what each lazy_exports call names",
    "wash.bench.shapes": "imports third-party packages by name for their versions",
}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((root / "wash").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _owner(name: str, known: dict[str, Path]) -> str:
    """The module that ``name`` (a module, or a name in one) lives in."""
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def _is_string_import(node: ast.AST) -> bool:
    """``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)`` with an argument."""
    if not (isinstance(node, ast.Call) and node.args):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


def _spelled(arg: ast.AST) -> tuple[str, bool]:
    """The name a string import asks for, as far as it is constant, and whether that is all of it.

    ``"wash.x"`` is whole; ``f"wash.x.{name}"``, ``"wash.x." + name`` and ``"wash.x.{}".format(name)``
    give their constant prefix; anything else (a variable, a call) gives no prefix at all.
    """
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value, True
    if isinstance(arg, ast.JoinedStr):
        prefix = ""
        for part in arg.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return prefix, False
            prefix += part.value
        return prefix, True
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        left, whole = _spelled(arg.left)
        if not whole:
            return left, False
        right, whole = _spelled(arg.right)
        return left + right, whole
    if (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "format"
            and isinstance(arg.func.value, ast.Constant) and isinstance(arg.func.value.value, str)):
        return arg.func.value.value.partition("{")[0], False
    return "", False


def _is_lazy_export(node: ast.AST) -> bool:
    """``lazy_exports(__name__, {...})``: a package naming the modules its exports are loaded from."""
    return (isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "lazy_exports")


def _string_import(node: ast.Call, known: dict[str, Path], strings: set[str]) -> tuple[set[str], bool]:
    """The modules a string import reaches, and whether the reader could tell (``False``: it could not)."""
    name, whole = _spelled(node.args[0])
    if name.startswith("."):  # relative to a ``package=`` argument
        return set(), False
    if not name.startswith(f"{ROOT_PACKAGE}."):
        if name == ROOT_PACKAGE and whole:
            return {ROOT_PACKAGE}, True
        # "", "wa", "wash" and the like, followed by a name it builds: maybe wash, maybe not
        return set(), whole or not f"{ROOT_PACKAGE}.".startswith(name)
    if whole:
        return {_owner(name, known)}, True
    package = _owner(name.rpartition(".")[0], known)
    spelled = {m for m in known if m.startswith(name) and m[len(name):] in strings}
    if spelled:
        return spelled, True
    return ({package}, True) if package != ROOT_PACKAGE else (set(), False)


def _read(root: Path) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """Each module's imports of other ``wash`` modules, and the string imports it could not spell out."""
    known = modules(root)
    graph: dict[str, set[str]] = {}
    unread: dict[str, list[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        for node in ast.walk(tree):
            if _is_string_import(node):  # importlib.import_module("wash.x"), __import__(f"wash.pkg.{name}")
                reached, read = _string_import(node, known, strings)
                targets.update(reached)
                if not read:
                    unread.setdefault(name, []).append(f"line {node.lineno}: {ast.unparse(node)}")
            elif _is_lazy_export(node):  # "config", "statistics.keyed", "aggregation:parse": modules it loads
                targets.update(f"{package}.{t.partition(':')[0]}" for t in strings
                               if f"{package}.{t.partition(':')[0]}" in known)
            elif isinstance(node, ast.Import):
                targets.update(_owner(a.name, known) for a in node.names if a.name.split(".")[0] == "wash")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "wash":
                    continue
                # ``from wash.engine import parallel`` imports the module wash.engine.parallel
                targets.update(_owner(f"{source}.{a.name}" if f"{source}.{a.name}" in known else source, known)
                               for a in node.names)
        graph[name] = targets - {name}
    return graph, unread


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module's imports of other ``wash`` modules, wherever in the file they stand."""
    return _read(root)[0]


def unread_imports(root: Path = ROOT) -> list[str]:
    """``module: line N: call`` for each string import whose name the reader cannot spell out (outside
    ``UNREAD``)."""
    return sorted(f"{module}: {call}" for module, calls in _read(root)[1].items() if module not in UNREAD
                  for call in calls)


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the layer that holds ``module`` (the longest listed prefix wins)."""
    best, depth = -1, -1
    for i, (_name, members) in enumerate(LAYERS):
        for m in members:
            covers = module == m or (m != ROOT_PACKAGE and module.startswith(m + "."))
            if covers and len(m) > depth:
                best, depth = i, len(m)
    if best < 0:
        raise LookupError(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py")
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``importer (layer) -> imported (higher layer)`` for every import that goes up."""
    return sorted(f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
                  for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that import each other round a circle: strongly connected sets of two or more."""
    names = sorted(graph)
    index = {n: i for i, n in enumerate(names)}
    rows = [index[a] for a in names for b in graph[a]]
    cols = [index[b] for a in names for b in graph[a]]
    adjacency = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    _count, labels = connected_components(adjacency, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for name, label in zip(names, labels):
        groups.setdefault(int(label), []).append(name)
    return sorted(group for group in groups.values() if len(group) > 1)


def test_every_module_is_in_a_layer():
    for module in modules():
        layer_of(module)


def test_no_module_imports_from_a_higher_layer():
    assert upward_imports(import_graph()) == []


def test_no_modules_import_each_other_in_a_circle():
    assert circles(import_graph()) == []


def test_every_string_import_is_read_or_has_a_reason():
    assert unread_imports() == []
    assert sorted(set(UNREAD) - set(_read(ROOT)[1])) == []  # a reason no module needs any more goes


def test_the_graph_sees_imports_in_functions_relative_under_type_checking_and_by_name(tmp_path):
    """The reader finds the imports that a plain ``import`` of the module would not run, the
    plug-ins a package loads by name (``wash.watermarks`` its schemes, ``wash.experiments`` its experiments)
    and the modules a package's declared exports are loaded from (``wash.core.exports.lazy_exports``)."""
    package = tmp_path / "wash"
    (package / "engine").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "common.py").write_text("")
    # declared exports, loaded from their modules on first use
    (package / "engine" / "__init__.py").write_text(
        "from wash.common import lazy_exports\n"
        "__all__, __getattr__, __dir__ = lazy_exports(__name__, {'D': 'd:e'})\n")
    (package / "engine" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from wash.engine.b import B\n"
        "def f():\n    from .. import common\n    import wash.engine.c\n")
    (package / "engine" / "b.py").write_text("from wash.engine import a\n")
    (package / "engine" / "c.py").write_text("")
    (package / "engine" / "d.py").write_text("")
    (package / "loader.py").write_text(
        "import importlib\nfor name in ('c', 'x'):\n    importlib.import_module(f'wash.engine.{name}')\n")
    graph = import_graph(tmp_path)
    assert graph["wash.engine.a"] == {"wash.engine.b", "wash.common", "wash.engine.c"}
    assert graph["wash.loader"] == {"wash.engine.c"}
    assert graph["wash.engine"] == {"wash.common", "wash.engine.d"}
    assert circles(graph) == [["wash.engine.a", "wash.engine.b"]]
    assert upward_imports({"wash.watermarks.kgw": {"wash.engine.a"}}) == [
        "wash.watermarks.kgw (watermarks) -> wash.engine.a (engine)"]
    with pytest.raises(LookupError, match="wash.newcomer is in no layer"):
        layer_of("wash.newcomer")  # the package's own entry does not place the modules beside it


def test_the_graph_follows_every_spelling_of_a_string_import(tmp_path):
    """A literal name is its module; a built name reaches the modules of its prefix's package that the file
    spells, or that package; another package's module adds nothing; a name the reader cannot spell out
    (a variable, a prefix that names no package of ``wash``) is reported, not guessed."""
    package = tmp_path / "wash"
    (package / "engine").mkdir(parents=True)
    (package / "detection").mkdir()
    for module in ("__init__.py", "engine/__init__.py", "engine/c.py", "engine/d.py",
                   "detection/__init__.py", "detection/null.py"):
        (package / module).write_text("")
    (package / "reader.py").write_text(
        "import importlib\nfrom importlib import import_module\n"
        "importlib.import_module('wash.engine.c')\n"
        "__import__('wash.detection.null', fromlist=['x'])\n"
        "import_module('wash.engine.' + 'd')\n"
        "importlib.import_module('torch')\n__import__(f'numpy.{kind}')\n")
    (package / "built.py").write_text(
        "import importlib\n"
        "def load(name):\n"
        "    importlib.import_module('wash.detection.{}'.format(name))\n"
        "    return importlib.import_module(f'wash.engine.{name}_x')\n")
    (package / "blind.py").write_text(
        "import importlib\n"
        "def load(name, package):\n"
        "    importlib.import_module(name)\n"
        "    __import__(f'wash.{name}')\n"
        "    importlib.import_module(f'{package}.x')\n"
        "    importlib.import_module('.c', 'wash.engine')\n")
    graph, unread = _read(tmp_path)
    assert graph["wash.reader"] == {"wash.engine.c", "wash.engine.d", "wash.detection.null"}
    assert graph["wash.built"] == {"wash.detection", "wash.engine"}
    assert graph["wash.blind"] == set()
    assert unread == {"wash.blind": ["line 3: importlib.import_module(name)",
                                     "line 4: __import__(f'wash.{name}')",
                                     "line 5: importlib.import_module(f'{package}.x')",
                                     "line 6: importlib.import_module('.c', 'wash.engine')"]}


if __name__ == "__main__":
    graph = import_graph()
    print("circles:")
    for group in circles(graph):
        print(f"  {len(group)} modules: {', '.join(group)}")
    print("upward imports:")
    for line in upward_imports(graph):
        print(f"  {line}")
    print("string imports the reader cannot spell out:")
    for line in unread_imports():
        print(f"  {line}")
