"""Every scheme parameter is range-checked when a provider spec is parsed.

What is checked, and why it could fail:
* ``BAD`` lists, for every registered scheme and every field of its ``Params``,
  values that must be refused (out of range, and for numeric fields also a
  non-numeric one); a scheme or field added without bad values fails
  ``test_bad_table_covers_every_field``, so no parameter goes unchecked by accident;
* each of those values gives a one-line ``WashInputError`` naming the scheme and the
  parameter at ``ProviderSpec.parse`` time (before any model or scheme is built);
* the same checks fire when ``Params`` is built in code (wrong types included);
* defaults and the edges of each accepted range are accepted, and default
  schemes still construct (a tiny vocabulary, no model);
* the CLI turns a bad parameter into exit code 2 and exactly one stderr line,
  without loading a model.
Nothing here loads a model; the whole file runs in about a second.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from wash.cli import main
from wash.engine.config import ProviderSpec
from wash.core.errors import WashInputError
from wash.watermarks import SCHEMES as _REGISTRY
from wash.watermarks import build_scheme

#: The project's own schemes (other tests register throwaway ones, e.g. test_engine's "test-eos").
SCHEMES = {name: cls for name, cls in _REGISTRY.items() if cls.__module__.startswith("wash.watermarks.")}

#: scheme -> field -> spec values that must be refused at parse time.
BAD: dict[str, dict[str, list[str]]] = {
    "none": {},
    "kgw": {
        "gamma": ["0", "1", "-0.1", "1.5", "nan", "inf", "half"],
        "delta": ["-0.5", "inf", "-inf", "nan", "big"],
        "context_width": ["-1", "2.5", "four"],
        "reduction": ["xor", "", "ADDITIVE"],
        "skip_repeated": ["maybe", "2"],
    },
    "biased-kgw": {
        "bias": ["-1", "inf", "nan", "strong"],
        "gamma": ["0", "1", "2", "nan", "x"],
        "skip_repeated": ["maybe", "2"],
    },
    "unigram": {
        "gamma": ["0", "1", "-1", "nan", "x"],
        "delta": ["-2", "inf", "nan", "x"],
        "skip_repeated": ["maybe", "-1"],
    },
    "waterbag": {
        "gamma": ["0", "1.0", "nan", "x"],
        "delta": ["-0.1", "inf", "x"],
        "bag_size": ["0", "-3", "65", "4.0", "many"],
        "context_width": ["-1", "x"],
        "reduction": ["xor"],
        "skip_repeated": ["sometimes"],
    },
    "dipmark": {
        "alpha": ["-0.01", "0.51", "1", "nan", "inf", "x"],
        "context_width": ["0", "-4", "1.5", "x"],
        "gamma": ["0", "1", "nan", "x"],
    },
    "aar": {
        "context_width": ["0", "-1", "2.5", "x"],
        "skip_repeated": ["maybe", "2"],
        "form": ["Soft", "gumbel-max", "", "1"],
        "detector": ["theirs", "RELEASE", ""],
    },
    "its-edit": {
        "keylen": ["0", "-5", "4097", "1.5", "x"],
        "gamma": ["-0.1", "inf", "nan", "x"],
        "n_permutations": ["1", "0", "1001", "10.0", "x"],
        "detector": ["markllm", "Ours"],
        "permutation": ["per_position", "one", "Shared", ""],
    },
    "exp-edit": {
        "keylen": ["0", "4097", "x"],
        "gamma": ["-1", "nan", "x"],
        "n_permutations": ["1", "1001", "x"],
        "detector": ["paper", ""],
        "form": ["hard", "SOFT"],
    },
    "synthid": {
        "ngram_len": ["1", "0", "-2", "x"],
        "depth": ["0", "257", "1.5", "x"],
        "sampling_table_size": ["1", "0", str(2**20 + 1), "x"],
        "sampling_table_seed": ["1.5", "seed"],
    },
}

#: Edges of the accepted ranges (and one interior value): these must parse.
GOOD: dict[str, dict[str, list[str]]] = {
    "kgw": {"gamma": ["0.001", "0.999"], "delta": ["0", "12.5"], "context_width": ["0", "1", "64"],
            "reduction": ["additive", "time", "skip", "min"], "skip_repeated": ["false", "true"]},
    "biased-kgw": {"bias": ["0", "10"], "gamma": ["0.25"], "skip_repeated": ["true", "false", "0", "1"]},
    "unigram": {"gamma": ["0.1"], "delta": ["0"], "skip_repeated": ["no"]},
    "waterbag": {"bag_size": ["1", "64"], "context_width": ["0"], "reduction": ["min"],
                 "skip_repeated": ["off"]},
    "dipmark": {"alpha": ["0", "0.5"], "context_width": ["1"], "gamma": ["0.9"]},
    "aar": {"context_width": ["1", "100"], "skip_repeated": ["false"], "form": ["gumbel", "soft"],
            "detector": ["ours", "release"]},
    "its-edit": {"keylen": ["1", "4096"], "gamma": ["0", "1"], "n_permutations": ["2", "1000"],
                 "detector": ["ours", "release"], "permutation": ["per-position", "shared"]},
    "exp-edit": {"keylen": ["1"], "gamma": ["0.5"], "n_permutations": ["2"], "form": ["gumbel", "soft"],
                 "detector": ["release"]},
    "synthid": {"ngram_len": ["2", "50"], "depth": ["1", "256"], "sampling_table_size": ["2", str(2**20)],
                "sampling_table_seed": ["0", "-7", str(2**70)]},
}


def _fields(name: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(SCHEMES[name].Params)}


def _is_numeric(name: str, field: str) -> bool:
    default = getattr(SCHEMES[name].Params(), field)
    return isinstance(default, (int, float)) and not isinstance(default, bool)


def _parses_as_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cases(table: dict[str, dict[str, list[str]]]) -> list[tuple[str, str, str]]:
    return [(s, f, v) for s, fields in table.items() for f, values in fields.items() for v in values]


def test_bad_table_covers_every_field() -> None:
    assert set(BAD) == set(SCHEMES), "add every registered scheme to BAD (an empty dict if it has no Params)"
    for name in SCHEMES:
        fields = _fields(name)
        assert set(BAD[name]) == set(fields), f"{name}: BAD must list bad values for exactly {sorted(fields)}"
        for field, values in BAD[name].items():
            assert values, f"{name}.{field}: no bad value listed"
            if _is_numeric(name, field):
                assert any(_parses_as_number(v) for v in values), f"{name}.{field}: no out-of-range number"
                assert any(not _parses_as_number(v) for v in values), f"{name}.{field}: no non-numeric value"
    for name, fields in GOOD.items():
        assert set(fields) <= set(_fields(name)), f"{name}: GOOD names an unknown field"


@pytest.mark.parametrize("scheme, field, value", _cases(BAD))
def test_bad_value_is_refused_at_parse_time(scheme: str, field: str, value: str) -> None:
    with pytest.raises(WashInputError) as err:
        ProviderSpec.parse(f"smollm2:{scheme}:1:{field}={value}")
    message = str(err.value)
    assert "\n" not in message
    assert f"parameter '{field}' of scheme '{scheme}'" in message, message
    assert "got " in message, message


@pytest.mark.parametrize("scheme, field, value", _cases(GOOD))
def test_range_edges_are_accepted(scheme: str, field: str, value: str) -> None:
    spec = ProviderSpec.parse(f"smollm2:{scheme}:1:{field}={value}")
    assert dict(spec.params) == {field: value}


@pytest.mark.parametrize("name", list(SCHEMES))
def test_defaults_validate_and_build(name: str) -> None:
    cls = SCHEMES[name]
    defaults = cls.Params()
    spelled = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                       for k, v in dataclasses.asdict(defaults).items())
    spec = ProviderSpec.parse(f"smollm2:{name}:7" + (f":{spelled}" if spelled else ""))
    assert cls.parse_params(dict(spec.params)) == defaults
    scheme = build_scheme(name, 7, 64)  # tiny vocabulary: constructors must accept the defaults
    assert scheme.params == defaults


@pytest.mark.parametrize("scheme, field, value", [
    ("aar", "context_width", 0),
    ("aar", "context_width", True),  # a bool is not an integer here
    ("aar", "context_width", 4.0),
    ("aar", "skip_repeated", 1),
    ("kgw", "gamma", "0.5"),
    ("kgw", "delta", float("nan")),
    ("kgw", "reduction", None),
    ("kgw", "skip_repeated", 1),  # 1 is not True here
    ("waterbag", "skip_repeated", "false"),
    ("unigram", "skip_repeated", None),
    ("dipmark", "alpha", 0.75),
    ("its-edit", "n_permutations", 1),
    ("its-edit", "permutation", None),
    ("exp-edit", "gamma", -0.5),
    ("exp-edit", "form", True),
    ("aar", "detector", 1),
    ("synthid", "sampling_table_seed", 0.5),
])
def test_params_built_in_code_are_checked_too(scheme: str, field: str, value) -> None:
    with pytest.raises(WashInputError, match=f"parameter '{field}' of scheme '{scheme}'"):
        SCHEMES[scheme].Params(**{field: value})


def test_former_name_unique_still_sets_skip_repeated() -> None:
    # ``unique`` was the context-free schemes' name for what is now the shared ``skip_repeated``
    for scheme in ("unigram", "biased-kgw"):
        spec = ProviderSpec.parse(f"smollm2:{scheme}:1:unique=false")
        assert build_scheme(scheme, 1, 64, dict(spec.params)).params.skip_repeated is False
        with pytest.raises(WashInputError, match="not both"):
            ProviderSpec.parse(f"smollm2:{scheme}:1:unique=false,skip_repeated=false")
        with pytest.raises(WashInputError, match="parameter .skip_repeated. of scheme .* must be bool"):
            ProviderSpec.parse(f"smollm2:{scheme}:1:unique=maybe")
    with pytest.raises(WashInputError, match="has no parameter 'unique'"):
        ProviderSpec.parse("smollm2:kgw:1:unique=false")


def test_context_width_bound_depends_on_the_reduction() -> None:
    assert ProviderSpec.parse("smollm2:kgw:1:context_width=0,reduction=additive")
    with pytest.raises(WashInputError, match=r"integer >= 1, got 0 \(with reduction 'skip'\)"):
        ProviderSpec.parse("smollm2:kgw:1:context_width=0,reduction=skip")


def test_message_names_range_and_value() -> None:
    with pytest.raises(WashInputError) as err:
        ProviderSpec.parse("smollm2:aar:1:context_width=0")
    assert str(err.value) == "parameter 'context_width' of scheme 'aar' must be an integer >= 1, got 0"
    with pytest.raises(WashInputError) as err:
        ProviderSpec.parse("smollm2:kgw:1:gamma=1.5")
    assert str(err.value) == "parameter 'gamma' of scheme 'kgw' must be a number in (0, 1), got 1.5"


def test_form_and_detector_messages_name_the_choices() -> None:
    with pytest.raises(WashInputError) as err:
        ProviderSpec.parse("gemma3:aar:42:form=smooth")
    assert str(err.value) == "parameter 'form' of scheme 'aar' must be one of gumbel, soft, got 'smooth'"
    with pytest.raises(WashInputError) as err:
        ProviderSpec.parse("smollm2:its-edit:7:permutation=global")
    assert str(err.value) == ("parameter 'permutation' of scheme 'its-edit' must be one of per-position, "
                              "shared, got 'global'")
    with pytest.raises(WashInputError) as err:
        ProviderSpec.parse("smollm2:exp-edit:7:detector=markllm")
    assert str(err.value) == "parameter 'detector' of scheme 'exp-edit' must be one of ours, release, got 'markllm'"


@pytest.mark.parametrize("text", [
    "gemma3:aar:42:form=soft",
    "smollm2:exp-edit:7:form=soft",
    "smollm2:its-edit:7:permutation=shared",
    "smollm2:aar:42:detector=release,form=soft",
    "smollm2:its-edit:7:detector=release,permutation=shared",
    "gemma3:exp-edit:7:detector=release,form=soft,coordinated=true",
])
def test_release_forms_round_trip_through_the_spec(text: str) -> None:
    spec = ProviderSpec.parse(text)
    assert str(spec) == text and ProviderSpec.parse(str(spec)) == spec
    scheme = build_scheme(spec.scheme, spec.key, 64, dict(spec.params))
    for name, value in spec.params:
        assert getattr(scheme.params, name) == value
    assert scheme.point_mass == (getattr(scheme.params, "form", "gumbel") == "gumbel")


def test_cli_reports_a_bad_parameter_in_one_line_without_loading_a_model(capsys, monkeypatch) -> None:
    import wash.engine.ensemble  # noqa: F401 - imported (and so patched and restored below) before the CLI runs:
    import wash.engine.models    # a module first imported under the patch would keep no_load for the session

    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded for a spec that should have been refused")

    # Modules imported later bind the patched function; ones already imported are patched too.
    original = wash.engine.models.load_model
    for module in [m for n, m in sys.modules.items() if n == "wash" or n.startswith("wash.")]:
        if getattr(module, "load_model", None) is original:
            monkeypatch.setattr(module, "load_model", no_load)
    code = main(["generate", "--provider", "smollm2:aar:1:context_width=0", "--prompt", "hi"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0] == "error: parameter 'context_width' of scheme 'aar' must be an integer >= 1, got 0"


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_every_scheme_explains_itself_from_its_own_defaults(name):
    cls = SCHEMES[name]
    text = cls.explain()
    assert cls.description and text and "{" not in text and "}" not in text
    params = cls.Params()
    for field in ("context_width", "keylen", "depth", "bag_size"):
        if hasattr(params, field):
            assert str(getattr(params, field)) in text, (name, field)
