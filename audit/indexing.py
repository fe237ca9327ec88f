"""Build byte-level infini-gram indexes from JSONL documents.

The files are infini-gram's own v4 format (`tokenized.N`, `table.N`, `offset.N`, `metadata.N`,
`metaoff.N`), so `infini_gram.engine.InfiniGramEngine` opens what this writes.  The suffix
array comes from libdivsufsort, which sorts a shard in one pass where infini-gram's indexer
sorts parts and merges them.  A build writes into a hidden sibling directory and moves it
into place (`audit.outputs`) only after `audit-index.json` is written, so an interrupted build
never leaves something that looks like an index, and `--force` never replaces a directory the
tool did not write.  The manifest records every file's size and hash, so damage is found
rather than read as absence.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import multiprocessing
import os
import re
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pydivsufsort

from audit import __version__
from audit.documents import NORMALIZERS, IndexBuildError, ParsedChunk, parse_lines
from audit.outputs import OutputError, check_directory_target, commit_directory, discard_staging, staging_directory
from audit.timestamps import utc_timestamp

MANIFEST = "audit-index.json"
MANIFEST_VERSION = 2
KINDS = ("tokenized", "table", "offset", "metadata", "metaoff")
INDEX_FILE = re.compile(rf"({'|'.join(KINDS)})\.(\d+)")
HASH_BLOCK = 1 << 24
# The modules whose code decides the bytes of an index; their hash is the `code` a manifest records.
BUILD_CODE = ("indexing.py", "documents.py", "text.py")
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
class FileInfo:
    """One file of an index as the build wrote it: exact size and blake2b-128 of its bytes."""

    name: str
    bytes: int
    blake2b: str


@dataclass(kw_only=True)
class IndexManifest:
    """`audit-index.json`.  `format`/`version` are infini-gram's file format; `manifest_version`
    is this record's own layout (1: no `files`; 2: every file's size and hash, and `code`).
    `minhash` lists the files of the near-duplicate index added under `minhash/`, if any
    (`audit.neardup`), so that `audit index verify` hashes them too."""

    format: str
    version: int
    manifest_version: int = 1
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
    code: str = ""
    extra: dict = field(default_factory=dict)
    files: list[FileInfo] = field(default_factory=list)
    minhash: list[FileInfo] = field(default_factory=list)

    def recorded_files(self) -> list[FileInfo]:
        """Every file the manifest records a size and hash for: the index's own, then the
        near-duplicate index's (named by their path inside the index directory)."""
        return [*self.files, *self.minhash]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> IndexManifest:
        data = dict(data)
        data["shards"] = [ShardInfo(**s) for s in data["shards"]]
        data["sources"] = [SourceInfo(**s) for s in data["sources"]]
        data["files"] = [FileInfo(**f) for f in data.get("files", [])]
        data["minhash"] = [FileInfo(**f) for f in data.get("minhash", [])]
        return cls(**data)


def new_file_hash() -> hashlib._Hash:
    return hashlib.blake2b(digest_size=16)


def hash_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """The hash a manifest records for a file, read once in large blocks."""
    digest = new_file_hash()
    buffer = bytearray(HASH_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while size := handle.readinto(buffer):
            digest.update(view[:size])
            if on_bytes:
                on_bytes(size)
    return digest.hexdigest()


def code_fingerprint() -> str:
    """A hash of the tool version and the code that writes an index, so a cache built by other
    code is noticed (and re-verified) even when the version number did not change."""
    digest = hashlib.blake2b(__version__.encode(), digest_size=8)
    for name in BUILD_CODE:
        source = Path(__file__).with_name(name)
        digest.update(source.read_bytes() if source.exists() else name.encode())
    return digest.hexdigest()


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
        stream = gzip.open(raw) if path.name.endswith(".gz") else raw  # noqa: SIM115 (closed with raw)
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


class _HashedFile:
    """A file written front to back, hashed as its bytes pass, so recording it costs no re-read."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self._handle: io.BufferedWriter = open(path, "wb", buffering=WRITE_BUFFER)  # noqa: SIM115 (close() ends it and returns the record)
        self._digest = new_file_hash()
        self._size = 0

    def write(self, data: bytes | memoryview) -> None:
        self._handle.write(data)
        self._digest.update(data)
        self._size += memoryview(data).nbytes

    def close(self) -> FileInfo:
        self._handle.close()
        return FileInfo(name=self.name, bytes=self._size, blake2b=self._digest.hexdigest())


class _ShardWriter:
    """Appends parsed chunks to the current shard's four files, starting a new shard before a
    document would take the shard past its size."""

    def __init__(self, directory: Path, max_bytes: int, digest: hashlib._Hash) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.digest = digest
        self.shards: list[ShardInfo] = []
        self.files: list[FileInfo] = []
        self._files: list[_HashedFile] = []
        self._meta_bytes = 0

    def _open_shard(self) -> None:
        self._close_files()
        index = len(self.shards)
        self._files = [_HashedFile(self.directory / f"{kind}.{index}") for kind in ("tokenized", "offset", "metadata", "metaoff")]
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
        self.files += [handle.close() for handle in self._files]
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


def write_suffix_array(tokenized: Path, table: Path) -> tuple[int, FileInfo]:
    """Sort the shard's suffixes and write them as `ratio`-byte little-endian pointers."""
    data = np.fromfile(tokenized, dtype=np.uint8)
    ratio = pointer_width(len(data))
    suffixes = pydivsufsort.divsufsort(data)
    del data
    width = suffixes.dtype.itemsize
    out = _HashedFile(table)
    if ratio == width and sys.byteorder == "little":
        out.write(memoryview(suffixes).cast("B"))
        return ratio, out.close()
    for start in range(0, len(suffixes), SA_CHUNK):
        chunk = suffixes[start : start + SA_CHUNK].astype("<i8" if width == 8 else "<i4", copy=False)
        out.write(chunk.view(np.uint8).reshape(-1, width)[:, :ratio].tobytes())
    return ratio, out.close()


def shard_budget(memory_bytes: int) -> int:
    """Largest shard whose sort fits the budget: the text plus a 4- or 8-byte suffix array."""
    per_byte = 5 if memory_bytes // 5 < 2**31 else 9
    return max(1 << 16, memory_bytes // per_byte)


def _holds(directory: Path, path: Path) -> bool:
    directory, path = directory.resolve(), path.resolve()
    return path == directory or directory in path.parents


def _written_before_markers(path: Path, inputs: Iterable[Path] = ()) -> bool:
    """An index corpus-audit wrote before directories carried the outputs marker, which
    `--force` may replace: nothing in it but files named `tokenized|table|offset|metadata|
    metaoff.N` and an `audit-index.json` naming corpus-audit, and none of them an input."""
    path = Path(path)
    if path.is_symlink() or not (path / MANIFEST).is_file() or any(_holds(path, p) for p in (Path.cwd(), *inputs)):
        return False
    try:
        tool = json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("tool", "")
    except (OSError, ValueError, AttributeError):
        return False
    names_ok = all(
        entry.is_file() and not entry.is_symlink() and (entry.name == MANIFEST or INDEX_FILE.fullmatch(entry.name))
        for entry in path.iterdir()
    )
    return isinstance(tool, str) and tool.startswith("corpus-audit") and names_ok


def _check_target(out: Path, inputs: list[Path], force: bool) -> None:
    """Refuse, before the long build, an `out` the build may not replace."""
    if (out.exists() or out.is_symlink()) and not force:
        raise IndexBuildError(f"{out}: already exists (use --force to replace it)")
    if _written_before_markers(out, inputs):
        return
    try:
        check_directory_target(out, "index", inputs=inputs)
    except OutputError as error:
        raise IndexBuildError(str(error)) from None


def _commit(staging: Path, out: Path, inputs: list[Path]) -> None:
    """Move the finished build into place; an index from before markers is set aside first,
    and put back if the move fails."""
    if not _written_before_markers(out, inputs):
        commit_directory(staging, out, "index", inputs=inputs)
        return
    retired = out.parent / f".{out.name}.replaced-{os.getpid()}"
    out.rename(retired)
    try:
        commit_directory(staging, out, "index", inputs=inputs)
    except BaseException:
        retired.rename(out)
        raise
    shutil.rmtree(retired, ignore_errors=True)


def _file_order(info: FileInfo) -> tuple[int, int]:
    kind, number = INDEX_FILE.fullmatch(info.name).groups()
    return int(number), KINDS.index(kind)


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
    `"none"` stores the raw bytes, exactly as infini-gram's own indexer does.  With `force`, an
    existing `out` is replaced only if this tool wrote it (see `audit.outputs`).
    """
    if normalization not in NORMALIZERS:
        raise IndexBuildError(f"normalization {normalization!r} is not one of {', '.join(NORMALIZERS)}")
    out = Path(out)
    inputs = [Path(p) for p in sources]
    _check_target(out, inputs, force)
    files = discover_sources(inputs)
    total_input = sum(path.stat().st_size for path, _ in files)
    staging = staging_directory(out)
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
        tables = []
        for i, shard in enumerate(shards):
            if progress:
                progress("sort", i, len(shards))
            shard.ratio, table = write_suffix_array(staging / f"tokenized.{shard.name}", staging / f"table.{shard.name}")
            tables.append(table)
        if progress:
            progress("sort", len(shards), len(shards))
        manifest = IndexManifest(
            format="infini-gram",
            version=4,
            manifest_version=MANIFEST_VERSION,
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
            code=code_fingerprint(),
            files=sorted(writer.files + tables, key=_file_order),
        )
        (staging / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
        _commit(staging, out, inputs)
        return manifest
    except OutputError as error:
        discard_staging(staging)
        raise IndexBuildError(str(error)) from None
    except BaseException:
        discard_staging(staging)
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
