"""Writing a shard's files: documents appended to its text, offsets and metadata as they are
parsed, each file hashed as its bytes pass, then the suffix array sorted by libdivsufsort,
which sorts a shard in one pass where infini-gram's indexer sorts parts and merges them."""
from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path

import numpy as np
import pydivsufsort

from audit.index.documents import ParsedChunk
from audit.index.format import FileInfo, ShardInfo, new_file_hash, pointer_width

SA_CHUNK = 1 << 24
WRITE_BUFFER = 1 << 22


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
