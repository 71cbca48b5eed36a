"""Which code made a result: the git commit and a fingerprint of the engine's source.

A run JSON, an experiment's meta and the generation store all record these, so a
number can be traced to the code that produced it, and a stored text made by an
older engine is never mistaken for one the current engine would make.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path
from typing import Iterable

#: The package's version (``wash.__version__``).
__version__ = "0.1.0"

ROOT = Path(__file__).resolve().parents[2]

#: The folders whose files determine a generated text (relative to the repository root):
#: the engine, the watermark schemes, the baselines' step strategies and the parser of their
#: ``param=value`` options. Any change to a file in them changes ``engine_fingerprint``; a
#: module added there is counted without anyone keeping a list.
ENGINE_SOURCES = ("wash/engine/*.py", "wash/watermarks/*.py", "wash/baselines/*.py", "wash/core/options.py")


#: Tracked paths whose changes do not make the code dirty: experiment outputs and prose.
#: A resumed run rewrites its own committed CSVs before it records the commit, and
#: calling that "+dirty" would hide that the code itself was the committed one.
NOT_CODE = ("results", "docs")


@functools.lru_cache(maxsize=4)
def git_commit(root: Path = ROOT) -> str:
    """The git commit of the working tree, ``+dirty`` when tracked code changed, or ``unknown``."""
    exclude = [f":(exclude){path}" for path in NOT_CODE]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *exclude],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit + ("+dirty" if dirty else "")) if commit else "unknown"


def engine_sources() -> list[Path]:
    """The files of ``ENGINE_SOURCES``, sorted (globs expanded)."""
    files: set[Path] = set()
    for pattern in ENGINE_SOURCES:
        found = sorted(ROOT.glob(pattern))
        if not found:
            raise FileNotFoundError(f"engine source {pattern} not found under {ROOT}")
        files.update(found)
    return sorted(files)


def source_fingerprint(files: Iterable[Path], root: Path | None = None) -> str:
    """A short hash (12 hex digits) over the names and bytes of ``files``."""
    h = hashlib.sha256()
    for f in sorted(Path(x) for x in files):
        name = f.relative_to(root).as_posix() if root is not None else f.name
        data = f.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def _engine_fingerprint() -> str:
    return source_fingerprint(engine_sources(), root=ROOT)


def engine_fingerprint() -> str:
    """The fingerprint of the engine's source (``ENGINE_SOURCES``), computed once per process."""
    return _engine_fingerprint()


def code_version() -> dict[str, str]:
    """What a result records about the code: package version, git commit, engine fingerprint."""
    return {"package": __version__, "commit": git_commit(), "engine": engine_fingerprint()}
