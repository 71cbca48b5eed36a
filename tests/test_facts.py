"""Facts listed in the docs are generated from the code: the README's scheme and mode tables and
``wash.ui``'s module list stay in sync with what defines them."""

from __future__ import annotations

from pathlib import Path

import pytest

from wash import facts


@pytest.mark.parametrize("name", sorted(facts.BLOCKS))
def test_each_generated_block_is_what_the_code_says(name):
    assert facts.written(name) == facts.BLOCKS[name](), (
        f"{facts.FILES[name]}'s '{name}' block is stale: run python -m wash.facts --write")


def test_the_tables_list_every_scheme_and_mode():
    from wash.engine.modes import STRATEGIES
    from wash.watermarks import SCHEMES

    for name, cls in SCHEMES.items():
        assert (f"| `{name}` |" in facts.schemes()) == cls.__module__.startswith("wash.watermarks.")
    for name in STRATEGIES:
        assert f"| `{name}` |" in facts.modes()


def test_the_ui_package_lists_every_module_it_holds():
    import wash.ui

    for path in Path(wash.ui.__file__).parent.glob("*.py"):
        if path.name != "__init__.py":
            assert f"* ``{path.stem}``: " in wash.ui.__doc__, path.stem
