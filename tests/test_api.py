"""The public API (``wash.generate``, ``stream``, ``detect``, ``identify``) and the README's example."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

import wash
from wash.engine.events import FinishedEvent, StepEvent

README = Path(__file__).resolve().parents[1] / "README.md"
TINY = ["tiny-smollm2:kgw:1", "tiny-gemma3:aar:2", "tiny-smollm2:dipmark:3"]
PROMPT = "The committee met on Tuesday to discuss"


def readme_example() -> str:
    """The Python block of the README's "Quick start from Python" section."""
    section = README.read_text().split("## Quick start from Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _run(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    return out.getvalue()


def test_readme_example_is_five_lines_on_the_offline_models():
    code = readme_example()
    assert len(code.strip().splitlines()) == 5
    assert re.findall(r'"(\w+):\w', code) and set(re.findall(r'"(\w+):\w', code)) <= {"smollm2", "gemma3"}


def test_readme_example_runs_on_the_tiny_models():
    code = re.sub(r'"(smollm2|gemma3):', r'"tiny-\1:', readme_example())
    lines = _run(code).splitlines()
    assert lines[0]  # the text
    assert [line.split()[0] for line in lines[-3:]] == ["P1", "P2", "P3"]


@pytest.mark.e2e
def test_readme_example_runs_on_the_real_models():
    lines = _run(readme_example()).splitlines()
    assert [line.split()[0] for line in lines[-3:]] == ["P1", "P2", "P3"]


def test_import_wash_loads_no_torch():
    code = "import sys, wash; assert 'torch' not in sys.modules; print(sorted(wash.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "generate" in out and "Provider" in out


def test_generate_is_the_engine_run_of_the_same_config():
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate

    config = GenerationConfig(providers=[ProviderSpec.parse(s) for s in TINY], prompt=PROMPT,
                              max_new_tokens=12, seed=4)
    assert wash.generate(PROMPT, TINY, max_new_tokens=12, seed=4).text == generate(config).text
    assert wash.generate(config).text == generate(config).text
    assert wash.generate(config, seed=5).text == generate(dataclasses.replace(config, seed=5)).text


def test_stream_yields_the_steps_and_ends_with_the_result():
    events = list(wash.stream(PROMPT, [wash.Provider.parse(TINY[0]), TINY[1]], max_new_tokens=6, mode="naive",
                              profile="paper"))
    assert isinstance(events[-1], FinishedEvent)
    result = events[-1].result
    assert result.mode == "naive" and result.settings["top_k"] == 10
    assert "".join(e.token for e in events if isinstance(e, StepEvent)) == result.text


def test_detect_reads_a_result_or_a_text():
    result = wash.generate(PROMPT, TINY, max_new_tokens=16, seed=1)
    from_result = wash.detect(result)
    from_text = wash.detect(result.text, TINY)
    assert [d.z for d in from_result] == [d.z for d in from_text] == [d.z for d in result.detection]
    assert [d.provider for d in wash.detect(result, TINY[1])] == ["P1 tiny-gemma3/aar#2"]


def test_identify_probes_the_system():
    found = wash.identify(TINY[0], "single", contexts=3, samples=20, runs=2)
    assert found.mode == "single" and len(found.scores) == 2


@pytest.mark.parametrize("call", [
    lambda: wash.generate(PROMPT, TINY, bogus=1),
    lambda: wash.generate(PROMPT, ["tiny-smollm2:nope:1"]),
    lambda: wash.generate(PROMPT, TINY, mode="fastest"),
    lambda: wash.detect("some text"),
    lambda: wash.identify(TINY, "single", sample=3),
])
def test_bad_input_is_a_wash_input_error(call):
    with pytest.raises(wash.WashInputError):
        call()


def test_no_module_of_the_package_shadows_a_public_name():
    """Importing ``wash.X`` sets the attribute ``wash.X`` to the module: no public name may be a module's."""
    package = Path(wash.__file__).parent
    modules = {p.stem for p in package.glob("*.py")}
    modules |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert not modules & set(wash.__all__)
