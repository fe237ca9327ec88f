"""Build byte-level infini-gram indexes from corpus files: JSONL, plain text, Parquet and
Hugging Face `datasets` directories.

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
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pydivsufsort
import zstandard

from audit import __version__
from audit.children import WorkerPool
from audit.documents import NORMALIZERS, IndexBuildError, ParsedChunk, parse_batch, parse_lines, parse_text
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
TEXT_SUFFIXES = (".txt", ".txt.gz", ".txt.zst", ".md")
DATASETS_MARKERS = ("state.json", "dataset_info.json", "dataset_dict.json")
TEXT_DOCS = ("file", "block")

ProgressHook = Callable[[str, int, int], None]
Task = tuple[Callable[..., ParsedChunk], tuple]


@dataclass
class ShardInfo:
    """One shard's size, documents and pointer width; `fingerprint` (blake2b-128 of its texts and
    metadata) is recorded by a sharded build (`audit.shardbuild`), which hashes shards apart."""

    name: str
    bytes: int
    documents: int
    ratio: int
    fingerprint: str = ""


@dataclass
class SourceInfo:
    """One input file and how it was read: `format` (jsonl, text, parquet, arrow or datasets),
    the field or column its text came from (`text_field`; none for plain text) and, for plain
    text, whether a document was the whole file or a blank-line-separated block (`text_docs`).
    The defaults describe manifests from before other formats were read: JSONL with `text`."""

    path: str
    documents: int
    skipped_blank_lines: int = 0
    format: str = "jsonl"
    text_field: str | None = "text"
    text_docs: str | None = None


@dataclass(frozen=True)
class CorpusFile:
    """A file of documents, the name its documents' metadata records, and its reader."""

    path: Path
    name: str
    format: str


@dataclass(frozen=True)
class Span:
    """Bytes `start` to `end` of an uncompressed file, cut at line starts, whose first line is
    line `first_line` of the file: the part of a file one shard of a sharded build reads."""

    start: int
    end: int
    first_line: int


@dataclass(frozen=True)
class ReadOptions:
    """How every source of one build is read (see `build_index`)."""

    normalization: str = "text"
    text_field: str = "text"
    text_docs: str = "file"


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


def file_format(path: Path) -> str:
    """The reader a file gets, by its suffix.  A name with none of the known suffixes is read as
    JSONL, as every file was before other formats were read."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".arrow"):
        return "arrow"
    return "text" if name.endswith(TEXT_SUFFIXES) else "jsonl"


def is_datasets_directory(path: Path) -> bool:
    """A directory `datasets`' `save_to_disk` wrote (a `Dataset` or a `DatasetDict`)."""
    return any((path / marker).is_file() for marker in DATASETS_MARKERS)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise IndexBuildError(f"{path}: not readable JSON ({error})") from None


def datasets_files(directory: Path) -> list[CorpusFile]:
    """The Arrow files of a `save_to_disk` directory in row order (as `state.json` lists them),
    each split of a `DatasetDict` in the order `dataset_dict.json` lists the splits, named
    relative to `directory`."""
    parts = [directory]
    if (directory / "dataset_dict.json").is_file():
        splits = _read_json(directory / "dataset_dict.json")
        splits = splits.get("splits") if isinstance(splits, dict) else None
        if not isinstance(splits, list) or not all(isinstance(split, str) for split in splits):
            raise IndexBuildError(f"{directory / 'dataset_dict.json'}: no list of split names under 'splits'")
        parts = [directory / split for split in splits]
    found: list[CorpusFile] = []
    for part in parts:
        state = part / "state.json"
        if state.is_file():
            entries = _read_json(state)
            entries = entries.get("_data_files") if isinstance(entries, dict) else None
            if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("filename"), str) for e in entries):
                raise IndexBuildError(f"{state}: no list of {{'filename': ...}} under '_data_files'")
            files = [part / entry["filename"] for entry in entries]
        else:
            files = sorted(part.glob("data-*.arrow"))
        if not files:
            raise IndexBuildError(f"{part}: a datasets directory without data-*.arrow files")
        for file in files:
            if not file.is_file():
                raise IndexBuildError(f"{file}: no such file (the datasets directory lists it)")
            found.append(CorpusFile(file, str(file.relative_to(directory)), "datasets"))
    return found


def discover_sources(paths: list[Path]) -> list[CorpusFile]:
    """Each file of documents with the name its documents' metadata records.

    A file is read by its suffix (`file_format`); a `datasets` directory contributes its Arrow
    files.  Any other directory contributes every `*.json*` file below it in sorted order,
    named relative to the directory, which is how infini-gram's indexer orders and names them;
    other formats in it are left alone, so a README or a notes file never becomes a document.
    """
    found: list[CorpusFile] = []
    for path in paths:
        if path.is_dir() and is_datasets_directory(path):
            found.extend(datasets_files(path))
        elif path.is_dir():
            files = sorted(p for p in path.glob("**/*.json*") if p.is_file())
            if not files:
                raise IndexBuildError(f"{path}: no *.json, *.jsonl or *.jsonl.gz files below it (Parquet, Arrow and text files are read when named one by one)")
            nested = next((p for p in sorted({f.parent for f in files}) if is_datasets_directory(p)), None)
            if nested:
                raise IndexBuildError(f"{nested}: a datasets directory inside {path}, whose JSON files are not documents; name it as a source of its own")
            found.extend(CorpusFile(f, str(f.relative_to(path)), "jsonl") for f in files)
        elif path.is_file():
            found.append(CorpusFile(path, path.name, file_format(path)))
        else:
            raise IndexBuildError(f"{path}: no such file or directory")
    return found


def _decompressed(raw: io.BufferedReader, path: Path) -> Iterable[bytes]:
    """The lines of a `.gz` or `.zst` file (Dolma and DCLM ship both), or of the file itself."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(raw)
    if name.endswith(".zst"):
        return _zstd_lines(raw)
    return raw


def _zstd_lines(raw: io.BufferedReader) -> Iterator[bytes]:
    """Lines of a Zstandard stream of one or more frames; a stream that ends inside a frame is
    cut short, which zstandard's own reader passes over in silence."""
    decompressor = zstandard.ZstdDecompressor()
    frame = decompressor.decompressobj()
    pending = b""
    while chunk := raw.read(1 << 20):
        try:
            data = frame.decompress(chunk)
            while frame.eof and frame.unused_data:
                rest, frame = frame.unused_data, decompressor.decompressobj()
                data += frame.decompress(rest)
        except zstandard.ZstdError as error:
            raise OSError(str(error)) from None
        lines = (pending + data).split(b"\n")
        pending = lines.pop()
        yield from (line + b"\n" for line in lines)
    if not frame.eof:
        raise EOFError("the Zstandard stream ends inside a frame")
    if pending:
        yield pending


def _span_lines(raw: io.BufferedReader, span: Span) -> Iterator[bytes]:
    """The lines of `span` of an uncompressed file."""
    raw.seek(span.start)
    left = span.end - span.start
    while left > 0 and (line := raw.readline(left)):
        left -= len(line)
        yield line


def line_chunks(path: Path, on_bytes: Callable[[int], None], span: Span | None = None) -> Iterator[tuple[int, list[bytes]]]:
    """(first line number, lines) in runs of about CHUNK_BYTES, reporting input bytes consumed;
    of `span` only, when given.  A compressed file cut short or damaged is an error naming the
    line it stopped at."""
    with open(path, "rb") as raw:
        stream = _decompressed(raw, path) if span is None else _span_lines(raw, span)
        first, lines, size, position = (1, [], 0, 0) if span is None else (span.first_line, [], 0, span.start)
        try:
            for line in stream:
                lines.append(line)
                size += len(line)
                if size >= CHUNK_BYTES:
                    on_bytes(raw.tell() - position)
                    position = raw.tell()
                    yield first, lines
                    first, lines, size = first + len(lines), [], 0
        except (EOFError, OSError, zlib.error) as error:
            raise IndexBuildError(f"{path}: line {first + len(lines)}: cannot be read, the compressed file is cut short or damaged ({error})") from None
        on_bytes(raw.tell() - position)
        if lines:
            yield first, lines


def whole_texts(path: Path, on_bytes: Callable[[int], None]) -> Iterator[list[tuple[int, bytes]]]:
    """A text file as one document starting at line 1; a blank file holds none."""
    data = b"".join(line for _, lines in line_chunks(path, on_bytes) for line in lines)
    if data.strip():
        yield [(1, data)]


def text_blocks(path: Path, on_bytes: Callable[[int], None], span: Span | None = None) -> Iterator[list[tuple[int, bytes]]]:
    """Blank-line-separated blocks as (first line number, bytes without the line break that
    ends the block), in runs of about CHUNK_BYTES; of `span` only (cut where a block starts),
    when given."""
    run: list[tuple[int, bytes]] = []
    block: list[bytes] = []
    start = size = 0
    for first, lines in line_chunks(path, on_bytes, span):
        for number, line in enumerate(lines, start=first):
            if line.strip():
                start = start if block else number
                block.append(line)
                continue
            if block:
                run.append((start, b"".join(block).rstrip(b"\r\n")))
                size += len(run[-1][1])
                block = []
            if size >= CHUNK_BYTES:
                yield run
                run, size = [], 0
    if block:
        run.append((start, b"".join(block).rstrip(b"\r\n")))
    if run:
        yield run


def _check_text_column(path: Path, schema: Any, text_field: str) -> None:
    """Refuse, before any row is read, a file whose text column is absent or not text."""
    import pyarrow as pa

    if text_field not in schema.names:
        raise IndexBuildError(f"{path}: row 0: field {text_field!r} is missing (its columns: {', '.join(schema.names)})")
    kind = schema.field(text_field).type
    value = kind.value_type if pa.types.is_dictionary(kind) else kind
    # string_view (pyarrow 16 on; Polars writes it) is named, not tested, so older pyarrow works.
    if not (pa.types.is_string(value) or pa.types.is_large_string(value) or str(value) == "string_view"):
        raise IndexBuildError(f"{path}: row 0: field {text_field!r} is {kind}, not a string")


def record_batches(file: CorpusFile, text_field: str, on_bytes: Callable[[int], None]) -> Iterator[tuple[int, Any]]:
    """(first row, record batch) of a Parquet file or an Arrow IPC file (stream or file format),
    read a batch at a time; rows are numbered from 0, as pyarrow and pandas number them.

    Parquet batches hold about CHUNK_BYTES (rows sized from the footer); Arrow files come in the
    batches they were written in (`datasets` writes 1,000 rows each).  The batches are parsed in
    the worker processes like JSONL chunks.  An unreadable file is an error naming it and the
    row reading stopped at."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, size = file.path, file.path.stat().st_size
    row = reported = 0

    def advance(position: int) -> None:
        nonlocal reported
        if position > reported:
            on_bytes(position - reported)
            reported = position

    try:
        if file.format == "parquet":
            with pq.ParquetFile(path) as reader:
                _check_text_column(path, reader.schema_arrow, text_field)
                meta = reader.metadata
                row_bytes = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)) / max(meta.num_rows, 1)
                for batch in reader.iter_batches(batch_size=max(1, min(1 << 16, int(CHUNK_BYTES / max(row_bytes, 1))))):
                    yield row, batch
                    row += batch.num_rows
                    advance(size * row // max(meta.num_rows, 1))
        else:
            with pa.OSFile(str(path)) as source:
                if source.read(6) == b"ARROW1":
                    reader = pa.ipc.open_file(source)
                    batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
                else:
                    source.seek(0)
                    reader = pa.ipc.open_stream(source)
                    batches = iter(reader)
                _check_text_column(path, reader.schema, text_field)
                for batch in batches:
                    yield row, batch
                    row += batch.num_rows
                    advance(source.tell())
                if isinstance(reader, pa.ipc.RecordBatchStreamReader) and not _ends_stream(path, size):
                    raise IndexBuildError(f"{path}: row {row}: the Arrow stream stops without its end marker; the file is truncated")
    except (pa.ArrowException, OSError) as error:
        kind = "a Parquet file" if file.format == "parquet" else "an Arrow IPC file"
        raise IndexBuildError(f"{path}: row {row}: cannot be read, the file is damaged or not {kind} ({error})") from None
    advance(size)


def _ends_stream(path: Path, size: int) -> bool:
    """Whether an Arrow IPC stream ends with its end-of-stream marker.  A stream cut between two
    batches otherwise reads as a shorter, whole one; every writer that closes a stream (as
    `datasets` does) writes the marker."""
    with open(path, "rb") as handle:
        handle.seek(max(0, size - 8))
        return handle.read(8) == b"\xff\xff\xff\xff\x00\x00\x00\x00"


def _slices(batch: Any) -> Iterator[tuple[int, Any]]:
    """A record batch in pieces of about CHUNK_BYTES, so one large batch is not one huge task."""
    step = max(1, batch.num_rows * CHUNK_BYTES // batch.nbytes if batch.nbytes > CHUNK_BYTES else batch.num_rows)
    for start in range(0, batch.num_rows, step):
        yield start, batch.slice(start, step)


def _ipc_stream(batch: Any) -> Any:
    """One record batch as an Arrow IPC stream, the form a worker process is sent it in."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def read_tasks(file: CorpusFile, options: ReadOptions, on_bytes: Callable[[int], None], span: Span | None = None) -> Iterator[Task]:
    """The parsing work for one file, as (function, arguments) for a worker process, read in
    order and in pieces of about CHUNK_BYTES, so no file is ever held whole in memory (a text
    file read as one document is, being one document).  `span` limits an uncompressed JSONL
    file, or a text file read in blocks, to part of it."""
    path = str(file.path)
    if file.format == "jsonl":
        for first, lines in line_chunks(file.path, on_bytes, span):
            yield parse_lines, (path, file.name, first, lines, options.normalization, options.text_field)
    elif file.format == "text" and options.text_docs == "block":
        for blocks in text_blocks(file.path, on_bytes, span):
            yield parse_text, (path, file.name, blocks, options.normalization)
    elif file.format == "text":
        for blocks in whole_texts(file.path, on_bytes):
            yield parse_text, (path, file.name, blocks, options.normalization)
    else:
        for first, batch in record_batches(file, options.text_field, on_bytes):
            for start, part in _slices(batch):
                yield parse_batch, (path, file.name, first + start, _ipc_stream(part), options.text_field, options.normalization)


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


class ShardWriter:
    """Appends parsed chunks to the current shard's four files, starting a new shard before a
    document would take the shard past its size."""

    def __init__(self, directory: Path, max_bytes: int, digest: hashlib._Hash, first: int = 0) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.digest = digest
        self.first = first
        self.shards: list[ShardInfo] = []
        self.files: list[FileInfo] = []
        self._files: list[_HashedFile] = []
        self._meta_bytes = 0

    def _open_shard(self) -> None:
        self._close_files()
        index = self.first + len(self.shards)
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
    files: list[CorpusFile], options: ReadOptions, on_bytes: Callable[[int], None], workers: int
) -> Iterator[tuple[int, ParsedChunk]]:
    """(source index, chunk) in input order, parsed on `workers` processes with a bounded
    number of chunks in flight, so memory stays flat however large the corpus.  Every format
    is parsed there: JSONL lines, text blocks and record batches alike.

    Workers are forked (a spawned one would re-import the caller's whole program) and forced
    to start before the first line is read, so they are forked before any progress callback
    can have started a display thread in this process."""
    with WorkerPool(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        for ready in [pool.submit(os.getpid) for _ in range(workers)]:
            ready.result()
        pending: deque[tuple[int, Future]] = deque()
        for source, file in enumerate(files):
            for function, arguments in read_tasks(file, options, on_bytes):
                pending.append((source, pool.submit(function, *arguments)))
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


def holds(directory: Path, path: Path) -> bool:
    directory, path = directory.resolve(), path.resolve()
    return path == directory or directory in path.parents


def _written_before_markers(path: Path, inputs: Iterable[Path] = ()) -> bool:
    """An index corpus-audit wrote before directories carried the outputs marker, which
    `--force` may replace: nothing in it but files named `tokenized|table|offset|metadata|
    metaoff.N` and an `audit-index.json` naming corpus-audit, and none of them an input."""
    path = Path(path)
    if path.is_symlink() or not (path / MANIFEST).is_file() or any(holds(path, p) for p in (Path.cwd(), *inputs)):
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


def check_target(out: Path, inputs: list[Path], force: bool) -> None:
    """Refuse, before the long build, an `out` the build may not replace."""
    if (out.exists() or out.is_symlink()) and not force:
        raise IndexBuildError(f"{out}: already exists (use --force to replace it)")
    if _written_before_markers(out, inputs):
        return
    try:
        check_directory_target(out, "index", inputs=inputs)
    except OutputError as error:
        raise IndexBuildError(str(error)) from None


def commit_index(staging: Path, out: Path, inputs: list[Path]) -> None:
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


def file_order(info: FileInfo) -> tuple[int, int]:
    kind, number = INDEX_FILE.fullmatch(info.name).groups()
    return int(number), KINDS.index(kind)


def read_options(normalization: str, text_field: str, text_docs: str) -> ReadOptions:
    """The options of a build, refused before any work when one is not understood."""
    if normalization not in NORMALIZERS:
        raise IndexBuildError(f"normalization {normalization!r} is not one of {', '.join(NORMALIZERS)}")
    if text_docs not in TEXT_DOCS:
        raise IndexBuildError(f"text_docs {text_docs!r} is not one of {', '.join(TEXT_DOCS)}")
    if not text_field:
        raise IndexBuildError("the text field's name is empty")
    return ReadOptions(normalization, text_field, text_docs)


def source_info(name: str, format: str, options: ReadOptions) -> SourceInfo:
    """A source's manifest entry before its documents are counted."""
    is_text = format == "text"
    return SourceInfo(path=name, documents=0, format=format, text_field=None if is_text else options.text_field, text_docs=options.text_docs if is_text else None)


def build_index(
    sources: list[Path],
    out: Path,
    *,
    memory_bytes: int = 8 << 30,
    normalization: str = "text",
    text_field: str = "text",
    text_docs: str = "file",
    force: bool = False,
    workers: int | None = None,
    progress: ProgressHook | None = None,
) -> IndexManifest:
    """Build an index at `out` from corpus files (see `discover_sources`).

    `text_field` names the JSONL field or Parquet/Arrow column holding the text; every other
    field is kept as the document's metadata.  `text_docs` says what a document of a plain-text
    file is: the whole `"file"`, or each blank-line-separated `"block"`.

    `normalization="text"` stores every document as queries are issued (NFC, whitespace runs
    collapsed to one space), so a passage matches whatever its line breaks or Unicode form;
    `"none"` stores the raw bytes, exactly as infini-gram's own indexer does.  With `force`, an
    existing `out` is replaced only if this tool wrote it (see `audit.outputs`).
    """
    options = read_options(normalization, text_field, text_docs)
    out = Path(out)
    inputs = [Path(p) for p in sources]
    check_target(out, inputs, force)
    files = discover_sources(inputs)
    total_input = sum(file.path.stat().st_size for file in files)
    staging = staging_directory(out)
    started = time.perf_counter()
    try:
        digest = hashlib.blake2b(digest_size=16)
        writer = ShardWriter(staging, shard_budget(memory_bytes), digest)
        done_input = 0

        def advance(n: int) -> None:
            nonlocal done_input
            done_input += n
            if progress:
                progress("read", done_input, total_input)

        source_infos = [source_info(file.name, file.format, options) for file in files]
        for source, chunk in parsed_chunks(files, options, advance, workers or os.cpu_count() or 1):
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
            files=sorted(writer.files + tables, key=file_order),
        )
        (staging / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
        commit_index(staging, out, inputs)
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
