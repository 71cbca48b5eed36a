"""Environment settings are read in one module, ``wash/core/env.py``, and its table names every one.

Read from the source (``ast``): any use of ``os.environ``, ``os.getenv`` or ``environ`` /
``getenv`` imported from ``os`` in ``wash/`` or ``app.py`` outside ``wash/core/env.py`` is a read,
unless it only sets or deletes a variable (``os.environ[name] = ...``, ``os.environ.update(...)``)
for a child process in one of ``WRITERS``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wash.core import env

ROOT = Path(__file__).resolve().parents[1]
#: The one module that reads the environment.
OWNER = "wash/core/env.py"
#: Modules that set variables for their child processes, and why (reading still goes through
#: ``wash.core.env``).
WRITERS = {
    "wash/experiments/driver.py": "a worker process's forward settings (driver.init_worker)",
    "wash/engine/ray_members.py": "PYTHONPATH for a local Ray cluster's workers (ray_members._init)",
}


def _sources(root: Path) -> list[Path]:
    return sorted(root.glob("wash/**/*.py")) + [p for p in (root / "app.py",) if p.exists()]


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` / ``os.environb`` / ``os.getenv`` / ``os.putenv``, or the bare names imported from ``os``."""
    names = ("environ", "environb", "getenv", "getenvb")
    if isinstance(node, ast.Attribute):
        return node.attr in names and isinstance(node.value, ast.Name) and node.value.id == "os"
    return False


def environment_uses(root: Path = ROOT) -> list[str]:
    """``path:line: read`` or ``path:line: write`` for every use of the environment in the package."""
    found = []
    for path in _sources(root):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "os":
                bad = [a.name for a in node.names if a.name in ("environ", "environb", "getenv", "getenvb")]
                if bad:
                    found.append(f"{rel}:{node.lineno}: read (from os import {', '.join(bad)})")
            if not _is_environ(node):
                continue
            parent = parents.get(node)
            write = ((isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del)))
                     or (isinstance(parent, ast.Attribute) and parent.attr == "update"
                         and isinstance(parents.get(parent), ast.Call)))
            found.append(f"{rel}:{node.lineno}: {'write' if write else 'read'}")
    return sorted(found, key=lambda u: (u.split(":")[0], int(u.split(":")[1])))


def test_only_wash_env_reads_the_environment():
    uses = environment_uses()
    reads = [u for u in uses if u.endswith("read") and not u.startswith(OWNER + ":")]
    writes = [u for u in uses if u.endswith("write") and u.split(":")[0] not in WRITERS]
    assert reads == [], "read the environment through wash.core.env"
    assert writes == [], "a module not in WRITERS sets the environment"
    assert any(u.startswith(OWNER + ":") for u in uses)  # the reader looks where the reads are


def test_the_reader_sees_every_spelling_of_a_read(tmp_path):
    (tmp_path / "wash").mkdir()
    (tmp_path / "wash" / "a.py").write_text(
        "import os\nfrom os import getenv\nx = os.environ.get('A')\ny = os.getenv('B')\nz = {**os.environ}\n"
        "os.environ['C'] = '1'\nos.environ.update({'D': '2'})\ndel os.environ['E']\nos.environ.pop('F')\n")
    assert environment_uses(tmp_path) == [
        "wash/a.py:2: read (from os import getenv)", "wash/a.py:3: read", "wash/a.py:4: read", "wash/a.py:5: read",
        "wash/a.py:6: write", "wash/a.py:7: write", "wash/a.py:8: write", "wash/a.py:9: read"]


def test_every_wash_variable_the_code_and_docs_name_has_a_row():
    """A ``WASH_*`` name in the package, the app, the tools or the docs that the table lacks is a setting the docs
    hide (a test's own knob, like ``WASH_APP_E2E_TOKENS``, is the test's)."""
    named: dict[str, str] = {}
    files = _sources(ROOT) + sorted((ROOT / "tools").glob("*.py")) + sorted((ROOT / "docs").glob("*.md")) \
        + [ROOT / "README.md"]
    for path in files:
        for name in re.findall(r"\bWASH_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")):
            named.setdefault(name, path.relative_to(ROOT).as_posix())
    rows = {v.name for v in env.VARIABLES}
    assert "WASH_PARALLEL_FORWARDS" in named
    assert {n: f for n, f in named.items() if n not in rows} == {}
    assert len(rows) == len(env.VARIABLES)  # one row each


@pytest.mark.parametrize("text,expected", [(None, True), ("", True), ("  ", True), ("0", False), ("false", False),
                                           ("No", False), ("OFF", False), ("1", True), ("yes", True)])
def test_an_on_off_setting_follows_one_rule(monkeypatch, text, expected):
    for variable, default in ((env.PARALLEL_FORWARDS, env.parallel_forwards), (env.MALLOC_TRIM, env.malloc_trim)):
        if text is None:
            monkeypatch.delenv(variable.name, raising=False)
        else:
            monkeypatch.setenv(variable.name, text)
        assert default() is expected, (variable.name, text)
    monkeypatch.setenv(env.ALLOW_EXTERNAL_MODELS.name, text or "")
    assert env.allow_external_models() is (expected and bool((text or "").strip()))


def test_typed_values(monkeypatch):
    monkeypatch.setenv(env.THREADS_PER_MODEL.name, "0")
    assert env.threads_per_model() == 1
    monkeypatch.setenv(env.THREADS_PER_MODEL.name, " 3 ")
    assert env.threads_per_model() == 3
    monkeypatch.delenv(env.THREADS_PER_MODEL.name)
    assert env.threads_per_model() is None
    monkeypatch.setenv(env.APP_MODELS.name, " tiny-smollm2, ,tiny-gemma3 ")
    assert env.app_models() == ["tiny-smollm2", "tiny-gemma3"]
    monkeypatch.setenv(env.APP_CONCURRENCY.name, "many")
    assert env.app_concurrency() == 2
    monkeypatch.setenv(env.RAY_CALL_TIMEOUT_S.name, "2.5")
    assert env.ray_call_timeout_s() == 2.5
    monkeypatch.setenv("GRADIO_SERVER_PORT", "")
    monkeypatch.setenv("PORT", "8080")
    assert env.server_port() == 8080
    monkeypatch.setenv("HF_HUB_OFFLINE", "")
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")
    child = env.child_environment({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}, CHILD_ONLY="1")
    assert (child["HF_HUB_OFFLINE"], child["TRANSFORMERS_VERBOSITY"], child["CHILD_ONLY"]) == ("", "info", "1")
