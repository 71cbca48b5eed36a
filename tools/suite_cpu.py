"""Where a command's CPU time goes, process by process (a script, not a test).

    python -m tools.suite_cpu --out cpu.json -- python -m pytest -n 2 --dist worksteal

Runs the command and, once a second until it ends, reads ``/proc`` for every process
descended from it (a process keeps counting after its parent ends and it is re-parented):
its CPU time (user + system) so far, its command line, and the test that started it
(``PYTEST_CURRENT_TEST`` in its environment). Writes one JSON object: the command, the
total, CPU-seconds by kind of process (pytest worker, Chromium, ``python app.py``, Ray,
``python -m MODULE``, ...), the CPU of the processes tests started, by test, and every
process seen by kind and test (the command lines stay out: they name this machine's paths).

Why CPU time and not wall time: on a 2-core machine the suite keeps both cores busy, so its
wall time is its CPU time over two, plus the machine's noise (the same code has run 776 and
813 s of pytest an hour apart). CPU-seconds by kind say what a change saved.

What it misses: a process that lives less than a second between two readings, and the last
second of a process (its CPU time is read while it runs). Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_process(pid: int) -> tuple[int, float, str] | None:
    """(parent pid, CPU-seconds so far, command line) of a live process; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, cmdline.replace(b"\0", b" ").decode(
        errors="replace").strip()


def started_by(pid: int) -> str:
    """The test that started the process (``PYTEST_CURRENT_TEST``, without its phase), or ''."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    for entry in environ:
        if entry.startswith(b"PYTEST_CURRENT_TEST="):
            return entry.split(b"=", 1)[1].decode(errors="replace").rsplit(" (", 1)[0]
    return ""


def kind(cmdline: str) -> str:
    """What sort of process a command line is, for the totals."""
    if "chromium" in cmdline:
        return "chromium"
    if "playwright/driver" in cmdline:
        return "playwright driver"
    if "exec(eval(sys.stdin.readline()))" in cmdline:
        return "pytest worker"
    if "ray::" in cmdline or "/ray/" in cmdline:
        return "ray"
    if "spawn_main" in cmdline:
        return "multiprocessing worker"
    if re.search(r"\bapp\.py\b", cmdline):
        return "python app.py"
    module = re.search(r"python[\d.]*\s+(?:-\S+\s+)*-m\s+(\S+)", cmdline)
    if module:
        return f"python -m {module.group(1)}"
    if re.search(r"python[\d.]*\s+(?:-\S+\s+)*-c\b", cmdline):
        return "python -c"
    script = re.search(r"python[\d.]*\s+(\S+\.py)\b", cmdline)
    if script:
        return f"python {Path(script.group(1)).name}"
    return Path(cmdline.split(" ", 1)[0]).name if cmdline else "(no command line)"


def merge(earlier: dict | None, pid: int, reading: tuple[int, float, str]) -> dict:
    """A process's record after a new reading: its CPU time now; the command line and test of its
    first reading (an exited process not yet reaped, a zombie, reads with an empty command line)."""
    if earlier is None:
        return {"cpu_s": reading[1], "command": reading[2][:300], "test": started_by(pid)}
    return {**earlier, "cpu_s": reading[1], "command": earlier["command"] or reading[2][:300]}


def sample(command: list[str], every_s: float = 1.0) -> tuple[int, dict[int, dict]]:
    """Run ``command``; its exit status and, per descendant pid, its last reading."""
    root = subprocess.Popen(command)
    family, seen = {root.pid}, {}
    while True:
        done = root.poll() is not None
        table = {int(p): read_process(int(p)) for p in os.listdir("/proc") if p.isdigit()}
        grew = True
        while grew:  # a child seen in this reading may have children of its own in it
            grew = False
            for pid, entry in table.items():
                if entry and pid not in family and entry[0] in family:
                    family.add(pid)
                    grew = True
        for pid in family:
            entry = table.get(pid)
            if entry:
                seen[pid] = merge(seen.get(pid), pid, entry)
        if done:
            return root.returncode, seen
        time.sleep(every_s)


def summary(command: list[str], returncode: int, seen: dict[int, dict]) -> dict:
    """The report: totals by kind, the CPU of processes other than the pytest workers by the test that
    started them, and every process by kind and test (no command lines: they name this machine's paths)."""
    from wash.core.provenance import command_line, cpu_description, load_average

    processes = sorted(({"kind": kind(e["command"]), "test": e["test"], "cpu_s": e["cpu_s"]}
                        for e in seen.values()), key=lambda e: -e["cpu_s"])
    by_kind, count, by_test = Counter(), Counter(), Counter()
    for p in processes:
        by_kind[p["kind"]] += p["cpu_s"]
        count[p["kind"]] += 1
        if p["kind"] != "pytest worker" and p["test"]:
            by_test[p["test"]] += p["cpu_s"]
        p["cpu_s"] = round(p["cpu_s"], 2)
    return {"command": command_line(["python", "-m", "tools.suite_cpu", "--", *command]), "returncode": returncode,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": cpu_description(),
            "load_average_end": load_average(), "total_cpu_s": round(sum(by_kind.values()), 1),
            "by_kind": [{"kind": k, "cpu_s": round(v, 1), "processes": count[k]} for k, v in by_kind.most_common()],
            "started_by_test": [{"test": t, "cpu_s": round(v, 1)} for t, v in by_test.most_common()],
            "processes": processes}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m tools.suite_cpu [--out FILE] [--every S] -- COMMAND ...", file=sys.stderr)
        return 2
    at = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m tools.suite_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="the JSON written (default: printed)")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between readings of /proc")
    args = parser.parse_args(argv[:at])
    command = argv[at + 1:]
    returncode, seen = sample(command, args.every)
    report = summary(command, returncode, seen)
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    for row in report["by_kind"][:12]:
        print(f"{row['cpu_s']:9.1f} CPU-s {row['processes']:4d} x {row['kind']}", file=sys.stderr)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
