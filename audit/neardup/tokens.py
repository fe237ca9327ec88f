"""Tokens and shingles: how a text is cut for the near-duplicate index, the same way at build
and at query time, and the parameters an index is built with."""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from audit import _neardup
from audit.text import UNSEGMENTED_SCRIPTS, script_of

# Tokens: learned per code point on first sight, so no table of all of Unicode is built.

SEPARATOR, WORD, CHARACTER, _UNSEEN = 0, 1, 2, 255
SCRIPT_NAMES = (
    "other", "latin", "cyrillic", "greek", "arabic", "hebrew", "devanagari", "hangul",
    "han", "kana", "thai", "lao", "khmer", "myanmar", "tibetan", "fullwidth",
)  # fmt: skip
_SCRIPT_IDS = {name: i for i, name in enumerate(SCRIPT_NAMES)}
_OWN_UNIT = UNSEGMENTED_SCRIPTS | {"fullwidth"}


class _CodePoints:
    """Per code point: separator (punctuation, symbol, space, control), word character, or a
    character that is a token by itself (`audit.text`'s unsegmented scripts); its simple case
    fold; its script.  Filled in for the code points a text holds, the first time they occur."""

    def __init__(self) -> None:
        self.kind = np.full(0x110000, _UNSEEN, dtype=np.uint8)
        self.fold = np.arange(0x110000, dtype=np.uint32)
        self.script = np.zeros(0x110000, dtype=np.uint8)

    def learn(self, points: np.ndarray) -> None:
        unseen = points[self.kind[points] == _UNSEEN]
        for point in np.unique(unseen).tolist():
            char = chr(point)
            category = unicodedata.category(char)
            if category[0] in "PSZ" or category == "Cc":
                self.kind[point] = SEPARATOR
                continue
            script = script_of(char)
            folded = char.casefold()
            if len(folded) == 1:
                self.fold[point] = ord(folded)
            self.script[point] = _SCRIPT_IDS.get(script, 0)
            self.kind[point] = CHARACTER if script in _OWN_UNIT else WORD


_CODE_POINTS: list[_CodePoints] = []


def _code_points() -> _CodePoints:
    if not _CODE_POINTS:
        _CODE_POINTS.append(_CodePoints())
    return _CODE_POINTS[0]


_U32 = np.uint32(0xFFFFFFFF)
_MIX = np.uint64(0x9E3779B97F4A7C15)
# Weights of a token's characters by position (a polynomial hash; positions past 63 share one).
_POWERS = np.array([pow(0x100000001B3, i, 1 << 64) for i in range(64)], dtype=np.uint64)


def _fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: spreads structured inputs over all bits."""
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


@dataclass(frozen=True)
class Tokens:
    """Tokens of a text: character start and end, a 64-bit hash of the case-folded token, and
    the script id (`SCRIPT_NAMES`) of its first character."""

    starts: np.ndarray
    ends: np.ndarray
    hashes: np.ndarray
    scripts: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


def code_points(text: str) -> np.ndarray:
    """The text's code points; undecodable bytes kept as lone surrogates (one per byte)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def tokenize_points(points: np.ndarray) -> Tokens:
    """Tokens of a code point array, in one compiled pass (`audit._neardup.tokens`): a word is
    a run of word characters, an unsegmented-script character is a token alone, separators
    only separate; a token's hash weighs each folded character by its position."""
    table = _code_points()
    points = np.ascontiguousarray(points, dtype=np.uint32)
    cut = _neardup.tokens(points, table.kind, table.fold, table.script, _POWERS)
    if cut is None:  # a code point not met before: learned, then the text is cut again
        table.learn(points)
        cut = _neardup.tokens(points, table.kind, table.fold, table.script, _POWERS)
    starts, ends, hashes, scripts = cut
    return Tokens(np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64), np.frombuffer(hashes, dtype=np.uint64), np.frombuffer(scripts, dtype=np.uint8))


def tokenize(text: str) -> Tokens:
    return tokenize_points(code_points(text))


class _Table(BaseModel):
    """Parameters as they are recorded: unknown keys and loose types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ShingleSizes(_Table):
    """Tokens per shingle, by the script of the shingle's first token: words for
    space-separated scripts, characters for the unsegmented ones; a script left unset uses
    `default` (fullwidth forms use `han`)."""

    default: int = Field(3, ge=1, le=16)
    arabic: int | None = Field(None, ge=1, le=16)
    cyrillic: int | None = Field(None, ge=1, le=16)
    devanagari: int | None = Field(None, ge=1, le=16)
    greek: int | None = Field(None, ge=1, le=16)
    hangul: int | None = Field(None, ge=1, le=16)
    hebrew: int | None = Field(None, ge=1, le=16)
    latin: int | None = Field(None, ge=1, le=16)
    han: int | None = Field(3, ge=1, le=16)
    kana: int | None = Field(3, ge=1, le=16)
    thai: int | None = Field(5, ge=1, le=16)
    lao: int | None = Field(5, ge=1, le=16)
    khmer: int | None = Field(5, ge=1, le=16)
    myanmar: int | None = Field(5, ge=1, le=16)
    tibetan: int | None = Field(5, ge=1, le=16)

    def size(self, script: str) -> int:
        name = "han" if script == "fullwidth" else script
        value = getattr(self, name) if name in type(self).model_fields and name != "default" else None
        return value or self.default

    def table(self) -> np.ndarray:
        return np.array([self.size(name) for name in SCRIPT_NAMES], dtype=np.int64)


Sketcher = Literal["datasketch", "rensa"]


class NearDupParams(_Table):
    """How a near-duplicate index is built; all of it is recorded in its manifest, and a query
    uses the index's own.  `window` must be a multiple of `stride`."""

    sketcher: Sketcher = "datasketch"
    num_perm: int = Field(32, ge=2, le=1024)
    bands: int = Field(32, ge=1)
    rows: int = Field(1, ge=1)
    seed: int = Field(1, ge=0, lt=2**32)
    window: int = Field(32, ge=2, le=65535)
    stride: int = Field(16, ge=1)
    shingle: ShingleSizes = Field(default_factory=ShingleSizes)

    @model_validator(mode="after")
    def _consistent(self) -> NearDupParams:
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows ({self.bands} x {self.rows}) exceeds num_perm ({self.num_perm})")
        if self.window % self.stride:
            raise ValueError(f"window ({self.window}) must be a multiple of stride ({self.stride})")
        return self

    def candidate_probability(self, similarity: float) -> float:
        """The LSH S-curve: the chance that a window at this Jaccard similarity is a candidate."""
        return 1 - (1 - similarity**self.rows) ** self.bands


def shingle_keys(tokens: Tokens, sizes: np.ndarray, limits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The 64-bit key of the shingle starting at each token, and whether one starts there (it
    needs k tokens before `limits`, the end of the token's document; default: the text's end).
    Equal shingle texts have equal keys; unequal ones may collide, so a key only proposes.
    Computed in one compiled pass (`audit._neardup.shingle_keys`)."""
    bounds = None if limits is None else np.ascontiguousarray(limits, dtype=np.int64)
    keys, valid = _neardup.shingle_keys(np.ascontiguousarray(tokens.hashes, dtype=np.uint64), np.ascontiguousarray(tokens.scripts, dtype=np.uint8), np.ascontiguousarray(sizes, dtype=np.int64), bounds)
    return np.frombuffer(keys, dtype=np.uint64), np.frombuffer(valid, dtype=bool)


def shingle_hashes(tokens: Tokens, sizes: np.ndarray, limits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The 32-bit hash the MinHash signatures are made of: the low half of the shingle's key."""
    keys, valid = shingle_keys(tokens, sizes, limits)
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32), valid


def shingle_regions(raws: list[bytes], sizes: np.ndarray, keys: np.ndarray, texts: list[str]) -> tuple:
    """Stretches of documents (bytes read from anywhere in them) decoded from their first whole
    character, joined by newlines, tokenised and shingled as `tokenize` and `shingle_keys` do
    (no shingle reaching into the next stretch), with the id of the shingle of `texts` (their
    `keys` aligned) that each position's shingle text is, and per stretch how many distinct
    ones it holds: `audit._neardup.region_shingles`, whose tuple this returns."""
    table = _code_points()
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    found = _neardup.region_shingles(raws, table.kind, table.fold, table.script, _POWERS, sizes, keys, texts)
    if found is None:  # a code point not met before: learned, then the stretches are cut again
        table.learn(code_points("\n".join(raw.decode("utf-8", "ignore") for raw in raws)))
        found = _neardup.region_shingles(raws, table.kind, table.fold, table.script, _POWERS, sizes, keys, texts)
    return found


@dataclass(frozen=True)
class FieldCut:
    """A field as a query needs it: its shingled tokens, and its distinct shingle texts (the
    tokens case-folded, one space between them) in first-occurrence order with the surface form
    of each first occurrence and its key (`keys`), and the numbers of those the set-aside texts
    lack (`own`)."""

    shingled: Shingled
    distinct: list[str]
    surfaces: list[str]
    keys: np.ndarray
    own: list[int]


def field_cut(text: str, sizes: np.ndarray, exclude: frozenset[str]) -> FieldCut:
    """`text` cut as `tokenize` and `shingle_keys` cut it, its distinct shingles picked out, in
    one compiled pass (`audit._neardup.field_shingles`)."""
    table = _code_points()
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    found = _neardup.field_shingles(text, table.kind, table.fold, table.script, _POWERS, sizes, exclude)
    if found is None:  # a code point not met before: learned, then the text is cut again
        table.learn(code_points(text))
        found = _neardup.field_shingles(text, table.kind, table.fold, table.script, _POWERS, sizes, exclude)
    starts, ends, hashes, scripts, keys, valid, low, distinct, surfaces, distinct_keys, own = found
    tokens = Tokens(np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64), np.frombuffer(hashes, dtype=np.uint64), np.frombuffer(scripts, dtype=np.uint8))
    shingled = Shingled(tokens, np.frombuffer(low, dtype=np.uint32), np.frombuffer(valid, dtype=bool), np.frombuffer(keys, dtype=np.uint64))
    return FieldCut(shingled, distinct, surfaces, np.frombuffer(distinct_keys, dtype=np.uint64), own)


@dataclass(frozen=True)
class Shingled:
    """A text's tokens and the shingle (if any) starting at each: its 32-bit hash (what the
    sketches are made of) and its 64-bit key (what proposes a match to verification)."""

    tokens: Tokens
    hashes: np.ndarray
    valid: np.ndarray
    keys: np.ndarray

    @property
    def positions(self) -> int:
        return len(self.hashes)


def shingle_text(text: str, sizes: ShingleSizes) -> Shingled:
    tokens = tokenize(text)
    keys, valid = shingle_keys(tokens, sizes.table())
    return Shingled(tokens, (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32), valid, keys)
