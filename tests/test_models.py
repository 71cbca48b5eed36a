"""Model catalog, the dequantised cache and one-copy-per-process loading."""

from __future__ import annotations

import threading

import pytest
import torch

from wash.engine import catalog, models
from wash.engine.cache import complete, tokenizer_pickle
from wash.core.errors import WashInputError


def test_unknown_and_external_names(monkeypatch):
    with pytest.raises(WashInputError, match="unknown model 'gpt-9'.*accepted: smollm2, gemma3"):
        catalog.check_model_name("gpt-9")
    monkeypatch.delenv(catalog.ALLOW_EXTERNAL_ENV, raising=False)
    with pytest.raises(WashInputError, match="WASH_ALLOW_EXTERNAL_MODELS"):
        catalog.check_model_name("Qwen/Qwen2.5-0.5B-Instruct")
    monkeypatch.setenv(catalog.ALLOW_EXTERNAL_ENV, "1")
    assert catalog.check_model_name("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"


def test_concurrent_loads_share_one_copy():
    got = []
    threads = [threading.Thread(target=lambda: got.append(models.load_model("tiny-gemma3"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(m is got[0] for m in got)


def test_tiny_models_are_deterministic_and_use_the_real_vocabulary(tiny_smollm2, tiny_gemma3):
    assert tiny_smollm2.vocab_size == 49152 and tiny_gemma3.vocab_size == 262144
    assert tiny_gemma3.bos_id == 2 and tiny_smollm2.bos_id is None
    w = tiny_smollm2.model.get_output_embeddings().weight
    again = models.random_model("tiny-llama", tiny_smollm2.tokenizer).get_output_embeddings().weight
    assert bool((w == again).all())


def test_dummy_members_are_refused_outside_the_benchmarks(monkeypatch):
    from wash.cli import main

    monkeypatch.setattr(catalog, "_DUMMIES_ALLOWED", False)
    with pytest.raises(WashInputError, match="dummy member .*only `python -m wash bench --dummy`"):
        catalog.check_model_name("dummy-tiny-llama@smollm2")
    assert main(["generate", "--provider", "dummy-tiny-llama@smollm2:kgw:1", "--prompt", "Hi"]) == 2
    with pytest.raises(WashInputError, match="malformed dummy member .*shapes: .*llama-3.1-8b"):
        catalog.check_model_name("dummy-llama-9b@smollm2")
    with pytest.raises(WashInputError, match="tokenizers: smollm2, gemma3"):
        catalog.check_model_name("dummy-tiny-llama@gpt2")
    catalog.allow_dummy_members()
    assert catalog.check_model_name("dummy-tiny-llama@smollm2") == "dummy-tiny-llama@smollm2"


@pytest.mark.parametrize("shape", [s for s in catalog.shape_names() if not s.startswith("tiny-")])
def test_each_published_shape_has_its_published_size_and_is_built_where_it_will_run(shape):
    """Built on the meta device (no memory): every tensor is created there, in the dtype asked for,
    and the parameter count is the published one once the vocabulary is the tokenizer's."""
    import torch

    tokenizer = models.load_tokenizer("gemma3")
    model = models.random_model(shape, tokenizer, "meta", torch.bfloat16)
    tensors = list(model.parameters()) + list(model.buffers())
    assert {t.device.type for t in tensors} == {"meta"}
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    info = catalog.read_shape(shape)
    embeddings = (1 if model.config.tie_word_embeddings else 2) * model.config.hidden_size
    expected = info["params_published"] + embeddings * (len(tokenizer) - info["vocab_published"])
    assert sum(p.numel() for p in model.parameters()) == expected
    assert model.config.vocab_size == len(tokenizer) == 262144


def test_a_dummy_member_loads_in_the_dtype_and_on_the_device_asked_for(monkeypatch):
    import torch

    monkeypatch.setattr(catalog, "_DUMMIES_ALLOWED", True)
    monkeypatch.setattr(models, "_LOADED", {})
    lm = models.load_model("dummy-tiny-qwen2@smollm2", device="cpu", dtype=torch.bfloat16)
    assert {p.dtype for p in lm.model.parameters()} == {torch.bfloat16} and lm.device == torch.device("cpu")
    assert type(lm.model).__name__ == "Qwen2ForCausalLM" and lm.vocab_size == 49152
    again = models.random_model("tiny-qwen2", lm.tokenizer, "cpu", torch.bfloat16)
    assert all(bool((a == b).all()) for a, b in zip(lm.model.parameters(), again.parameters()))
    with pytest.raises(WashInputError, match="unknown dtype 'fp8'"):
        models.parse_dtype("fp8")


def _logits(loaded, text="Hello there"):
    import torch

    with torch.no_grad():
        return loaded.model(torch.tensor([loaded.encode_prompt(text)])).logits


#: Entries of SmolLM2's vocabulary the tiny GGUF keeps: its special tokens, its 256 byte tokens and
#: the first merges, enough to encode any text.
TINY_VOCAB = 1024


def _tiny_gguf(folder) -> str:
    """A one-layer, 16-wide llama GGUF with SmolLM2's real tokenizer cut to its first ``TINY_VOCAB``
    entries: the packaged file's metadata with tiny dimensions, the merges among the kept
    entries, and seeded F32 weights. It goes through the same dequantise, save, mark and rebuild
    code as the packaged model in about a second a build, where the 135M-parameter file takes
    about a minute, and the whole vocabulary's metadata about 4 s to parse."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    from wash.engine import cache

    src_dir, src_file = cache.gguf_file("smollm2", lambda _m: None)
    reader = GGUFReader(f"{src_dir}/{src_file}")
    hidden, ff, heads, kv, vocab = 16, 32, 2, 1, TINY_VOCAB
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()[:vocab]
    kept = set(tokens)
    merges = [m for m in reader.fields["tokenizer.ggml.merges"].contents()
              if set(m.split(" ")) <= kept and m.replace(" ", "") in kept]
    tiny = {"llama.block_count": 1, "llama.embedding_length": hidden, "llama.feed_forward_length": ff,
            "llama.attention.head_count": heads, "llama.attention.head_count_kv": kv,
            "llama.rope.dimension_count": hidden // heads, "general.file_type": 0,  # 0: all F32
            "llama.vocab_size": vocab, "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges,
            "tokenizer.ggml.token_type": reader.fields["tokenizer.ggml.token_type"].contents()[:vocab]}
    writer = GGUFWriter(folder / "tiny.gguf", "llama")
    for key, field in reader.fields.items():
        if not key.startswith("GGUF.") and key != "general.architecture":
            sub = field.types[1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(key, tiny.get(key, field.contents()), field.types[0], sub_type=sub)
    head = hidden // heads
    shapes = {"token_embd.weight": (vocab, hidden), "output_norm.weight": (hidden,),
              "blk.0.attn_norm.weight": (hidden,), "blk.0.ffn_norm.weight": (hidden,),
              "blk.0.attn_q.weight": (hidden, hidden), "blk.0.attn_k.weight": (kv * head, hidden),
              "blk.0.attn_v.weight": (kv * head, hidden), "blk.0.attn_output.weight": (hidden, hidden),
              "blk.0.ffn_gate.weight": (ff, hidden), "blk.0.ffn_up.weight": (ff, hidden),
              "blk.0.ffn_down.weight": (hidden, ff)}
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return "tiny.gguf"


def test_a_build_parses_each_gguf_file_once(tmp_path):
    """Inside ``gguf_parsed_once`` (nested blocks included) every open of one file is the first parse;
    outside it, each open parses."""
    import numpy as np
    import gguf

    from wash.engine.cache import gguf_parsed_once

    path = tmp_path / "small.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_uint32("llama.block_count", 1)
    writer.add_tensor("w", np.zeros(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with gguf_parsed_once():
        first = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(path) is first and first.fields["llama.block_count"].contents() == 1
        with gguf_parsed_once():  # a nested block reads the outer block's readers
            assert gguf.GGUFReader(path) is first
        assert gguf.GGUFReader(path) is first  # and the nested block's end keeps them
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)
    with gguf_parsed_once():
        assert gguf.GGUFReader(path) is not first  # a new block parses again


def test_corrupt_or_partial_cache_is_rebuilt(tmp_path, monkeypatch):
    """A copy that fails to load, or whose files do not match the marker, is rebuilt.

    The catalog's ``smollm2`` is built from a tiny GGUF with its real tokenizer
    (``_tiny_gguf``): what is checked is the cache's build, check and rebuild, which
    do not depend on the model's size. Loaded weights are memory-mapped from the
    cache, so each copy is released before its files are damaged (as a separate,
    later process would find them).
    """
    import gc

    from wash.engine import cache

    source = tmp_path / "gguf"
    source.mkdir()
    tiny_file = _tiny_gguf(source)
    monkeypatch.setattr(cache, "gguf_file", lambda name, say: (str(source), tiny_file))
    monkeypatch.setenv("WASH_CACHE_DIR", str(tmp_path / "cache"))
    messages: list[str] = []
    loaded = models._load("smollm2", messages.append, 0)
    assert loaded.model.config.num_hidden_layers == 1 and loaded.vocab_size == TINY_VOCAB  # the tiny file
    reference = _logits(loaded)
    del loaded
    gc.collect()
    weights = tmp_path / "cache" / "models" / "smollm2" / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(b"\0" * size)  # right size, garbage content
    messages.clear()
    loaded = models._load("smollm2", messages.append, 0)
    assert any("does not load" in m for m in messages), messages
    assert bool((_logits(loaded) == reference).all())
    del loaded
    gc.collect()
    with open(weights, "r+b") as fh:  # a partial copy: truncated
        fh.truncate(size // 2)
    messages.clear()
    loaded = models._load("smollm2", messages.append, 0)
    assert any("incomplete or corrupt" in m for m in messages), messages
    assert bool((_logits(loaded) == reference).all())


def test_a_cached_tokenizer_is_read_again_from_its_pickle_and_a_broken_pickle_is_read_past(tmp_path):
    """The pickle beside a cached tokenizer gives the tokenizer the files give; one that does not load
    (truncated here) is read past, and the files' tokenizer is pickled again in its place."""
    from transformers import AutoTokenizer

    directory = tmp_path / "tokenizers" / "smollm2"
    models.load_tokenizer("smollm2").save_pretrained(directory)
    from_files = AutoTokenizer.from_pretrained(directory)
    pickled = tokenizer_pickle(directory)
    assert not pickled.exists()
    first = models.read_tokenizer(directory)
    assert pickled.exists() and pickled.stat().st_size > 100_000
    files = directory / "tokenizer.json"
    files.rename(tmp_path / "aside.json")  # the files cannot give it now: this read is the pickle's
    again = models.read_tokenizer(directory)
    (tmp_path / "aside.json").rename(files)
    text = "The lighthouse keeper's 3 children — naïve, 😀 <|im_end|>"
    for tok in (first, again):
        assert type(tok) is type(from_files)
        assert tok(text).input_ids == from_files(text).input_ids
        assert tok.get_vocab() == from_files.get_vocab() and tok.all_special_ids == from_files.all_special_ids
    pickled.write_bytes(pickled.read_bytes()[:1000])
    read_past = models.read_tokenizer(directory)
    assert read_past(text).input_ids == from_files(text).input_ids
    assert pickled.stat().st_size > 100_000  # written again, whole
    assert not list(directory.glob("*.partial"))


def test_prepare_cache_builds_what_is_missing_in_a_process_of_its_own_then_nothing(tmp_path, monkeypatch):
    """``complete`` asks for the weights' copy, the tokenizer's files and the pickles of both;
    ``prepare_cache`` builds what is missing in a spawned process (here the pickle of SmolLM2's
    tokenizer files, copied without it; its weights are linked from the suite's cache, which the
    session's start completed) and, once the cache is complete, starts nothing."""
    import shutil

    from wash.engine.cache import cache_dir

    real = cache_dir()
    assert complete("smollm2")
    monkeypatch.setenv("WASH_CACHE_DIR", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smollm2").symlink_to(real / "models" / "smollm2")
    tokenizer = tmp_path / "tokenizers" / "smollm2"
    shutil.copytree(real / "tokenizers" / "smollm2", tokenizer,
                    ignore=shutil.ignore_patterns("*.pickle", "*.partial"))
    assert not complete("smollm2")
    messages: list[str] = []
    took = models.prepare_cache(["smollm2"], messages.append)
    assert list(took) == ["smollm2"] and took["smollm2"] > 0
    assert complete("smollm2") and tokenizer_pickle(tokenizer).stat().st_size > 100_000
    assert messages[0].startswith("building the model cache for smollm2") and "cached in" in messages[-1]
    assert not any("dequantising" in m for m in messages)  # the weights' copy was there
    assert models.prepare_cache(["smollm2"], messages.append) == {}
    (tokenizer / "tokenizer.json").write_text("{}")  # a size its marker does not list
    assert not complete("smollm2")


@pytest.mark.parametrize("capability, breaks, dtype", [
    ((9, 0), True, torch.bfloat16),   # H200 (ZeroGPU): bf16 for every model
    ((8, 0), False, torch.bfloat16),  # A100
    ((7, 5), False, torch.float16),   # T4: no bf16 in hardware
    ((7, 5), True, torch.float32),    # T4 and Gemma-3: fp32, never fp16
])
def test_gpu_dtype_is_bf16_where_the_gpu_has_it_else_fp32_for_what_fp16_breaks(capability, breaks, dtype):
    assert models.gpu_dtype(capability, breaks) == dtype


def test_fp16_breaking_is_a_catalog_fact_that_reaches_the_device_choice(monkeypatch):
    assert [n for n in catalog.CATALOG if catalog.breaks_in_fp16(n)] == ["gemma3", "tiny-gemma3"]
    assert not catalog.breaks_in_fp16("dummy-gemma-3-270m@gemma3") and not catalog.breaks_in_fp16("org/model")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    cuda = torch.device("cuda:0")
    assert models.resolve_device(0, breaks_in_fp16=catalog.breaks_in_fp16("gemma3")) == (cuda, torch.float32)
    assert models.resolve_device(0, breaks_in_fp16=catalog.breaks_in_fp16("smollm2")) == (cuda, torch.float16)
    assert models.resolve_device(0, "cuda:0", breaks_in_fp16=True) == (cuda, torch.float32)
