"""docs/APP.md's API example runs as written against the app and prints the text the engine makes.

Why: the example is what an API user copies first. It once passed a boolean where
``/generate`` takes a choice (``"off"``), which Gradio refuses, and printed the last
output (the evidence note) as "the generated text". Here the example's own code is
executed against ``app.build_demo`` served in this process on the tiny models (``served_tiny_app``;
the only edits: the URL and the model names), and what it prints must equal the engine's
text for the same settings.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def api_example() -> str:
    """The first python block of docs/APP.md's "API" section."""
    section = (ROOT / "docs" / "APP.md").read_text(encoding="utf-8").split("### API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_api_example_runs_and_prints_the_engines_text(served_tiny_app):
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate

    url = served_tiny_app[0]
    code = api_example()
    for model in ("smollm2", "gemma3"):
        assert f'"{model}"' in code
        code = code.replace(f'"{model}"', f'"tiny-{model}"')
    assert '"http://127.0.0.1:7860"' in code
    printed: list[str] = []
    namespace: dict = {"print": lambda *args: printed.append(" ".join(map(str, args)))}  # the example's own
    exec(compile(code.replace('"http://127.0.0.1:7860"', repr(url)), "docs/APP.md", "exec"), namespace)
    rows = namespace["table"]["data"]
    engine = generate(GenerationConfig(
        providers=[ProviderSpec.parse(f"{m}:{s}:{k}") for m, s, k, _ in rows], prompt="The old lighthouse keeper",
        mode="wash", max_new_tokens=32, temperature=1.0, seed=0, forwards="eager"))
    assert printed == [engine.text]
