"""A group of an index's shards mapped in one process, answering in global document numbers:
the suffix-array searches and document reads every local query is merged from."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from audit import _suffix
from audit.corpora.base import Occurrence
from audit.corpora.inlanguage import CharMatches, ShardQueries
from audit.corpora.shardread import ShardDocument, char_count, count_next, pointer_at
from audit.corpora.shards import Shard, key_step, map_shards

# Queries whose character-start lengths a group keeps (`longest_char_bytes`).
RECENT_KEPT = 8


class ShardGroup(ShardQueries):
    """Some shards of an index, mapped in one process, answering in global document numbers.
    A local index holds one group of all its shards; a distributed one holds a group in each
    of its Ray actors (`audit.corpora.distributed`).  Every method is a pure read, so a call
    repeated after a crash gives the same answer."""

    def __init__(self, path: str | Path, numbers: list[int], first_documents: list[int]) -> None:
        self.path = Path(path)
        self.shards = map_shards(self.path, numbers, first_documents)
        step = key_step(sum(len(shard.data) for shard in self.shards))
        for shard in self.shards:
            shard.key_step = step
        self._recent: dict[bytes, CharMatches] = {}

    def count_bytes(self, pattern: bytes) -> int:
        return sum(hi - lo for lo, hi in self.ranges(pattern))

    def longest_match_bytes(self, query: bytes) -> np.ndarray:
        best = np.zeros(len(query), dtype=np.int64)
        for shard in self.shards:
            found = np.frombuffer(_suffix.longest_matches(shard.data, shard.table, shard.ratio, query, shard.keys), dtype=np.int64)
            np.maximum(best, found, out=best)
        return best

    def longest_char_bytes(self, query: bytes) -> np.ndarray:
        """`longest_match_bytes` at the character starts of `query` only (`char_starts`), one
        length each: the figures are per character, so the other positions are not searched."""
        return self.char_matches(query).best

    def char_matches(self, query: bytes) -> CharMatches:
        """`longest_char_bytes` with each shard's own lengths and ranks (`CharMatches`).  The
        last few answers are kept (read-only): a field's language-restricted pass starts from
        the same lengths its pass over every document found, and searches around those ranks."""
        kept = self._recent.get(query)
        if kept is not None:
            return kept
        best = np.zeros(char_count(query), dtype=np.int64)
        per_shard = []
        for shard in self.shards:
            lengths, ranks = _suffix.longest_char_ranks(shard.data, shard.table, shard.ratio, query, shard.keys)
            np.maximum(best, np.frombuffer(lengths, dtype=np.int64), out=best)
            per_shard.append((lengths, ranks))
        best.setflags(write=False)
        if len(self._recent) >= RECENT_KEPT:
            self._recent.clear()
        self._recent[query] = found = CharMatches(best, per_shard)
        return found

    def casing_counts(self, texts: list[str]) -> np.ndarray:
        """Each text's occurrences in its casings together (`LocalIndex.casing_counts`), in one call."""
        return np.frombuffer(_suffix.casing_counts([(shard.data, shard.table, shard.ratio, shard.keys) for shard in self.shards], texts), dtype=np.int64)

    def ranges(self, pattern: bytes) -> list[tuple[int, int]]:
        """Each shard's suffix-array range of the pattern."""
        return [_suffix.find_range(shard.data, shard.table, shard.ratio, pattern) for shard in self.shards]

    def sample(self, picks: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """Documents and byte offsets at `count` ranks spread evenly over each shard's range
        (lo, hi, count), in shard order (`_suffix.sample_ranks`, numpy's linspace in C): arrays,
        since a field's sample of hundreds is asked only which languages its documents are in."""
        documents, offsets = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for shard, (lo, hi, count) in zip(self.shards, picks, strict=True):
            if count <= 0:
                continue
            local, within = _suffix.sample_ranks(shard.table, shard.ratio, shard.offsets, lo, hi, count)
            offsets.append(np.frombuffer(within, dtype=np.int64))
            documents.append(np.frombuffer(local, dtype=np.int64) + shard.first_document)
        return np.concatenate(documents), np.concatenate(offsets)

    def holds(self, document: int) -> bool:
        first = self.shards[0].first_document
        return first <= document < self.shards[-1].first_document + len(self.shards[-1].offsets)

    def _locate(self, document: int) -> tuple[Shard, int]:
        for shard in reversed(self.shards):
            if document >= shard.first_document:
                return shard, document - shard.first_document
        raise IndexError(document)

    def metadata(self, document: int) -> dict:
        shard, local = self._locate(document)
        if shard.metadata is None or shard.metaoff is None:
            return {}
        start = int(shard.metaoff[local])
        end = int(shard.metaoff[local + 1]) if local + 1 < len(shard.metaoff) else len(shard.metadata)
        return json.loads(shard.metadata[start:end].decode("utf-8"))

    def _bounds(self, document: int) -> tuple[Shard, int, int]:
        """The shard holding a document and its text's byte range there (after the separator)."""
        shard, local = self._locate(document)
        start = int(shard.offsets[local]) + 1
        end = int(shard.offsets[local + 1]) if local + 1 < len(shard.offsets) else len(shard.data)
        return shard, start, end

    def texts(self, start: int, stop: int) -> list[bytes]:
        found = []
        for document in range(start, stop):
            shard, begin, end = self._bounds(document)
            found.append(shard.data[begin:end])
        return found

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        shard, start, end = self._bounds(occurrence.document)
        at = start + occurrence.offset
        return shard.data[max(start, at - before) : min(end, at + after)]

    def surroundings(self, documents: np.ndarray, offsets: np.ndarray, before: int, after: int) -> list[bytes]:
        """`surrounding` of each (document, offset) of these shards, the bounds worked out
        for all at once (`spans`): a pair check reads hundreds of places of its rarest string."""
        return self.spans(documents, np.maximum(offsets - before, 0), offsets + after)

    def spans(self, documents: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[bytes]:
        """Bytes `starts` to `ends` of each document's text (offsets in it), cut at its end: the
        stretches around a field's candidate windows that near-duplicate verification reads,
        a few dozen a field, their bounds worked out for all at once."""
        found: list[bytes] = [b""] * len(documents)
        firsts = np.array([shard.first_document for shard in self.shards], dtype=np.int64)
        owners = np.searchsorted(firsts, documents, side="right") - 1
        for k in np.unique(owners).tolist():
            shard, at = self.shards[k], np.flatnonzero(owners == k)
            local = documents[at] - shard.first_document
            begin = shard.offsets[local].astype(np.int64) + 1
            end = np.where(local + 1 < len(shard.offsets), shard.offsets[np.minimum(local + 1, len(shard.offsets) - 1)].astype(np.int64), len(shard.data))
            lows, highs = np.minimum(end, begin + starts[at]).tolist(), np.minimum(end, begin + ends[at]).tolist()
            data = shard.data
            for position, low, high in zip(at.tolist(), lows, highs, strict=True):
                found[position] = data[low:high]
        return found

    def excerpt(self, occurrence: Occurrence, before: int, after: int) -> tuple[bytes, dict]:
        """`surrounding` and the document's metadata in one call: provenance costs one round
        trip to a remote group, not two."""
        return self.surrounding(occurrence, before, after), self.metadata(occurrence.document)

    def next_byte_counts(self, prompt: bytes, unit: int, end: int) -> dict[int, int]:
        """How often each byte follows `prompt` in these shards, counted (and, with `unit` over
        1, sampled) as infini-gram's `ntd` counts one shard; `end` stands for a document's end."""
        counts: dict[int, int] = {}
        for shard in self.shards:
            lo, hi = _suffix.find_range(shard.data, shard.table, shard.ratio, prompt)
            count_next(shard, len(prompt), lo, hi, unit, end, None, None, counts)
        return counts

    def longest_suffix(self, prompt: bytes) -> int:
        """How many of the last bytes of `prompt` these shards hold, at most: a binary search,
        since every suffix of a string found is found too."""
        lo, hi = 0, len(prompt)
        while lo < hi:
            middle = (lo + hi + 1) >> 1
            if self.count_bytes(prompt[len(prompt) - middle :]):
                lo = middle
            else:
                hi = middle - 1
        return lo

    def document_at(self, first_document: int, pointer: int, before: int, after: int) -> ShardDocument:
        """The document holding byte `pointer` of the shard whose first document is
        `first_document`, shown from up to `before` bytes before the pointer to `after` bytes
        after it, within the document."""
        shard, _ = self._locate(first_document)
        document = first_document + int(np.searchsorted(shard.offsets, pointer, side="right")) - 1
        _, start, end = self._bounds(document)
        shown = max(start, pointer - before)
        return ShardDocument(document, pointer, start, end, shown, shard.data[shown : min(end, pointer + after)], self._metadata_line(document))

    def document_at_rank(self, first_document: int, rank: int, before: int, after: int) -> ShardDocument:
        """`document_at` the position the shard's suffix array holds at `rank`."""
        shard, _ = self._locate(first_document)
        return self.document_at(first_document, pointer_at(shard, rank), before, after)

    def _metadata_line(self, document: int) -> bytes:
        shard, local = self._locate(document)
        if shard.metadata is None or shard.metaoff is None:
            return b""
        end = int(shard.metaoff[local + 1]) if local + 1 < len(shard.metaoff) else len(shard.metadata)
        return shard.metadata[int(shard.metaoff[local]) : end]


def share_out(ranges: list[tuple[int, int]], limit: int) -> list[tuple[int, int, int]]:
    """How many of `limit` sampled occurrences each shard gives, in proportion to its range."""
    total = sum(hi - lo for lo, hi in ranges)
    picks = []
    for lo, hi in ranges:
        share = 0 if hi <= lo or limit <= 0 else min(max(1, round(limit * (hi - lo) / total)), hi - lo)
        picks.append((lo, hi, share))
    return picks
