"""No tracked text file names an absolute path of the machine it was made on.

Why: a command recorded as ``--out`` followed by the author's checkout, a log under a
temporary directory or a model cache under a home directory means nothing on a
reader's machine, and a committed meta or benchmark must say how to remake it from
the repository root (``wash.core.provenance`` writes them so).

What counts as a machine path: an absolute path whose first component is one of
``MACHINE_ROOTS`` (home directories, checkouts and work areas, temporary and mounted
space, per-machine installs) with at least one component after it. System paths a
program legitimately names (``/usr/bin/chromium``, ``/proc/self/status``,
``/proc/cpuinfo``, ``/dev/null``, ``/usr/bin/env``, ``/etc/...``) have other roots
and are allowed; ``SYSTEM_PATHS`` lists those the code uses so a test holds them
allowed. A path inside a URL (``https://host/home/x``) or a relative one
(``runs/tmp/x``, ``~/.cache/wash``) is not absolute on this machine and is not
matched.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: First components of absolute paths that belong to one machine, not to every system.
MACHINE_ROOTS = ("work", "workspace", "root", "home", "Users", "tmp", "var/tmp", "var/folders", "private",
                 "mnt", "media", "opt", "srv", "scratch", "data", "content")
#: System paths the project names on purpose (browser, process facts, shell): never machine paths.
SYSTEM_PATHS = ("/usr/bin/chromium", "/usr/bin/env", "/proc/self/status", "/proc/cpuinfo", "/dev/null")

#: A root at the start of a path: not preceded by a character that would make it part of a
#: relative path, a URL's host or path, or a word (``runs/tmp/x``, ``https://h/home/x``, ``a/home/b``).
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:" + "|".join(re.escape(r) for r in MACHINE_ROOTS)
                          + r")/[\w.~$%+-]")


def machine_paths(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line of ``text`` naming a machine path."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if MACHINE_PATH.search(line)]


def tracked_text_files(root: Path = ROOT) -> list[Path]:
    """Every file git tracks under ``root`` that is text (no NUL byte in its first 8 KB)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = []
    for name in listed.decode().split("\0"):
        path = root / name
        if name and path.is_file() and not path.is_symlink():
            with open(path, "rb") as fh:
                if b"\0" not in fh.read(8192):
                    files.append(path)
    return files


def _sample(root: str, rest: str) -> str:
    """A machine path built at run time, so this file itself names none."""
    return f"/{root}/{rest}"


@pytest.mark.parametrize("path", [
    _sample("work", "main/results/decay"), _sample("root", ".cache/wash/models/smollm2"),
    _sample("home", "someone/wash"), _sample("tmp", "wash-latency-app-f33pjoce.log"),
    _sample("opt", "venv/bin/python"), _sample("Users", "me/wash"), _sample("var/folders", "x/T/run"),
])
def test_a_machine_path_is_found_wherever_it_stands(path):
    for text in (f"--out {path} --workers 2", f'"app_log": "{path}"', f"(`{path}`)", f"{path}\n"):
        assert machine_paths("first line\n" + text) == [(2, text.strip())], text


@pytest.mark.parametrize("text", [
    *SYSTEM_PATHS, "~/.cache/wash", "runs/tmp/x", "results/tmp-notes", "https://example.org/home/x",
    "file:relative/home/x", "read-only apart from `/tmp`", "1/N of /tmp", "a/home/b", "$HOME/x",
])
def test_system_relative_and_url_paths_are_not_machine_paths(text):
    assert machine_paths(text) == []


def test_no_tracked_text_file_names_a_machine_path():
    files = tracked_text_files()
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".json" for p in files)
    found = [f"{p.relative_to(ROOT)}:{number}: {line[:160]}" for p in files
             for number, line in machine_paths(p.read_text(encoding="utf-8", errors="replace"))]
    assert not found, ("absolute paths of the machine a file was made on (record them relative to the "
                       "repository root, see wash/core/provenance.py):\n" + "\n".join(found))


# -- the writers record portable commands and paths (wash.core.provenance) ----------------------------
def test_a_recorded_command_names_the_repository_relatively_and_the_interpreter_as_python():
    import sys

    from wash.core.provenance import command_line, portable_text

    home = Path.home()
    line = command_line([sys.executable, "-m", "wash", "experiment", "decay", "--out", str(ROOT / "results" / "x"),
                         f"--cache={home / 'a b'}", "--set", "seeds=0,1"])
    assert line == "python -m wash experiment decay --out results/x --cache=~/'a b' --set seeds=0,1"
    assert machine_paths(line) == []
    cache = _sample("tmp", "wash-fresh-cache-4k4mnewj")
    text = portable_text(f"gemma3: loading weights from {cache}/models/gemma3 and {home}/x",
                         {cache: "$WASH_CACHE_DIR"})
    assert text == "gemma3: loading weights from $WASH_CACHE_DIR/models/gemma3 and ~/x"


def test_an_experiment_meta_records_its_output_folder_relative_to_the_repository(tmp_path):
    from wash.experiments import load
    from wash.experiments.driver import write_meta

    config = load("decay").Config.from_preset("tiny", out=ROOT / "runs" / "meta-test")
    meta = write_meta(tmp_path / "decay_meta.json", "decay", config, None, jobs_total=3, ran=0, elapsed=1.0,
                      load_at_start=[0.5, 0.25, 0.125])
    assert meta["config"]["out"] == "runs/meta-test"
    assert meta["command"].startswith("python ") and machine_paths(meta["command"]) == []
    assert meta["load_average"]["start"] == [0.5, 0.25, 0.125] and len(meta["load_average"]["end"]) == 3
    assert "logical CPUs" in meta["machine"]
