"""Word completion for routed spans, on the real SmolLM2 and Gemma 3 tokenizers' token bytes.

A routed span ends before a token that starts a new word (whitespace, punctuation,
a symbol, or a whole character of a script written without spaces), or right after
the token that completes a character of such a script. Tiny random models never
write CJK, so these tests walk the real tokenisations of Chinese, Japanese, Thai
and Korean sentences.
"""

from __future__ import annotations

import pytest

from wash.engine.config import MAX_ROUTED_SPAN
from wash.engine.routing import is_unspaced_char, starts_new_word, word_complete

MODELS = ("smollm2", "gemma3")

ZH = "今天天气很好，我们去公园散步吧。北京是中华人民共和国的首都，龘齉爩。"
JA = "東京は日本の首都です。ひらがなとカタカナ、そして漢字を使います。ﾊﾝｶｸもある。"
TH = "ภาษาไทยเป็นภาษาที่ไม่มีการเว้นวรรคระหว่างคำ"
MIXED = "我用iPhone看新闻，東京でPythonを書いた。"
KO = "대한민국의 수도는 서울입니다. 한국어는 띄어쓰기를 합니다."
UNSPACED_TEXTS = {"zh": ZH, "ja": JA, "th": TH, "mixed": MIXED}


@pytest.fixture(scope="module")
def tokenisers():
    """name -> (tokenizer, ModelVocab) of the real tokenizers (read once per module)."""
    from wash.engine.models import load_tokenizer
    from wash.engine.vocab import build_model_vocab

    out = {}
    for name in MODELS:
        tokenizer = load_tokenizer(name)
        out[name] = (tokenizer, build_model_vocab(name, tokenizer, len(tokenizer), frozenset()))
    return out


def token_bytes(tokenisers, name: str, text: str) -> list[bytes]:
    tokenizer, vocab = tokenisers[name]
    pieces = [vocab.token_bytes[i] for i in tokenizer.encode(text, add_special_tokens=False)]
    assert b"".join(pieces) == text.encode("utf-8"), name
    return pieces


def char_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, char) byte offsets of every character of ``text``."""
    out, pos = [], 0
    for ch in text:
        n = len(ch.encode("utf-8"))
        out.append((pos, pos + n, ch))
        pos += n
    return out


def token_ends(pieces: list[bytes]) -> list[int]:
    ends, pos = [], 0
    for p in pieces:
        pos += len(p)
        ends.append(pos)
    return ends


def tokens_per_char(pieces: list[bytes], text: str) -> list[int]:
    """For each character, how many tokens hold at least one of its bytes."""
    starts = [e - len(p) for e, p in zip(token_ends(pieces), pieces)]
    ends = token_ends(pieces)
    return [sum(1 for s, e in zip(starts, ends) if s < c_end and e > c_start)
            for c_start, c_end, _ in char_spans(text)]


def routed_walk(pieces: list[bytes], *, with_before: bool = True) -> list[list[bytes]]:
    """Open a routed span at every token; the specialists then write the tokenisation's tokens.

    Mirrors the engine: the opening token is committed; a span ends when what is
    committed completes a word, before a token that starts a new word (discarded),
    at MAX_ROUTED_SPAN tokens, or at the end of the text.
    """
    spans = []
    for i in range(len(pieces)):
        before = b"".join(pieces[:i]) if with_before else b""
        span = [pieces[i]]
        while (not word_complete(b"".join(span), before) and len(span) < MAX_ROUTED_SPAN
               and i + len(span) < len(pieces)):
            y = pieces[i + len(span)]
            if starts_new_word(y):
                break
            span.append(y)
        spans.append(span)
    return spans


# --- the script list ------------------------------------------------------------------------


def test_unspaced_scripts():
    unspaced = ("中国字龘𠀀\U00031350\U0002EBF0豈\U0002F800"  # Han, Ext B, Ext H/I (newer than unicodedata), compat
                "あゔゝアヴーｱﾝ\U0001B001"  # kana, prolonged sound mark, halfwidth, Kana Supplement
                "ㄅꀀ々〆〇。、「」，！"  # Bopomofo, Yi, iteration marks, CJK punctuation
                # Thai (letter, vowel, tone mark), Lao, Khmer, Myanmar, Tibetan, Javanese, Balinese
                "กำ่ກកကཀꦲᬅ")
    for ch in unspaced:
        assert is_unspaced_char(ch), f"U+{ord(ch):04X}"
    spaced = ("aZé1 \n.,$ÀЖאا"  # Latin, Cyrillic, Hebrew, Arabic
              "한국ㄱᄀ\uffa1"  # Hangul: Korean writes spaces between words
              "๑០၁"  # digits of unspaced scripts: a number is one word
              "ＡＺ０９\u3000"  # fullwidth Latin letters and digits, ideographic space
              "\u0301🚗")  # a general combining accent, an emoji
    for ch in spaced:
        assert not is_unspaced_char(ch), f"U+{ord(ch):04X}"


def paper_rule(token: bytes) -> bool:
    """``starts_new_word`` before scripts without spaces: whitespace, punctuation or a symbol."""
    import unicodedata

    text = token.decode("utf-8", errors="ignore")
    return not token or bool(text) and (text[0].isspace() or unicodedata.category(text[0])[0] in "PS")


# --- starts_new_word --------------------------------------------------------------------------


def test_starts_new_word_english_unchanged():
    assert starts_new_word(b" the") and starts_new_word(b".") and starts_new_word(b"\n")
    assert starts_new_word(b"") and starts_new_word(b"$") and starts_new_word(b"+1")
    assert not starts_new_word(b"ing") and not starts_new_word(b"the") and not starts_new_word(b"2")
    assert not starts_new_word(b"\x80") and not starts_new_word(b"\xa9abc")  # continuation bytes
    assert not starts_new_word("é".encode()[:1])  # a lead byte, the character not whole


def test_starts_new_word_unspaced_scripts():
    for token in ("中", "中华人民共和国", "の", "カタカナ", "ｱ", "ก", "ภาษา", "。", "，", "龘"):
        assert starts_new_word(token.encode()), token
    assert not starts_new_word("中".encode()[:2])  # half of 中: not yet a whole character
    assert not starts_new_word("ี".encode()) and not starts_new_word("่".encode())  # Thai marks attach
    assert not starts_new_word("\u3099".encode())  # combining dakuten: attaches to its kana
    assert not starts_new_word("한국".encode()) and starts_new_word(" 한국".encode())  # Korean: spaces


@pytest.mark.parametrize("name", MODELS)
def test_starts_new_word_over_real_vocabularies(tokenisers, name):
    _, vocab = tokenisers[name]
    tokens = [b for b in vocab.token_bytes if b]
    for s in (b" the", b"ing", b".", "中".encode(), "の".encode()):
        assert s in tokens, s  # the cases above are real tokens of this vocabulary
    seen = {"cjk": 0, "kana": 0, "hangul": 0, "continuation": 0}
    for b in tokens:
        if 0x80 <= b[0] <= 0xBF:
            seen["continuation"] += 1
            assert not starts_new_word(b), b
            continue
        text = b.decode("utf-8", errors="replace")
        ch = text[0]
        if ch == "\ufffd" and not b.startswith("\ufffd".encode()):
            assert not starts_new_word(b), b  # the first character is not whole
        elif "\u4e00" <= ch <= "\u9fff":
            seen["cjk"] += 1
            assert starts_new_word(b), b
        elif "\u3041" <= ch <= "\u3096" or "\u30a1" <= ch <= "\u30fa":  # kana letters
            seen["kana"] += 1
            assert starts_new_word(b), b
        elif "\uac00" <= ch <= "\ud7a3":
            seen["hangul"] += 1
            assert not starts_new_word(b), b
        elif b[0] < 0x80:  # ASCII-led tokens: the paper's rule, unchanged
            assert starts_new_word(b) == paper_rule(b), b
    assert all(seen.values()), seen


# --- word_complete on real tokenisations --------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("lang", sorted(UNSPACED_TEXTS))
def test_word_complete_exactly_after_a_whole_unspaced_character(tokenisers, name, lang):
    text = UNSPACED_TEXTS[lang]
    pieces = token_bytes(tokenisers, name, text)
    # Ends of characters that complete a word: every character but ASCII (iPhone, Python).
    word_ends = {end for _, end, ch in char_spans(text) if not ch.isascii()}
    char_ends = {end for _, end, _ in char_spans(text)}
    partial = 0
    prefix = b""
    for piece, end in zip(pieces, token_ends(pieces)):
        expected = end in word_ends
        assert word_complete(piece, before=prefix) == expected, (piece, end)
        assert word_complete(prefix + piece) == expected, (piece, end)  # the whole text as one span
        if end not in char_ends:
            partial += 1  # the token ends inside a character: the specialists must finish it
            assert not word_complete(piece, before=prefix) and not word_complete(prefix + piece)
        prefix += piece
    if name == "smollm2" or lang == "zh":  # byte tokens for rare characters (龘) in both
        assert partial > 0


def test_word_complete_partial_utf8_and_spans_opening_inside_a_character():
    du = "都".encode()  # SmolLM2 spells it \xe9 + \x83\xbd
    assert not word_complete(du[:1]) and not word_complete(du[:2])
    assert word_complete(du) and word_complete(du[1:], before=du[:1])
    assert word_complete(du[2:], before=b"abc" + du[:2])
    assert not word_complete(du[1:])  # without the bytes before, the character is unknown
    assert not word_complete(b"") and not word_complete(b"iPhone") and not word_complete("한".encode())
    assert word_complete(" 中".encode()) and word_complete("ภาษา".encode()) and word_complete("。".encode())
    assert not word_complete("中".encode() + b"\xe4")  # a new character begun and not finished


# --- simulated routing ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("lang", ["zh", "ja", "th"])
def test_routed_spans_never_outlast_one_character(tokenisers, name, lang):
    text = UNSPACED_TEXTS[lang]
    pieces = token_bytes(tokenisers, name, text)
    per_char = tokens_per_char(pieces, text)
    longest_char = max(per_char)
    assert 1 <= longest_char <= 4
    spans = routed_walk(pieces)
    assert max(len(s) for s in spans) <= longest_char, (spans, per_char)
    for i, span in enumerate(spans):
        if i + len(span) < len(pieces):  # not cut by the end of the text: a character ended
            assert word_complete(b"".join(span), before=b"".join(pieces[:i])), span
    # The engine without ``before``: a span opening inside a character runs to the next one.
    pairs = [a + b for a, b in zip(per_char, per_char[1:])]
    assert max(len(s) for s in routed_walk(pieces, with_before=False)) <= max(pairs)


@pytest.mark.parametrize("name", MODELS)
def test_korean_keeps_the_paper_rule(tokenisers, name):
    """Korean is written with spaces: words end at spaces, never at each Hangul syllable."""
    pieces = token_bytes(tokenisers, name, KO)
    prefix = b""
    for piece in pieces:
        assert not word_complete(piece, before=prefix) and not word_complete(prefix + piece), piece
        assert starts_new_word(piece) == (piece[:1] in (b" ", b".")), piece
        prefix += piece
    spans = routed_walk(pieces)
    for i, span in enumerate(spans):
        joined = b"".join(span)
        assert b" " not in joined[1:], joined.decode("utf-8", errors="replace")  # one word at most
        end = i + len(span)
        assert end == len(pieces) or starts_new_word(pieces[end]), joined  # it ran to the word's end
    assert max(len(s) for s in spans) > 1  # spans cover several syllables
