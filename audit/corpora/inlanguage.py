"""Queries of a local index that count only documents of some languages.

A match counts for a language only where the document holding it is in that language (the
index's `doclangs` table), so every figure a signal reads has a restricted form here:

- counts: the positions of a suffix-array range whose documents are allowed;
- occurrences: a sample of those positions;
- the longest match at each position: the largest n such that query[i:i+n]'s range holds a
  position in an allowed document.  That is monotone in n (a shorter prefix's range holds the
  longer one's), at most the unrestricted longest match, and at least the previous position's
  restricted length less the bytes between them, so each position costs one check when the
  unrestricted match is allowed and a short binary search otherwise.  Each length's range is
  found around the rank the unrestricted search ended at (its suffix starts with every
  shorter prefix), in a few steps out from it rather than two searches of the whole table.

A range is checked by its positions' documents (pointers -> documents by a search of the
offsets, narrowed in C to one block's documents by `_suffix.document_directory` -> language codes): vectorised for counts and occurrences, in C for the longest
matches (`_suffix.restricted_longest`, a whole query in one call), where a block whose documents
are all allowed or all not (`_suffix.block_verdicts`: nearly every block, since a corpus's
neighbouring documents share a language) answers without the search.  A range of more than `SCAN_CAP` positions (a common short n-gram) is not
read whole: `SCAN_CAP` ranks spread evenly over it are.  What that leaves open is never read
as absence: a capped count becomes [allowed among those read, range less disallowed among
those read], and a longest match whose check stayed open is reported with the unrestricted
length as its highest (`MatchLengths.highest`), which the signals turn into bounded figures.

`ShardQueries` is the per-shard half, mixed into `ShardGroup` so a distributed index's actors
answer too; `LanguageView` is the driver's half, a corpus answering the same protocol.
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import pydivsufsort

from audit import _chars, _suffix
from audit.corpora.base import CorpusInfo, DocumentHit, LanguageBy, MatchLengths, MatchQuestions, Occurrence, Sampled
from audit.corpora.shardread import char_count, char_lengths
from audit.corpora.shards import LEAST_KEY_STEP, Shard
from audit.index.doclangs import RECORD, TABLE, UNKNOWN, DocumentLanguages, How

# Positions of one suffix-array range read to find allowed documents; a larger range is sampled.
SCAN_CAP = 1 << 16
# Ranks read first when only "is any allowed?" is asked: most ranges answer from these.
FIRST_LOOK = 256
# Allowed-document masks kept per shard group (one per set of languages asked).
MASKS_KEPT = 64
# Allowed documents of a shard up to this many bytes get their own small index (see `_small_index`).
TEXT_CAP = 1 << 20
# Bytes of small indexes (text and suffix array) a shard group keeps.
SMALL_KEPT = 64 << 20
# No let-in documents.
NO_DOCUMENTS = np.empty(0, dtype=np.int64)
# Samples of a string's places a language's views keep between them (`LanguageView.occurrences`).
SAMPLES_KEPT = 128


class CharMatches(NamedTuple):
    """A query's unrestricted longest match at each character start (`best`, over a group's
    shards), and each shard's own (lengths, ranks) as `_suffix.longest_char_ranks` gives
    them: the restricted search finds every shorter prefix's range around those ranks."""

    best: np.ndarray
    per_shard: list[tuple[bytes, bytes]]


class SmallIndex(NamedTuple):
    """Some documents' text joined by the document separator, its suffix array and that
    array's sampled keys (`_suffix.shard_keys`)."""

    text: bytes
    table: bytes
    keys: bytes

    @classmethod
    def of(cls, text: bytes) -> SmallIndex:
        table = _sorted_suffixes(text) if text else b""
        return cls(text, table, _suffix.shard_keys(text, table, 4, LEAST_KEY_STEP))

    @property
    def size(self) -> int:
        return len(self.text) + len(self.table) + len(self.keys)


class ShardQueries:
    """Language-restricted answers of a group of shards (`self.shards`, mapped from `self.path`),
    each figure for the documents whose code is in `allowed` (a uint16 array) and the global
    document numbers in `extra` (windows identified in the language: `ngram_language`)."""

    shards: list[Shard]
    path: Path

    def char_matches(self, query: bytes) -> CharMatches: ...

    def _directory(self, k: int) -> bytes:
        """Shard k's `_suffix.document_directory`, made once: a pointer's document is then
        looked up among a block's few documents rather than all of them."""
        directories = self.__dict__.setdefault("_directories", {})
        if k not in directories:
            shard = self.shards[k]
            directories[k] = _suffix.document_directory(shard.offsets, len(shard.data))
        return directories[k]

    def _shard_codes(self) -> list[np.ndarray]:
        codes = getattr(self, "_codes", None)
        if codes is None:
            table = np.memmap(self.path / TABLE, dtype=RECORD, mode="r")
            codes = [np.ascontiguousarray(table["code"][s.first_document : s.first_document + len(s.offsets)]) for s in self.shards]
            self._codes = codes
        return codes

    def _verdicts(self, k: int, allowed: np.ndarray, mask: np.ndarray) -> bytes | None:
        """`_suffix.block_verdicts` of shard k's directory for the documents of the `allowed`
        languages, made once per set of languages; None when `mask` is not their mask (it
        lets in some documents of other languages: then every rank's document is looked up)."""
        if mask is not self._allowed(k, allowed, NO_DOCUMENTS):
            return None
        verdicts = self.__dict__.setdefault("_verdicts_kept", {})
        key = (k, allowed.tobytes())
        if key not in verdicts:
            if len(verdicts) > MASKS_KEPT:
                verdicts.clear()
            verdicts[key] = _suffix.block_verdicts(mask, self._directory(k))
        return verdicts[key]

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

    def _small_index(self, k: int, mask: np.ndarray, key: tuple[object, ...]) -> SmallIndex | None:
        """The texts of the documents of shard k that `mask` selects, joined by the document
        separator, and their suffix array (4-byte pointers), when they are few bytes
        (`TEXT_CAP`): then the longest match in those documents is the plain longest match in
        that small index, exact, where a common pattern's range in the shard would be sampled.
        A UTF-8 query (no 0xff) cannot match across a separator.  The most recently asked are
        kept, up to `SMALL_KEPT` bytes, so a benchmark's languages are sorted once each."""
        kept: OrderedDict[tuple[object, ...], SmallIndex | None] = self.__dict__.setdefault("_small", OrderedDict())
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
        shard = self.shards[k]
        starts = shard.offsets + 1
        ends = np.append(shard.offsets[1:], len(shard.data))
        chosen = np.flatnonzero(mask)
        built = None
        if int((ends[chosen] - starts[chosen]).sum()) <= TEXT_CAP:
            text = b"\xff".join(shard.data[int(starts[d]) : int(ends[d])] for d in chosen)
            built = SmallIndex.of(text)
        kept[key] = built
        held = sum(entry.size for entry in kept.values() if entry is not None)
        while held > SMALL_KEPT and len(kept) > 1:
            oldest = kept.popitem(last=False)[1]
            held -= oldest.size if oldest is not None else 0
        return built

    def _exact_parts(self, k: int, allowed: np.ndarray, extra: np.ndarray) -> tuple[list[SmallIndex], list[bytes], np.ndarray | None]:
        """Shard k's allowed documents as the language's small index, the let-in documents'
        texts (a field's own few: searched as text, `longest_in_text`, not sorted), and the mask
        of those too large for either, searched in the shard (None: no such document)."""
        shard = self.shards[k]
        language_mask = self._allowed(k, allowed, NO_DOCUMENTS)
        language = self._small_index(k, language_mask, (k, allowed.tobytes()))
        rest = language_mask if language is None and language_mask.any() else None
        texts = []
        local = extra[(extra >= shard.first_document) & (extra < shard.first_document + len(shard.offsets))] - shard.first_document
        for document in local.tolist():
            start, end = int(shard.offsets[document]) + 1, int(shard.offsets[document + 1]) if document + 1 < len(shard.offsets) else len(shard.data)
            if end - start <= TEXT_CAP:
                texts.append(bytes(shard.data[start:end]))
                continue
            rest = np.zeros(len(shard.offsets), dtype=bool) if rest is None else rest.copy() if rest is language_mask else rest
            rest[document] = True
        return [language] if language is not None else [], texts, rest

    def count_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[int, int]:
        """(fewest, most) occurrences of `pattern` in allowed documents: equal unless a range
        was sampled."""
        low, high, _ = self.occurrences_in(pattern, allowed, extra, 0)
        return low, high

    def longest_in(self, query: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lowest, highest) restricted longest match in bytes at each character start of
        `query` (`char_starts`); highest is the unrestricted length where a sampled check left
        it open.  A shard's allowed documents, where small, are asked through their own index
        (`_small_index`, `_exact_parts`), exactly; the others in C (`_suffix.restricted_longest`): at each
        start, from the unrestricted length down, each length checked shard by shard (ranks
        read whole up to `SCAN_CAP`, else `FIRST_LOOK` then `SCAN_CAP` of them sampled; what
        one length's check read is not read again for the next)."""
        unrestricted = self.char_matches(query)
        upper = unrestricted.best
        held = self._held(query, unrestricted, allowed, extra)
        if held.all():
            return upper.copy(), upper.copy()
        low = high = np.zeros(len(upper), dtype=np.int64)
        large = []
        for k, shard in enumerate(self.shards):
            small, texts, rest = self._exact_parts(k, allowed, extra)
            exact = [np.frombuffer(_suffix.longest_char_matches(index.text, index.table, 4, query, index.keys, held), dtype=np.int64) for index in small if index.text]
            for found in exact + [longest_in_text(text, query, upper, held) for text in texts]:
                low, high = np.maximum(low, found), np.maximum(high, found)
            if rest is not None:
                large.append((shard.data, shard.table, shard.ratio, shard.offsets, rest, self._directory(k), *unrestricted.per_shard[k], self._verdicts(k, allowed, rest)))
        if large:
            found_low, found_high = _suffix.restricted_longest(large, query, upper, (FIRST_LOOK, SCAN_CAP))
            low = np.maximum(low, np.frombuffer(found_low, dtype=np.int64))
            high = np.maximum(high, np.frombuffer(found_high, dtype=np.int64))
        low, high = np.where(held, upper, low), np.where(held, upper, high)
        return low, high

    def _held(self, query: bytes, unrestricted: CharMatches, allowed: np.ndarray, extra: np.ndarray) -> np.ndarray:
        """Per character start, whether the restricted match is known without a search
        (`_suffix.held_starts`): none was found anywhere, the rank a shard's unrestricted
        search ended on lies in a document that counts (so the restricted match is the
        unrestricted one), or the previous start's is held and this one's follows from it.  On ECLeKTic-sized passages this settles about seven starts in ten,
        which the small indexes then skip."""
        shards = [(s.data, s.table, s.ratio, s.offsets, self._allowed(k, allowed, extra), self._directory(k), *unrestricted.per_shard[k]) for k, s in enumerate(self.shards)]
        return np.frombuffer(_suffix.held_starts(shards, query, unrestricted.best), dtype=bool)

    def occurrences_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray, limit: int) -> tuple[int, int, Sampled]:
        """(fewest, most) allowed occurrences and up to `limit` of each shard's, spread evenly
        (in shard order, each shard's in rank order)."""
        low = high = 0
        documents, offsets = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for k, shard in enumerate(self.shards):
            lo, hi = _suffix.find_range(shard.data, shard.table, shard.ratio, pattern)
            if hi <= lo:
                continue
            pointers, local, read = self._read(k, lo, hi, allowed, SCAN_CAP, extra)
            low += len(pointers)
            high += (hi - lo) - (read - len(pointers))
            at = np.asarray(_spread(len(pointers), limit), dtype=np.int64)
            documents.append(local[at] + shard.first_document)
            offsets.append(pointers[at].astype(np.int64) - shard.offsets[local[at]].astype(np.int64) - 1)
        return low, high, Sampled.kept(np.concatenate(documents), np.concatenate(offsets))


def longest_in_text(text: bytes, query: bytes, upper: np.ndarray | None = None, held: np.ndarray | None = None) -> np.ndarray:
    """At each character start of `query`, the longest prefix of the rest that `text` holds, in
    bytes: from the previous start's length less the bytes between them (a suffix of a string
    found is found), one byte at a time, so about two substring searches per character; in C
    (`_chars.longest_in_text`), since a benchmark of short fields asks it of every let-in page.
    Given the unrestricted lengths (`upper`), no search goes past them; given the starts whose
    restricted match is known (`held`, `ShardQueries._held`), those are answered `upper` and
    floor the next search: each answer is then at least the text's own and at most the
    restricted one, so the largest over a language's parts is still the restricted match."""
    given = [part for part in (upper, held) if part is not None]
    return np.frombuffer(_chars.longest_in_text(text, query, *given), dtype=np.int64)


def _sorted_suffixes(text: bytes) -> bytes:
    """The suffix array of `text` as 4-byte little-endian pointers, sorted on a new thread: the
    sorter's OpenMP keeps a thread pool per calling thread, and a forked worker's main thread
    inherits its parent's pool without the pool's threads (an index built before the fork
    would leave it waiting for them forever)."""
    with ThreadPoolExecutor(max_workers=1) as fresh:
        suffixes = fresh.submit(pydivsufsort.divsufsort, np.frombuffer(bytearray(text), dtype=np.uint8)).result()
    return suffixes.astype("<i4").tobytes()


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

    def occurrences_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray, limit: int) -> tuple[int, Sampled]: ...

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes: ...

    def surroundings(self, places: Sequence[Occurrence], before: int, after: int) -> list[bytes]: ...

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit: ...


class LanguageView:
    """A local index seen through its language table: the corpus protocol, each answer counting
    only documents of `languages` (any of their regional or script forms: `zh` takes `zh-Hant`)
    and of unknown language when `unknown` is true.  A language
    no document is in leaves nothing allowed, and every answer is 0 without a query."""

    by = LanguageBy.TABLE
    exact_lengths = True

    def __init__(self, index: TabledIndex, languages: frozenset[str], unknown: bool, documents: frozenset[int] = frozenset(), samples: Callable | None = None) -> None:
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
        # Filled by the n-gram scope (`Scope.quoting`): this view with the documents quoting a
        # match let in, per language, match, windows read and digest of the sample.
        self.quoted: dict[tuple[str, str, int, bytes], LanguageView] = {}
        self._samples = samples or functools.lru_cache(maxsize=SAMPLES_KEPT)(LanguageView._sampled)
        # Read-only: a view is kept by its index and handed to every field that asks for it.
        self.allowed.setflags(write=False)
        self.extra.setflags(write=False)

    def with_documents(self, documents: frozenset[int]) -> LanguageView:
        """This view with some documents of other languages let in: those whose window around
        a match was identified as this language (a page quoting it)."""
        return LanguageView(self.index, self.languages, self.unknown, self.let_in | documents, self._samples)

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
            low = high = np.zeros(char_count(encoded), dtype=np.int64)
        else:
            low, high = self.index.longest_in(encoded, self.allowed, self.extra)
        lengths = char_lengths(encoded, low)
        return MatchLengths(lengths, None if low.tobytes() == high.tobytes() else char_lengths(encoded, high))

    def occurrences(self, text: str, limit: int) -> tuple[int, Sampled]:
        """Kept (read-only), in one store with the views letting documents in: a benchmark's
        pair checks ask a language for the same answers and names item after item."""
        return (0, Sampled.none()) if self.empty or not text else self._samples(self, text, limit)

    def _sampled(self, text: str, limit: int) -> tuple[int, Sampled]:
        total, found = self.index.occurrences_in(text.encode("utf-8"), self.allowed, self.extra, limit)
        return total, found.picked(_spread(len(found), limit))

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        return self.index.surrounding(occurrence, before, after)

    def surroundings(self, places: Sequence[Occurrence], before: int, after: int) -> list[bytes]:
        return self.index.surroundings(places, before, after)

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        return self.index.document_hit(occurrence, length_bytes, context_chars)

    def document_language(self, document: int) -> tuple[str, str]:
        """The document's language in the table and how it was known (`metadata`, `source`,
        `identified`, or `unknown` for `und`)."""
        return self.table.language(document), _HOW[self.table.known_by(document)]
