"""``python -m tools.suite_cpu``: a command's CPU time by kind of process, read from ``/proc``."""

from __future__ import annotations

import json
import sys

import pytest

from tools.suite_cpu import kind, main, merge

#: A child that starts a grandchild which burns about 1.5 CPU-seconds, then exits with status 3.
_FAMILY = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
           "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.5: pass']); sys.exit(3)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_grandchilds_cpu_time_is_counted_under_its_kind(tmp_path):
    out = tmp_path / "cpu.json"
    assert main(["--out", str(out), "--every", "0.2", "--", sys.executable, "-c", _FAMILY]) == 3
    report = json.loads(out.read_text())
    python_c = [p for p in report["processes"] if p["kind"] == "python -c"]
    assert len(python_c) == 2 and 1.0 <= max(p["cpu_s"] for p in python_c) <= 2.5, report["processes"]
    assert next(row for row in report["by_kind"] if row["kind"] == "python -c")["cpu_s"] >= 1.0
    assert report["total_cpu_s"] >= 1.0 and report["returncode"] == 3
    assert report["command"].startswith("python -m tools.suite_cpu -- ") and str(tmp_path) not in out.read_text()


def test_kinds_of_the_suites_processes():
    assert kind("/usr/lib/chromium/chromium --type=renderer") == "chromium"
    assert kind("/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))") == "pytest worker"
    assert kind("/v/bin/python app.py") == "python app.py"
    assert kind("/v/bin/python -m wash.experiments.cost --measure {}") == "python -m wash.experiments.cost"
    assert kind("/v/bin/python -B -c from multiprocessing.spawn import spawn_main") == "multiprocessing worker"
    assert kind("/v/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --x") == "ray"
    assert kind("/v/bin/python tools/gpu_bundle.py pack b") == "python gpu_bundle.py"
    assert kind("") == "(no command line)"


def test_a_process_read_after_it_exited_keeps_its_command_line():
    first = merge(None, 999_999_999, (1, 2.0, "/v/bin/python app.py"))  # no such pid: no test read
    assert first == {"cpu_s": 2.0, "command": "/v/bin/python app.py", "test": ""}
    again = merge(first, 999_999_999, (1, 3.5, ""))  # read again as a zombie: no command line
    assert again == {"cpu_s": 3.5, "command": "/v/bin/python app.py", "test": ""}
