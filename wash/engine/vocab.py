"""Vocabulary alignment: what text each token stands for, and the union of vocabularies.

Two tokenizers agree on a token when it stands for the same *bytes*. Comparing
bytes rather than strings keeps partial UTF-8 tokens (half of an emoji) exact:

* byte-level BPE (SmolLM2, GPT-2, Llama 3, Qwen): each character of the token
  string stands for one byte through the GPT-2 byte alphabet (``Ġ`` is a space);
* SentencePiece (Gemma, Llama 2, Mistral): ``▁`` is a space and ``<0xNN>`` a raw
  byte-fallback token;
* non-special added tokens stand for their literal content.

Special tokens (BOS, padding, ``<unused…>``, chat markers) stand for no text: the
engine never samples them. End-of-text tokens of every model share ONE extra union
slot, so "some model wants to stop" is a single event of the average. Rows of the
logits beyond the tokenizer (Qwen pads 151,669 tokens to 151,936 logits) map to
nothing.

Union ids are assigned in sorted byte order, so they are a pure function of the
model set, whatever order the providers are listed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import torch

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def _gpt2_byte_decoder() -> dict[str, int]:
    """Inverse of the GPT-2 byte-to-unicode alphabet used by byte-level BPE."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


@dataclass(frozen=True, eq=False)
class ModelVocab:
    """The byte string of every row of one model's logits (``None``: not text)."""

    name: str
    kind: str
    token_bytes: tuple[bytes | None, ...]
    eos_ids: frozenset[int]
    #: id of the single-byte token for each byte value, to encode invalid UTF-8 exactly.
    byte_ids: dict[int, int]

    @property
    def size(self) -> int:
        return len(self.token_bytes)


def tokenizer_kind(tokens: Sequence[str]) -> str:
    """'byte-level' or 'sentencepiece', from the token strings themselves."""
    spaced_bpe = sum(1 for t in tokens if t.startswith("Ġ"))
    spaced_sp = sum(1 for t in tokens if t.startswith("▁"))
    return "byte-level" if spaced_bpe >= spaced_sp else "sentencepiece"


def build_model_vocab(name: str, tokenizer: object, vocab_size: int, eos_ids: frozenset[int]) -> ModelVocab:
    """Map each of ``vocab_size`` logit rows to the bytes it stands for."""
    n_tok = len(tokenizer)
    strings = tokenizer.convert_ids_to_tokens(list(range(n_tok)))
    added = {i: t for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    special = {i for i, t in added.items() if getattr(t, "special", False)}
    special |= set(getattr(tokenizer, "all_special_ids", []))
    kind = tokenizer_kind([s for s in strings if s])
    decoder = _gpt2_byte_decoder()
    out: list[bytes | None] = [None] * vocab_size
    byte_ids: dict[int, int] = {}
    fallback_bytes: dict[int, bool] = {}
    for i, s in enumerate(strings[:vocab_size]):
        if s is None or i in special:
            continue
        if i in added:
            out[i] = str(added[i]).encode("utf-8")
            continue
        fallback = False
        if kind == "byte-level":
            try:
                out[i] = bytes(decoder[c] for c in s)
            except KeyError:
                out[i] = s.encode("utf-8")
        else:
            m = _BYTE_FALLBACK.match(s)
            fallback = m is not None
            out[i] = bytes([int(m.group(1), 16)]) if m else s.replace("▁", " ").encode("utf-8")
        if len(out[i]) == 1:
            b = out[i][0]
            # A plain token spelling the byte is what the tokenizer emits: prefer it.
            if b not in byte_ids or (fallback_bytes.get(b) and not fallback):
                byte_ids[b] = i
                fallback_bytes[b] = fallback
    for i in eos_ids:
        if i < vocab_size:
            out[i] = None
    return ModelVocab(name=name, kind=kind, token_bytes=tuple(out), eos_ids=frozenset(eos_ids),
                      byte_ids=byte_ids)


@dataclass(frozen=True, eq=False)
class UnionMap:
    """One model's rows and the union vocabulary: the one place a model's ids or
    distributions are projected onto the union, and read back.

    Every projection goes through here: the served system's p_i on the union
    (``served.ServedSystem.on_union``), the coordinated watermark's union space
    (``watermarks.coordinated.UnionSpace``, handed one of these by ``providers``),
    the union probabilities the loop reports (``read``) and identification's drawn
    tokens (``union_ids``). Rows that spell the same bytes add up in one union entry.
    """

    #: ``VocabAlignment.to_union`` and ``from_union`` of this model.
    to_union: torch.Tensor
    from_union: torch.Tensor
    #: ``to_union`` with non-text rows sent to the extra slot ``size`` (dropped by ``project``).
    scatter_index: torch.Tensor
    #: The union ids several rows spell, with those rows.
    rows_of: dict[int, list[int]]
    size: int
    eos_index: int
    #: The index tensors above as a device needs them, built on first use there: a step on a GPU
    #: never indexes with a host tensor (``index_on``).
    _on_device: dict = field(default_factory=dict, compare=False, repr=False)

    def index_on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``scatter_index`` and the read table (``read_at``) on ``device``, each built once.

        The read table has a row per union id: the model rows spelling it, padded with
        the row count (the zero slot ``read_at`` appends), so reading a union entry is one
        gather and a sum of a fixed width, with no host read of which rows those are.
        """
        device = torch.device(device)
        if device not in self._on_device:
            width = max((len(rows) for rows in self.rows_of.values()), default=1)
            pad = self.to_union.numel()
            table = torch.full((self.size, width), pad, dtype=torch.long)
            present = self.from_union >= 0
            table[present, 0] = self.from_union[present].long()
            for u, rows in self.rows_of.items():
                table[u, :len(rows)] = torch.tensor(rows, dtype=torch.long)
            self._on_device[device] = (self.scatter_index.to(device), table.to(device))
        return self._on_device[device]

    def union_ids(self, rows: torch.Tensor) -> torch.Tensor:
        """The union ids of model rows (-1: a row that is no text)."""
        return self.to_union[rows]

    def union_id(self, row: int) -> int:
        return int(self.to_union[row])

    def ids(self, ids: Sequence[int]) -> list[int]:
        """A model's id sequence in union ids; rows that are no text (BOS, specials) go to the
        end-of-text slot, so a context that holds them stays hashable."""
        out = []
        for i in ids:
            u = int(self.to_union[i]) if 0 <= i < self.to_union.numel() else -1
            out.append(u if u >= 0 else self.eos_index)
        return out

    def project(self, probs: torch.Tensor) -> torch.Tensor:
        """A distribution over the model's rows onto the union (float64, mass kept; non-text rows dropped)."""
        index = self.scatter_index if probs.device.type == "cpu" else self.index_on(probs.device)[0]
        acc = torch.zeros(self.size + 1, dtype=torch.float64, device=probs.device)
        acc.scatter_add_(0, index, probs.to(torch.float64))
        return acc[:self.size]

    def lift(self, union_vector: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """``probs`` with each row scaled by its union entry's value (non-text rows: 0)."""
        padded = torch.cat([union_vector, union_vector.new_zeros(1)])
        return probs * padded[self.scatter_index]

    def read_at(self, probs: torch.Tensor, union_ids: torch.Tensor) -> torch.Tensor:
        """``read`` on the device of ``probs``, for union ids held there: a tensor, nothing read by the host.

        Rows absent from the model read the appended zero; several rows of one union id add up."""
        table = self.index_on(probs.device)[1]
        padded = torch.cat([probs.to(torch.float64), probs.new_zeros(1, dtype=torch.float64)])
        rows = torch.index_select(table, 0, union_ids)
        return torch.index_select(padded, 0, rows.reshape(-1)).view(rows.shape).sum(-1)

    def read(self, probs: torch.Tensor, union_ids: Sequence[int]) -> list[float]:
        """Union probabilities of a few union ids, read off a model-row vector without projecting it all."""
        out = []
        for u in union_ids:
            rows = self.rows_of.get(u)
            if rows is not None:
                out.append(float(probs[rows].sum()))
            else:
                r = int(self.from_union[u])
                out.append(float(probs[r]) if r >= 0 else 0.0)
        return out


@dataclass(frozen=True)
class VocabAlignment:
    """The union of several models' vocabularies and the index maps into it.

    ``size`` counts the text tokens plus one end-of-text slot at ``eos_index``.
    ``to_union[m][i]`` is the union id of model m's row i (-1: not text);
    ``from_union[m][u]`` is model m's id for union id u (-1: m lacks it);
    ``intersection[u]`` is True when every model has u (the EOS slot included).
    """

    models: tuple[str, ...]
    union_bytes: tuple[bytes, ...]
    to_union: dict[str, torch.Tensor]
    from_union: dict[str, torch.Tensor]
    intersection: torch.Tensor
    #: ``to_union`` with non-text rows sent to slot ``size`` (for fast scatters).
    scatter_index: dict[str, torch.Tensor]
    #: Per model, the union ids that several of its rows spell, with those rows.
    rows_of: dict[str, dict[int, list[int]]]
    _maps: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def size(self) -> int:
        return len(self.union_bytes) + 1

    @property
    def eos_index(self) -> int:
        return len(self.union_bytes)

    def union_map(self, model: str) -> UnionMap:
        """``model``'s projection onto the union (``UnionMap``), one per model (it keeps its device copies)."""
        if model not in self._maps:
            self._maps[model] = UnionMap(self.to_union[model], self.from_union[model], self.scatter_index[model],
                                         self.rows_of[model], self.size, self.eos_index)
        return self._maps[model]

    def served_mask(self, model: str, end_of_text: bool = True) -> torch.Tensor:
        """The rows of ``model``'s logits the engine never serves (True): those that are no text, and
        with ``end_of_text=False`` its end-of-text rows too (before ``min_new_tokens``).

        The mask ``sampling.process_logits`` serves under, wherever a model is served: a
        row is served in a line-up exactly when it is served alone (``served_mask``).
        """
        t = self.to_union[model]
        return t < 0 if end_of_text else (t < 0) | (t == self.eos_index)

    def contains(self, model: str, union_id: int) -> bool:
        return bool(self.from_union[model][union_id] >= 0)

    def token_bytes(self, union_id: int) -> bytes:
        return b"" if union_id == self.eos_index else self.union_bytes[union_id]

    def token_text(self, union_id: int) -> str:
        """Readable form for displays (partial UTF-8 shown with replacement marks)."""
        if union_id == self.eos_index:
            return "<end of text>"
        return self.union_bytes[union_id].decode("utf-8", errors="replace")


def align(vocabs: Sequence[ModelVocab]) -> VocabAlignment:
    """Build the union of the given models' vocabularies (cached by model names)."""
    return _align_cached(tuple(vocabs))


@lru_cache(maxsize=16)
def _align_cached(vocabs: tuple[ModelVocab, ...]) -> VocabAlignment:
    all_bytes: set[bytes] = set()
    for v in vocabs:
        all_bytes.update(b for b in v.token_bytes if b is not None)
    union = tuple(sorted(all_bytes))
    index = {b: u for u, b in enumerate(union)}
    eos_index = len(union)
    to_union: dict[str, torch.Tensor] = {}
    from_union: dict[str, torch.Tensor] = {}
    present = []
    for v in vocabs:
        t = torch.full((v.size,), -1, dtype=torch.long)
        f = torch.full((len(union) + 1,), -1, dtype=torch.long)
        # The lowest id wins for duplicate spellings; single bytes then take the id the
        # tokenizer itself emits (``byte_ids``). Assigned as whole index tensors: one
        # element at a time took ~6 s for Gemma 3's 262k rows, at every process start.
        rows = [i for i, b in enumerate(v.token_bytes) if b is not None]
        ids = [index[v.token_bytes[i]] for i in rows]
        lowest: dict[int, int] = {}
        for i, u in zip(rows, ids):
            lowest.setdefault(u, i)
        if rows:
            t[torch.tensor(rows)] = torch.tensor(ids)
            f[torch.tensor(list(lowest))] = torch.tensor(list(lowest.values()))
        for b, i in v.byte_ids.items():
            f[index[bytes([b])]] = i
        for i in v.eos_ids:
            if i < v.size:
                t[i] = eos_index
        if v.eos_ids:
            f[eos_index] = min(v.eos_ids)
        to_union[v.name] = t
        from_union[v.name] = f
        present.append(f >= 0)
    intersection = torch.stack(present).all(dim=0)
    size = len(union) + 1
    scatter = {m: torch.where(t >= 0, t, torch.tensor(size)) for m, t in to_union.items()}
    rows_of: dict[str, dict[int, list[int]]] = {}
    for m, t in to_union.items():
        counts = torch.bincount(t[t >= 0], minlength=size)
        multi = torch.nonzero(counts > 1).flatten().tolist()
        rows_of[m] = {u: torch.nonzero(t == u).flatten().tolist() for u in multi}
    return VocabAlignment(models=tuple(v.name for v in vocabs), union_bytes=union,
                          to_union=to_union, from_union=from_union, intersection=intersection,
                          scatter_index=scatter, rows_of=rows_of)


def served_mask(vocab: ModelVocab, end_of_text: bool = True) -> torch.Tensor:
    """``VocabAlignment.served_mask`` of one model, read off its one-model alignment (cached)."""
    return align([vocab]).served_mask(vocab.name, end_of_text)


_VOCABS: dict[str, ModelVocab] = {}


def model_vocab(lm) -> ModelVocab:
    """Token bytes of a loaded model (``wash.engine.models.LoadedModel``), computed once per process.

    Reading 262k token strings takes about a second; every generation and detector
    of the process shares the result, keyed by the model's name.
    """
    if lm.name not in _VOCABS:
        _VOCABS[lm.name] = build_model_vocab(lm.name, lm.tokenizer, lm.vocab_size, lm.eos_ids)
    return _VOCABS[lm.name]


def encode_bytes(data: bytes, encode_text, vocab: ModelVocab) -> list[int]:
    """Tokenise raw bytes with a model's tokenizer, exactly.

    Valid UTF-8 runs go through the tokenizer; bytes that are not valid UTF-8 on
    their own (a span cut inside a character) go through the model's single-byte
    tokens, which every byte-level and byte-fallback vocabulary has.
    """
    ids: list[int] = []
    pos = 0
    while pos < len(data):
        try:
            text = data[pos:].decode("utf-8")
            ids.extend(encode_text(text))
            break
        except UnicodeDecodeError as err:
            if err.start > 0:
                ids.extend(encode_text(data[pos:pos + err.start].decode("utf-8")))
            bad_end = pos + err.start + max(1, err.end - err.start)
            for b in data[pos + err.start:bad_end]:
                if b in vocab.byte_ids:
                    ids.append(vocab.byte_ids[b])
                else:  # bytes that never occur in UTF-8 (0xC0, 0xF5..): no vocabulary has them
                    ids.extend(encode_text("\ufffd"))
            pos = bad_end
    return ids
