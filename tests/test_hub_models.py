"""The larger hub-only models: catalog facts, where the app offers them (a GPU and the hub), the one-line
refusal elsewhere (this machine has no hub: the real condition), their presets, and a seeded WASH run of
three families on tiny random models around the real tokenizers."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from wash.content.presets import PRESETS, preset, preset_names
from wash.core.errors import WashInputError
from wash.engine.cache import hub_answers, hub_reason, missing_reason
from wash.engine.catalog import CATALOG, HUB_MODELS, OFFLINE_DEFAULTS, check_model_name, tokenizer_family
from wash.engine.config import GenerationConfig, ProviderSpec
from wash.engine.ensemble import generate
from wash.engine.models import load_model
from wash.engine.vocab import model_vocab
from wash.ui import settings


def _unreachable(name: str) -> str:
    why = hub_reason(name)
    if why is None:
        pytest.skip(f"{CATALOG[name].hub_fallback} can be had here (cached, or the hub answers)")
    return why


def test_the_catalog_has_two_instruct_models_of_two_families_from_the_hub():
    entries = [CATALOG[name] for name in HUB_MODELS]
    assert HUB_MODELS == ("qwen2.5-0.5b", "smollm2-1.7b")
    assert [e.hub_fallback for e in entries] == ["Qwen/Qwen2.5-0.5B-Instruct",
                                                 "HuggingFaceTB/SmolLM2-1.7B-Instruct"]
    assert all(e.hub_only and e.needs_gpu and e.licence == "Apache-2.0" for e in entries)
    assert all("Instruct" in e.title for e in entries)
    assert len({e.family.split()[0] for e in entries}) == 2
    assert not any(e.breaks_in_fp16 for e in entries)  # fp16 breaks Gemma 3 alone among the catalog's models
    assert [tokenizer_family(n) for n in HUB_MODELS] == ["qwen2.5-0.5b", "smollm2"]
    assert all(check_model_name(n, allow_external=False) == n for n in HUB_MODELS)


@pytest.mark.parametrize("name", HUB_MODELS)
def test_a_hub_model_is_refused_at_once_in_one_line_without_the_hub(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    why = _unreachable(name)
    assert "HF_HUB_OFFLINE=1" in why and CATALOG[name].hub_fallback in why
    start = time.perf_counter()
    with pytest.raises(WashInputError) as refused:
        load_model(name)
    assert time.perf_counter() - start < 5  # transformers' own retries take about a minute
    message = str(refused.value)
    assert "\n" not in message and message == f"model '{name}' cannot load here: {missing_reason(name)}"


def test_an_unreachable_hub_is_probed_not_retried(monkeypatch):
    """With ``HF_HUB_OFFLINE`` unset the probe asks the hub itself; here it does not answer."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    why = _unreachable("qwen2.5-0.5b")
    assert "does not answer from this machine" in why
    proc = subprocess.run([sys.executable, "-m", "wash", "generate", "--prompt", "hi",
                           "--max-new-tokens", "2", "--provider", "qwen2.5-0.5b:kgw:1"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "0"})
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("[wash] ")]  # progress lines
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert errors == [f"error: model 'qwen2.5-0.5b' cannot load here: Qwen2.5-0.5B-Instruct loads from the "
                      f"model hub alone, and {why}."]


class _Hub(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(404 if self.path.startswith("/missing") else 200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_the_hub_probe_takes_any_http_answer_and_nothing_else():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert hub_answers(base) and hub_answers(base + "/missing")
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{free.getsockname()[1]}"
    assert not hub_answers(closed) and not hub_answers("http://wash-no-such-host.invalid")
    assert not hub_answers("")


def test_the_app_offers_them_only_with_a_gpu_and_the_hub(monkeypatch):
    monkeypatch.delenv("WASH_APP_MODELS", raising=False)
    assert settings.hub_models_offered(gpu=False) == []
    for name in HUB_MODELS:
        assert "only with a GPU" in settings.hub_model_reason(name, gpu=False)
        assert (settings.hub_model_reason(name, gpu=True) is None) == (hub_reason(name) is None)
    offline = [n for n in OFFLINE_DEFAULTS if n not in settings.missing_models()] or list(OFFLINE_DEFAULTS)
    # after the offline ones, so slots A/B stay the offline models
    assert settings.app_models() == offline + settings.hub_models_offered()
    # never named on a page that does not offer them
    assert not set(settings.missing_models()) & set(HUB_MODELS)


@pytest.mark.parametrize("name", HUB_MODELS)
def test_the_app_refuses_a_hub_model_it_does_not_offer_in_one_line(name, monkeypatch):
    monkeypatch.delenv("WASH_APP_MODELS", raising=False)
    if name in settings.app_models():
        pytest.skip("this machine has a GPU and the hub: the app offers it")
    with pytest.raises(WashInputError) as refused:
        settings.check_app_model(name)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"model '{name}' is not offered here: {CATALOG[name].title}")
    assert message.endswith(settings.hub_model_reason(name))


def test_their_presets_are_offered_only_with_their_models():
    hub = [p for p in PRESETS if p.models]
    assert len(hub) == 2 and all(set(p.models) & set(HUB_MODELS) for p in hub)
    assert preset_names(list(OFFLINE_DEFAULTS)) == [p.name for p in PRESETS if not p.models]
    assert preset_names(list(OFFLINE_DEFAULTS + HUB_MODELS)) == [p.name for p in PRESETS]
    three = preset("Three families, three tokenizers (GPU)")
    rows = three.resolved(["smollm2", "gemma3"])  # its own models, whatever the app's first two are
    assert [r[0] for r in rows] == ["qwen2.5-0.5b", "smollm2-1.7b", "gemma3"]
    assert [s.model for s in three.specs([])] == ["qwen2.5-0.5b", "smollm2-1.7b", "gemma3"]
    paper = preset("Paper setting on 0.5-2B instruct models (GPU)")
    assert [r[1:] for r in paper.resolved([])] == [r[1:] for r in PRESETS[0].resolved(["smollm2", "gemma3"])]


def test_a_seeded_wash_run_over_three_families(tiny_qwen25, tiny_smollm2, tiny_gemma3):
    """The three-family preset's line-up on tiny random models around the same real tokenizers (the hub
    models' own weights are out of reach here): the same seed gives the same text, and every model's
    context spells it."""
    tiny_of = {"qwen2.5-0.5b": "tiny-qwen2.5", "smollm2-1.7b": "tiny-smollm2", "gemma3": "tiny-gemma3"}
    specs = [(tiny_of[name], scheme, key)
             for name, scheme, key, _ in preset("Three families, three tokenizers (GPU)").resolved([])]
    config = GenerationConfig(providers=[ProviderSpec.parse(f"{m}:{s}:{k}") for m, s, k in specs],
                              prompt="The library opened", max_new_tokens=12, seed=3, live_detection=False)
    first, again = generate(config), generate(config)
    assert first.text == again.text and len(first.tokens) == 12
    assert first.routing.routed_spans >= 1  # three tokenizers: some sampled token is not one of every model's
    for lm in (tiny_qwen25, tiny_smollm2, tiny_gemma3):
        vocab = model_vocab(lm)
        spelled = b"".join(vocab.token_bytes[i] for i in first.model_ids[lm.name])
        assert spelled.decode("utf-8", errors="replace") == first.text, lm.name
        # never a padding row of the logits
        assert all(i < len(lm.tokenizer) for i in first.model_ids[lm.name])
    assert [d.scheme for d in first.detection] == ["kgw", "aar", "dipmark"]
