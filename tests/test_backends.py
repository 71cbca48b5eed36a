"""Backends plug in by one registry line; their options are parsed once; a missing capability is one line.

Why: a new backend (a compiled GPU member, a remote server) must be its own module plus a
line in ``wash.engine.backends.REGISTRY``, with nothing above the members knowing which
backend runs a model; and a feature that needs a whole-sequence computation a backend
cannot give must refuse before any work, naming both.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wash.engine.backends import BACKENDS, REGISTRY, backend_class, backend_name, backend_text, parse_backend
from wash.engine.members import ALL_CAPABILITIES, CAPABILITIES, LocalMember, require
from wash.core.errors import WashInputError

ROOT = Path(__file__).resolve().parents[1]
#: The registry and the modules that implement a backend: the only places that may name one.
BACKEND_MODULES = {"wash/engine/backends.py"} | {f"{line.load().__module__.replace('.', '/')}.py" for line in REGISTRY.values()}


def test_every_registry_line_names_a_backend_of_that_name():
    for name in BACKENDS:
        cls = backend_class(name)
        assert cls.name == name
        assert callable(getattr(cls, "members")) and callable(getattr(cls, "member"))


def test_a_backend_and_its_options_are_parsed_once_from_one_spelling():
    ray = parse_backend("ray:address=10.1.2.3:6379")
    assert (ray.name, ray.address) == ("ray", "10.1.2.3:6379")
    assert backend_text(ray) == "ray:address=10.1.2.3:6379" and backend_name(ray) == "ray"
    assert parse_backend(ray) is ray  # a parsed backend is taken as it is
    assert backend_text("ray") == "ray" and backend_text(" local ") == "local"
    with pytest.raises(WashInputError, match=r"^unknown backend 'rey' \(accepted: local, ray, compiled\)$"):
        parse_backend("rey")
    with pytest.raises(WashInputError, match=r"^backend 'local' has no parameter 'address' \(accepted: none\)$"):
        parse_backend("local:address=x")
    with pytest.raises(WashInputError, match=r"^backend 'ray': parameter 'auto' is not of the form name=value$"):
        parse_backend("ray:auto")


def test_the_default_is_wash_backend_else_local(monkeypatch):
    monkeypatch.delenv("WASH_BACKEND", raising=False)
    assert parse_backend().name == "local" and parse_backend("").name == "local"
    monkeypatch.setenv("WASH_BACKEND", "ray:address=auto")
    assert backend_text(None) == "ray:address=auto"


def test_a_generation_config_carries_the_parsed_backend():
    from wash.engine.config import GenerationConfig

    config = GenerationConfig(providers=[], prompt="", backend="ray:address=auto")
    assert config.backend.name == "ray" and config.backend.address == "auto"
    with pytest.raises(WashInputError, match="has no parameter 'adress'"):
        GenerationConfig(providers=[], prompt="", backend="ray:adress=auto").validate(inputs=False)


def _backend_branches(tree: ast.Module) -> list[str]:
    """Comparisons with a backend's name, and reads of a backend's own option, outside the backends."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Constant) and s.value in BACKENDS for s in sides):
                found.append(ast.unparse(node))
        elif isinstance(node, (ast.Attribute, ast.Name)) and "ray_address" in ast.unparse(node):
            found.append(ast.unparse(node))
    return found


def test_no_module_outside_the_backends_branches_on_one():
    found = []
    for path in sorted((ROOT / "wash").rglob("*.py")) + [ROOT / "app.py"]:
        rel = str(path.relative_to(ROOT))
        if rel in BACKEND_MODULES or rel == "wash/core/env.py":  # env reads RAY_ADDRESS for the ray backend
            continue
        found += [f"{rel}: {b}" for b in _backend_branches(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []


def test_the_branch_check_bites():
    tree = ast.parse("if backend == 'ray':\n    connect(config.ray_address)\nok = name == 'other'\n")
    assert _backend_branches(tree) == ["backend == 'ray'", "config.ray_address"]


# -- capabilities --------------------------------------------------------------------------
class _NextTokenOnly(LocalMember):
    """A real member that gives only what every member must (a server streaming one token at a time)."""

    capabilities = frozenset()
    backend = "next-token-only"


def test_require_names_the_feature_the_capability_and_the_member(tiny_smollm2):
    member = _NextTokenOnly(tiny_smollm2)
    with pytest.raises(WashInputError, match=r"^perplexity needs 'token_nll', which model 'tiny-smollm2' on "
                                             r"backend 'next-token-only' does not give$"):
        require(member, "token_nll", "perplexity")
    full = LocalMember(tiny_smollm2)
    assert require(full, "token_nll", "perplexity") is full
    assert set(CAPABILITIES) == set(ALL_CAPABILITIES) == {"token_nll", "position_logits", "prefix_tree_logits"}
    with pytest.raises(ValueError, match="unknown capability"):
        require(full, "kv_export", "x")


def test_a_model_aware_statistic_refuses_a_member_that_cannot_reread_a_text(tiny_smollm2):
    from wash.detection import statistics
    from wash.engine.providers import build_providers
    from wash.engine.settings import ProviderSpec

    [provider] = build_providers([ProviderSpec.parse("tiny-smollm2:kgw:1")], backend="local").providers
    text = " a text that no cache has read before, for the capability test"
    assert statistics.detect_with(provider, text, "sum").tokens_scored > 0  # the scheme's own sum needs no model
    provider.member = _NextTokenOnly(tiny_smollm2)
    with pytest.raises(WashInputError, match="needs 'position_logits', which model 'tiny-smollm2' on backend "
                                             "'next-token-only' does not give"):
        statistics.detect_with(provider, text, "lr-mix")
