"""The ray backend: members as Ray actors, on the tiny models (real tokenizers), one Ray start per module.

The backend must change where the forwards run and nothing else: a seeded run on
``ray`` reproduces the committed fingerprints of the local backend (text, every event,
every distribution a token was drawn from, bit for bit) in every WASH forwards mode,
including routed spans and re-synchronisation across two tokenizers. A member that
dies or stops answering ends the run with one error naming it, and the next run
starts a fresh actor; an unreachable cluster fails at start with one line and exit 2.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from fingerprint_cases import EXPECTED, PROMPT, check, run_case  # noqa: E402

import wash.baselines  # noqa: E402,F401 (registers the baseline modes)
from wash.engine.config import GenerationConfig, ProviderSpec  # noqa: E402
from wash.engine.ensemble import generate, generate_stream  # noqa: E402
from wash.engine.events import FinishedEvent, StepEvent  # noqa: E402
from wash.core.errors import MemberError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MIXED = ["tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2", "tiny-smollm2:unigram:3"]
_EXPECTED = json.loads(EXPECTED.read_text())


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local Ray cluster for the module, left again at its end."""
    from wash.engine import ray_members

    saved = os.environ.get("WASH_THREADS_PER_MODEL")
    os.environ["WASH_THREADS_PER_MODEL"] = "1"  # the fingerprints' setting, also in the actors
    ray_members.connect()
    yield
    ray_members.shutdown()
    if saved is None:
        os.environ.pop("WASH_THREADS_PER_MODEL", None)
    else:
        os.environ["WASH_THREADS_PER_MODEL"] = saved


def config(backend: str, n: int = 12, seed: int = 3, **fields) -> GenerationConfig:
    return GenerationConfig(providers=[ProviderSpec.parse(s) for s in MIXED], prompt=PROMPT, max_new_tokens=n,
                            seed=seed, backend=backend, **fields)


# -- the same text, the same distributions ---------------------------------------------
@pytest.mark.parametrize("name", ["wash-eager", "wash-lazy", "wash-eager-schemes", "naive", "single",
                                  "wash-eager-paper-profile", "demark"])
def test_ray_backend_reproduces_the_committed_fingerprint(name, monkeypatch):
    """Text, events and every drawn distribution, bit for bit, as the local backend made them.

    ``wash-eager`` and ``wash-lazy`` route spans across the two tokenizers (re-synchronising
    both actors); ``wash-eager-schemes`` adds a coordinated provider and a sampling scheme.
    ``demark`` probes through the actor's batched prefix-tree forwards.
    """
    monkeypatch.setenv("WASH_BACKEND", "ray")
    check(name, run_case(name), _EXPECTED)


def test_identification_on_ray_gives_the_local_statistic():
    """Every forward of the probe runs in the actors, and S, every run's score and the rest of
    the report are the local backend's (an ensemble across the two tokenizers)."""
    from wash.detection.identification import SERVED_ROWS, Probe, identify
    from wash.engine.ray_members import RayContext

    specs = [ProviderSpec.parse(s) for s in MIXED[:2]]

    def probe(backend: str) -> dict:
        SERVED_ROWS.clear()  # rows an earlier probe of this process left would be reused
        found = identify(specs, "wash", Probe(contexts=3, samples=30, runs=2, seed=2), backend=backend)
        assert found.forwards > 0 and all(isinstance(c, RayContext) == (backend == "ray")
                                          for c in SERVED_ROWS.contexts.values())
        return {k: v for k, v in found.to_dict().items() if k != "seconds"}

    try:
        local, remote = probe("local"), probe("ray")
    finally:
        SERVED_ROWS.clear()
    assert math.isfinite(local["s"]) and remote["s"] == local["s"] and remote["scores"] == local["scores"]
    assert remote == local


def test_randomwalk_takes_its_rewriter_and_judge_from_the_providers_backend():
    """A rewriter or judge that serves no provider is a Ray actor too (it rewrites in the actor's
    context and judges with the actor's per-token NLL, which the next test compares with local)."""
    from wash.baselines.randomwalk import RandomWalk
    from wash.engine.providers import build_providers
    from wash.engine.ray_members import RayMember

    pset = build_providers([ProviderSpec.parse("tiny-smollm2:kgw:1")], backend="ray")
    assert "tiny-gemma3" not in pset.members
    list(RandomWalk(rewriter="tiny-gemma3", judge="tiny-gemma3").load(config("ray"), pset))
    assert isinstance(pset.members["tiny-gemma3"], RayMember)


@pytest.mark.parametrize("statistic", ["sum", "lr-mix"])
def test_detection_with_any_statistic_runs_on_ray_and_gives_the_local_verdict(statistic):
    """The CLI's and the app's per-text detection reads each provider's model through its member,
    so a model-aware statistic (one re-reading forward per text) runs in the actors too."""
    from wash.detection.per_text import detect_text
    from wash.engine.providers import build_providers
    from wash.engine.ray_members import RayMember

    specs = [ProviderSpec.parse(s) for s in ("tiny-smollm2:kgw:1", "tiny-gemma3:synthid:2")]
    text = " The cat sat by the window and watched the rain fall on the old stone wall."
    remote_set = build_providers(specs, backend="ray")
    assert all(isinstance(p.member, RayMember) for p in remote_set.providers)
    remote = detect_text(remote_set.providers, text, statistic=statistic)
    local = detect_text(build_providers(specs, backend="local").providers, text, statistic=statistic)
    for r, lo in zip(remote, local):
        assert (r.tokens, r.tokens_scored, r.detected) == (lo.tokens, lo.tokens_scored, lo.detected)
        assert math.isclose(r.z, lo.z, rel_tol=1e-6, abs_tol=1e-6)


def test_a_texts_read_for_the_model_aware_statistics_in_an_actor_equals_local():
    import numpy as np

    from wash.detection.statistics.served_text import read_text
    from wash.engine.providers import member_of
    from wash.engine.ray_members import ray_member

    text = " The cat sat by the window and watched the rain."
    local, remote = read_text(member_of("tiny-smollm2", "local"), text), read_text(ray_member("tiny-smollm2"), text)
    assert remote.ids == local.ids and np.array_equal(remote.rows, local.rows)
    # the same forward on the actor's lane (one thread here) and in this thread: float tolerance
    assert np.allclose(remote.logits, local.logits, rtol=1e-5, atol=1e-5)


def test_perplexity_on_ray_equals_local():
    from wash.experiments.scoring import continuation_nll

    text = " The cat sat by the window and watched the rain."
    for model in ("tiny-smollm2", "tiny-gemma3"):
        local, remote = (continuation_nll(model, PROMPT, text, backend=b) for b in ("local", "ray"))
        assert remote[1] == local[1] > 0
        assert remote[0] == pytest.approx(local[0], rel=1e-6, abs=1e-6)


def test_a_routed_run_matches_local_event_by_event():
    """The per-step distributions themselves (not only their hashes), with routed spans resynced."""
    local = [e for e in generate_stream(config("local", n=20)) if isinstance(e, (StepEvent, FinishedEvent))]
    remote = [e for e in generate_stream(config("ray", n=20)) if isinstance(e, (StepEvent, FinishedEvent))]
    assert local[-1].result.routing.routed_spans > 0  # the case exercises routing and resync
    assert local[-1].result.text == remote[-1].result.text
    assert local[-1].result.model_ids == remote[-1].result.model_ids
    assert remote[-1].result.timing.backend == "ray"
    steps_l, steps_r = local[:-1], remote[:-1]
    assert [e.token for e in steps_l] == [e.token for e in steps_r]
    assert [e.average_probs for e in steps_l] == [e.average_probs for e in steps_r]
    assert [e.provider_probs for e in steps_l] == [e.provider_probs for e in steps_r]
    # the actors fed what the local contexts fed, in the same chunks
    assert local[-1].result.timing.forward_calls == remote[-1].result.timing.forward_calls
    assert local[-1].result.timing.ids_fed == remote[-1].result.timing.ids_fed


def test_top_k_shipping_gives_the_text_and_distributions_of_whole_rows(monkeypatch):
    """Under top-k the actors send about k rows a step; the run equals one where they send whole rows."""
    from wash.engine.served import ServedSystem

    def steps(cfg: GenerationConfig) -> list:
        return [(e.token, e.average_probs, e.provider_probs) for e in generate_stream(cfg)
                if isinstance(e, StepEvent)]

    paper = dict(n=16, seed=5, top_k=10, min_new_tokens=8)  # end of text masked, then allowed
    shipped = steps(config("ray", **paper))
    monkeypatch.setattr(ServedSystem, "served_rows", lambda self, model: None)
    assert steps(config("ray", **paper)) == shipped
    assert steps(config("local", **paper)) == shipped


def test_a_context_receives_only_the_rows_its_profile_can_keep():
    import torch

    from wash.engine.members import LocalMember
    from wash.engine.models import load_model
    from wash.engine.ray_members import ray_member
    from wash.engine.sampling import ServedRows, process_logits

    remote, local = ray_member("tiny-gemma3"), LocalMember(load_model("tiny-gemma3"))
    ids = local.encode_prompt(PROMPT)
    size = local.context(ids).next_logits().numel()
    none = torch.zeros(size, dtype=torch.bool)
    served = ServedRows.of([none, none], 1.0, 10)
    narrow, whole, here = remote.context(ids, served=served), remote.context(ids), local.context(ids)
    for token in (5, 17, 3):
        rows = [process_logits(c.next_logits(), none, 1.0, 1.0, 10) for c in (narrow, whole, here)]
        assert torch.equal(rows[0], rows[2]) and torch.equal(rows[1], rows[2])
        for c in (narrow, whole, here):
            c.append([token])
    assert whole.rows_received == 3 * size  # 262,144 rows a step for Gemma-3's vocabulary
    assert 3 * 10 <= narrow.rows_received <= 3 * 12  # k rows (and any tied with the k-th)


# -- faults ---------------------------------------------------------------------------------
def test_a_killed_actor_ends_the_run_naming_it_and_the_next_run_starts_a_fresh_one():
    from wash.engine.ray_members import ray_member

    victim = ray_member("tiny-gemma3")
    events = generate_stream(config("ray", n=20, forwards="lazy"))
    with pytest.raises(MemberError, match=r"member tiny-gemma3 \(Ray actor, pid \d+\) died"):
        for event in events:
            if isinstance(event, StepEvent) and event.step == 2:
                ray.kill(victim.actor, no_restart=True)
    fresh = ray_member("tiny-gemma3")
    assert fresh is not victim and fresh.pid != victim.pid
    assert generate(config("ray", n=8, forwards="lazy")).text == generate(config("local", n=8,
                                                                                 forwards="lazy")).text


def test_a_silent_actor_times_out_naming_it(monkeypatch):
    monkeypatch.setenv("WASH_RAY_CALL_TIMEOUT_S", "0.000001")  # no real call answers that fast
    with pytest.raises(MemberError, match=r"member tiny-\w+ .* did not answer within"):
        generate(config("ray", n=4))
    monkeypatch.delenv("WASH_RAY_CALL_TIMEOUT_S")
    assert generate(config("ray", n=4)).text == generate(config("local", n=4)).text


def test_an_unreachable_address_fails_at_start_with_one_line_and_exit_2():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WASH_BACKEND": "local"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-m", "wash", "generate", "--provider", "tiny-smollm2:kgw:1",
                          "--prompt", "hello", "--max-new-tokens", "2", "--backend", "ray:address=127.0.0.1:9"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if not line.startswith("[wash]")]
    assert errors == ["error: cannot reach the Ray cluster at 127.0.0.1:9: Connection refused"], out.stderr


def test_an_unknown_backend_is_refused_before_anything_starts():
    from wash.core.errors import WashInputError

    with pytest.raises(WashInputError, match="unknown backend 'rey' .accepted: local, ray, compiled."):
        config("rey").validate()


def test_readme_paper_size_command_is_a_valid_ray_config(monkeypatch):
    """docs/USAGE.md's "Run it at the paper's size" command parses and validates (no model loads)."""
    import re
    import shlex

    from wash.cli import build_parser
    from wash.engine.config import from_command_line

    section = (Path(__file__).resolve().parents[1] / "docs" / "USAGE.md").read_text().split(
        "### Run it at the paper's size", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    command = re.search(r"python -m wash (generate .*?)(?:\n\n|\Z)", block.replace("\\\n", " "), re.S).group(1)
    monkeypatch.setenv("WASH_ALLOW_EXTERNAL_MODELS", "1")
    config = from_command_line(build_parser().parse_args(shlex.split(command)))
    config.validate()
    assert config.backend.name == "ray" and config.backend.address == "auto"
    assert [p.model for p in config.providers] == ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B",
                                                  "/models/Ministral3-8B"]
    monkeypatch.delenv("WASH_ALLOW_EXTERNAL_MODELS")
    with pytest.raises(Exception, match="WASH_ALLOW_EXTERNAL_MODELS"):
        from_command_line(build_parser().parse_args(shlex.split(command))).validate()


def test_bench_compares_the_backends_side_by_side_on_the_tiny_models():
    """``bench --compare-backends``: every N and forwards on both backends, the overhead their difference."""
    from wash.bench.models import compare_backends

    report = compare_backends(("tiny-smollm2", "tiny-gemma3"), tokens=3, rounds=2)
    assert [(r["forwards"], r["n"]) for r in report["wash"]] == [(f, n) for f in ("eager", "lazy")
                                                                  for n in (2, 3, 5)]
    for row in report["wash"] + report["plain_decode"]:
        assert row["local_ms"] > 0 and row["ray_ms"] > 0
    for row in report["wash"]:
        assert len(row["local_ms_rounds"]) == len(row["ray_ms_rounds"]) == 2
        diffs = sorted(b - a for a, b in zip(row["local_ms_rounds"], row["ray_ms_rounds"]))
        assert row["ray_overhead_ms"] == pytest.approx(sum(diffs) / 2)
    # the paper's top-k, where the actors send only the rows it keeps: plain decodes and N = 3
    assert [r["what"] for r in report["top_k_rows_shipped"]] == ["plain tiny-smollm2", "plain tiny-gemma3",
                                                                 "WASH N=3 eager", "WASH N=3 lazy"]
    assert all(r["local_ms"] > 0 and r["ray_ms"] > 0 for r in report["top_k_rows_shipped"])


_THREAD_STARTED_CLUSTER = """
import threading, time, ray
from wash.engine.ray_members import connect
t = threading.Thread(target=connect)
t.start(); t.join()  # the app starts Ray from its preload thread, which then ends

@ray.remote
class Echo:
    def ping(self):
        return "pong"

echo = Echo.remote()
time.sleep(3)  # the cluster dies as its spawning thread ends (parent-death signal): at once, not later
print(ray.get(echo.ping.remote(), timeout=30))
"""


def test_a_cluster_started_from_a_thread_outlives_the_thread():
    """Ray ties its GCS and raylet to the spawning thread: when it ended, the cluster died and took the app."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-c", _THREAD_STARTED_CLUSTER], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0 and done.stdout.strip().endswith("pong"), done.stderr[-2000:]
