"""A byte-level infini-gram index on disk, memory-mapped and searched by `audit._suffix`.

Any u8 index in infini-gram's v4 format opens here, whether `audit index build` or
`python -m infini_gram.indexing --token_dtype u8` wrote it.  Opening checks, cheaply, that the
files are the ones the manifest records at the sizes it records, that no other file is in the
directory, that their sizes and offsets agree with each other by infini-gram's rules, and that
a sample of each suffix array is in order (`audit.corpora.soundness`): a damaged index is an
error, never a silent "not found".  `audit.corpora.verify.verify_index` also re-hashes every file.
"""
from __future__ import annotations

import bisect
import functools
import hashlib
import json
import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audit import _suffix
from audit.corpora.base import CorpusInfo, DocumentHit, MatchLengths, MatchQuestions, Occurrence, cut_snippet
from audit.corpora.inlanguage import LanguageView, ShardQueries
from audit.corpora.shardread import TEXTS_PER_CALL, ShardDocument, bytes_to_char_lengths, count_next, pointer_at
from audit.corpora.soundness import foreign_files, suffix_order_problem
from audit.errors import AuditError
from audit.index.doclangs import DocumentLanguages, LanguageTableError, read_table, summary
from audit.index.format import INDEX_FILE, KINDS, MANIFEST, IndexManifest, pointer_width, read_manifest


class IndexOpenError(AuditError):
    """The directory is not a complete, undamaged index; the message names the file at fault
    and says what to do, `detail` only what is wrong."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail or message


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


class _Damage(Exception):
    """One file of the index is wrong; `open_shards` turns it into an IndexOpenError that says
    what to do about it."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name
        self.problem = problem


def _load_manifest(path: Path) -> IndexManifest | None:
    try:
        return read_manifest(path)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise _Damage(MANIFEST, f"not a readable index manifest ({error})") from None


def _index_names(path: Path) -> set[str]:
    """Files infini-gram's engine would take for index files: any name holding a kind's name."""
    return {entry.name for entry in path.iterdir() if any(kind in entry.name for kind in KINDS)}


def _expected_names(path: Path, manifest: IndexManifest | None, present: set[str]) -> set[str]:
    """The files the index must consist of: as the manifest lists them, else three per shard,
    plus metadata and metaoff for every shard if any shard has them."""
    if manifest is not None and manifest.files:
        return {f.name for f in manifest.files}
    if manifest is not None:
        shards = [s.name for s in manifest.shards]
    else:
        shards = sorted({m[2] for m in map(INDEX_FILE.fullmatch, present) if m and m[1] == "tokenized"}, key=int)
        if not shards:
            raise IndexOpenError(f"{path}: no tokenized.N files; build one with `audit index build`")
    with_metadata = any(m and m[1] in ("metadata", "metaoff") for m in map(INDEX_FILE.fullmatch, present))
    kinds = KINDS if with_metadata else KINDS[:3]
    return {f"{kind}.{n}" for n in shards for kind in kinds}


def _check_names(path: Path, manifest: IndexManifest | None) -> list[int]:
    """Shard numbers, once every expected file is present and no stray one would be read."""
    present = _index_names(path)
    expected = _expected_names(path, manifest, present)
    shard_files = {name for name in expected if INDEX_FILE.fullmatch(name)}
    missing = sorted(shard_files - present) + sorted(name for name in expected - shard_files if not (path / name).is_file())
    stray = sorted(present - expected)
    if missing:
        raise _Damage(missing[0], "is missing")
    if stray:
        raise _Damage(stray[0], "is not a file of this index (infini-gram's engine would read it as one); remove it")
    return sorted({int(INDEX_FILE.fullmatch(name)[2]) for name in shard_files})


def _size(path: Path, name: str) -> int:
    return (path / name).stat().st_size


def _check_recorded(path: Path, manifest: IndexManifest) -> None:
    """Every size the manifest records, exactly: each file's (version 2), and each shard's
    bytes, pointer width and documents (every version)."""
    recorded = {f.name: f.bytes for f in manifest.files}
    for shard in manifest.shards:
        n = shard.name
        recorded.setdefault(f"tokenized.{n}", shard.bytes)
        recorded.setdefault(f"table.{n}", shard.bytes * shard.ratio)
        recorded.setdefault(f"offset.{n}", 8 * shard.documents)
        if (path / f"metaoff.{n}").exists():
            recorded.setdefault(f"metaoff.{n}", 8 * shard.documents)
    for name, expected in recorded.items():
        actual = _size(path, name)
        if actual != expected:
            raise _Damage(name, f"{actual:,} bytes, but the manifest records {expected:,}")
    for shard in manifest.shards:
        for name, expected in ((f"tokenized.{shard.name}", shard.bytes), (f"offset.{shard.name}", 8 * shard.documents)):
            if recorded[name] != expected:
                raise _Damage(MANIFEST, f"records {name} as {recorded[name]:,} bytes in its file list but {expected:,} in its shard list")
    if sum(s.bytes for s in manifest.shards) != manifest.bytes or sum(s.documents for s in manifest.shards) != manifest.documents:
        raise _Damage(MANIFEST, "its totals disagree with its shards")


def _read_pointers(path: Path, name: str) -> np.ndarray:
    size = _size(path, name)
    if size == 0 or size % 8:
        raise _Damage(name, f"{size:,} bytes, not a whole number (at least one) of 8-byte offsets")
    return np.fromfile(path / name, dtype="<u8").astype(np.int64)


def _check_increasing(name: str, starts: np.ndarray, target: str, size: int) -> None:
    if starts[0] != 0:
        raise _Damage(name, f"its first entry is {starts[0]:,}, not 0")
    falls = np.flatnonzero(np.diff(starts) <= 0)
    if len(falls):
        raise _Damage(name, f"entry {falls[0] + 1:,} ({starts[falls[0] + 1]:,}) does not come after entry {falls[0]:,} ({starts[falls[0]]:,})")
    if starts[-1] >= size:
        raise _Damage(name, f"its last entry {starts[-1]:,} is past the end of {target} ({size:,} bytes)")


def _check_offsets(n: int, offsets: np.ndarray, data: mmap.mmap, width: int) -> None:
    """Each document starts on a token boundary with the 0xff separator, in order, in range."""
    name = f"offset.{n}"
    _check_increasing(name, offsets, f"tokenized.{n}", len(data))
    raw = np.frombuffer(data, dtype=np.uint8)
    bad = offsets % width != 0
    for byte in range(width):
        bad |= raw[np.minimum(offsets + byte, len(raw) - 1)] != 0xFF
    if bad.any():
        at = int(np.argmax(bad))
        raise _Damage(name, f"document {at:,} starts at byte {offsets[at]:,} of tokenized.{n}, which is not the 0xff document separator")


def _check_metaoff(n: int, metaoff: np.ndarray, documents: int, metadata: mmap.mmap) -> None:
    """One metadata line per document, each starting where the previous line ended."""
    name = f"metaoff.{n}"
    if len(metaoff) != documents:
        raise _Damage(name, f"{len(metaoff):,} entries, but offset.{n} has {documents:,} documents")
    _check_increasing(name, metaoff, f"metadata.{n}", len(metadata))
    raw = np.frombuffer(metadata, dtype=np.uint8)
    if raw[-1] != ord("\n"):
        raise _Damage(f"metadata.{n}", "does not end with a line end (cut short?)")
    after = np.flatnonzero(raw[metaoff[1:] - 1] != ord("\n"))
    if len(after):
        raise _Damage(name, f"entry {after[0] + 1:,} starts at byte {metaoff[after[0] + 1]:,} of metadata.{n}, which is not the start of a line")


def _open_shard(path: Path, n: int, width: int, first: int) -> _Shard:
    """One shard's files, mapped, after the checks infini-gram's indexer and engine imply."""
    data_size, table_size = _size(path, f"tokenized.{n}"), _size(path, f"table.{n}")
    if data_size == 0 or data_size % width:
        raise _Damage(f"tokenized.{n}", f"{data_size:,} bytes, not a whole number (at least one) of {width}-byte tokens")
    ratio = pointer_width(data_size)
    expected = ratio * (data_size // width)
    if table_size != expected:
        raise _Damage(f"table.{n}", f"{table_size:,} bytes, but tokenized.{n} ({data_size:,} bytes) needs {expected:,} ({ratio}-byte pointers, by infini-gram's rule)")
    data = _map(path / f"tokenized.{n}")
    offsets = _read_pointers(path, f"offset.{n}")
    _check_offsets(n, offsets, data, width)
    metadata = metaoff = None
    if (path / f"metadata.{n}").exists():
        metaoff = _read_pointers(path, f"metaoff.{n}")
        if _size(path, f"metadata.{n}") == 0:
            raise _Damage(f"metadata.{n}", "is empty")
        metadata = _map(path / f"metadata.{n}")
        _check_metaoff(n, metaoff, len(offsets), metadata)
    table = _map(path / f"table.{n}")
    if problem := suffix_order_problem(data, table, ratio, width):
        raise _Damage(f"table.{n}", problem)
    return _Shard(data=data, table=table, ratio=ratio, offsets=offsets, metadata=metadata, metaoff=metaoff, first_document=first)


def _check_layout(path: Path, token_width: int) -> tuple[IndexManifest | None, list[int]]:
    """The manifest and shard numbers, once the names and recorded sizes are right: file
    metadata only, so a driver that leaves the shards to other processes checks this much."""
    if not path.is_dir():
        raise IndexOpenError(f"{path}: no such index directory")
    manifest = _load_manifest(path)
    dtype = f"u{8 * token_width}"
    if manifest is not None and manifest.token_dtype != dtype:
        raise IndexOpenError(f"{path}: token dtype {manifest.token_dtype} is not {'byte-level (u8)' if token_width == 1 else dtype}")
    numbers = _check_names(path, manifest)
    if foreign := foreign_files(path, manifest):
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise IndexOpenError(f"{path / foreign[0]}: a file the index did not write{more}; move it out of the index directory {path}, which must hold only the index's own files", detail=f"{foreign[0]}: a file the index did not write")
    if manifest is not None:
        _check_recorded(path, manifest)
    return manifest, numbers


def _damaged(path: Path, damage: _Damage, token_width: int) -> IndexOpenError:
    remedy = f"rebuild it (`audit index build ... --force`), or run `audit index verify {path}` to check every file" if token_width == 1 else "rebuild it with infini-gram's indexer"
    return IndexOpenError(f"{path / damage.name}: {damage.problem}. The index is damaged: {remedy}", detail=str(damage))


@dataclass(frozen=True)
class Layout:
    """What opening an index needs to know before any shard is mapped: its manifest, shard
    numbers, and each shard's first global document number (from the offset files' sizes)."""

    manifest: IndexManifest | None
    numbers: list[int]
    first_documents: list[int]
    shard_bytes: list[int]


def index_layout(path: Path, token_width: int = 1) -> Layout:
    """The index's layout, or IndexOpenError naming the first file that is missing, stray or
    the wrong size."""
    path = Path(path)
    try:
        manifest, numbers = _check_layout(path, token_width)
    except _Damage as damage:
        raise _damaged(path, damage, token_width) from None
    counts = [_size(path, f"offset.{n}") // 8 for n in numbers]
    firsts = [sum(counts[:i]) for i in range(len(counts))]
    return Layout(manifest, numbers, firsts, [_size(path, f"tokenized.{n}") for n in numbers])


def map_shards(path: Path, numbers: list[int], first_documents: list[int], token_width: int = 1) -> list[_Shard]:
    """These shards, mapped, after each one's own checks (sizes and offsets by infini-gram's
    rules), or IndexOpenError naming the file at fault."""
    path = Path(path)
    try:
        return [_open_shard(path, n, token_width, first) for n, first in zip(numbers, first_documents, strict=True)]
    except _Damage as damage:
        raise _damaged(path, damage, token_width) from None


def open_shards(path: Path, token_width: int = 1) -> tuple[IndexManifest | None, list[_Shard]]:
    """The manifest (None for an index infini-gram's indexer wrote) and every shard, mapped,
    or IndexOpenError naming the first file that is missing, stray, the wrong size or out of
    line with the others."""
    layout = index_layout(path, token_width)
    return layout.manifest, map_shards(path, layout.numbers, layout.first_documents, token_width)


def check_index(path: Path, token_width: int = 1) -> IndexManifest | None:
    """Raise IndexOpenError unless the index opens cleanly with `token_width`-byte tokens; sizes
    and offsets only, no hashing.  An index of another width is named as such, not as damaged:
    a shard's table holds one pointer per token, which gives the width its tokens have."""
    path = Path(path)
    data = min(path.glob("tokenized.[0-9]*"), default=None) if path.is_dir() else None
    table = data.with_name(data.name.replace("tokenized", "table", 1)) if data else None
    if table is not None and table.is_file() and table.stat().st_size:
        size = data.stat().st_size
        found, rest = divmod(pointer_width(size) * size, table.stat().st_size)
        if not rest and found in (1, 2, 4) and found != token_width:
            raise IndexOpenError(f"{path} holds u{8 * found} tokens ({found} bytes each), not u{8 * token_width}")
    return open_shards(path, token_width)[0]


class ShardGroup(ShardQueries):
    """Some shards of an index, mapped in one process, answering in global document numbers.
    A local index holds one group of all its shards; a distributed one holds a group in each
    of its Ray actors (`audit.corpora.distributed`).  Every method is a pure read, so a call
    repeated after a crash gives the same answer."""

    def __init__(self, path: str | Path, numbers: list[int], first_documents: list[int]) -> None:
        self.path = Path(path)
        self.shards = map_shards(self.path, numbers, first_documents)

    def count_bytes(self, pattern: bytes) -> int:
        return sum(hi - lo for lo, hi in self.ranges(pattern))

    def longest_match_bytes(self, query: bytes) -> np.ndarray:
        best = np.zeros(len(query), dtype=np.int64)
        for shard in self.shards:
            found = np.frombuffer(_suffix.longest_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
            np.maximum(best, found, out=best)
        return best

    def ranges(self, pattern: bytes) -> list[tuple[int, int]]:
        """Each shard's suffix-array range of the pattern."""
        return [_suffix.find_range(shard.data, shard.table, shard.ratio, pattern) for shard in self.shards]

    def sample(self, picks: list[tuple[int, int, int]]) -> list[Occurrence]:
        """Occurrences at `count` ranks spread evenly over each shard's range (lo, hi, count)."""
        found: list[Occurrence] = []
        for shard, (lo, hi, count) in zip(self.shards, picks, strict=True):
            if count <= 0:
                continue
            ranks = np.unique(np.linspace(lo, hi - 1, num=count).round().astype(np.int64))
            pointers = shard.pointers(ranks)
            documents = np.searchsorted(shard.offsets, pointers, side="right") - 1
            for pointer, document in zip(pointers.tolist(), documents.tolist(), strict=True):
                found.append(Occurrence(document=shard.first_document + document, offset=pointer - int(shard.offsets[document]) - 1))
        return found

    def holds(self, document: int) -> bool:
        first = self.shards[0].first_document
        return first <= document < self.shards[-1].first_document + len(self.shards[-1].offsets)

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


class LocalIndex:
    """A corpus served from a local index directory.  `neardup_redis` is where its
    near-duplicate bands are served from when not from its own files (a registry entry's
    `minhash_redis`).

    Every answer is merged here from the shard groups' (`ask`): counts summed, longest matches
    maxed per position, occurrences sampled in proportion to each shard's range, documents by
    global number.  A subclass that puts its groups elsewhere changes `ask` and nothing else,
    so its answers are this class's answers."""

    # Its runners can be sent to other processes: it re-opens there from its path.
    ships_to_workers = True

    def __init__(self, path: Path, name: str | None = None, neardup_redis: str | None = None) -> None:
        self.path = Path(path)
        self.neardup_redis = neardup_redis
        self.layout = index_layout(self.path)
        self.groups = self._open_groups()
        manifest = self.layout.manifest
        self.info = CorpusInfo(
            name=name or self.path.name,
            backend="local",
            location=str(self.path.resolve()),
            fingerprint=manifest.fingerprint if manifest else self._fingerprint_files(),
            documents=self.layout.first_documents[-1] + (self.path / f"offset.{self.layout.numbers[-1]}").stat().st_size // 8,
            bytes=sum(self.layout.shard_bytes),
            details={
                "shards": len(self.layout.numbers),
                "token_dtype": "u8",
                "normalization": manifest.normalization if manifest else "unknown",
                "built_by": manifest.tool if manifest else "unknown",
            },
        )
        self.languages = self._read_languages()
        if self.languages is not None:
            self.info.details["languages"] = summary(self.languages)

    def _read_languages(self) -> DocumentLanguages | None:
        """Each document's language (`audit.index.doclangs`); None for an index built
        before the table was written, whose documents' languages are unknown."""
        try:
            return read_table(self.path, self.info.documents)
        except LanguageTableError as error:
            raise IndexOpenError(f"{error}; write it anew with `audit index languages {self.path} --force`", str(error)) from None

    @functools.cached_property
    def language_counts(self) -> dict[str, int]:
        """Documents per language in the table (empty without one), counted once."""
        return self.languages.counts() if self.languages is not None else {}

    def in_language(self, languages: frozenset[str], unknown: bool) -> LanguageView | None:
        """This index counting only documents of `languages` (and of unknown language when
        `unknown`); None for an index without a language table."""
        return None if self.languages is None else LanguageView(self, languages, unknown)

    def _open_groups(self) -> list[Any]:
        """The shard groups, in shard order; `group_starts` holds each one's first document."""
        self.group_starts = [0]
        return [ShardGroup(self.path, self.layout.numbers, self.layout.first_documents)]

    def ask(self, method: str, *args: Any) -> list[Any]:
        """Each group's answer to one call, in shard order."""
        return [getattr(group, method)(*args) for group in self.groups]

    def _owner(self, document: int) -> int:
        """The position of the group holding a document (groups are contiguous runs of shards)."""
        return bisect.bisect_right(self.group_starts, document) - 1

    def ask_owner(self, document: int, method: str, *args: Any) -> Any:
        return getattr(self.groups[self._owner(document)], method)(*args)

    def __reduce__(self) -> tuple:
        return (type(self), (self.path, self.info.name, self.neardup_redis))

    def _fingerprint_files(self) -> str:
        """For indexes built elsewhere: sizes plus the head of every table, cheap and stable."""
        digest = hashlib.blake2b(digest_size=16)
        for n, size in zip(self.layout.numbers, self.layout.shard_bytes, strict=True):
            digest.update(size.to_bytes(8, "little"))
            with open(self.path / f"table.{n}", "rb") as table:
                digest.update(table.read(1 << 20))
        return digest.hexdigest()

    def count_bytes(self, pattern: bytes) -> int:
        return sum(self.ask("count_bytes", pattern))

    def longest_match_bytes(self, query: bytes) -> np.ndarray:
        """Per byte position, the longest prefix of query[l:] found: infini-gram's `creativity`
        (which reports l plus this length)."""
        best = np.zeros(len(query), dtype=np.int64)
        for found in self.ask("longest_match_bytes", query):
            np.maximum(best, found, out=best)
        return best

    def count(self, text: str) -> int:
        return self.count_bytes(text.encode("utf-8"))

    def count_range(self, text: str) -> tuple[int, int]:
        found = self.count(text)
        return found, found

    def match_lengths(self, text: str, questions: MatchQuestions | None = None) -> MatchLengths:
        encoded = text.encode("utf-8")
        if not encoded:
            return MatchLengths([])
        return MatchLengths(bytes_to_char_lengths(encoded, self.longest_match_bytes(encoded)))

    def occurrences(self, text: str, limit: int) -> tuple[int, list[Occurrence]]:
        """Up to `limit` occurrences spread evenly over the suffix-array range (a sample of
        the whole range, not its lexicographically first entries)."""
        per_group = self.ask("ranges", text.encode("utf-8"))
        picks = share_out([span for spans in per_group for span in spans], limit)
        total = sum(hi - lo for lo, hi, _ in picks)
        if not any(count for _, _, count in picks):
            return total, []
        mine, at = [], 0
        for spans in per_group:
            mine.append(picks[at : at + len(spans)])
            at += len(spans)
        found = [o for group in self._ask_each("sample", mine) for o in group]
        found.sort(key=lambda o: (o.document, o.offset))
        return total, found[:limit]

    def _ask_each(self, method: str, arguments: list[Any]) -> list[Any]:
        """Each group's answer to the call with its own argument."""
        return [getattr(group, method)(argument) for group, argument in zip(self.groups, arguments, strict=True)]

    def metadata(self, document: int) -> dict:
        return self.ask_owner(document, "metadata", document)

    def documents(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(document number, stored text) for documents `start` to `stop` - 1, in order: what an
        index built over this one's text (the near-duplicate index) reads."""
        stop = self.info.documents if stop is None else stop
        while start < stop:
            group = self._owner(start)
            group_end = self.group_starts[group + 1] if group + 1 < len(self.group_starts) else self.info.documents
            end = min(stop, group_end, start + TEXTS_PER_CALL)
            for offset, text in enumerate(self.ask_owner(start, "texts", start, end)):
                yield start + offset, text
            start = end

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        return self.ask_owner(occurrence.document, "surrounding", occurrence, before, after)

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        reach = 4 * context_chars
        window, metadata = self.ask_owner(occurrence.document, "excerpt", occurrence, reach, length_bytes + reach)
        snippet, start, end = cut_snippet(window, min(occurrence.offset, reach), length_bytes, context_chars)
        return DocumentHit(occurrence.document, metadata, occurrence.offset, length_bytes, snippet, start, end)
