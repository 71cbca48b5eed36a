"""Facts listed in the docs are generated from what defines or measured them: the README's scheme
and mode tables, the suite's size and CI time, the app's memory and ``wash.ui``'s module list stay
in sync with their sources."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wash.publish import facts

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name,file", [(n, f) for n in sorted(facts.BLOCKS) for f in facts.files_holding(n)])
def test_each_generated_block_is_what_its_source_says(name, file):
    assert facts.written(name, file) == facts.BLOCKS[name](), (
        f"{file}'s '{name}' block is stale (or missing): run python -m wash.publish.facts --write")


def test_the_written_tables_list_every_scheme_and_mode_the_command_line_accepts():
    """The docs' tables as written hold a row for each scheme and mode a user can type: those of
    a fresh process that imported the CLI alone (its ``--mode`` choices; the package's schemes).
    A mode the tables' builder does not register (the baselines register themselves on import)
    or a scheme its filter drops leaves the table short of what the CLI accepts."""
    code = ("import json, argparse, wash.cli; from wash.engine.config import add_generate_arguments; "
            "from wash.watermarks import SCHEMES; p = argparse.ArgumentParser(); add_generate_arguments(p); "
            "modes = next(a.choices for a in p._actions if a.dest == 'mode'); "
            "print(json.dumps([list(modes), list(SCHEMES)]))")
    modes, schemes = json.loads(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                                               text=True, check=True).stdout)
    assert {"wash", "toblend"} <= set(modes) and {"kgw", "aar"} <= set(schemes)
    for name, rows in (("modes", modes), ("schemes", schemes)):
        for file in facts.files_holding(name):
            table = facts.written(name, file)
            assert table is not None, (name, file)
            missing = [row for row in rows if f"| `{row}` |" not in table]
            assert not missing, f"{file}'s {name} table has no row for {missing}"


def test_the_scheme_table_says_synthid_is_no_point_mass():
    """One answer everywhere: SynthID's p_i is the tournament's full law (``point_mass = False``)."""
    row = next(line for line in facts.schemes().splitlines() if line.startswith("| `synthid` |"))
    assert row.endswith("| full distribution |")


def test_each_ui_module_has_its_own_docstring_in_the_package_list():
    """Every helper module opens with a docstring, and the list quotes its first line (read by
    Python, not by the list's own parser): a module without one fails here."""
    import wash.ui

    for path in sorted(Path(wash.ui.__file__).parent.glob("*.py")):
        if path.name == "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc and doc.splitlines()[0].strip(), f"wash/ui/{path.name} has no docstring"
        assert f"* ``{path.stem}``: {doc.splitlines()[0]}" in wash.ui.__doc__, path.stem


def _run(passed: int = 10, failed: int = 0, code: str = "abc1234", **extra) -> dict:
    return {"code": code, "date": "2026-11-27 10:00 UTC", "command": "bash .ci/run", "what": "a fresh clone",
            "workers": 2, "passed": passed, "failed": failed, "pytest_s": 600, "total_s": 720,
            "machine": "Linux x86_64, 2 logical CPUs (AMD EPYC)", "load": "0.5", **extra}


def test_the_tests_block_quotes_the_newest_codes_runs(tmp_path):
    record = tmp_path / "suite.json"
    record.write_text(json.dumps({"runs": [_run(900, code="old0000"), _run(), _run(pytest_s=660, total_s=780)]}))
    text = facts.tests(record)
    assert text.startswith("At code abc1234, in each of 2 runs of `bash .ci/run` (a fresh clone): "
                           "**10 tests passed**; it took 12.0 min (pytest 600 s) and 13.0 min (pytest 660 s)")
    assert "900" not in text and "AMD EPYC" in text
    record.write_text(json.dumps({"runs": [_run(10), _run(11)]}))
    with pytest.raises(ValueError, match="disagree"):
        facts.tests(record)


def test_the_runs_table_lists_every_recorded_run_newest_first(tmp_path):
    record = tmp_path / "suite.json"
    record.write_text(json.dumps({"runs": [_run(900, code="old0000", load="busy"),
                                           _run(8, failed=2, total_s=None, code="new1111")]}))
    rows = facts.suite_runs(record).splitlines()[2:]
    assert rows == ["| 2026-11-27 10:00 | new1111 | 2 | not recorded | 600 s | 8 passed, 2 failed | 0.5 |",
                    "| 2026-11-27 10:00 | old0000 | 2 | 12.0 min (720 s) | 600 s | 900 passed | busy |"]


def test_a_run_of_the_suite_appends_its_count_to_the_record(tmp_path):
    """``tools.suite_record`` on a small suite of its own: the record's counts are pytest's."""
    (tmp_path / "test_small.py").write_text(
        "import pytest\n\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n\n"
        "@pytest.mark.skip(reason='x')\ndef test_c():\n    pass\n")
    record = tmp_path / "record.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "pytest", "-p", "tools.suite_record", "--suite-record", str(record),
            "-p", "no:randomly", "-p", "no:cacheprovider", "-q"]
    done = subprocess.run(base, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads(record.read_text())["runs"][-1]
    assert (run["passed"], run["failed"], run["skipped"]) == (2, 0, 1)
    assert run["recorded_by"] == "tools.suite_record" and run["pytest_s"] >= 0 and len(run["slowest"]) >= 2
    assert "**2 tests passed**, 1 skipped" in facts.tests(record)
    # part of the suite is not the suite: nothing is added
    done = subprocess.run([*base, "-k", "test_a"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and len(json.loads(record.read_text())["runs"]) == 1


def _soak(backend: str, ready: float, end: float, failed: int = 0) -> dict:
    return {"backend": backend, "requests_ok": 10, "requests_failed": failed, "clients": 16, "seconds": 600,
            "elapsed_s": 660.0, "rss_mb": {"end": end, "samples_every_30s": [[0.0, ready], [30.0, ready + 5]]}}


def test_the_memory_block_reads_the_soaks_that_served_every_request(tmp_path):
    (tmp_path / "docs").mkdir()
    for name, soak in {"a": _soak("local", 2500.4, 2700.2), "b": _soak("local", 2541.0, 2862.0),
                       "c": _soak("local", 100.0, 9999.0, failed=3), "d": _soak("ray", 4879.3, 5506.1)}.items():
        (tmp_path / "docs" / f"soak-{name}.json").write_text(json.dumps(soak))
    text = facts.app_memory(tmp_path)
    assert ("* `--backend local`: 2,500 to 2,541 MB once ready; 2,700 to 2,862 MB after 10 min of 16 clients "
            "(2 soaks: `docs/soak-a.json`, `docs/soak-b.json`).") in text
    assert "* `--backend ray`: 4,879 MB once ready; 5,506 MB after 10 min of 16 clients" in text
    assert "9,999" not in text and "soak-c" not in text
