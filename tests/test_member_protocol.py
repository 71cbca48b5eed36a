"""No caller reaches a member's model: everything above the members goes through their protocol.

Why: a caller that reads a member's model (``member.lm``, ``lm.model(...)``) runs that
model in the calling process whatever the backend, so on ``--backend ray`` it silently
runs locally, and a new backend would have to know about it. Read from the source
(``ast``), so a new leak fails here before it ships.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The members' own modules: the protocol, its two implementations, and the loading of a model.
MEMBER_MODULES = {"wash/engine/members.py", "wash/engine/ray_members.py", "wash/engine/models.py"}
#: Modules that hold a model in this process on purpose, and why (a forward or its weights).
WEIGHTS_ON_PURPOSE = {
    # memory measurements: the resident bytes of the loaded weights, and their offloading
    "wash/experiments/cost.py",
    "wash/shape_bench.py",
}


def _sources() -> list[tuple[str, ast.Module]]:
    files = sorted((ROOT / "wash").rglob("*.py")) + [ROOT / "app.py"]
    return [(str(f.relative_to(ROOT)), ast.parse(f.read_text(), str(f))) for f in files if f.exists()]


def _member_lm_reads(tree: ast.Module, path: str = "") -> list[str]:
    """``X.lm`` where ``X`` is not a provider: a member's (or anything else's) model description.

    A provider keeps its model's description (``Provider.lm``: tokenizer and sizes, without
    weights on a remote backend); every other ``.lm`` above the members is a member's.
    """
    def a_provider(value: ast.expr) -> bool:
        text = ast.unparse(value)
        return (text in ("p", "provider", "self.provider") or text.startswith("providers[")
                or (text == "self" and path == "wash/engine/providers.py"))

    return [ast.unparse(node) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "lm" and not a_provider(node.value)]


def _model_uses(tree: ast.Module) -> list[str]:
    """A loaded model's weights reached: ``<x>.lm.model``, ``lm.model`` (called, or its decoder, config, ...)."""
    return [ast.unparse(node) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "model"
            and ast.unparse(node.value).split(".")[-1] == "lm"]


def leaks() -> list[str]:
    found = []
    for path, tree in _sources():
        if path in MEMBER_MODULES:
            continue
        found += [f"{path}: {text}" for text in _member_lm_reads(tree, path)]
        if path not in WEIGHTS_ON_PURPOSE:
            found += [f"{path}: {text}" for text in _model_uses(tree)]
    return found


def test_no_module_above_the_members_reads_a_members_model():
    assert leaks() == []


def test_the_check_finds_a_leak():
    """The rule bites: the two spellings it guards are found in a module's source."""
    tree = ast.parse("lms = {n: remote[n].lm for n in names}\nout = self.judge.lm.model(input_ids=x)\n"
                     "ids = provider.lm.encode(text)\n")
    assert _member_lm_reads(tree) == ["remote[n].lm", "self.judge.lm"]
    assert _model_uses(tree) == ["self.judge.lm.model"]


def test_the_protocol_declares_what_its_implementations_offer():
    """Every public capability of the two members is declared on ``Member`` (callers type against it)."""
    from wash.engine.members import LocalMember, Member
    from wash.engine.ray_members import RayMember

    declared = {n for n in dir(Member) if not n.startswith("_")} | set(Member.__annotations__)
    for cls in (LocalMember, RayMember):
        offered = {n for n in dir(cls) if not n.startswith("_")}
        assert declared <= offered, f"{cls.__name__} lacks {sorted(declared - offered)}"
    for capability in ("context", "submit", "run", "prefix_tree_logits", "token_nll", "position_logits",
                       "encode", "encode_prompt",
                       "decode_id", "vocab", "vocab_size", "bos_id", "eos_ids", "tokenizer", "max_context", "name"):
        assert capability in declared, capability


if __name__ == "__main__":
    print("\n".join(leaks()) or "no leak")
