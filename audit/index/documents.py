"""Corpus documents in their on-disk form: JSONL lines, plain-text blocks and Arrow record
batches parsed into separator-prefixed text and infini-gram metadata lines.

Kept apart from `audit.index.build` so that the worker processes which parse in parallel import
nothing heavier than `json` (pyarrow only when they are handed a record batch).
"""
from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from audit.index.errors import IndexBuildError
from audit.text import normalize

if TYPE_CHECKING:
    import pyarrow as pa

# A value as JSON reads it: the metadata lines, manifests and records an index holds.
JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"

DOC_SEPARATOR = b"\xff"
NORMALIZERS: dict[str, Callable[[str], str]] = {"text": normalize, "none": lambda text: text}


@dataclass
class ParsedChunk:
    """Consecutive documents of one file, already in their on-disk form."""

    texts: bytes
    text_sizes: list[int]
    metadata: bytes
    metadata_sizes: list[int]
    blank_lines: int = 0
    # Each document's (language, `audit.index.doclangs.How`), filled where it was parsed.
    languages: list[tuple[str, int]] | None = None


class _Chunk:
    """Collects documents as they are parsed, so every format ends in the same bytes."""

    def __init__(self, normalization: str) -> None:
        self.normalizer = NORMALIZERS[normalization]
        self.texts: list[bytes] = []
        self.metadata: list[bytes] = []

    def add(self, text: str, name: str, linenum: int, metadata: Mapping[str, object]) -> None:
        self.texts.append(DOC_SEPARATOR + self.normalizer(text).encode("utf-8"))
        line = _ENCODER.encode({"path": name, "linenum": linenum, "metadata": metadata})
        self.metadata.append((line + "\n").encode("utf-8"))

    def done(self, blank_lines: int = 0) -> ParsedChunk:
        return ParsedChunk(
            texts=b"".join(self.texts),
            text_sizes=[len(t) for t in self.texts],
            metadata=b"".join(self.metadata),
            metadata_sizes=[len(m) for m in self.metadata],
            blank_lines=blank_lines,
        )


def _json_value(value: object) -> str:
    """Arrow columns hold values JSON has no type for (timestamps, dates, binary, decimals);
    they are kept as provenance in a form that reads back, not dropped."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


_ENCODER = json.JSONEncoder(default=_json_value)


def _not_a_string(value: object) -> str:
    return "missing" if value is None else f"a {type(value).__name__}, not a string"


def parse_lines(path: str, name: str, first_line: int, lines: list[bytes], normalization: str, text_field: str = "text") -> ParsedChunk:
    """Parse a run of JSONL lines into separator-prefixed texts and infini-gram metadata lines.

    Every field but `text_field`, nested ones included, is kept as the document's metadata.
    Runs in worker processes, so the errors it raises carry the file and line themselves.
    """
    chunk, blank = _Chunk(normalization), 0
    for number, line in enumerate(lines, start=first_line):
        if not line.strip():
            blank += 1
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise IndexBuildError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        except UnicodeDecodeError:
            raise IndexBuildError(f"{path}:{number}: not valid UTF-8") from None
        if not isinstance(record, dict):
            raise IndexBuildError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        text = record.pop(text_field, None)
        if not isinstance(text, str):
            raise IndexBuildError(f"{path}:{number}: field {text_field!r} is {_not_a_string(text)}")
        try:
            chunk.add(text, name, number - 1, record)
        except UnicodeEncodeError as error:
            raise IndexBuildError(f"{path}:{number}: field {text_field!r} holds a lone surrogate ({error.object[error.start]!r} at character {error.start}), which is no text") from None
    return chunk.done(blank)


def parse_text(path: str, name: str, blocks: list[tuple[int, bytes]], normalization: str) -> ParsedChunk:
    """Plain-text documents, each given as (number of its first line, its bytes).

    The metadata records only where the document starts: a text file has no fields.
    """
    chunk = _Chunk(normalization)
    for first, raw in blocks:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            line = first + raw.count(b"\n", 0, error.start)
            raise IndexBuildError(f"{path}:{line}: not valid UTF-8") from None
        chunk.add(text.removeprefix("\ufeff") if first == 1 else text, name, first - 1, {})
    return chunk.done()


def parse_batch(path: str, name: str, first_row: int, stream: pa.Buffer, text_field: str, normalization: str) -> ParsedChunk:
    """A Parquet or Arrow record batch, sent as a one-batch Arrow IPC stream: it carries the
    schema and any dictionaries, and only a slice's own rows where pickling a slice would send
    its whole parent.

    The reader has checked that `text_field` is a string column; a null in it is an error
    naming the row (numbered from 0 in the file, as pyarrow and pandas number them).
    """
    import pyarrow as pa

    records = pa.ipc.open_stream(stream).read_next_batch()
    try:
        texts = records.column(text_field).to_pylist()
        rows = records.drop_columns([text_field]).to_pylist()
    except UnicodeDecodeError:
        row, field = _undecodable(records)
        raise IndexBuildError(f"{path}: row {first_row + row}: field {field!r} is not valid UTF-8") from None
    chunk = _Chunk(normalization)
    for row, (text, metadata) in enumerate(zip(texts, rows, strict=True), start=first_row):
        if text is None:
            raise IndexBuildError(f"{path}: row {row}: field {text_field!r} is missing (null)")
        chunk.add(text, name, row, metadata)
    return chunk.done()


def _undecodable(records: pa.RecordBatch) -> tuple[int, str]:
    """The first row and column holding a string that is not UTF-8 (Parquet does not check;
    pyarrow only finds out when it converts the value)."""
    for row in range(records.num_rows):
        for name in records.schema.names:
            try:
                records.column(name)[row].as_py()
            except UnicodeDecodeError:
                return row, name
    raise AssertionError("no undecodable value")
