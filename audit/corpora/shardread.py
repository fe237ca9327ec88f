"""Reading a byte-level shard below the suffix-array search: characters from byte offsets,
the document around a position as infini-gram's engine shows it, and the next-byte counts of
its `ntd` query."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from audit import _chars
from audit.corpora.shards import Shard


@lru_cache(maxsize=64)
def char_starts(encoded: bytes) -> np.ndarray:
    """Byte offsets at which UTF-8 characters start (read-only: kept for the next asker, as a
    field's searches each ask for them)."""
    raw = np.frombuffer(encoded, dtype=np.uint8)
    starts = np.flatnonzero((raw & 0xC0) != 0x80)
    starts.setflags(write=False)
    return starts


# UTF-8 continuation bytes: every other byte starts a character.
_CONTINUATION = bytes(range(0x80, 0xC0))


def char_count(encoded: bytes) -> int:
    """How many characters start in `encoded` (the length of `char_starts`, without the
    array: a field's searches each size their answers with it)."""
    return len(encoded.translate(None, _CONTINUATION))


def char_lengths(encoded: bytes, at_starts: np.ndarray) -> list[int]:
    """Per character, how many whole characters the byte-level match starting there covers,
    from the byte lengths at the character starts (`char_starts`) alone; in C
    (`_chars.char_lengths`), since every field asks it twice and most fields are short."""
    return _chars.char_lengths(encoded, np.ascontiguousarray(at_starts, dtype=np.int64))


def bytes_to_char_lengths(encoded: bytes, byte_lengths: np.ndarray) -> list[int]:
    """Per character, how many whole characters a byte-level match starting there covers."""
    return char_lengths(encoded, byte_lengths[char_starts(encoded)])


# Documents read in one call by `LocalIndex.documents`: few calls to a remote group, bounded memory.
TEXTS_PER_CALL = 1024
# The byte before every document of a byte-level index (infini-gram's document separator).
SEPARATOR = 0xFF


@dataclass(frozen=True)
class ShardDocument:
    """The document holding one byte position of a shard, and the window of it shown around
    that position, as infini-gram's engine shows one (`get_doc_by_ptr`): `pointer`, `start`,
    `end` and `shown` are positions in the shard's bytes, `text` the window, `metadata` the
    document's metadata line as stored."""

    document: int
    pointer: int
    start: int
    end: int
    shown: int
    text: bytes
    metadata: bytes


def pointer_at(shard: Shard, rank: int) -> int:
    return int.from_bytes(shard.table[rank * shard.ratio : (rank + 1) * shard.ratio], "little")


def next_byte(shard: Shard, rank: int, length: int, end: int) -> int:
    """The byte after the `length`-byte match at `rank`; `end` where a document or the shard ends."""
    at = pointer_at(shard, rank) + length
    return end if at == len(shard.data) or shard.data[at] == SEPARATOR else shard.data[at]


def count_next(shard: Shard, length: int, lo: int, hi: int, unit: int, end: int, first: int | None, last: int | None, counts: dict[int, int]) -> None:
    """infini-gram's `_get_freq_by_token_id_approx`, step for step, so sampled counts are the
    engine's: a range whose first and last continuations agree counts whole, a range under
    four units is sampled at the middle of every unit, any other is halved."""
    if hi - lo < 4 * unit:
        for rank in range(lo, hi, unit):
            whole = rank + unit <= hi
            found = next_byte(shard, rank + (unit >> 1) if whole else (rank + hi) >> 1, length, end)
            counts[found] = counts.get(found, 0) + (unit if whole else hi - rank)
        return
    first = next_byte(shard, lo, length, end) if first is None else first
    last = next_byte(shard, hi - 1, length, end) if last is None else last
    if first == last:
        counts[first] = counts.get(first, 0) + hi - lo
        return
    middle = (lo + hi) >> 1
    count_next(shard, length, lo, middle, unit, end, first, None, counts)
    count_next(shard, length, middle, hi, unit, end, None, last, counts)
