"""Window units per script: words where words are spaced, characters where they are not."""
import gzip
import json
import random
import re
import unicodedata
from array import array
from pathlib import Path

import pytest

from audit import _chars
from audit.text import _SCRIPT_RANGES, _UNSEGMENTED_RANGES, dominant_script, normalize, script_of, unit_bounds, unit_count, units, windows

DEMO = Path(__file__).resolve().parent.parent / "audit" / "data" / "demo" / "corpus"


def surface(text: str, size: int) -> list[str]:
    return [text[s:e] for s, e in windows(text, size)]


def test_normalize_composes_and_collapses():
    assert normalize("Cafe\u0301  au\n\tlait ") == "Café au lait"


def test_han_windows_are_characters():
    text = "西汉册封谁为武安侯？"
    assert dominant_script(text) == "han"
    assert surface(text, 3)[:3] == ["西汉册", "汉册封", "册封谁"]
    assert len(units(text)) == 9


def test_kana_with_han_is_character_windowed():
    text = "西漢は誰を武安侯に封じましたか？"
    assert dominant_script(text) == "kana"
    assert surface(text, 4)[0] == "西漢は誰"


def test_hangul_windows_are_words():
    text = "서한은 누구를 무안후로 봉했습니까?"
    assert dominant_script(text) == "hangul"
    assert surface(text, 2) == ["서한은 누구를", "누구를 무안후로", "무안후로 봉했습니까?"]


def test_hebrew_and_devanagari_windows_are_words():
    hebrew = 'מי קיבל את התואר "המרקיז של ווֹאָן"'
    assert dominant_script(hebrew) == "hebrew"
    assert surface(hebrew, 3)[0] == "מי קיבל את"
    hindi = "पश्चिमी हान राजवंश में उपाधि किसे दी गई थी?"
    assert dominant_script(hindi) == "devanagari"
    assert surface(hindi, 4)[-1] == "किसे दी गई थी?"


def test_mixed_script_keeps_latin_words_whole():
    text = "田中はPython programmingが好き"
    assert [text[u.start : u.end] for u in units(text)] == ["田", "中", "は", "Python", "programming", "が", "好", "き"]


def test_short_text_is_one_window():
    assert surface("Tian Fen", 8) == ["Tian Fen"]
    assert windows("   ", 8) == ()


def reference_units(text: str) -> list[tuple[int, int]]:
    """The units' definition as a regular expression: an unsegmented-script character alone,
    else a run of characters that are neither space nor unsegmented; a lone punctuation or
    separator character dropped."""
    unsegmented = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for ranges in _UNSEGMENTED_RANGES.values() for lo, hi in ranges)
    unit = re.compile(rf"[{unsegmented}]|[^\s{unsegmented}]+")
    return [m.span() for m in unit.finditer(text) if len(m.group()) > 1 or unicodedata.category(m.group())[0] not in "PZ"]


def test_units_are_cut_as_the_regular_expression_defines_them():
    """The compiled cutter against the definition, on every kind of character it must tell
    apart: each space str.isspace knows (and the separators it does not), punctuation of many
    blocks, the edges of every unsegmented range, astral characters, marks, controls and a lone
    surrogate; and on the demo corpus's text in each of its languages."""
    spaces = [chr(c) for c in range(0x3100) if chr(c).isspace()] + ["\u200b", "\u2028", "\ufeff"]
    edges = [chr(c) for ranges in _UNSEGMENTED_RANGES.values() for lo, hi in ranges for c in (lo - 1, lo, hi, hi + 1)]
    others = [*"aZé9½,.;!?-—«»()「」、。，・…'\"$+=@#%&*~^_|\\/", "\u0301", "\x00", "\x07", "\ud800", "😀", "𝄞", "\U000e0001", "Ⅻ", "ǅ"]
    pool = spaces + edges + others
    rng = random.Random(3)
    texts = ["", " ", "。", "a", "。a。", " , ", "\u3000", *pool]
    texts += ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    for path in sorted(DEMO.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            texts += [json.loads(line)["text"][:3000] for _, line in zip(range(5), lines, strict=False)]
    for text in texts:
        assert [tuple(u) for u in units(text)] == reference_units(text), repr(text)
    assert unit_count("a b , c") == 3
    assert unit_bounds("a b , c") == ((0, 2, 6), (1, 3, 7))  # tuples: the cached answer cannot be changed by a caller


def test_the_unit_cutter_refuses_a_damaged_range_table():
    with pytest.raises(ValueError, match="pairs of uint32"):
        _chars.unit_spans("a b", b"\x00" * 6, unicodedata.category)
    with pytest.raises(TypeError):
        _chars.unit_spans(b"a b", b"", unicodedata.category)
    with pytest.raises(TypeError, match="category name"):
        _chars.unit_spans(", a", b"", lambda char: 7)


def counted_by_character(text: str) -> str:
    """The dominant script as its definition reads, one character at a time (`script_of`)."""
    counts: dict[str, int] = {}
    for char in text:
        script = script_of(char)
        if script not in ("other", "fullwidth"):
            counts[script] = counts.get(script, 0) + 1
    if not counts:
        return "other"
    if "kana" in counts and "han" in counts:
        return "kana"
    return max(counts, key=counts.__getitem__)


def test_the_dominant_script_counted_in_c_is_the_one_counted_character_by_character():
    """Every script's edges, characters of no script, fullwidth forms, ties (the script met
    first wins) and 40 documents of each of the demo corpus's files."""
    edges = [chr(bound) for ranges in (*_UNSEGMENTED_RANGES.values(), *_SCRIPT_RANGES.values()) for lo, hi in ranges for bound in (lo - 1, lo, hi, hi + 1)]
    pool = [*edges, " ", "1", "!", "\x00", "\U0010ffff", *"aé漢かカ한ไ"]
    rng = random.Random(7)
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 30))) for _ in range(20_000)]
    texts += ["ab 漢字", "漢字 ab", "aא", "אa", "ＡＢＣ", "ｶﾀｶﾅ", "", "123 !?"]
    for path in sorted(DEMO.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            texts += [json.loads(line)["text"] for line, _ in zip(handle, range(40), strict=False)]
    found = [dominant_script.__wrapped__(text) for text in texts]
    assert found == [counted_by_character(text) for text in texts]
    assert {"latin", "han", "kana", "hangul", "other"} <= set(found)
    with pytest.raises(ValueError, match="sorted"):
        _chars.script_counts("a", array("I", [5, 9, 0, 1, 2, 0]).tobytes(), 1)
