"""Fluency-aware routing: finishing a word that only some vocabularies can spell.

When the token sampled from the average is missing from some providers'
vocabularies, those providers could not take it as context. The word is finished
by "specialists", the providers whose vocabularies contain every token of the word
so far: at each step ONE of them is picked uniformly at random (never by
likelihood, which carries watermark signal) and samples from its own watermarked
distribution; the set narrows to providers that also have the new token.

When is a word complete? The paper (Section 2, "Fluency-Aware Routing", and the
routing appendix) routes until "word completion": a word ends where the next
word begins, i.e. at whitespace. Here, a span ends when

1. the next token a specialist samples *starts a new word* (``starts_new_word``):
   it begins with whitespace (space, newline, tab), punctuation or a symbol
   (Unicode categories P* and S*: "." "," "$" "+" "，" "。"...), or with a whole
   character of a script written without spaces (below), or it is end-of-text.
   That boundary token is discarded, not committed: the next token is drawn from
   the full average again;
2. or the span just committed *completes a word* (``word_complete``): its bytes end
   with a whole character (no trailing partial UTF-8 sequence) of a script written
   without spaces. The engine asks this after every committed routed token, the
   opening one included, so a span can be one token long. A span can open inside a
   character (SmolLM2 spells 都 as ``\xe9`` + ``\x83\xbd``, and only the second
   token may be missing elsewhere): pass the bytes generated before the span as
   ``before`` so that its first token can already complete the character;
3. or, as the last resort, the span reaches ``MAX_ROUTED_SPAN`` tokens
   (``wash.engine.config``).

Why rule 2: Chinese, Japanese, Thai... put no spaces between words, so rule 1
alone waits for a space that never comes and one specialist writes a whole clause
(a Chinese prompt routed 74% of its tokens in spans of 8.75 tokens on average,
often with a single specialist, whose watermark then leaks). In these scripts we
take each character as the unit of the word: a span ends as soon as a character is
complete, and the next character comes from the full average again. A character
spread over several byte tokens (``\\xe9`` ``\\xbe`` ``\\x98`` for 龘) is still
finished by the specialists first: half a character is never handed back to
models that cannot take it.

Which scripts (``is_unspaced_char``; explicit code-point blocks, not
``unicodedata.name`` prefixes, because Python's Unicode database lags the
standard: Python 3.11 knows Unicode 14, without CJK Extensions H and I):

* Han: CJK Unified Ideographs with Extension A, all of planes 2 and 3 (Extensions
  B-J and the Compatibility Ideographs Supplement), Compatibility Ideographs,
  radicals and strokes, Tangut, Khitan and Nushu;
* Japanese kana: Hiragana, Katakana (with phonetic extensions, halfwidth forms and
  the kana supplements); Bopomofo; Yi;
* the punctuation of these writing systems (CJK Symbols and Punctuation with the
  iteration marks 々 〆 〇, vertical, small and fullwidth punctuation): most are
  P*/S* and already start a new word; a span ending on one is complete too;
* Southeast Asian scripts written without spaces between words: Thai, Lao, Khmer,
  Myanmar (and its extensions), Tibetan, Tai Le, New Tai Lue, Tai Tham, Tai Viet,
  Buginese, Balinese, Javanese. Here the unit is the code point, not the
  orthographic syllable: a span may end on a consonant whose vowel sign or tone
  mark the average then supplies. A combining mark (category M*) completes a span
  but never starts a new word.

Not included: decimal digits of these scripts (a number is one word, as "2024"),
fullwidth Latin letters and digits (ＡＢＣ, ２０: Latin words written wide), and
Hangul: Korean IS written with spaces between words (eojeol, "대한민국의 수도는"),
so rule 1 already ends its spans after a few syllables, and cutting every syllable
would break words the paper keeps whole.
"""

from __future__ import annotations

import bisect
import unicodedata
from typing import Sequence

import torch

from wash.engine.sampling import uniform_choice

#: Inclusive code-point blocks of scripts written without spaces between words.
_UNSPACED_BLOCKS: tuple[tuple[int, int, str], ...] = (
    (0x0E00, 0x0E7F, "Thai"),
    (0x0E80, 0x0EFF, "Lao"),
    (0x0F00, 0x0FFF, "Tibetan"),
    (0x1000, 0x109F, "Myanmar"),
    (0x1780, 0x17FF, "Khmer"),
    (0x1950, 0x197F, "Tai Le"),
    (0x1980, 0x19DF, "New Tai Lue"),
    (0x19E0, 0x19FF, "Khmer Symbols"),
    (0x1A00, 0x1A1F, "Buginese"),
    (0x1A20, 0x1AAF, "Tai Tham"),
    (0x1B00, 0x1B7F, "Balinese"),
    (0x2E80, 0x2FFF, "CJK Radicals, Kangxi Radicals, Ideographic Description"),
    (0x3001, 0x303F, "CJK Symbols and Punctuation (not U+3000 IDEOGRAPHIC SPACE)"),
    (0x3040, 0x309F, "Hiragana"),
    (0x30A0, 0x30FF, "Katakana"),
    (0x3100, 0x312F, "Bopomofo"),
    (0x3190, 0x319F, "Kanbun"),
    (0x31A0, 0x31BF, "Bopomofo Extended"),
    (0x31C0, 0x31EF, "CJK Strokes"),
    (0x31F0, 0x31FF, "Katakana Phonetic Extensions"),
    (0x3400, 0x4DBF, "CJK Unified Ideographs Extension A"),
    (0x4E00, 0x9FFF, "CJK Unified Ideographs"),
    (0xA000, 0xA4CF, "Yi Syllables, Yi Radicals"),
    (0xA980, 0xA9DF, "Javanese"),
    (0xA9E0, 0xA9FF, "Myanmar Extended-B"),
    (0xAA60, 0xAA7F, "Myanmar Extended-A"),
    (0xAA80, 0xAADF, "Tai Viet"),
    (0xF900, 0xFAFF, "CJK Compatibility Ideographs"),
    (0xFE10, 0xFE1F, "Vertical Forms"),
    (0xFE30, 0xFE6F, "CJK Compatibility Forms, Small Form Variants"),
    (0xFF01, 0xFF0F, "Fullwidth punctuation"),
    (0xFF1A, 0xFF20, "Fullwidth punctuation"),
    (0xFF3B, 0xFF40, "Fullwidth punctuation"),
    (0xFF5B, 0xFF65, "Fullwidth and halfwidth CJK punctuation"),
    (0xFF66, 0xFF9F, "Halfwidth Katakana"),
    (0x116D0, 0x116FF, "Myanmar Extended-C"),
    (0x16FE0, 0x16FFF, "Ideographic Symbols and Punctuation"),
    (0x17000, 0x18D7F, "Tangut, Tangut Components, Khitan Small Script, Tangut Supplement"),
    (0x1AFF0, 0x1AFFF, "Kana Extended-B"),
    (0x1B000, 0x1B16F, "Kana Supplement, Kana Extended-A, Small Kana Extension"),
    (0x1B170, 0x1B2FF, "Nushu"),
    (0x20000, 0x3FFFF, "Planes 2 and 3: CJK Extensions B-J, Compatibility Ideographs Supplement"),
)
_BLOCK_STARTS = tuple(lo for lo, _, _ in _UNSPACED_BLOCKS)


def is_unspaced_char(ch: str) -> bool:
    """True when ``ch`` is one character of a script written without spaces between words.

    Its code point lies in one of ``_UNSPACED_BLOCKS`` and it is not a decimal digit
    (category Nd). Unassigned code points of those blocks count, so characters newer
    than Python's Unicode database are recognised.
    """
    cp = ord(ch)
    k = bisect.bisect_right(_BLOCK_STARTS, cp) - 1
    return k >= 0 and cp <= _UNSPACED_BLOCKS[k][1] and unicodedata.category(ch) != "Nd"


def _utf8_length(lead: int) -> int:
    """Bytes of the UTF-8 sequence a lead byte opens (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0  # a continuation byte (0x80-0xBF) or a byte UTF-8 never uses


def _first_char(token: bytes) -> str | None:
    """The character a token's leading bytes spell whole, or None (a partial or stray sequence)."""
    n = _utf8_length(token[0])
    if n == 0 or len(token) < n:
        return None
    try:
        return token[:n].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _last_char(data: bytes) -> str | None:
    """The character ``data`` ends with whole, or None (it ends inside or after a broken sequence)."""
    for back in range(1, min(4, len(data)) + 1):
        n = _utf8_length(data[-back])
        if n == 0:
            continue  # a continuation byte: the character starts further back
        if n != back:
            return None  # the last sequence is cut short (or too long: invalid)
        try:
            return data[-back:].decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def starts_new_word(token: bytes) -> bool:
    """True when a token begins a new word, so a routed span ends before it.

    A token begins a new word when it is empty (end-of-text) or its first character
    is whitespace, punctuation or a symbol (P*, S*), or a character of a script
    written without spaces (``is_unspaced_char``) other than a combining mark.
    A token that opens with a continuation byte, or whose first character it does
    not hold whole (``\\xe4\\xb8``), is still inside, or not yet at the end of, a
    character: False.
    """
    if not token:
        return True
    ch = _first_char(token)
    if ch is None:
        return False
    category = unicodedata.category(ch)
    if ch.isspace() or category[0] in "PS":
        return True
    return category[0] != "M" and is_unspaced_char(ch)


def word_complete(span: bytes, before: bytes = b"") -> bool:
    """True when a routed span ends with a whole character of a script written without spaces.

    ``span`` is the bytes committed in the span so far; the engine asks after each
    committed token (the opening one too) and ends the span at True. A span ending
    in a partial UTF-8 sequence (a byte token holding part of a character) is not
    complete: the specialists finish the character first. Only the end matters:
    ``before``, the bytes generated just before the span (its last 3 bytes are
    enough), lets a span that opens inside a character (``\\x83\\xbd`` finishing
    都) be judged; without it such a span is complete only at its next character.
    """
    if not span:
        return False
    ch = _last_char(before[-3:] + span)  # its last byte is the span's: it ends in the span
    return ch is not None and is_unspaced_char(ch)


def specialists(candidates: Sequence[int], provider_models: Sequence[str],
                from_union: dict[str, torch.Tensor], union_id: int) -> list[int]:
    """The providers among ``candidates`` whose vocabulary contains ``union_id``."""
    return [i for i in candidates if int(from_union[provider_models[i]][union_id]) >= 0]


def pick_specialist(current: Sequence[int], generator: torch.Generator) -> int:
    """One specialist, uniformly at random."""
    return current[uniform_choice(len(current), generator)]
