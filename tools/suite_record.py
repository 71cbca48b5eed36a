"""pytest plugin: append this run of the suite to the committed record ``docs/test-suite.json``.

    python -m pytest -p tools.suite_record --suite-record docs/test-suite.json -n 2 --dist worksteal

Why: the docs state how many tests the suite has and how long it takes, and a number
typed by hand in several places goes stale as tests are added. ``wash.publish.facts`` writes
those sentences (the ``tests`` block) from this record alone; after a full run,
``python -m wash.publish.facts --write`` updates every page that quotes them.

A run records the code (``wash.core.version.git_commit``), date, command, xdist workers,
tests passed and failed, pytest's own seconds, the machine's kind, the load average at
the start and the end, and the 15 slowest phases. It records nothing when only part of
the suite was selected (``-k``, ``-m`` or named test files), since its count would not be
the suite's. Under xdist only the controller writes.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

from wash.core.provenance import command_line, cpu_description, load_average
from wash.core.version import git_commit

#: Options that select part of the suite: a run using one is not a run of the suite.
SELECTING = ("keyword", "markexpr", "lf", "deselect")


def pytest_addoption(parser) -> None:
    parser.addoption("--suite-record", metavar="FILE", default=None,
                     help="append this run (count, time, machine, load) to FILE, e.g. docs/test-suite.json")


def pytest_configure(config) -> None:
    config._suite_record_start = (time.time(), load_average())


def _whole_suite(config) -> bool:
    """Whether the run selected the whole suite: no -k, -m, --lf or --deselect, and no paths but the
    configured ``testpaths`` (or the root directory)."""
    import pytest

    if any(config.getoption(name, None) for name in SELECTING):
        return False
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return True
    root = Path(config.rootpath)
    whole = [root / p for p in config.getini("testpaths")] or [root]
    return sorted(Path(a).resolve() for a in config.args) == sorted(p.resolve() for p in whole)


def _loads(values: list[float] | None) -> str:
    return ", ".join(f"{v:.2f}" for v in values) if values else "not available"


def run_record(config, stats: dict, seconds: float, load_at_start) -> dict:
    """The record of one run from the terminal reporter's ``stats``."""
    def count(key: str) -> int:  # as pytest's own summary line counts
        return len(stats.get(key, []))

    phases = [r for reports in stats.values() for r in reports
              if hasattr(r, "duration") and hasattr(r, "nodeid") and getattr(r, "when", None)]
    slowest = sorted(phases, key=lambda r: r.duration, reverse=True)[:15]
    return {
        "code": git_commit(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command_line(["python", "-m", "pytest", *config.invocation_params.args]),
        "what": "pytest alone (an installed venv)",
        "workers": config.getoption("numprocesses", None) or 0,
        "passed": count("passed"),
        "failed": count("failed") + count("error"),
        "skipped": count("skipped"),
        "pytest_s": round(seconds, 2),
        "total_s": None,
        "machine": cpu_description(),
        "load": f"load average (1, 5, 15 min) {_loads(load_at_start)} at the start, {_loads(load_average())} at "
                "the end",
        "slowest": [[round(r.duration, 2), r.when, r.nodeid] for r in slowest],
        "recorded_by": "tools.suite_record",
    }


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    target = config.getoption("suite_record")
    if not target or hasattr(config, "workerinput"):
        return
    if not _whole_suite(config):
        terminalreporter.write_line(f"suite_record: part of the suite was selected; nothing added to {target}")
        return
    started, load_at_start = config._suite_record_start
    record = run_record(config, terminalreporter.stats, time.time() - started, load_at_start)
    path = Path(target)
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    data["runs"].append(record)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    terminalreporter.write_line(f"suite_record: {record['passed']} passed, {record['failed']} failed in "
                                f"{record['pytest_s']} s, added to {target}")
