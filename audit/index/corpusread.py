"""Reading corpus files in pieces: JSONL lines (plain, gzip or Zstandard), plain-text blocks or
whole files, and Parquet or Arrow record batches, each cut into tasks of about CHUNK_BYTES that
the build's worker processes parse (`audit.index.documents`).  No file is held whole, and no
document longer than `ReadOptions.max_document`: one line a small compressed file inflates to
gigabytes is refused, naming the file and line, before it is held."""
from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import zstandard

from audit.index.documents import NORMALIZERS, ParsedChunk, parse_batch, parse_lines, parse_text
from audit.index.errors import IndexBuildError

if TYPE_CHECKING:
    import pyarrow as pa

CHUNK_BYTES = 1 << 22
# The largest document (line, block or whole text file) a build reads, unless told otherwise.
MAX_DOCUMENT = 64 << 20
# Compressed bytes fed to Zstandard at a time: at most ~64 MiB out, whatever the file holds.
ZSTD_READ = 2048
TEXT_DOCS = ("file", "block")

Task = tuple[Callable[..., ParsedChunk], tuple]


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
    max_document: int = MAX_DOCUMENT


def read_options(normalization: str, text_field: str, text_docs: str, max_document: int = MAX_DOCUMENT) -> ReadOptions:
    """The options of a build, refused before any work when one is not understood."""
    if normalization not in NORMALIZERS:
        raise IndexBuildError(f"normalization {normalization!r} is not one of {', '.join(NORMALIZERS)}")
    if text_docs not in TEXT_DOCS:
        raise IndexBuildError(f"text_docs {text_docs!r} is not one of {', '.join(TEXT_DOCS)}")
    if not text_field:
        raise IndexBuildError("the text field's name is empty")
    if max_document < 1:
        raise IndexBuildError(f"the largest document size {max_document} is not a positive number of bytes")
    return ReadOptions(normalization, text_field, text_docs, max_document)


def _decompressed(raw: io.BufferedReader, path: Path, limit: int) -> Iterable[bytes]:
    """The lines of a `.gz` or `.zst` file (Dolma and DCLM ship both), or of the file itself."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return _bounded_lines(gzip.open(raw), limit)
    if name.endswith(".zst"):
        return _zstd_lines(raw, limit)
    return _bounded_lines(raw, limit)


class _LineTooLong(Exception):
    """A line past the document limit, found before it was held whole."""


def _bounded_lines(stream: io.BufferedIOBase, limit: int) -> Iterator[bytes]:
    """Lines of a file object, none read past `limit + 1` bytes, so one endless line (a small
    gzip file can inflate to gigabytes of one line) is refused, not held."""
    while line := stream.readline(limit + 1):
        yield line


def _zstd_lines(raw: io.BufferedReader, limit: int) -> Iterator[bytes]:
    """Lines of a Zstandard stream of one or more frames; a stream that ends inside a frame is
    cut short, which zstandard's own reader passes over in silence.  Input is fed ZSTD_READ
    bytes at a time, since Zstandard inflates a byte to as many as 32,000; a line growing past
    `limit` is refused before it is held whole."""
    decompressor = zstandard.ZstdDecompressor()
    frame = decompressor.decompressobj()
    pending: list[bytes] = []
    held = 0
    while chunk := raw.read(ZSTD_READ):
        try:
            data = frame.decompress(chunk)
            while frame.eof and frame.unused_data:
                rest, frame = frame.unused_data, decompressor.decompressobj()
                data += frame.decompress(rest)
        except zstandard.ZstdError as error:
            raise OSError(str(error)) from None
        *lines, tail = data.split(b"\n")
        if lines:
            yield b"".join([*pending, lines[0], b"\n"])
            yield from (line + b"\n" for line in lines[1:])
            pending, held = [], 0
        pending.append(tail)
        held += len(tail)
        if held > limit:
            raise _LineTooLong
    if not frame.eof:
        raise EOFError("the Zstandard stream ends inside a frame")
    if held:
        yield b"".join(pending)


def _span_lines(raw: io.BufferedReader, span: Span, limit: int) -> Iterator[bytes]:
    """The lines of `span` of an uncompressed file, none read past `limit + 1` bytes."""
    raw.seek(span.start)
    left = span.end - span.start
    while left > 0 and (line := raw.readline(min(left, limit + 1))):
        left -= len(line)
        yield line


def too_long(path: Path, line: int, limit: int, what: str = "line") -> IndexBuildError:
    return IndexBuildError(f"{path}: line {line}: a {what} longer than {limit:,} bytes, the largest document a build reads (--max-document); raise it to read this one")


def line_chunks(path: Path, on_bytes: Callable[[int], None], span: Span | None = None, limit: int = MAX_DOCUMENT) -> Iterator[tuple[int, list[bytes]]]:
    """(first line number, lines) in runs of about CHUNK_BYTES, reporting input bytes consumed;
    of `span` only, when given.  A compressed file cut short or damaged, or a line longer than
    `limit`, is an error naming the line it stopped at."""
    with open(path, "rb") as raw:
        stream = _decompressed(raw, path, limit) if span is None else _span_lines(raw, span, limit)
        first, lines, size, position = (1, [], 0, 0) if span is None else (span.first_line, [], 0, span.start)
        try:
            for line in stream:
                if len(line) > limit:
                    raise _LineTooLong
                lines.append(line)
                size += len(line)
                if size >= CHUNK_BYTES:
                    on_bytes(raw.tell() - position)
                    position = raw.tell()
                    yield first, lines
                    first, lines, size = first + len(lines), [], 0
        except (EOFError, OSError, zlib.error) as error:
            raise IndexBuildError(f"{path}: line {first + len(lines)}: cannot be read, the compressed file is cut short or damaged ({error})") from None
        except _LineTooLong:
            raise too_long(path, first + len(lines), limit) from None
        on_bytes(raw.tell() - position)
        if lines:
            yield first, lines


def whole_texts(path: Path, on_bytes: Callable[[int], None], limit: int = MAX_DOCUMENT) -> Iterator[list[tuple[int, bytes]]]:
    """A text file as one document starting at line 1; a blank file holds none."""
    parts: list[bytes] = []
    held = 0
    for first, lines in line_chunks(path, on_bytes, limit=limit):
        held += sum(map(len, lines))
        if held > limit:
            raise too_long(path, first, limit, "text file (one document)")
        parts += lines
    data = b"".join(parts)
    if data.strip():
        yield [(1, data)]


def text_blocks(path: Path, on_bytes: Callable[[int], None], span: Span | None = None, limit: int = MAX_DOCUMENT) -> Iterator[list[tuple[int, bytes]]]:
    """Blank-line-separated blocks as (first line number, bytes without the line break that
    ends the block), in runs of about CHUNK_BYTES; of `span` only (cut where a block starts),
    when given."""
    run: list[tuple[int, bytes]] = []
    block: list[bytes] = []
    start = size = held = 0
    for first, lines in line_chunks(path, on_bytes, span, limit):
        for number, line in enumerate(lines, start=first):
            if line.strip():
                start, held = (start, held) if block else (number, 0)
                held += len(line)
                if held > limit:
                    raise too_long(path, start, limit, "block (one document)")
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


def _check_text_column(path: Path, schema: pa.Schema, text_field: str) -> None:
    """Refuse, before any row is read, a file whose text column is absent or not text."""
    import pyarrow as pa

    if text_field not in schema.names:
        raise IndexBuildError(f"{path}: row 0: field {text_field!r} is missing (its columns: {', '.join(schema.names)})")
    kind = schema.field(text_field).type
    value = kind.value_type if pa.types.is_dictionary(kind) else kind
    # string_view (pyarrow 16 on; Polars writes it) is named, not tested, so older pyarrow works.
    if not (pa.types.is_string(value) or pa.types.is_large_string(value) or str(value) == "string_view"):
        raise IndexBuildError(f"{path}: row 0: field {text_field!r} is {kind}, not a string")


def record_batches(file: CorpusFile, text_field: str, on_bytes: Callable[[int], None]) -> Iterator[tuple[int, pa.RecordBatch]]:
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


def _slices(batch: pa.RecordBatch) -> Iterator[tuple[int, pa.RecordBatch]]:
    """A record batch in pieces of about CHUNK_BYTES, so one large batch is not one huge task."""
    step = max(1, batch.num_rows * CHUNK_BYTES // batch.nbytes if batch.nbytes > CHUNK_BYTES else batch.num_rows)
    for start in range(0, batch.num_rows, step):
        yield start, batch.slice(start, step)


def _ipc_stream(batch: pa.RecordBatch) -> pa.Buffer:
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
        for first, lines in line_chunks(file.path, on_bytes, span, options.max_document):
            yield parse_lines, (path, file.name, first, lines, options.normalization, options.text_field)
    elif file.format == "text" and options.text_docs == "block":
        for blocks in text_blocks(file.path, on_bytes, span, options.max_document):
            yield parse_text, (path, file.name, blocks, options.normalization)
    elif file.format == "text":
        for blocks in whole_texts(file.path, on_bytes, options.max_document):
            yield parse_text, (path, file.name, blocks, options.normalization)
    else:
        for first, batch in record_batches(file, options.text_field, on_bytes):
            for start, part in _slices(batch):
                yield parse_batch, (path, file.name, first + start, _ipc_stream(part), options.text_field, options.normalization)
