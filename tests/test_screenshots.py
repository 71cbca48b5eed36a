"""``python -m tools.screenshots``: its file names and arguments, and a run on the tiny models.

The script writes the README's screenshot and one picture per tab of the page (docs/SCREENSHOTS.md).
The fast tests pin how a tab's label becomes a file name and what the arguments default to; the
browser test runs the script's ``main`` end to end, in the test's process, on the tiny models into a
temporary folder and checks that every tab the page offers got a non-empty PNG of the viewport's
width, and nothing else did.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tools.screenshots import FIGURES, README_SHOT, ROOT, parse_args, tab_filename, tab_files

#: The tabs the page has today; a tab added later must get its picture too (the run finds it by itself).
KNOWN_TABS = {"Generate", "Detect", "Identify", "Results", "Theory", "About"}


@pytest.mark.parametrize("label, name", [
    ("Generate", "tab-generate.png"),
    ("Lesson", "tab-lesson.png"),
    ("  Is this model watermarked? ", "tab-is-this-model-watermarked.png"),
    ("Théorie 2", "tab-theorie-2.png"),
    ("Step 1 / 5: N = 3", "tab-step-1-5-n-3.png"),
])
def test_tab_labels_become_file_names(label, name):
    assert tab_filename(label) == name


def test_a_label_without_letters_and_two_labels_for_one_file_are_refused():
    with pytest.raises(ValueError, match="no letter or digit"):
        tab_filename("★ ?")
    with pytest.raises(ValueError, match="distinct file names"):
        tab_files(["Results", "results!"])
    assert tab_files(["Generate", "Lesson"]) == {"Generate": "tab-generate.png", "Lesson": "tab-lesson.png"}


def test_arguments_default_to_the_repository_and_a_fixed_run():
    args = parse_args([])
    assert (args.out_dir, args.preset, args.prompt, args.seed) == (ROOT, 0, 1, 2)
    assert (args.tokens, args.profile) == (64, "open")
    assert (args.width, args.port, args.skip, args.models, args.probe) == (1280, 0, [], "", "fast")
    assert args.url == ""
    args = parse_args(["--out-dir", "out/x", "--tokens", "8", "--skip", "Identify", "--skip", "Theory",
                       "--models", "tiny-smollm2,tiny-gemma3", "--port", "7961"])
    assert (args.out_dir, args.tokens, args.port) == (Path("out/x"), 8, 7961)
    assert (args.skip, args.models) == (["Identify", "Theory"], "tiny-smollm2,tiny-gemma3")
    for bad in (["--tokens", "0"], ["--prompt", "-1"], ["--profile", "fast"], ["--seed", "x"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.mark.browser
def test_a_run_on_the_tiny_models_writes_one_png_per_tab(tmp_path, served_tiny_app, capsys):
    # the script's main, in this process, against the app this test process serves on the tiny models
    # (``--url``): starting one is test_app_live's
    from tools.screenshots import main

    main(["--url", served_tiny_app[0], "--out-dir", str(tmp_path), "--tokens", "8", "--skip", "Identify",
          "--timeout", "240"])
    report = json.loads(capsys.readouterr().out)
    assert report["command"].startswith("python -m tools.screenshots --url ")  # this run's arguments, not pytest's
    assert KNOWN_TABS <= set(report["tabs"]), report["tabs"]
    assert report["generate"]["status"].startswith("Done: 8 tokens")
    written = sorted(p.name for p in (tmp_path / FIGURES).iterdir())
    assert written == sorted(tab_filename(label) for label in report["tabs"])
    for path in [tmp_path / README_SHOT, *(tmp_path / FIGURES).iterdir()]:
        width, height = _png_size(path)
        assert width == 1280 and height > 300, (path.name, width, height)
        assert 10_000 < path.stat().st_size < 400 * 1024, (path.name, path.stat().st_size)
