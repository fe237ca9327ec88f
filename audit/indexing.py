"""Build byte-level infini-gram indexes from JSONL documents.

The files are infini-gram's own v4 format (`tokenized.N`, `table.N`, `offset.N`, `metadata.N`,
`metaoff.N`), so `infini_gram.engine.InfiniGramEngine` opens what this writes.  The suffix
array comes from libdivsufsort, which sorts a shard in one pass where infini-gram's indexer
sorts parts and merges them.  A build writes into a hidden sibling directory and renames it
into place only after `audit-index.json` is written, so an interrupted build never leaves
something that looks like an index.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import multiprocessing
import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pydivsufsort

from audit import __version__
from audit.documents import NORMALIZERS, IndexBuildError, ParsedChunk, parse_lines
from audit.timestamps import utc_timestamp

MANIFEST = "audit-index.json"
SA_CHUNK = 1 << 24
WRITE_BUFFER = 1 << 22
CHUNK_BYTES = 1 << 22

ProgressHook = Callable[[str, int, int], None]


@dataclass
class ShardInfo:
    name: str
    bytes: int
    documents: int
    ratio: int


@dataclass
class SourceInfo:
    path: str
    documents: int
    skipped_blank_lines: int = 0


@dataclass
class IndexManifest:
    format: str
    version: int
    token_dtype: str
    normalization: str
    shards: list[ShardInfo]
    sources: list[SourceInfo]
    documents: int
    bytes: int
    fingerprint: str
    created: str
    tool: str
    build_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> IndexManifest:
        data = dict(data)
        data["shards"] = [ShardInfo(**s) for s in data["shards"]]
        data["sources"] = [SourceInfo(**s) for s in data["sources"]]
        return cls(**data)


def pointer_width(size: int) -> int:
    """Bytes per suffix-array pointer, by infini-gram's rule, so tables are interchangeable."""
    return max(1, int(np.ceil(np.log2(max(size, 2)) / 8)))


def discover_sources(paths: list[Path]) -> list[tuple[Path, str]]:
    """Each JSONL file with the name it is recorded under in document metadata.

    A directory contributes every `*.json*` file below it in sorted order, named relative to
    the directory, which is how infini-gram's indexer orders and names them.
    """
    found: list[tuple[Path, str]] = []
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.glob("**/*.json*") if p.is_file())
            if not files:
                raise IndexBuildError(f"{path}: no *.json, *.jsonl or *.jsonl.gz files below it")
            found.extend((f, str(f.relative_to(path))) for f in files)
        elif path.is_file():
            found.append((path, path.name))
        else:
            raise IndexBuildError(f"{path}: no such file or directory")
    return found


def line_chunks(path: Path, on_bytes: Callable[[int], None]) -> Iterator[tuple[int, list[bytes]]]:
    """(first line number, lines) in runs of about CHUNK_BYTES, reporting input bytes consumed."""
    with open(path, "rb") as raw:
        stream = gzip.open(raw) if path.name.endswith(".gz") else raw
        first, lines, size, position = 1, [], 0, 0
        for line in stream:
            lines.append(line)
            size += len(line)
            if size >= CHUNK_BYTES:
                on_bytes(raw.tell() - position)
                position = raw.tell()
                yield first, lines
                first, lines, size = first + len(lines), [], 0
        on_bytes(raw.tell() - position)
        if lines:
            yield first, lines


class _ShardWriter:
    """Appends parsed chunks to the current shard's four files, starting a new shard before a
    document would take the shard past its size."""

    def __init__(self, directory: Path, max_bytes: int, digest: hashlib._Hash) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.digest = digest
        self.shards: list[ShardInfo] = []
        self._files: list[io.BufferedWriter] = []
        self._meta_bytes = 0

    def _open_shard(self) -> None:
        self._close_files()
        index = len(self.shards)
        self._files = [
            open(self.directory / f"{kind}.{index}", "wb", buffering=WRITE_BUFFER) for kind in ("tokenized", "offset", "metadata", "metaoff")
        ]
        self.shards.append(ShardInfo(name=str(index), bytes=0, documents=0, ratio=0))
        self._meta_bytes = 0

    def _fitting(self, sizes: np.ndarray) -> int:
        """How many of the next documents fit the current shard (at least one in an empty one)."""
        shard = self.shards[-1]
        fits = int(np.searchsorted(np.cumsum(sizes), self.max_bytes - shard.bytes, side="right"))
        return max(fits, 0 if shard.documents else 1)

    def add(self, chunk: ParsedChunk) -> None:
        sizes = np.array(chunk.text_sizes, dtype=np.int64)
        meta_sizes = np.array(chunk.metadata_sizes, dtype=np.int64)
        text_at = meta_at = done = 0
        while done < len(sizes):
            count = self._fitting(sizes[done:]) if self.shards else 0
            if count == 0:
                self._open_shard()
                count = self._fitting(sizes[done:])
            part, meta_part = sizes[done : done + count], meta_sizes[done : done + count]
            text_end, meta_end = text_at + int(part.sum()), meta_at + int(meta_part.sum())
            self._write(chunk.texts[text_at:text_end], part, chunk.metadata[meta_at:meta_end], meta_part)
            text_at, meta_at, done = text_end, meta_end, done + count

    def _write(self, texts: bytes, sizes: np.ndarray, metadata: bytes, meta_sizes: np.ndarray) -> None:
        shard = self.shards[-1]
        tokenized, offset, metadata_file, metaoff = self._files
        tokenized.write(texts)
        offset.write((shard.bytes + np.cumsum(sizes) - sizes).astype("<u8").tobytes())
        metadata_file.write(metadata)
        metaoff.write((self._meta_bytes + np.cumsum(meta_sizes) - meta_sizes).astype("<u8").tobytes())
        self.digest.update(texts)
        self.digest.update(metadata)
        shard.bytes += len(texts)
        shard.documents += len(sizes)
        self._meta_bytes += len(metadata)

    def _close_files(self) -> None:
        for handle in self._files:
            handle.close()
        self._files = []

    def close(self) -> list[ShardInfo]:
        self._close_files()
        return self.shards


def parsed_chunks(
    files: list[tuple[Path, str]], normalization: str, on_bytes: Callable[[int], None], workers: int
) -> Iterator[tuple[int, ParsedChunk]]:
    """(source index, chunk) in input order, parsed on `workers` processes with a bounded
    number of chunks in flight, so memory stays flat however large the corpus.

    Workers are forked (a spawned one would re-import the caller's whole program) and forced
    to start before the first line is read, so they are forked before any progress callback
    can have started a display thread in this process."""
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        for ready in [pool.submit(os.getpid) for _ in range(workers)]:
            ready.result()
        pending: deque[tuple[int, Future]] = deque()
        for source, (path, name) in enumerate(files):
            for first, lines in line_chunks(path, on_bytes):
                pending.append((source, pool.submit(parse_lines, str(path), name, first, lines, normalization)))
                while len(pending) > 2 * workers:
                    done_source, future = pending.popleft()
                    yield done_source, future.result()
        while pending:
            done_source, future = pending.popleft()
            yield done_source, future.result()


def write_suffix_array(tokenized: Path, table: Path) -> int:
    """Sort the shard's suffixes and write them as `ratio`-byte little-endian pointers."""
    data = np.fromfile(tokenized, dtype=np.uint8)
    ratio = pointer_width(len(data))
    suffixes = pydivsufsort.divsufsort(data)
    del data
    width = suffixes.dtype.itemsize
    with open(table, "wb") as out:
        if ratio == width and sys.byteorder == "little":
            suffixes.tofile(out)
            return ratio
        for start in range(0, len(suffixes), SA_CHUNK):
            chunk = suffixes[start : start + SA_CHUNK].astype("<i8" if width == 8 else "<i4", copy=False)
            out.write(chunk.view(np.uint8).reshape(-1, width)[:, :ratio].tobytes())
    return ratio


def shard_budget(memory_bytes: int) -> int:
    """Largest shard whose sort fits the budget: the text plus a 4- or 8-byte suffix array."""
    per_byte = 5 if memory_bytes // 5 < 2**31 else 9
    return max(1 << 16, memory_bytes // per_byte)


def build_index(
    sources: list[Path],
    out: Path,
    *,
    memory_bytes: int = 8 << 30,
    normalization: str = "text",
    force: bool = False,
    workers: int | None = None,
    progress: ProgressHook | None = None,
) -> IndexManifest:
    """Build an index at `out` from JSONL(.gz) documents with a `text` field.

    `normalization="text"` stores every document as queries are issued (NFC, whitespace runs
    collapsed to one space), so a passage matches whatever its line breaks or Unicode form;
    `"none"` stores the raw bytes, exactly as infini-gram's own indexer does.
    """
    if normalization not in NORMALIZERS:
        raise IndexBuildError(f"normalization {normalization!r} is not one of {', '.join(NORMALIZERS)}")
    out = Path(out)
    if out.exists() and not force:
        raise IndexBuildError(f"{out}: already exists (use --force to replace it)")
    files = discover_sources([Path(p) for p in sources])
    total_input = sum(path.stat().st_size for path, _ in files)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    started = time.perf_counter()
    try:
        digest = hashlib.blake2b(digest_size=16)
        writer = _ShardWriter(staging, shard_budget(memory_bytes), digest)
        done_input = 0

        def advance(n: int) -> None:
            nonlocal done_input
            done_input += n
            if progress:
                progress("read", done_input, total_input)

        source_infos = [SourceInfo(path=name, documents=0) for _, name in files]
        for source, chunk in parsed_chunks(files, normalization, advance, workers or os.cpu_count() or 1):
            writer.add(chunk)
            source_infos[source].documents += len(chunk.text_sizes)
            source_infos[source].skipped_blank_lines += chunk.blank_lines
        shards = writer.close()
        if not shards:
            raise IndexBuildError(f"no documents found in {', '.join(str(p) for p in sources)}")
        for i, shard in enumerate(shards):
            if progress:
                progress("sort", i, len(shards))
            shard.ratio = write_suffix_array(staging / f"tokenized.{shard.name}", staging / f"table.{shard.name}")
        if progress:
            progress("sort", len(shards), len(shards))
        manifest = IndexManifest(
            format="infini-gram",
            version=4,
            token_dtype="u8",
            normalization=normalization,
            shards=shards,
            sources=source_infos,
            documents=sum(s.documents for s in shards),
            bytes=sum(s.bytes for s in shards),
            fingerprint=digest.hexdigest(),
            created=utc_timestamp(),
            tool=f"corpus-audit {__version__}",
            build_seconds=round(time.perf_counter() - started, 3),
        )
        (staging / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
        return manifest
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def read_manifest(directory: Path) -> IndexManifest | None:
    path = Path(directory) / MANIFEST
    if not path.exists():
        return None
    return IndexManifest.from_dict(json.loads(path.read_text(encoding="utf-8")))


def describe_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    exponent = min(int(math.log(n, 1024)), 4)
    return f"{n / 1024 ** exponent:.1f} {'BKMGT'[exponent]}{'iB' if exponent else ''}"
