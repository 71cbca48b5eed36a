"""Where a recorded output was made, written so that the record is portable.

Experiment metas, bench, soak and latency JSONs are committed, and each records the
command that made it and the machine it ran on. Why this module: a command as the
shell saw it names absolute paths of that machine (an ``--out`` under the author's
checkout, the virtual environment's interpreter, a temporary model cache), which
mean nothing on a reader's machine and leak the author's layout into the repository
(``tests/test_no_machine_paths.py`` refuses them in tracked files). Every writer
goes through ``command_line`` and ``portable``: a path inside the repository
becomes relative to its root, the interpreter becomes ``python``, the home
directory ``~``; the machine is described by kind (CPU model, cores), not by name.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Iterable, Mapping

#: The repository root: paths under it are recorded relative to it.
REPO = Path(__file__).resolve().parents[2]


def _is_python(path: Path) -> bool:
    """Whether ``path`` is a Python interpreter (this one, or any ``.../bin/python3.11``)."""
    try:
        if path == Path(sys.executable) or path.resolve() == Path(sys.executable).resolve():
            return True
    except OSError:
        pass
    return path.parent.name == "bin" and path.name.startswith("python")


def portable(arg: str, root: Path = REPO, home: Path | None = None) -> str:
    """``arg`` as a record should hold it: an absolute path inside ``root`` made relative to it,
    an interpreter ``python``, a path inside the running virtual environment ``$VIRTUAL_ENV/...``,
    a path under the home directory ``~/...``; anything else unchanged.

    ``--opt=/abs/path`` is treated as its value. A path outside all three (a temporary directory, say) is kept:
    the caller decides whether such a path belongs in a committed record at all.
    """
    if arg.startswith("-") and "=" in arg:
        option, value = arg.split("=", 1)
        return f"{option}={portable(value, root, home)}"
    if not os.path.isabs(arg):
        return arg
    path = Path(os.path.normpath(arg))
    if _is_python(path):
        return "python"
    for base in (Path(root).resolve(), Path(root)):
        if path == base:
            return "."
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    if sys.prefix != sys.base_prefix and path.is_relative_to(sys.prefix):  # inside this virtual environment
        return "$VIRTUAL_ENV/" + path.relative_to(sys.prefix).as_posix()
    home = Path(home) if home is not None else Path.home()
    if path.is_relative_to(home) and home != Path("/"):
        return "~/" + path.relative_to(home).as_posix()
    return arg


def _quote(arg: str) -> str:
    """``shlex.quote``, leaving a leading ``~/`` or ``$VIRTUAL_ENV/`` (also after ``--opt=``) outside
    the quotes so that a shell expands it."""
    for lead in ("~/", "$VIRTUAL_ENV/"):
        head, sep, rest = arg.partition(lead)
        if sep and (not head or (head.startswith("-") and head.endswith("="))):
            return head + sep + shlex.quote(rest) if rest else head + sep
    return shlex.quote(arg)


def command_line(args: Iterable[str], root: Path = REPO) -> str:
    """A command (``argv``-like, program first) as one shell line with every argument ``portable``."""
    return " ".join(_quote(portable(str(a), root)) for a in args)


def portable_text(text: str, names: Mapping[str, str] | None = None, root: Path = REPO) -> str:
    """``text`` (a log line, say) with ``names``' paths replaced by their labels, then the repository
    root by ``.`` and the home directory by ``~``: longest first, so a path inside another is named
    by the more specific one."""
    replace = {**(names or {}), str(Path(root).resolve()): ".", str(Path.home()): "~"}
    for path in sorted(replace, key=len, reverse=True):
        if path and path != "/":
            text = text.replace(path, replace[path])
    return text


def cpuinfo(field: str) -> str | None:
    """The first value of ``field`` (``model name``, ``vendor_id``) in ``/proc/cpuinfo``; None where
    the file or the field is missing (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_description() -> str:
    """``Linux x86_64, 2 logical CPUs (AMD EPYC)``: the kind of machine (``platform.processor()`` is
    often empty on Linux, so the CPU model comes from ``/proc/cpuinfo``)."""
    cpu = cpuinfo("model name") or platform.processor() or platform.machine()
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} logical CPUs ({cpu})"


def uptime_line() -> str:
    """``uptime``'s line (load averages included), or the load averages alone where there is no ``uptime``:
    what a benchmark records before and after it runs, so a reader can tell an idle machine from a busy one."""
    import subprocess

    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (two decimals), or None where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None
