"""Qwen2.5's tokenizer built offline (``wash.engine.qwen_tokenizer``) and the union vocabulary of three
families on real tokenizers: Qwen2.5 (byte-level BPE, 151,643 + 22), SmolLM2 (byte-level BPE, 49,152;
SmolLM2-1.7B-Instruct's too) and Gemma 3 (SentencePiece, 262,144)."""

from __future__ import annotations

import torch

from wash.engine import qwen_tokenizer
from wash.engine.models import load_tokenizer
from wash.engine.vocab import align, model_vocab

# transformers' tests/models/qwen2/test_tokenization_qwen2.py (test_tokenizer_integration): the ids the
# hub's Qwen/Qwen-tokenizer gives these texts, the tokenizer Qwen2 and Qwen2.5 share (padding left out).
INTEGRATION = {
    "Transformers (formerly known as pytorch-transformers and pytorch-pretrained-bert) provides "
    "general-purpose architectures (BERT, GPT-2, RoBERTa, XLM, DistilBert, XLNet...) for Natural "
    "Language Understanding (NLU) and Natural Language Generation (NLG) with over 32+ pretrained "
    "models in 100+ languages and deep interoperability between Jax, PyTorch and TensorFlow.":
    [8963, 388, 320, 69514, 3881, 438, 4510, 27414, 32852, 388, 323, 4510, 27414, 21334, 35722, 1455, 529, 8,
     5707, 4586, 58238, 77235, 320, 61437, 11, 479, 2828, 12, 17, 11, 11830, 61437, 64, 11, 1599, 10994, 11,
     27604, 321, 33, 529, 11, 29881, 6954, 32574, 369, 18448, 11434, 45451, 320, 45, 23236, 8, 323, 18448,
     11434, 23470, 320, 30042, 38, 8, 448, 916, 220, 18, 17, 10, 80669, 4119, 304, 220, 16, 15, 15, 10,
     15459, 323, 5538, 94130, 2897, 1948, 619, 706, 11, 5355, 51, 21584, 323, 94986, 13],
    "🤗 Transformers 提供了可以轻松地下载并且训练先进的预训练模型的 API 和工具。使用预训练模型可以减少计算消耗和碳排放，"
    "并且节省从头训练所需要的时间和资源。":
    [144834, 80532, 93685, 83744, 34187, 73670, 104261, 29490, 62189, 103937, 104034, 102830, 98841, 104034,
     104949, 9370, 5333, 58143, 102011, 1773, 37029, 98841, 104034, 104949, 73670, 101940, 100768, 104997,
     33108, 100912, 105054, 90395, 100136, 106831, 45181, 64355, 104034, 113521, 101975, 33108, 85329, 1773],
    '```python\ntokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen-tokenizer")\ntokenizer("世界，你好！")```':
    [73594, 12669, 198, 85593, 284, 8979, 37434, 6387, 10442, 35722, 445, 48, 16948, 45274, 16948, 34841,
     3135, 1138, 85593, 445, 99489, 3837, 108386, 6313, 899, 73594],
}


def test_the_built_tokenizer_gives_the_hub_tokenizers_ids():
    tokenizer = load_tokenizer("qwen2.5-0.5b")  # through the cache, as every load after the first
    for text, ids in INTEGRATION.items():
        assert tokenizer.encode(text, add_special_tokens=False) == ids
        assert tokenizer.decode(ids) == text


def test_sizes_added_tokens_and_ends():
    tokenizer = load_tokenizer("qwen2.5-0.5b")
    assert len(tokenizer) == qwen_tokenizer.REGULAR + len(qwen_tokenizer.ADDED) == 151_665
    assert tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|file_sep|>"]) \
        == [151_643, 151_644, 151_645, 151_664]
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert tokenizer.bos_token is None
    special = {i for i, t in tokenizer.added_tokens_decoder.items() if t.special}
    assert special == set(range(151_643, 151_643 + qwen_tokenizer.SPECIAL))
    # a special token in the text is one token; digits go one per token (Qwen2's \p{N} pre-tokenizer)
    assert tokenizer.encode("a<|im_end|>b", add_special_tokens=False)[1] == 151_645
    assert len(tokenizer.encode(" 2024", add_special_tokens=False)) == 5


def test_the_rank_file_is_read_without_tiktoken():
    ranks = qwen_tokenizer.read_ranks(qwen_tokenizer.ranks_file())
    assert sorted(ranks.values()) == list(range(qwen_tokenizer.REGULAR))
    assert all(bytes([b]) in ranks for b in range(256))  # byte-level: every byte is a token


def test_smollm2_sizes_share_one_tokenizer():
    assert load_tokenizer("smollm2-1.7b") is load_tokenizer("smollm2")


def test_logits_wider_than_qwens_tokenizer_are_never_text(tiny_qwen25):
    assert (tiny_qwen25.vocab_size, len(tiny_qwen25.tokenizer)) == (151_936, 151_665)
    vocab = model_vocab(tiny_qwen25)
    assert vocab.size == 151_936 and all(b is None for b in vocab.token_bytes[151_665:])
    alignment = align([vocab])
    assert bool((alignment.to_union["tiny-qwen2.5"][151_665:] == -1).all())
    assert {int(alignment.to_union["tiny-qwen2.5"][i]) for i in tiny_qwen25.eos_ids} == {alignment.eos_index}


def test_union_of_three_families(tiny_qwen25, tiny_smollm2, tiny_gemma3):
    models = (tiny_qwen25, tiny_smollm2, tiny_gemma3)
    vocabs = [model_vocab(lm) for lm in models]
    assert [v.kind for v in vocabs] == ["byte-level", "byte-level", "sentencepiece"]
    alignment = align(vocabs)
    texts = [{b for b in v.token_bytes if b is not None} for v in vocabs]
    assert alignment.size == len(set().union(*texts)) + 1  # + the one end-of-text slot
    assert int(alignment.intersection.sum()) == len(set.intersection(*texts)) + 1
    qwen = texts[0]
    # Qwen's regular tokens all spell distinct bytes; its 8 added tokens that are not special
    # (<tool_call>, the fill-in-the-middle markers...) stand for their literal text, as in the hub's tokenizer
    literal = {t.encode() for i, t in enumerate(qwen_tokenizer.ADDED) if i >= qwen_tokenizer.SPECIAL}
    assert len(literal) == 8 and literal <= qwen and len(qwen) == qwen_tokenizer.REGULAR + len(literal)
    for lm, vocab in zip(models, vocabs):  # every model can spell any text: every byte is in the union
        t = alignment.to_union[lm.name]
        for text in ("Bedrooms 日本語 🚗", "négligent\n\tx"):
            ids = torch.tensor(lm.encode(text))
            assert b"".join(alignment.union_bytes[int(u)] for u in t[ids]) == text.encode()


def test_words_the_three_split_differently(tiny_qwen25, tiny_smollm2, tiny_gemma3):
    """Words the three tokenizers split differently: the case WASH's routing and re-synchronisation handle."""
    def pieces(lm, text: str) -> list[bytes]:
        vocab = model_vocab(lm)
        return [vocab.token_bytes[i] for i in lm.encode(text)]

    qwen, smol, gemma = (lambda text, lm=lm: pieces(lm, text)
                         for lm in (tiny_qwen25, tiny_smollm2, tiny_gemma3))
    assert qwen(" Bedrooms") == gemma(" Bedrooms") == [b" Bedrooms"] and len(smol(" Bedrooms")) > 1
    assert len(gemma("日本語")) == 1 < len(qwen("日本語")) < len(smol("日本語"))
    assert qwen(" 2024") == smol(" 2024") and len(qwen(" 2024")) == 5  # digits one per token in all three
    assert len(gemma(" 2024")) == 5
