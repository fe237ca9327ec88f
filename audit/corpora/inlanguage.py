"""Queries of a local index that count only documents of some languages.

A match counts for a language only where the document holding it is in that language (the
index's `doclangs` table), so every figure a signal reads has a restricted form here:

- counts: the positions of a suffix-array range whose documents are allowed;
- occurrences: a sample of those positions;
- the longest match at each position: the largest n such that query[i:i+n]'s range holds a
  position in an allowed document.  That is monotone in n (a shorter prefix's range holds the
  longer one's), at most the unrestricted longest match, and at least the previous position's
  restricted length less the bytes between them, so each position costs one check when the
  unrestricted match is allowed and a short binary search otherwise.

A range is checked by its positions' documents (pointers -> documents by a search of the
offsets -> language codes): vectorised for counts and occurrences, in C for the longest
matches (`_suffix.restricted_longest`, a whole query in one call).  A range of more than `SCAN_CAP` positions (a common short n-gram) is not
read whole: `SCAN_CAP` ranks spread evenly over it are.  What that leaves open is never read
as absence: a capped count becomes [allowed among those read, range less disallowed among
those read], and a longest match whose check stayed open is reported with the unrestricted
length as its highest (`MatchLengths.highest`), which the signals turn into bounded figures.

`ShardQueries` is the per-shard half, mixed into `ShardGroup` so a distributed index's actors
answer too; `LanguageView` is the driver's half, a corpus answering the same protocol.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
import pydivsufsort

from audit import _suffix
from audit.corpora.base import CorpusInfo, DocumentHit, LanguageBy, MatchLengths, MatchQuestions, Occurrence
from audit.corpora.shardread import char_starts
from audit.corpora.shards import Shard
from audit.index.doclangs import RECORD, TABLE, UNKNOWN, DocumentLanguages, How

# Positions of one suffix-array range read to find allowed documents; a larger range is sampled.
SCAN_CAP = 1 << 16
# Ranks read first when only "is any allowed?" is asked: most ranges answer from these.
FIRST_LOOK = 256
# A range of at most this many ranks is read whole, without building the allowed text.
FEW = 16
# Allowed-document masks kept per shard group (one per set of languages asked).
MASKS_KEPT = 16
# Allowed documents of a shard up to this many bytes get their own small index (see `_allowed_index`).
TEXT_CAP = 1 << 20


class ShardQueries:
    """Language-restricted answers of a group of shards (`self.shards`, mapped from `self.path`),
    each figure for the documents whose code is in `allowed` (a uint16 array) and the global
    document numbers in `extra` (windows identified in the language: `ngram_language`)."""

    shards: list[Shard]
    path: Path

    def longest_char_bytes(self, query: bytes) -> np.ndarray: ...

    def _shard_codes(self) -> list[np.ndarray]:
        codes = getattr(self, "_codes", None)
        if codes is None:
            table = np.memmap(self.path / TABLE, dtype=RECORD, mode="r")
            codes = [np.ascontiguousarray(table["code"][s.first_document : s.first_document + len(s.offsets)]) for s in self.shards]
            self._codes = codes
        return codes

    def _allowed(self, k: int, allowed: np.ndarray, extra: np.ndarray) -> np.ndarray:
        """Per document of shard k, whether it counts: computed once per set of languages and
        let-in documents, so each range costs a gather rather than a set test."""
        masks = self.__dict__.setdefault("_masks", {})
        key = (k, allowed.tobytes(), extra.tobytes())
        if key not in masks:
            if len(masks) > MASKS_KEPT:
                masks.clear()
            shard = self.shards[k]
            mask = np.isin(self._shard_codes()[k], allowed)
            local = extra[(extra >= shard.first_document) & (extra < shard.first_document + len(mask))] - shard.first_document
            mask[local] = True
            masks[key] = mask
        return masks[key]

    def _read(self, k: int, lo: int, hi: int, allowed: np.ndarray, most: int, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """(pointers, shard-local documents) of the allowed positions among at most `most`
        ranks of [lo, hi) spread evenly over it, and how many ranks were read."""
        shard = self.shards[k]
        ranks = np.arange(lo, hi, dtype=np.int64) if hi - lo <= most else np.unique(np.linspace(lo, hi - 1, num=most).round().astype(np.int64))
        pointers = shard.pointers(ranks)
        documents = np.searchsorted(shard.offsets, pointers, side="right") - 1
        keep = self._allowed(k, allowed, extra)[documents]
        return pointers[keep], documents[keep], len(ranks)

    def _allowed_index(self, k: int, allowed: np.ndarray, extra: np.ndarray) -> tuple[bytes, bytes] | None:
        """The texts of shard k's allowed documents, joined by the document separator, and their
        suffix array (4-byte pointers), when they are few bytes (`TEXT_CAP`): then the longest
        match in those documents is the plain longest match in that small index, exact, where a
        common pattern's range in the shard would be sampled.  A UTF-8 query (no 0xff) cannot
        match across a separator.  Built once per set of languages and let-in documents."""
        built = self.__dict__.setdefault("_small", {})
        key = (k, allowed.tobytes(), extra.tobytes())
        if key not in built:
            if len(built) > MASKS_KEPT:
                built.clear()
            shard, mask = self.shards[k], self._allowed(k, allowed, extra)
            starts = shard.offsets + 1
            ends = np.append(shard.offsets[1:], len(shard.data))
            chosen = np.flatnonzero(mask)
            size = int((ends[chosen] - starts[chosen]).sum())
            built[key] = None
            if size <= TEXT_CAP:
                text = b"\xff".join(shard.data[int(starts[d]) : int(ends[d])] for d in chosen)
                table = _sorted_suffixes(text) if text else b""
                built[key] = (text, table)
        return built[key]

    def count_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[int, int]:
        """(fewest, most) occurrences of `pattern` in allowed documents: equal unless a range
        was sampled."""
        low, high, _ = self.occurrences_in(pattern, allowed, extra, 0)
        return low, high

    def longest_in(self, query: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lowest, highest) restricted longest match in bytes at each character start of
        `query` (`char_starts`); highest is the unrestricted length where a sampled check left
        it open.  A shard whose allowed documents are small is asked through their own index
        (`_allowed_index`), exactly; the others in C (`_suffix.restricted_longest`): at each
        start, from the unrestricted length down, each length checked shard by shard (ranks
        read whole up to `FEW`, else `FIRST_LOOK` then `SCAN_CAP` ranks sampled)."""
        upper = self.longest_char_bytes(query)
        low = high = np.zeros(len(upper), dtype=np.int64)
        large = []
        for k, shard in enumerate(self.shards):
            small = self._allowed_index(k, allowed, extra)
            if small is None:
                large.append((shard.data, shard.table, shard.ratio, shard.offsets, self._allowed(k, allowed, extra)))
            elif small[0]:
                found = np.frombuffer(_suffix.longest_char_matches(small[0], small[1], 4, query), dtype=np.int64)
                low, high = np.maximum(low, found), np.maximum(high, found)
        if large:
            found_low, found_high = _suffix.restricted_longest(large, query, upper, (FEW, FIRST_LOOK, SCAN_CAP))
            low = np.maximum(low, np.frombuffer(found_low, dtype=np.int64))
            high = np.maximum(high, np.frombuffer(found_high, dtype=np.int64))
        return low, high

    def occurrences_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray, limit: int) -> tuple[int, int, list[Occurrence]]:
        """(fewest, most) allowed occurrences and up to `limit` of them, spread evenly."""
        low = high = 0
        found: list[Occurrence] = []
        for k, shard in enumerate(self.shards):
            lo, hi = _suffix.find_range(shard.data, shard.table, shard.ratio, pattern)
            if hi <= lo:
                continue
            pointers, documents, read = self._read(k, lo, hi, allowed, SCAN_CAP, extra)
            low += len(pointers)
            high += (hi - lo) - (read - len(pointers))
            for j in _spread(len(pointers), limit):
                document = int(documents[j])
                found.append(Occurrence(shard.first_document + document, int(pointers[j]) - int(shard.offsets[document]) - 1))
        return low, high, found


def _sorted_suffixes(text: bytes) -> bytes:
    """The suffix array of `text` as 4-byte little-endian pointers, sorted on a new thread: the
    sorter's OpenMP keeps a thread pool per calling thread, and a forked worker's main thread
    inherits its parent's pool without the pool's threads (an index built before the fork
    would leave it waiting for them forever)."""
    with ThreadPoolExecutor(max_workers=1) as fresh:
        suffixes = fresh.submit(pydivsufsort.divsufsort, np.frombuffer(bytearray(text), dtype=np.uint8)).result()
    return suffixes.astype("<i4").tobytes()


def char_lengths(encoded: bytes, at_starts: np.ndarray) -> list[int]:
    """Per character, how many whole characters the byte-level match starting there covers,
    from the byte lengths at the character starts (`char_starts`) alone."""
    starts = char_starts(encoded)
    bounds = np.append(starts, len(encoded))
    return (np.searchsorted(bounds, starts + at_starts, side="right") - 1 - np.arange(len(starts))).tolist()


def _spread(count: int, limit: int) -> list[int]:
    if count <= limit:
        return list(range(count))
    return np.unique(np.linspace(0, count - 1, num=limit).round().astype(np.int64)).tolist()


_HOW = {How.NONE: "unknown", How.METADATA: "metadata", How.SOURCE: "source", How.IDENTIFIED: "identified"}


class TabledIndex(Protocol):
    """A local index with a language table, as a `LanguageView` asks it: each restricted
    figure merged over its shard groups."""

    info: CorpusInfo
    languages: DocumentLanguages | None

    @property
    def language_counts(self) -> dict[str, int]: ...

    def count_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[int, int]: ...

    def longest_in(self, query: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def occurrences_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray, limit: int) -> tuple[int, list[Occurrence]]: ...

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes: ...

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit: ...


class LanguageView:
    """A local index seen through its language table: the corpus protocol, each answer counting
    only documents of `languages` (any of their regional or script forms: `zh` takes `zh-Hant`)
    and of unknown language when `unknown` is true.  A language
    no document is in leaves nothing allowed, and every answer is 0 without a query."""

    by = LanguageBy.TABLE

    def __init__(self, index: TabledIndex, languages: frozenset[str], unknown: bool, documents: frozenset[int] = frozenset()) -> None:
        if index.languages is None:
            raise ValueError(f"{index.info.name}: has no language table")
        self.index, self.info, self.table = index, index.info, index.languages
        self.languages, self.unknown = languages, unknown
        present = index.language_counts
        primaries = {name.split("-")[0] for name in languages}
        names = {name for name in present if name.split("-")[0] in primaries} | ({UNKNOWN} if unknown and present.get(UNKNOWN) else set())
        self.allowed = np.array(sorted(self.table.code(name) for name in names), dtype=np.uint16)
        self.extra = np.array(sorted(documents), dtype=np.int64)
        self.let_in = documents

    def with_documents(self, documents: frozenset[int]) -> LanguageView:
        """This view with some documents of other languages let in: those whose window around
        a match was identified as this language (a page quoting it)."""
        return LanguageView(self.index, self.languages, self.unknown, self.let_in | documents)

    @property
    def empty(self) -> bool:
        return not len(self.allowed) and not len(self.extra)

    def count_range(self, text: str) -> tuple[int, int]:
        if self.empty or not text:
            return 0, 0
        return self.index.count_in(text.encode("utf-8"), self.allowed, self.extra)

    def count(self, text: str) -> int:
        return self.count_range(text)[1]

    def match_lengths(self, text: str, questions: MatchQuestions | None = None) -> MatchLengths:
        encoded = text.encode("utf-8")
        if not encoded:
            return MatchLengths([])
        if self.empty:
            low = high = np.zeros(len(char_starts(encoded)), dtype=np.int64)
        else:
            low, high = self.index.longest_in(encoded, self.allowed, self.extra)
        lengths = char_lengths(encoded, low)
        return MatchLengths(lengths, None if np.array_equal(low, high) else char_lengths(encoded, high))

    def occurrences(self, text: str, limit: int) -> tuple[int, list[Occurrence]]:
        if self.empty or not text:
            return 0, []
        total, found = self.index.occurrences_in(text.encode("utf-8"), self.allowed, self.extra, limit)
        return total, [found[j] for j in _spread(len(found), limit)]

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        return self.index.surrounding(occurrence, before, after)

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        return self.index.document_hit(occurrence, length_bytes, context_chars)

    def document_language(self, document: int) -> tuple[str, str]:
        """The document's language in the table and how it was known (`metadata`, `source`,
        `identified`, or `unknown` for `und`)."""
        return self.table.language(document), _HOW[self.table.known_by(document)]
