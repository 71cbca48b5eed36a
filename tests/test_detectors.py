"""Detectors: calibrated on looping text, coordinated detection independent of the
providers named, and the ``biased`` experiment's lists shared across base models.

What is checked, and why it could fail:

* looping text: small models loop, and a detector that scores a repeated (context,
  token) pair again counts a copy of evidence it already has. For EVERY registered
  scheme, natural English spans (the real SmolLM2 tokenizer) repeated back to back
  (``wash.detection.null.LOOPS``: 40 tokens x 5, 12 x 16, 100 x 2), each of 50
  spans scored with its own key (fixed seeds): none of 50 above z = 4 (a calibrated
  detector passes with probability 1 - 50 x 3e-5) and a null sd under 1.35 per
  construction. Before the shared ``skip_repeated`` rule KGW had 12 of these 50 above
  z = 4 on the 12-token loop (sd 4.0), Water-Bag 42 (19 and 82 of 100); the all-pairs
  count (``skip_repeated=false``) is checked to fail here, so the test has power.
  50 keys rather than 100 halve the cost and keep that power: the failures it guards
  against put a fifth or more of the keys above z = 4, and 50 keys estimate the sd
  to about 0.1. The permutation tests run with 20 random keys and a 105-long key
  sequence to stay fast (the same code; docs/DETECTORS.md has the defaults). The
  WASH release's detectors (``detector=release``) and ITS-Edit's shared permutation
  are held to the same limits.
* coordinated detection: a coordinated provider's z on a fixed text is the same
  whether the CLI names it alone or beside another model's provider, once the
  generation's model set is given (``--models``, or ``--run`` reading a run JSON,
  with or without its ``settings["models"]``), and equals the z the generation
  itself reported; the Detect tab's ``detect`` likewise.
* biased experiment: its providers (``biased._specs``) are coordinated, and two
  ``biased-kgw`` providers with the same key on different base models promote the
  same token strings; without coordination the same key gives unrelated lists.
Tiny random models around the real tokenizers stand in for the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from wash.detection.null import KEY_BASE, LOOPS, Loop, Row, english_ids, looping_texts, null_zs, registered_schemes

pytestmark = pytest.mark.usefixtures("single_thread")

KEYS = 50
#: The permutation tests' cost grows with both; their null calibration does not depend on them.
FAST_EDIT = {"n_permutations": "20", "keylen": "105"}
TEXT = ("The old lighthouse keeper climbed the stairs one last time, and as the storm rolled in "
        "over the harbour he began to tell the children the story of the ship that never came home.")


# -- looping text --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def loops() -> tuple[int, dict]:
    from wash.engine.models import load_tokenizer

    ids = english_ids("smollm2")
    return len(load_tokenizer("smollm2")), {loop: looping_texts(ids, loop, KEYS) for loop in LOOPS}


#: Schemes whose detectors (ours and the release's) read one alignment per text
#: (``keyseq.edit_verdict``). ITS-Edit's release detector is a test of its own.
ONE_ALIGNMENT = ("exp-edit",)


@pytest.fixture(scope="module")
def alignments(loops):
    """``get(name, params)``: the alignment of looping text i with key KEY_BASE + i, per loop, computed
    once for every ``detector`` (the alignment does not read it; checked in
    ``test_both_exp_edit_detectors_read_one_alignment``)."""
    from wash.watermarks import build_scheme
    from wash.watermarks.keyseq import align_edit

    vocab_size, texts = loops
    done: dict[tuple, dict] = {}

    def get(name: str, params: dict[str, str]) -> dict:
        key = (name, tuple(sorted((k, v) for k, v in params.items() if k != "detector")))
        if key not in done:
            done[key] = {loop: [align_edit(build_scheme(name, KEY_BASE + i, vocab_size, params), t)
                                for i, t in enumerate(texts[loop])] for loop in LOOPS}
        return done[key]

    return get


def _rows(name: str, params: dict[str, str], loops: tuple[int, dict], alignments) -> list[Row]:
    from wash.watermarks import build_scheme
    from wash.watermarks.keyseq import edit_verdict

    vocab_size, texts = loops
    if name not in ONE_ALIGNMENT:
        return [Row.of(name, loop.label, null_zs(name, params, texts[loop], vocab_size), 0.0, params)
                for loop in LOOPS]
    return [Row.of(name, loop.label, [edit_verdict(build_scheme(name, KEY_BASE + i, vocab_size, params), a).z
                                      for i, a in enumerate(alignments(name, params)[loop])], 0.0, params)
            for loop in LOOPS]


def test_both_exp_edit_detectors_read_one_alignment(loops) -> None:
    """What ``alignments`` relies on: either detector's verdict on the default scheme's alignment is
    that detector's own ``detect``."""
    from wash.watermarks import build_scheme
    from wash.watermarks.keyseq import align_edit, edit_verdict

    vocab_size, texts = loops
    t = texts[Loop(12, 16)][0][:48]  # 4 repeats: the cost grows with the square of the length
    shared = align_edit(build_scheme("exp-edit", KEY_BASE, vocab_size, FAST_EDIT), t)
    for detector in ("ours", "release"):
        scheme = build_scheme("exp-edit", KEY_BASE, vocab_size, {"detector": detector, **FAST_EDIT})
        assert edit_verdict(scheme, shared) == scheme.detect(t), detector


def test_every_registered_scheme_is_measured() -> None:
    assert {"none", "kgw", "biased-kgw", "unigram", "waterbag", "dipmark", "aar", "its-edit", "exp-edit",
            "synthid"} <= set(registered_schemes())


def test_loops_are_natural_text_repeated(loops) -> None:
    _, texts = loops
    for loop, batch in texts.items():
        assert len(batch) == KEYS and len({tuple(t) for t in batch}) == KEYS
        for t in batch:
            assert len(t) == loop.period * loop.repeats and t == t[:loop.period] * loop.repeats


@pytest.mark.parametrize("name", registered_schemes())
def test_null_on_looping_text(name: str, loops, alignments) -> None:
    params = FAST_EDIT if name in ("its-edit", "exp-edit") else {}
    for row in _rows(name, params, loops, alignments):
        print(f"{name} {row.loop}: sd {row.sd_z:.2f}, max {row.max_z:.2f}, "
              f"{row.above} of {row.keys} above z=4")
        assert row.above == 0, f"{name} on {row.loop}: {row.above} of {row.keys} keys above z = 4"
        assert row.sd_z < 1.35, f"{name} on {row.loop}: null sd of z {row.sd_z:.2f}"


#: The WASH release's detectors and ITS-Edit's shared permutation, held to the same null.
#: ``form=soft`` (aar, exp-edit) is left out: it changes generation only, and the detector
#: of a soft provider is the default one, value for value
#: (tests/test_watermarks_forms.py::test_detection_does_not_read_the_form).
#: The release's AAR test is not among them: it scores every repeat, as the release does, and fails
#: (``test_release_aar_fails_on_looping_text``).
VARIANTS = {
    "exp-edit:detector=release": ("exp-edit", {"detector": "release", **FAST_EDIT}),
    "its-edit:permutation=shared": ("its-edit", {"permutation": "shared", **FAST_EDIT}),
    "its-edit:detector=release,permutation=shared": ("its-edit", {"detector": "release", "permutation": "shared",
                                                                  **FAST_EDIT}),
    "its-edit:detector=release": ("its-edit", {"detector": "release", **FAST_EDIT}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_null_on_looping_text_release_variants(variant: str, loops, alignments) -> None:
    name, params = VARIANTS[variant]
    for row in _rows(name, params, loops, alignments):
        print(f"{variant} {row.loop}: sd {row.sd_z:.2f}, max {row.max_z:.2f}, "
              f"{row.above} of {row.keys} above z=4")
        assert row.above == 0, f"{variant} on {row.loop}: {row.above} of {row.keys} keys above z = 4"
        assert row.sd_z < 1.35, f"{variant} on {row.loop}: null sd of z {row.sd_z:.2f}"


def test_release_aar_fails_on_looping_text(loops) -> None:
    # The release's aar_detector.py scores every token, repeats included: a loop repeats its
    # scores, the empirical sd does not grow with them, and z spreads like sqrt(repeats) times
    # the loop's own (measured: sd 2.94 on the 40-token loop repeated 5 times, 50 keys; 2.31 over 100).
    vocab_size, texts = loops
    zs = np.asarray(null_zs("aar", {"detector": "release"}, texts[Loop(40, 5)], vocab_size))
    assert float(zs.std(ddof=1)) > 1.8


@pytest.mark.parametrize("name", ["kgw", "waterbag"])
def test_all_pairs_count_fails_on_looping_text(name: str, loops) -> None:
    # the peers' count (every token scored), which the default now avoids, fails the same
    # check on the tight loop (measured: 12 and 42 of the 50 keys above z = 4): the test has power
    vocab_size, texts = loops
    tight = Loop(12, 16)
    zs = np.asarray(null_zs(name, {"skip_repeated": "false"}, texts[tight], vocab_size))
    assert int((zs > 4).sum()) > 5 and float(zs.std(ddof=1)) > 1.8


# -- coordinated detection -------------------------------------------------------------------
SMOL = "tiny-smollm2:kgw:42:coordinated=true"
GEMMA = "tiny-gemma3:kgw:42:coordinated=true"
BOTH = "tiny-smollm2,tiny-gemma3"


def _cli_detect(capsys, *args: str) -> dict[str, float]:
    from wash.cli import main

    assert main(["detect", *args, "--json"]) == 0
    return {row["provider"].split(" ", 1)[1]: row["z"] for row in json.loads(capsys.readouterr().out)}


def test_coordinated_z_does_not_depend_on_the_providers_named(capsys, tiny_smollm2, tiny_gemma3) -> None:
    both = _cli_detect(capsys, "--provider", SMOL, "--provider", GEMMA, "--text", TEXT)
    alone = _cli_detect(capsys, "--provider", SMOL, "--models", BOTH, "--text", TEXT)
    other = _cli_detect(capsys, "--provider", GEMMA, "--models", "tiny-gemma3,tiny-smollm2", "--text", TEXT)
    smol, gemma = "tiny-smollm2/kgw#42 (coord.)", "tiny-gemma3/kgw#42 (coord.)"
    assert alone[smol] == both[smol] and other[gemma] == both[gemma]


def _coordinated_config():
    from wash.engine.config import GenerationConfig, ProviderSpec

    return GenerationConfig(providers=[ProviderSpec.parse(SMOL), ProviderSpec.parse(GEMMA)],
                            prompt="Once upon a time", mode="wash", max_new_tokens=24, min_new_tokens=24,
                            seed=3, live_detection=False)


@pytest.fixture(scope="module")
def coordinated_result(tiny_smollm2, tiny_gemma3):
    """A WASH run over both tiny models with two coordinated providers."""
    from wash.engine.ensemble import generate

    return generate(_coordinated_config())


@pytest.fixture(scope="module")
def coordinated_run(coordinated_result) -> dict:
    """The run as its JSON (what ``python -m wash generate --json`` prints, less its extras)."""
    return json.loads(json.dumps(coordinated_result.to_dict()))


@pytest.mark.parametrize("recorded", [True, False], ids=["settings-models", "providers-fallback"])
def test_detect_run_uses_the_generations_model_set(capsys, tmp_path: Path, coordinated_run: dict,
                                                   recorded: bool) -> None:
    run = json.loads(json.dumps(coordinated_run))
    if not recorded:  # a run JSON from before settings recorded the models
        run["settings"].pop("models", None)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    reported = {d["provider"].split(" ", 1)[1]: d["z"] for d in run["detection"]}
    assert _cli_detect(capsys, "--run", str(path)) == reported
    # one provider named against the run: still the generation's union, still its z
    gemma_only = _cli_detect(capsys, "--run", str(path), "--provider", GEMMA)
    assert gemma_only == {"tiny-gemma3/kgw#42 (coord.)": reported["tiny-gemma3/kgw#42 (coord.)"]}


def test_recorded_run_reads_the_cli_json_and_the_app_download(coordinated_run: dict) -> None:
    from wash.detection.per_text import recorded_run
    from wash.core.errors import WashInputError

    run = recorded_run(coordinated_run)
    assert run.text == coordinated_run["text"] and [str(s) for s in run.specs] == [SMOL, GEMMA]
    assert sorted(run.models) == sorted(BOTH.split(","))
    download = {"settings": {}, "events": [{"event": "step"},
                                           {"event": "finished", "result": coordinated_run}]}
    assert recorded_run(download) == run
    with pytest.raises(WashInputError, match="not a run JSON"):
        recorded_run({"text": "no providers"})


def test_detect_tab_takes_the_model_set(tiny_smollm2, tiny_gemma3, coordinated_result) -> None:
    from wash.core.errors import WashInputError
    from wash.ui.detect import detect, result_models

    choices = ["tiny-smollm2", "tiny-gemma3"]
    gemma_row = ["tiny-gemma3", "kgw", "42", "coordinated=true"]
    both = detect(TEXT, [["tiny-smollm2", "kgw", "42", "coordinated=true"], gemma_row], choices=choices)
    for models in (choices, BOTH):  # the multiselect's list, or an API caller's "m1,m2"
        alone = detect(TEXT, [gemma_row], choices=choices, models=models)
        assert (alone[0].z, alone[0].per_token) == (both[1].z, both[1].per_token)
    # without the model set the provider hashes in its own model's union: other lists
    assert detect(TEXT, [gemma_row], choices=choices, models=[])[0].per_token != both[1].per_token
    with pytest.raises(WashInputError, match="models of the generation: unknown model 'nope'"):
        detect(TEXT, [gemma_row], choices=choices, models="tiny-gemma3,nope")
    # "Send text to Detect" fills the field from the last generation
    assert sorted(result_models(coordinated_result)) == sorted(choices) and result_models(None) == []


def test_send_to_detect_passes_the_generations_models(coordinated_result) -> None:
    from wash.ui import handlers
    from wash.ui.run import WASH, RunRecord

    record = RunRecord.start(_coordinated_config(), compare=False)
    record.results[WASH] = coordinated_result
    text, table, models, _ = handlers.send_to_detect(coordinated_result.text, [["a"]], record)
    assert text == coordinated_result.text and table == [["a"]]
    assert sorted(models) == ["tiny-gemma3", "tiny-smollm2"]


# -- the biased experiment shares one list -----------------------------------------------------
def _green_by_text(provider) -> dict[bytes, bool]:
    """Each token string the provider's model spells -> whether the provider's list promotes it."""
    vocab = provider.member.vocab
    ids = list(range(vocab.size))
    mask = provider.scheme.green_mask([], None)  # context-free: one list
    scheme_ids = provider.scheme_ids(ids)
    return {vocab.token_bytes[i]: bool(mask[u]) for i, u in zip(ids, scheme_ids)
            if vocab.token_bytes[i] is not None and 0 <= u < mask.shape[0]}


def _agreement(providers) -> tuple[float, int]:
    a, b = (_green_by_text(p) for p in providers)
    shared = set(a) & set(b)
    return float(np.mean([a[t] == b[t] for t in shared])), len(shared)


def test_biased_experiment_providers_share_one_list(tiny_smollm2, tiny_gemma3) -> None:
    from wash.experiments import biased
    from wash.engine.providers import build_providers

    models = ("tiny-smollm2", "tiny-gemma3")
    specs = biased._specs("wash", 4.0, models, biased.Config(), 0, 0)
    assert {s.model for s in specs} == set(models) and len({s.key for s in specs}) == 1
    assert all(s.coordinated and s.scheme == "biased-kgw" for s in specs)
    providers = build_providers(specs[:2]).providers
    agree, shared = _agreement(providers)
    assert shared > 10_000 and agree == 1.0
    # the list is promoted: " the" gets the same +bias (or none) under both models
    logits = {p.model: torch.zeros(p.member.vocab_size) for p in providers}
    boosted = []
    for p in providers:
        the = p.member.tokenizer.encode(" the", add_special_tokens=False)
        assert len(the) == 1
        ratio = p.distribution(logits[p.model], [], 0) / torch.softmax(logits[p.model].double(), -1)
        boosted.append(bool(ratio[the[0]] > 2 * ratio[ratio > 0].min()))  # green: e^4 over red
    assert boosted[0] == boosted[1]
    # without coordination the same key hashes each model's own ids: unrelated lists
    plain = [s.__class__(model=s.model, scheme=s.scheme, key=s.key, params=s.params) for s in specs[:2]]
    agree_plain, _ = _agreement(build_providers(plain).providers)
    assert 0.4 < agree_plain < 0.6
