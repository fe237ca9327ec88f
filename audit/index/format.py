"""The on-disk form of an index, as the builder writes it and the query side reads it.

The files are infini-gram's own v4 format (`tokenized.N`, `table.N`, `offset.N`, `metadata.N`,
`metaoff.N`), so `infini_gram.engine.InfiniGramEngine` opens what a build writes, beside the
language table (`audit.index.doclangs`) and `audit-index.json`, the manifest.  The manifest
records every file's size and hash, so damage is found rather than read as absence.  This is
the one module of the build the query side imports.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from audit import __version__
from audit.timestamps import utc_timestamp

if TYPE_CHECKING:
    from audit.index.documents import JsonValue

MANIFEST = "audit-index.json"
MANIFEST_VERSION = 2
KINDS = ("tokenized", "table", "offset", "metadata", "metaoff")
INDEX_FILE = re.compile(rf"({'|'.join(KINDS)})\.(\d+)")
HASH_BLOCK = 1 << 24


@dataclass
class ShardInfo:
    """One shard's size, documents and pointer width; `fingerprint` (blake2b-128 of its texts and
    metadata) is recorded by a sharded build (`audit.index.sharded`), which hashes shards apart."""

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
    extra: dict[str, JsonValue] = field(default_factory=dict)
    files: list[FileInfo] = field(default_factory=list)
    minhash: list[FileInfo] = field(default_factory=list)

    @classmethod
    def built(
        cls, *, normalization: str, shards: list[ShardInfo], sources: list[SourceInfo], fingerprint: str, seconds: float, code: str, extra: dict[str, JsonValue], files: list[FileInfo]
    ) -> IndexManifest:
        """The manifest of a build finished now: infini-gram's byte-level v4 files, this layout."""
        return cls(
            format="infini-gram",
            version=4,
            manifest_version=MANIFEST_VERSION,
            token_dtype="u8",
            normalization=normalization,
            shards=shards,
            sources=sources,
            documents=sum(s.documents for s in shards),
            bytes=sum(s.bytes for s in shards),
            fingerprint=fingerprint,
            created=utc_timestamp(),
            tool=f"corpus-audit {__version__}",
            build_seconds=round(seconds, 3),
            code=code,
            extra=extra,
            files=files,
        )

    def recorded_files(self) -> list[FileInfo]:
        """Every file the manifest records a size and hash for: the index's own, then the
        near-duplicate index's (named by their path inside the index directory)."""
        return [*self.files, *self.minhash]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, JsonValue]) -> IndexManifest:
        data = dict(data)
        data["shards"] = [ShardInfo(**s) for s in data["shards"]]
        data["sources"] = [SourceInfo(**s) for s in data["sources"]]
        data["files"] = [FileInfo(**f) for f in data.get("files", [])]
        data["minhash"] = [FileInfo(**f) for f in data.get("minhash", [])]
        return cls(**data)


def read_manifest(directory: Path) -> IndexManifest | None:
    path = Path(directory) / MANIFEST
    if not path.exists():
        return None
    return IndexManifest.from_dict(json.loads(path.read_text(encoding="utf-8")))


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


def pointer_width(size: int) -> int:
    """Bytes per suffix-array pointer, by infini-gram's rule, so tables are interchangeable."""
    return max(1, int(np.ceil(np.log2(max(size, 2)) / 8)))


def file_order(info: FileInfo) -> tuple[int, int, str]:
    """Shard files by shard and kind, then any other file of the index (the language table) by name."""
    if found := INDEX_FILE.fullmatch(info.name):
        return int(found[2]), KINDS.index(found[1]), ""
    return sys.maxsize, 0, info.name
