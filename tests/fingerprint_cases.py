"""Seeded generations across every mode, reduced to hashes: the engine's behaviour in a few lines.

``tests/test_fingerprint.py`` runs every case of ``CASES`` on the tiny models (real
tokenizers) and compares its hashes with ``tests/fingerprint.json``, written from
the engine before a refactoring started. A refactoring that changes no result keeps
every hash. Three hashes per case:

* ``text``: the final text (UTF-8);
* ``events``: every event the run yields, in order, with what it reports (tokens,
  routing, candidates and their probabilities under every distribution, ‖p̄ − p*‖∞,
  entropies, live z, re-synchronisations, rewrite attempts), then the result
  (per-model ids, token records, spans, detection, finish reason, recorded settings
  and a baseline's counts); wall-clock times and machine settings are left out;
* ``draws``: every full distribution a token was drawn from (the cumulative sums
  ``wash.engine.sampling.sample`` searches, and any scheme's own ``torch.searchsorted``
  over a CDF), each hashed bit for bit; as a sorted multiset, since the eager
  step's models compute on their own threads in no fixed order.

Floats are written exactly (``repr``), so ``events``, ``draws`` and an
identification's hash pin bits, not roundings, and those bits hold for one torch
build on one kind of CPU: an AMD EPYC and an Intel Xeon, both running torch
2.13.0's CPU wheel, give every case the same text and number of draws but different
last bits in the probabilities. So ``fingerprint.json`` keeps the ``PORTABLE`` parts
(text, number of draws) once, checked on every machine, and the bit-level parts per
``platform()`` (CPU vendor and the instruction set torch dispatches to, torch
version), checked where that platform is recorded. The test pins one torch thread
per model (``WASH_THREADS_PER_MODEL=1``) so a machine's core count does not enter.

After an intended change of behaviour, rewrite the file on every recorded platform
(``--write`` replaces this platform's entry and the portable parts, and drops the
other platforms' entries, which no longer describe the engine); on a new kind of
machine, add its entry (``--add-platform`` checks the portable parts first)::

    PYTHONPATH=. OMP_NUM_THREADS=1 python tests/fingerprint_cases.py --write
    PYTHONPATH=. OMP_NUM_THREADS=1 python tests/fingerprint_cases.py --add-platform
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import torch

import wash.baselines  # noqa: F401  the baseline modes register on import, as in the API and CLI

EXPECTED = Path(__file__).with_name("fingerprint.json")
#: The parts of a case's fingerprint that hold on every machine; the rest pin float bits.
PORTABLE = ("text", "n_draws")


def platform() -> str:
    """The kind of machine float bits depend on: CPU vendor, torch's CPU dispatch level, torch version."""
    vendor = "unknown-vendor"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                vendor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{vendor} {torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}"


def split(found: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """A run's fingerprints as (portable parts, this platform's bit-level parts), case by case."""
    portable = {n: {k: v for k, v in h.items() if k in PORTABLE} for n, h in found.items()}
    bits = {n: {k: v for k, v in h.items() if k not in PORTABLE} for n, h in found.items()}
    return {n: h for n, h in portable.items() if h}, bits


def expected(name: str, recorded: dict, where: str | None = None) -> tuple[dict, dict | None]:
    """Case ``name``'s recorded portable parts, and its bit-level parts on ``where`` (this platform by
    default; ``None`` when that platform has no entry)."""
    entry = _entry(recorded["platforms"], where or platform())
    return recorded["portable"].get(name, {}), entry.get(name) if entry is not None else None


def _entry(platforms: dict[str, dict], where: str) -> dict | None:
    """``where``'s entry; else one recorded before the dispatch level was (``"<vendor> *, torch <v>"``)."""
    if where in platforms:
        return platforms[where]
    vendor, rest = where.split(" ", 1)
    torch_version = rest.split(", ", 1)[1]
    return platforms.get(f"{vendor} *, {torch_version}")


def check(name: str, found: dict, recorded: dict) -> None:
    """Assert ``found`` against the record: the portable parts always, the bits where this platform is
    recorded (else a skip that says how to record it: a new kind of CPU is not a change of behaviour)."""
    import pytest

    portable, bits = expected(name, recorded)
    mine_portable, mine_bits = split({name: found})
    assert mine_portable.get(name, {}) == portable, f"{name}: text or number of draws changed"
    if bits is None:
        pytest.skip(f"no bit-level fingerprint recorded for {platform()} (recorded: "
                    f"{', '.join(recorded['platforms'])}); add one with "
                    "`python tests/fingerprint_cases.py --add-platform`")
    assert mine_bits[name] == bits, f"{name}: float bits changed on {platform()}"
PROMPT = "The committee met on Tuesday to discuss"
MIXED = ["tiny-smollm2:kgw:1", "tiny-gemma3:kgw:2", "tiny-smollm2:unigram:3"]
#: Three schemes of three families (green list, sampling, distribution-preserving reweighting),
#: one coordinated, across the two tokenizers.
SCHEMES = ["tiny-smollm2:kgw:11", "tiny-gemma3:aar:12", "tiny-smollm2:dipmark:13:coordinated=true"]

#: name -> (GenerationConfig fields, environment). Every mode, both forwards, a routed
#: case across the two tokenizers, a robust aggregation rule, and each baseline.
CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "wash-eager": (dict(providers=MIXED, mode="wash", max_new_tokens=32, seed=3), {}),
    "wash-eager-schemes": (dict(providers=SCHEMES, mode="wash", max_new_tokens=24, seed=5), {}),
    "wash-eager-paper-profile": (dict(providers=MIXED, mode="wash", max_new_tokens=16, seed=1, top_k=10,
                                      min_new_tokens=16), {}),
    "wash-lazy": (dict(providers=MIXED, mode="wash", max_new_tokens=32, seed=3, forwards="lazy"), {}),
    "wash-lazy-one-thread": (dict(providers=MIXED, mode="wash", max_new_tokens=24, seed=4, forwards="lazy"),
                             {"WASH_PARALLEL_FORWARDS": "0"}),
    "wash-reencode": (dict(providers=MIXED, mode="wash", max_new_tokens=12, seed=2,
                           reencode_every_step=True), {}),
    "wash-median-clip": (dict(providers=SCHEMES, mode="wash", max_new_tokens=24, seed=5,
                              aggregate="median-clip:xi=0.5"), {}),
    "wash-geo-clip": (dict(providers=MIXED, mode="wash", max_new_tokens=16, seed=6, aggregate="geo-clip"), {}),
    "naive": (dict(providers=MIXED, mode="naive", max_new_tokens=24, seed=3), {}),
    "single": (dict(providers=MIXED, mode="single", max_new_tokens=24, seed=3), {}),
    "single-lazy": (dict(providers=SCHEMES[1:], mode="single", max_new_tokens=16, seed=7, forwards="lazy"), {}),
    "unwatermarked": (dict(providers=MIXED, mode="unwatermarked", max_new_tokens=24, seed=3), {}),
    "unwatermarked-lazy": (dict(providers=MIXED, mode="unwatermarked", max_new_tokens=16, seed=8,
                                forwards="lazy"), {}),
    "toblend": (dict(providers=MIXED, mode="toblend", max_new_tokens=20, seed=3,
                     baseline_options="block=3,lookahead=2"), {}),
    "toblend-round-robin": (dict(providers=SCHEMES, mode="toblend", max_new_tokens=12, seed=9,
                                 baseline_options="block=2,select=round-robin"), {}),
    "demark": (dict(providers=["tiny-smollm2:kgw:21"], mode="demark", max_new_tokens=6, seed=3,
                    baseline_options="k=4,words=6,max_h=2"), {}),
    "demark-black": (dict(providers=["tiny-gemma3:unigram:22"], mode="demark", max_new_tokens=4, seed=3,
                          baseline_options="k=3,access=black,samples=3,h=1,delta=2"), {}),
    "randomwalk": (dict(providers=MIXED, mode="randomwalk", max_new_tokens=16, seed=3,
                        baseline_options="steps=6,span=2,patience=2,rewriter=tiny-smollm2,judge=tiny-gemma3"),
                   {}),
}

#: name -> (providers, probe mode, ``wash.detection.identification.Probe`` fields): identification under every
#: probe mode, both procedures, the mean and a robust rule, across the two tokenizers.
IDENTIFY_CASES: dict[str, tuple[list[str], str, dict[str, Any]]] = {
    "identify-v1-wash": (SCHEMES, "wash", dict(contexts=4, samples=40, runs=2, seed=5)),
    "identify-v1-single": (["tiny-gemma3:waterbag:31"], "single", dict(contexts=3, samples=30, runs=2, seed=1)),
    "identify-v1-median-clip": (MIXED, "wash", dict(contexts=3, samples=30, runs=2, seed=2,
                                                     aggregate="median-clip")),
    "identify-v2-wash": (MIXED, "wash", dict(version="v2", samples=40, runs=2, min_count=1, seed=3)),
    "identify-v2-unwatermarked": (MIXED, "unwatermarked", dict(version="v2", samples=30, runs=2, min_count=1,
                                                               seed=4, serving="paper")),
    "identify-v2-cap": (SCHEMES, "wash", dict(version="v2", samples=30, runs=2, min_count=1, seed=6,
                                              aggregate="cap:xi=0.5")),
    # per-generation states: keyed point masses (read per state) beside a sampled stateful law
    "identify-v2-stateful": (["tiny-smollm2:exp-edit:21", "tiny-gemma3:its-edit:22", "tiny-smollm2:waterbag:23"],
                             "wash", dict(version="v2", samples=40, runs=2, min_count=1, seed=7)),
}

#: Keys of a result's settings (and a baseline's counts) that depend on the clock or the
#: process history, not on the seed.
_VOLATILE = ("code", "parallel_forwards", "threads_per_model", "cached")


def _volatile(key: str) -> bool:
    """Wall-clock times (``*_s``, ``*_ms``, ``*_s_per_token``, ``seconds``, ``timing``) and ``_VOLATILE``."""
    return (key.endswith(("_s", "_ms", "_s_per_token")) or key in ("seconds", "timing")
            or key in _VOLATILE)


def _stable(value: Any) -> Any:
    """``value`` as JSON-able data without what varies from run to run (``_volatile`` keys)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in value.items()
                if not _volatile(str(k))}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, torch.Tensor):
        return _stable(value.tolist())
    return value


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:16]


class _Draws:
    """Records a hash of every tensor ``torch.searchsorted`` searches (the full CDF of a draw)."""

    def __init__(self) -> None:
        self.hashes: list[str] = []
        self._lock = threading.Lock()
        self._original = torch.searchsorted

    def __enter__(self) -> "_Draws":
        original = self._original

        def searchsorted(sorted_sequence, *args, **kwargs):
            if isinstance(sorted_sequence, torch.Tensor):
                data = sorted_sequence.detach().cpu().contiguous()
                h = hashlib.sha256(str(data.dtype).encode() + data.numpy().tobytes()).hexdigest()[:16]
                with self._lock:
                    self.hashes.append(h)
            return original(sorted_sequence, *args, **kwargs)

        torch.searchsorted = searchsorted
        return self

    def __exit__(self, *exc) -> None:
        torch.searchsorted = self._original


def run_case(name: str) -> dict[str, str]:
    """One case's three hashes (see the module docstring)."""
    from wash.engine.config import GenerationConfig, ProviderSpec
    from wash.engine.ensemble import generate_stream
    from wash.engine.events import FinishedEvent, LoadEvent

    fields, env = CASES[name]
    fields = dict(fields, providers=[ProviderSpec.parse(s) for s in fields["providers"]], prompt=PROMPT)
    saved = {k: os.environ.get(k) for k in ("WASH_PARALLEL_FORWARDS", "WASH_THREADS_PER_MODEL")}
    os.environ.update({"WASH_PARALLEL_FORWARDS": "1", "WASH_THREADS_PER_MODEL": "1", **env})
    try:
        events: list[Any] = []
        text = None
        with _Draws() as draws:
            for event in generate_stream(GenerationConfig(**fields)):
                if isinstance(event, LoadEvent):
                    continue  # loading messages depend on what the process loaded before
                if isinstance(event, FinishedEvent):
                    text = event.result.text
                events.append([type(event).__name__, _stable(event)])
        assert text is not None
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"text": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16], "events": _digest(events),
            "draws": _digest(sorted(draws.hashes)), "n_draws": len(draws.hashes)}


def run_identify_case(name: str) -> dict[str, str]:
    """One identification's hash: everything it reports but its time and its count of fresh forwards."""
    from wash.engine.config import ProviderSpec
    from wash.detection.identification import Probe, identify

    specs, mode, probe = IDENTIFY_CASES[name]
    found = identify([ProviderSpec.parse(s) for s in specs], mode, Probe(**probe)).to_dict()
    found.pop("forwards")  # rows an earlier probe of the process left are reused
    return {"identification": _digest(_stable(found))}


def run_all() -> dict[str, dict[str, str]]:
    return {**{name: run_case(name) for name in CASES},
            **{name: run_identify_case(name) for name in IDENTIFY_CASES}}


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    found = run_all()
    portable, bits = split(found)
    if "--write" in sys.argv:
        record = {"portable": portable, "platforms": {platform(): bits}}
    elif "--add-platform" in sys.argv:
        record = json.loads(EXPECTED.read_text())
        if portable != record["portable"]:
            changed = sorted(n for n in portable if portable[n] != record["portable"].get(n))
            sys.exit(f"the portable parts differ from the record ({', '.join(changed)}): the engine's "
                     "behaviour changed, not only the machine; nothing written")
        record["platforms"][platform()] = bits
    else:
        print(json.dumps({"platform": platform(), **found}, indent=1, sort_keys=True))
        sys.exit(0)
    EXPECTED.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {EXPECTED} ({', '.join(record['platforms'])})")
