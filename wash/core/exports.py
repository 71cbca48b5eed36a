"""A package's declared exports, each loaded from its module on first use (PEP 562).

The layers above a package (experiments, reporting, the ways in) import only what the
package declares (``from wash.engine import GenerationConfig``), never its modules
(``tests/test_api_surface.py``). The package cannot simply import those modules in its
``__init__``: reading one name would then load every module of the package, and every
module of the package that imports a sibling would first run the ``__init__`` that imports
it back. So the ``__init__`` names each export's module, and the module is imported when
the name is first read.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping, Sequence


def lazy_exports(package: str, exports: Mapping[str, str], modules: Sequence[str] = ()
                 ) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``.

    ``exports`` maps each public name to the module that holds it, relative to the package
    (``"config"``, ``"statistics.keyed"``), or to ``"module:attribute"`` where the package
    exports it under another name (``"parse_mode": "modes:parse"``, where two modules
    of the package each have a ``parse``). A name read once is kept in the package's
    namespace, so later reads cost a dictionary look-up. ``modules`` are submodules the package
    declares whole, read as namespaces (``from wash.detection import key_null``; Python's import
    finds them itself); a name may not be both.
    """
    both = set(exports) & set(modules)
    if both:
        raise ValueError(f"{package} exports {', '.join(sorted(both))} both as a name and as a module")

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = exports[name].partition(":")
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports) | set(modules))

    return sorted({*exports, *modules}), __getattr__, __dir__
