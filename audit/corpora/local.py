"""A byte-level infini-gram index on disk, memory-mapped and searched by `audit._suffix`.

Any u8 index in infini-gram's v4 format opens here, whether `audit index build` or
`python -m infini_gram.indexing --token_dtype u8` wrote it.
"""
from __future__ import annotations

import hashlib
import json
import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit import _suffix
from audit.corpora.base import CorpusInfo, DocumentHit, MatchLengths, Occurrence
from audit.indexing import read_manifest


class IndexOpenError(Exception):
    """The directory is not a complete byte-level index; the message says what is missing."""


def _map(path: Path) -> mmap.mmap:
    with open(path, "rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


@dataclass
class _Shard:
    data: mmap.mmap
    table: mmap.mmap
    ratio: int
    offsets: np.ndarray
    metadata: mmap.mmap | None
    metaoff: np.ndarray | None
    first_document: int

    def pointers(self, ranks: np.ndarray) -> np.ndarray:
        table = np.frombuffer(self.table, dtype=np.uint8)
        columns = ranks[:, None].astype(np.int64) * self.ratio + np.arange(self.ratio)
        weights = np.uint64(1) << (np.arange(self.ratio, dtype=np.uint64) * np.uint64(8))
        return (table[columns].astype(np.uint64) * weights).sum(axis=1).astype(np.int64)


def char_starts(encoded: bytes) -> np.ndarray:
    """Byte offsets at which UTF-8 characters start."""
    raw = np.frombuffer(encoded, dtype=np.uint8)
    return np.flatnonzero((raw & 0xC0) != 0x80)


def bytes_to_char_lengths(encoded: bytes, byte_lengths: np.ndarray) -> list[int]:
    """Per character, how many whole characters a byte-level match starting there covers."""
    starts = char_starts(encoded)
    bounds = np.append(starts, len(encoded))
    ends = starts + byte_lengths[starts]
    return (np.searchsorted(bounds, ends, side="right") - 1 - np.arange(len(starts))).tolist()


class LocalIndex:
    """A corpus served from a local index directory."""

    def __init__(self, path: Path, name: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise IndexOpenError(f"{self.path}: no such index directory")
        manifest = read_manifest(self.path)
        names = sorted(int(p.name.split(".")[1]) for p in self.path.glob("tokenized.*") if p.name.split(".")[1].isdigit())
        if not names:
            raise IndexOpenError(f"{self.path}: no tokenized.N files; build one with `audit index build`")
        if manifest is not None and manifest.token_dtype != "u8":
            raise IndexOpenError(f"{self.path}: token dtype {manifest.token_dtype} is not byte-level (u8)")
        self.shards: list[_Shard] = []
        first = 0
        for n in names:
            for kind in ("table", "offset"):
                if not (self.path / f"{kind}.{n}").exists():
                    raise IndexOpenError(f"{self.path}: {kind}.{n} is missing (an incomplete build?)")
            data = _map(self.path / f"tokenized.{n}")
            table = _map(self.path / f"table.{n}")
            if len(table) % len(data):
                raise IndexOpenError(f"{self.path}: table.{n} size {len(table)} is not a multiple of tokenized.{n} size {len(data)}")
            offsets = np.fromfile(self.path / f"offset.{n}", dtype="<u8").astype(np.int64)
            has_meta = (self.path / f"metadata.{n}").exists() and (self.path / f"metaoff.{n}").exists()
            self.shards.append(
                _Shard(
                    data=data,
                    table=table,
                    ratio=len(table) // len(data),
                    offsets=offsets,
                    metadata=_map(self.path / f"metadata.{n}") if has_meta else None,
                    metaoff=np.fromfile(self.path / f"metaoff.{n}", dtype="<u8").astype(np.int64) if has_meta else None,
                    first_document=first,
                )
            )
            first += len(offsets)
        self.info = CorpusInfo(
            name=name or self.path.name,
            backend="local",
            location=str(self.path.resolve()),
            fingerprint=manifest.fingerprint if manifest else self._fingerprint_files(),
            documents=first,
            bytes=sum(len(s.data) for s in self.shards),
            details={
                "shards": len(self.shards),
                "token_dtype": "u8",
                "normalization": manifest.normalization if manifest else "unknown",
                "built_by": manifest.tool if manifest else "unknown",
            },
        )

    def _fingerprint_files(self) -> str:
        """For indexes built elsewhere: sizes plus the head of every table, cheap and stable."""
        digest = hashlib.blake2b(digest_size=16)
        for shard in self.shards:
            digest.update(len(shard.data).to_bytes(8, "little"))
            digest.update(shard.table[: 1 << 20])
        return digest.hexdigest()

    def count_bytes(self, pattern: bytes) -> int:
        total = 0
        for shard in self.shards:
            lo, hi = _suffix.find_range(shard.data, shard.table, shard.ratio, pattern)
            total += hi - lo
        return total

    def longest_match_bytes(self, query: bytes) -> np.ndarray:
        """Per byte position, the longest prefix of query[l:] found: infini-gram's `creativity`
        (which reports l plus this length)."""
        best = np.zeros(len(query), dtype=np.int64)
        for shard in self.shards:
            found = np.frombuffer(_suffix.longest_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
            np.maximum(best, found, out=best)
        return best

    def count(self, text: str) -> int:
        return self.count_bytes(text.encode("utf-8"))

    def count_range(self, text: str) -> tuple[int, int]:
        found = self.count(text)
        return found, found

    def match_lengths(self, text: str) -> MatchLengths:
        encoded = text.encode("utf-8")
        if not encoded:
            return MatchLengths([])
        return MatchLengths(bytes_to_char_lengths(encoded, self.longest_match_bytes(encoded)))

    def occurrences(self, text: str, limit: int) -> tuple[int, list[Occurrence]]:
        """Up to `limit` occurrences spread evenly over the suffix-array range (a sample of
        the whole range, not its lexicographically first entries)."""
        pattern = text.encode("utf-8")
        ranges = [(shard, *_suffix.find_range(shard.data, shard.table, shard.ratio, pattern)) for shard in self.shards]
        total = sum(hi - lo for _, lo, hi in ranges)
        found: list[Occurrence] = []
        for shard, lo, hi in ranges:
            if hi <= lo or limit <= 0:
                continue
            share = max(1, round(limit * (hi - lo) / total))
            ranks = np.unique(np.linspace(lo, hi - 1, num=min(share, hi - lo)).round().astype(np.int64))
            pointers = shard.pointers(ranks)
            documents = np.searchsorted(shard.offsets, pointers, side="right") - 1
            for pointer, document in zip(pointers.tolist(), documents.tolist(), strict=True):
                offset = pointer - int(shard.offsets[document]) - 1
                found.append(Occurrence(document=shard.first_document + document, offset=offset))
        found.sort(key=lambda o: (o.document, o.offset))
        return total, found[:limit]

    def _locate(self, document: int) -> tuple[_Shard, int]:
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

    def _bounds(self, document: int) -> tuple[_Shard, int, int]:
        """The shard holding a document and its text's byte range there (after the separator)."""
        shard, local = self._locate(document)
        start = int(shard.offsets[local]) + 1
        end = int(shard.offsets[local + 1]) if local + 1 < len(shard.offsets) else len(shard.data)
        return shard, start, end

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        shard, start, end = self._bounds(occurrence.document)
        at = start + occurrence.offset
        return shard.data[max(start, at - before) : min(end, at + after)]

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        reach = 4 * context_chars
        window = self.surrounding(occurrence, reach, length_bytes + reach)
        start = min(occurrence.offset, reach)
        end = start + length_bytes
        before = window[:start].decode("utf-8", errors="ignore")[-context_chars:]
        match = window[start:end].decode("utf-8", errors="ignore")
        after = window[end:].decode("utf-8", errors="ignore")[:context_chars]
        return DocumentHit(
            document=occurrence.document,
            metadata=self.metadata(occurrence.document),
            offset=occurrence.offset,
            length=length_bytes,
            snippet=before + match + after,
            snippet_match_start=len(before),
            snippet_match_end=len(before) + len(match),
        )
