"""Text normalisation and script-aware units, shared by every signal that windows text.

Space-separated scripts are windowed in words; Han, Kana, Thai and the other scripts written
without spaces between words are windowed in characters, since a "word" there would be a
whole clause.  Mixed text (Japanese with Latin names) gets both kinds of unit in one sequence.
"""
from __future__ import annotations

import unicodedata
from array import array
from functools import lru_cache
from typing import NamedTuple

from audit import _chars

# Scripts written without spaces between words: every character is its own unit.
_UNSEGMENTED_RANGES = {
    "han": [(0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F), (0x3000, 0x303F)],
    "kana": [(0x3040, 0x309F), (0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)],
    "thai": [(0x0E00, 0x0E7F)],
    "lao": [(0x0E80, 0x0EFF)],
    "khmer": [(0x1780, 0x17FF)],
    "myanmar": [(0x1000, 0x109F)],
    "tibetan": [(0x0F00, 0x0FFF)],
    "fullwidth": [(0xFF00, 0xFF65)],
}
UNSEGMENTED_SCRIPTS = frozenset(_UNSEGMENTED_RANGES) - {"fullwidth"}
_SCRIPT_RANGES = {
    "hangul": [(0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF)],
    "hebrew": [(0x0590, 0x05FF)],
    "arabic": [(0x0600, 0x06FF), (0x0750, 0x077F)],
    "devanagari": [(0x0900, 0x097F)],
    "cyrillic": [(0x0400, 0x04FF)],
    "greek": [(0x0370, 0x03FF)],
    "latin": [(0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x024F), (0x1E00, 0x1EFF)],
}


@lru_cache(maxsize=1024)
def normalize(text: str) -> str:
    """NFC and collapsed whitespace: the form every query is issued in.  Cached: each signal
    normalises the same fields of a variant again."""
    return " ".join(unicodedata.normalize("NFC", text).split())


# The unsegmented ranges as the unit cutter (`_chars.unit_spans`) reads them: sorted [lo, hi] pairs.
_UNSEGMENTED_TABLE = array("I", [bound for pair in sorted(p for ranges in _UNSEGMENTED_RANGES.values() for p in ranges) for bound in pair]).tobytes()


# Every script's ranges as `_chars.script_counts` reads them: (lo, hi, script number) triples, sorted.
_SCRIPT_NAMES = (*_UNSEGMENTED_RANGES, *_SCRIPT_RANGES)
_SCRIPT_TABLE = array(
    "I", [v for lo, hi, k in sorted((lo, hi, k) for k, name in enumerate(_SCRIPT_NAMES) for lo, hi in {**_UNSEGMENTED_RANGES, **_SCRIPT_RANGES}[name]) for v in (lo, hi, k)]
).tobytes()


@lru_cache(maxsize=65536)
def script_of(char: str) -> str:
    code = ord(char)
    for table in (_UNSEGMENTED_RANGES, _SCRIPT_RANGES):
        for script, ranges in table.items():
            if any(lo <= code <= hi for lo, hi in ranges):
                return script
    return "other"


@lru_cache(maxsize=4096)
def dominant_script(text: str) -> str:
    """The most frequent script among letters, ignoring digits, punctuation and spaces; among
    equally frequent scripts, the one met first.  Counted in C (`_chars.script_counts`), since
    every field of every variant asks it; cached, since every signal asks it of the same fields."""
    counts, firsts = _chars.script_counts(text, _SCRIPT_TABLE, len(_SCRIPT_NAMES))
    present = {name: (-counts[k], firsts[k]) for k, name in enumerate(_SCRIPT_NAMES) if counts[k] and name != "fullwidth"}
    if not present:
        return "other"
    if "kana" in present and "han" in present:
        return "kana"
    return min(present, key=present.__getitem__)


class Unit(NamedTuple):
    """One window unit: a word, or a single character of an unsegmented script.  A tuple,
    not a dataclass: every field of every variant is cut into units, several times."""

    start: int
    end: int


@lru_cache(maxsize=4096)
def unit_bounds(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The starts and the ends of `text`'s units (`units`), as two tuples (every later caller
    is handed the same ones): what windows are cut from.  In C, since every field of every
    variant is cut; cached, since the signals cut the same fields several times."""
    return _chars.unit_spans(text, _UNSEGMENTED_TABLE, unicodedata.category)


def units(text: str) -> tuple[Unit, ...]:
    """Words split on whitespace (str.isspace), with every unsegmented-script character its own
    unit; a unit of one punctuation or separator character is dropped.

    Punctuation stays attached to its word, so windows cover the exact surface text.
    """
    return tuple(map(Unit, *unit_bounds(text)))


def unit_count(text: str) -> int:
    """How many units `text` has, without building them."""
    return len(unit_bounds(text)[0])


@lru_cache(maxsize=64)
def windows(text: str, size: int) -> tuple[tuple[int, int], ...]:
    """Character spans of every run of `size` consecutive units; a shorter text is one window.
    Cached (a few: a long field's are tens of kilobytes): a field's figures ask for its
    windows three times, over every document and again in its language."""
    starts, ends = unit_bounds(text)
    if not starts:
        return ()
    if len(starts) <= size:
        return ((starts[0], ends[-1]),)
    return tuple(zip(starts[: len(starts) - size + 1], ends[size - 1 :], strict=True))
