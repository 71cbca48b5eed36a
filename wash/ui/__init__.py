"""The Gradio app's helpers, kept free of widgets so tests can call them directly.

``app.py`` only lays out widgets and wires events; everything it shows is built
here from the engine's events and results. The modules (this list is built from
each module's own docstring when the package is imported, so it cannot drift):
"""

import ast as _ast
from pathlib import Path as _Path


def _modules() -> list[str]:
    """One line per helper module: its name and the first line of its docstring."""
    lines = []
    for path in sorted(_Path(__file__).parent.glob("*.py")):
        if path.name == "__init__.py":
            continue
        doc = _ast.get_docstring(_ast.parse(path.read_text(encoding="utf-8"))) or ""
        lines.append(f"* ``{path.stem}``: {doc.splitlines()[0] if doc else '(no docstring)'}")
    return lines


__doc__ = (__doc__ or "") + "\n" + "\n".join(_modules()) + "\n"
