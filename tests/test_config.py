"""Settings parsed once at the edge: typed objects, a validate() that changes nothing, the command line."""

from __future__ import annotations

import ast
import dataclasses
import shlex
from pathlib import Path

import pytest

from wash.engine import aggregation
from wash.engine.aggregation import Cap, MedianClip
from wash.baselines.demark import DeMark
from wash.baselines.toblend import ToBlend
from wash.cli import build_parser
from wash.engine.config import GenerationConfig, ProviderSpec, command_line, from_command_line
from wash.engine.ensemble import Wash
from wash.core.errors import WashInputError
from wash.engine.settings import Forwards

ROOT = Path(__file__).resolve().parents[1]
SPECS = [ProviderSpec.parse(s) for s in ("tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2")]


def config(**kw) -> GenerationConfig:
    return GenerationConfig(providers=list(SPECS), prompt=kw.pop("prompt", "Hello there"), **kw)


CONFIGS = [
    dict(),
    dict(aggregate=" median-clip ", seed="7"),
    dict(mode="toblend", baseline_options=" select = round-robin "),
    dict(mode="naive", forwards="lazy", top_k=10),
    dict(mode="demark", baseline_options="k=4", temperature=0.7, top_p=0.9, max_new_tokens=12),
    dict(mode="unwatermarked", aggregate="cap:xi=0.5"),
]


@pytest.mark.parametrize("fields", CONFIGS)
def test_text_settings_are_typed_when_the_config_is_made_and_validate_changes_nothing(fields):
    cfg = config(**fields)
    before = dataclasses.asdict(cfg)
    cfg.validate()
    assert dataclasses.asdict(cfg) == before
    assert isinstance(cfg.forwards, Forwards) and isinstance(cfg.seed, int)
    assert cfg.aggregate == str(cfg.rule)
    if cfg.spec.baseline:
        assert cfg.baseline_options == str(cfg.strategy)


def test_the_typed_objects():
    cfg = config(aggregate="median-clip:xi=0.5", mode="toblend", baseline_options="block=2")
    assert cfg.rule == MedianClip(xi=0.5) and cfg.aggregate == "median-clip:xi=0.5"
    assert cfg.strategy == ToBlend(block=2) and cfg.forwards == Forwards.EAGER == "eager"
    assert config().strategy == Wash()


def test_setting_a_text_field_parses_it_again():
    cfg = config()
    cfg.aggregate = "cap"
    assert cfg.rule == Cap() and cfg.aggregate == "cap:xi=1.0"
    cfg.mode, cfg.baseline_options = "demark", "k=3"
    assert cfg.strategy == DeMark(k=3) and cfg.baseline_options.startswith("k=3,access=gray")
    cfg.forwards = "lazy"
    assert cfg.forwards is Forwards.LAZY


def test_text_that_does_not_parse_is_kept_for_validate():
    cfg = config(aggregate="nope", forwards="sideways")
    assert cfg.aggregate == "nope" and cfg.forwards == "sideways"
    with pytest.raises(WashInputError, match="unknown forwards 'sideways'"):
        cfg.validate()
    with pytest.raises(WashInputError, match="unknown aggregate 'nope'"):
        cfg.rule
    with pytest.raises(WashInputError, match="unknown mode 'fastest'"):
        config(mode="fastest").strategy


def test_one_generation_parses_the_rule_once(monkeypatch):
    from wash.engine.ensemble import generate

    built = []
    post = aggregation.Rule.__post_init__
    monkeypatch.setattr(aggregation.Rule, "__post_init__", lambda self: (built.append(self), post(self))[1])
    cfg = config(aggregate="median-clip", max_new_tokens=2)
    cfg.validate()
    generate(cfg)
    assert len(built) == 1


@pytest.mark.parametrize("fields", CONFIGS)
def test_the_command_line_reads_back_as_the_same_config(fields):
    cfg = config(**fields, live_detection=False)
    args = build_parser().parse_args(shlex.split(command_line(cfg))[3:])
    assert from_command_line(args) == cfg


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_ui_does_not_import_the_cli():
    for path in (ROOT / "wash" / "ui").glob("*.py"):
        assert "wash.cli" not in _imports(path), path.name


def _aggregation_parse_calls() -> list[str]:
    """``file:line`` of every call of ``wash.engine.aggregation.parse`` in the package, app.py and tools/."""
    sites = []
    for path in sorted([*(ROOT / "wash").rglob("*.py"), ROOT / "app.py", *(ROOT / "tools").glob("*.py")]):
        tree = ast.parse(path.read_text(), filename=str(path))
        rel = path.relative_to(ROOT).as_posix()
        names = {"parse"} if rel == "wash/engine/aggregation.py" else set()  # its own name for it
        modules = {"wash.engine.aggregation"}  # dotted names the module is reached by
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "wash.engine.aggregation":
                names |= {a.asname or a.name for a in node.names if a.name == "parse"}
            elif isinstance(node, ast.ImportFrom) and node.module == "wash.engine":
                modules |= {a.asname or a.name for a in node.names if a.name == "aggregation"}
            elif isinstance(node, ast.Import):
                modules |= {a.asname for a in node.names if a.name == "wash.engine.aggregation" and a.asname}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Name) and func.id in names) or (
                    isinstance(func, ast.Attribute) and func.attr == "parse"
                    and ast.unparse(func.value) in modules):
                sites.append(f"{rel}:{node.lineno}")
    return sites


def test_the_aggregation_rule_is_parsed_at_one_site():
    """One parse of a rule's text (``config.rule_of``); everyone else asks the ``Rule`` or the config."""
    sites = _aggregation_parse_calls()
    assert len(sites) == 1 and sites[0].startswith("wash/engine/config.py:"), sites


def test_lazy_forwards_are_refused_by_the_engine_check_everywhere(capsys):
    """A robust rule with lazy forwards: the generation, the rules experiment and the experiment
    command all raise the engine config's one message."""
    from wash.cli import main
    from wash.experiments import load

    message = "aggregate median needs --forwards eager: a lazy step draws from one provider"
    with pytest.raises(WashInputError, match=message):
        config(aggregate="median", forwards="lazy").validate()
    with pytest.raises(WashInputError, match=message):
        load("rules").Config.from_preset("tiny", rules=("mean", "median"), forwards="lazy")
    assert main(["experiment", "decay", "--tiny", "--aggregate", "median", "--forwards", "lazy", "--show"]) == 2
    assert message in capsys.readouterr().err
    assert main(["experiment", "cost", "--tiny", "--aggregate", "median", "--show"]) == 2
    assert "variant lazy: " + message in capsys.readouterr().err


def test_an_unregistered_baseline_names_the_import_that_registers_it(monkeypatch):
    from wash.engine import modes

    plain = {name: cls for name, cls in modes.STRATEGIES.items() if not cls.baseline}
    monkeypatch.setattr(modes, "STRATEGIES", plain)
    assert "wash.baselines is imported" in str(modes.unknown_mode("toblend"))
    monkeypatch.undo()
    import wash.baselines  # noqa: F401

    assert "wash.baselines" not in str(modes.unknown_mode("nope"))


def test_the_loops_view_of_the_settings_is_the_config_itself():
    """``decode.RunSettings`` names what the decoding loop reads of ``GenerationConfig`` (the loop
    cannot import the config: the config resolves modes to the strategies that run the loop). It
    declares nothing of its own: every name is a field or property of the config, with the same
    annotation where both annotate it, so the two cannot drift apart."""
    import dataclasses

    from wash.engine.config import GenerationConfig
    from wash.engine.decode import RunSettings

    fields = {f.name: f.type for f in dataclasses.fields(GenerationConfig)}
    names = set(RunSettings.__annotations__) | {n for n in vars(RunSettings) if not n.startswith("_")}
    for name in sorted(names):
        assert hasattr(GenerationConfig, name) or name in fields, f"RunSettings.{name} is not GenerationConfig's"
    for name, kind in RunSettings.__annotations__.items():
        assert str(fields[name]).split(" | ")[0].strip("'\"") == str(kind).strip("'\""), name
