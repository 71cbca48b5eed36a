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
#: The members' own modules: the protocol, its implementations, and the loading of a model.
MEMBER_MODULES = {"wash/engine/members.py", "wash/engine/ray_members.py", "wash/engine/compiled_members.py",
                  "wash/engine/models.py"}
#: Modules that hold a model in this process on purpose, and why (a forward or its weights).
WEIGHTS_ON_PURPOSE = {
    # memory measurements: the resident bytes of the loaded weights, and their offloading
    "wash/experiments/cost.py",
    "wash/bench/shapes.py",
}


def _sources() -> list[tuple[str, ast.Module]]:
    files = sorted((ROOT / "wash").rglob("*.py")) + [ROOT / "app.py"]
    return [(str(f.relative_to(ROOT)), ast.parse(f.read_text(), str(f))) for f in files if f.exists()]


def _member_lm_reads(tree: ast.Module) -> list[str]:
    """Every ``X.lm`` read, whatever ``X`` is called: a model description above the members.

    Decided by the attribute alone: providers hold a member (``Provider.member``), so no
    ``.lm`` is needed above the members, and a rule by variable name would let a renamed
    variable through."""
    return [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "lm"]


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
        found += [f"{path}: {text}" for text in _member_lm_reads(tree)]
        if path not in WEIGHTS_ON_PURPOSE:
            found += [f"{path}: {text}" for text in _model_uses(tree)]
    return found


def test_no_module_above_the_members_reads_a_members_model():
    assert leaks() == []


def test_the_check_finds_a_leak():
    """The rule bites: the two spellings it guards are found in a module's source."""
    tree = ast.parse("lms = {n: remote[n].lm for n in names}\nout = self.judge.lm.model(input_ids=x)\n"
                     "ids = provider.lm.encode(text)\n")
    assert _member_lm_reads(tree) == ["remote[n].lm", "self.judge.lm", "provider.lm"]
    assert _model_uses(tree) == ["self.judge.lm.model"]


def _declared(protocol: type) -> set[str]:
    return {n for n in dir(protocol) if not n.startswith("_")} | set(protocol.__annotations__)


def test_the_protocol_declares_what_its_implementations_offer():
    """What every member gives is declared on ``Member``, each optional computation on its own protocol,
    and a member offers the optional ones it lists in ``capabilities`` (callers type against these)."""
    from wash.engine.compiled_members import CompiledMember
    from wash.engine.members import CAPABILITIES, LocalMember, Member
    from wash.engine.ray_members import RayMember

    core = _declared(Member)
    assert core >= {"context", "submit", "run", "encode", "encode_prompt", "decode_id", "vocab", "vocab_size",
                    "bos_id", "eos_ids", "tokenizer", "max_context", "name", "capabilities", "backend"}
    assert not core & set(CAPABILITIES)  # the optional computations are not asked of every member
    for capability, protocol in CAPABILITIES.items():
        assert _declared(protocol) - core == {capability}
    for cls in (LocalMember, RayMember, CompiledMember):
        offered = {n for n in dir(cls) if not n.startswith("_")}
        assert core <= offered, f"{cls.__name__} lacks {sorted(core - offered)}"
        assert set(cls.capabilities) <= offered, f"{cls.__name__} lists a capability it does not offer"


if __name__ == "__main__":
    print("\n".join(leaks()) or "no leak")
