"""Opening a byte-level infini-gram index's shards: the checks made before any answer, and the
memory maps.

Any u8 index in infini-gram's v4 format opens here, whether `audit index build` or
`python -m infini_gram.indexing --token_dtype u8` wrote it.  Opening checks, cheaply, that the
files are the ones the manifest records at the sizes it records, that no other file is in the
directory, that their sizes and offsets agree with each other by infini-gram's rules, and that
a sample of each suffix array is in order (`audit.corpora.soundness`): a damaged index is an
error, never a silent "not found".  `audit.corpora.verify.verify_index` also re-hashes every file.
"""
from __future__ import annotations

import mmap
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from audit import _suffix
from audit.corpora.soundness import foreign_files, suffix_order_problem
from audit.errors import AuditError
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


# Sampled keys (`_suffix.shard_keys`): every LEAST_KEY_STEP-th suffix's at most, and no more
# than KEYS_BUDGET bytes for a group of shards mapped in one process (a step twice as long
# halves them): the keys of a large index cost a few more steps of each search, not its memory.
LEAST_KEY_STEP = 256
KEYS_BUDGET = 64 << 20


def key_step(suffixes: int) -> int:
    """The step of the sampled keys of shards holding `suffixes` suffixes in all."""
    step = LEAST_KEY_STEP
    while suffixes // step * _suffix.KEY_BYTES > KEYS_BUDGET:
        step *= 2
    return step


# Pointer widths numpy reads as one little-endian word.
_WORDS = {1: np.dtype("u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


@dataclass
class Shard:
    data: mmap.mmap
    table: mmap.mmap
    ratio: int
    offsets: np.ndarray
    metadata: mmap.mmap | None
    metaoff: np.ndarray | None
    first_document: int
    key_step: int = LEAST_KEY_STEP

    @cached_property
    def keys(self) -> bytes:
        """The suffix array's sampled keys, every `key_step`-th suffix's
        (`_suffix.shard_keys`), made on the first search (tens of milliseconds for a 100 MiB
        shard): the searches given them start a few steps from their answer, with the same
        answers."""
        return _suffix.shard_keys(self.data, self.table, self.ratio, self.key_step)

    def pointers(self, ranks: np.ndarray) -> np.ndarray:
        """The suffix array's entries at `ranks`: read as words where a pointer is one."""
        word = _WORDS.get(self.ratio)
        if word is not None:
            return np.frombuffer(self.table, dtype=word, count=len(self.table) // self.ratio)[ranks].astype(np.int64)
        table = np.frombuffer(self.table, dtype=np.uint8)
        columns = ranks[:, None].astype(np.int64) * self.ratio + np.arange(self.ratio)
        weights = np.uint64(1) << (np.arange(self.ratio, dtype=np.uint64) * np.uint64(8))
        return (table[columns].astype(np.uint64) * weights).sum(axis=1).astype(np.int64)


class Damage(Exception):
    """One file of the index is wrong; `open_shards` turns it into an IndexOpenError that says
    what to do about it."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name
        self.problem = problem


def load_manifest(path: Path) -> IndexManifest | None:
    try:
        return read_manifest(path)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise Damage(MANIFEST, f"not a readable index manifest ({error})") from None


def index_names(path: Path) -> set[str]:
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
    present = index_names(path)
    expected = _expected_names(path, manifest, present)
    shard_files = {name for name in expected if INDEX_FILE.fullmatch(name)}
    missing = sorted(shard_files - present) + sorted(name for name in expected - shard_files if not (path / name).is_file())
    stray = sorted(present - expected)
    if missing:
        raise Damage(missing[0], "is missing")
    if stray:
        raise Damage(stray[0], "is not a file of this index (infini-gram's engine would read it as one); remove it")
    return sorted({int(INDEX_FILE.fullmatch(name)[2]) for name in shard_files})


def file_size(path: Path, name: str) -> int:
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
        actual = file_size(path, name)
        if actual != expected:
            raise Damage(name, f"{actual:,} bytes, but the manifest records {expected:,}")
    for shard in manifest.shards:
        for name, expected in ((f"tokenized.{shard.name}", shard.bytes), (f"offset.{shard.name}", 8 * shard.documents)):
            if recorded[name] != expected:
                raise Damage(MANIFEST, f"records {name} as {recorded[name]:,} bytes in its file list but {expected:,} in its shard list")
    if sum(s.bytes for s in manifest.shards) != manifest.bytes or sum(s.documents for s in manifest.shards) != manifest.documents:
        raise Damage(MANIFEST, "its totals disagree with its shards")


def _read_pointers(path: Path, name: str) -> np.ndarray:
    size = file_size(path, name)
    if size == 0 or size % 8:
        raise Damage(name, f"{size:,} bytes, not a whole number (at least one) of 8-byte offsets")
    return np.fromfile(path / name, dtype="<u8").astype(np.int64)


def _check_increasing(name: str, starts: np.ndarray, target: str, size: int) -> None:
    if starts[0] != 0:
        raise Damage(name, f"its first entry is {starts[0]:,}, not 0")
    falls = np.flatnonzero(np.diff(starts) <= 0)
    if len(falls):
        raise Damage(name, f"entry {falls[0] + 1:,} ({starts[falls[0] + 1]:,}) does not come after entry {falls[0]:,} ({starts[falls[0]]:,})")
    if starts[-1] >= size:
        raise Damage(name, f"its last entry {starts[-1]:,} is past the end of {target} ({size:,} bytes)")


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
        raise Damage(name, f"document {at:,} starts at byte {offsets[at]:,} of tokenized.{n}, which is not the 0xff document separator")


def _check_metaoff(n: int, metaoff: np.ndarray, documents: int, metadata: mmap.mmap) -> None:
    """One metadata line per document, each starting where the previous line ended."""
    name = f"metaoff.{n}"
    if len(metaoff) != documents:
        raise Damage(name, f"{len(metaoff):,} entries, but offset.{n} has {documents:,} documents")
    _check_increasing(name, metaoff, f"metadata.{n}", len(metadata))
    raw = np.frombuffer(metadata, dtype=np.uint8)
    if raw[-1] != ord("\n"):
        raise Damage(f"metadata.{n}", "does not end with a line end (cut short?)")
    after = np.flatnonzero(raw[metaoff[1:] - 1] != ord("\n"))
    if len(after):
        raise Damage(name, f"entry {after[0] + 1:,} starts at byte {metaoff[after[0] + 1]:,} of metadata.{n}, which is not the start of a line")


def _open_shard(path: Path, n: int, width: int, first: int) -> Shard:
    """One shard's files, mapped, after the checks infini-gram's indexer and engine imply."""
    data_size, table_size = file_size(path, f"tokenized.{n}"), file_size(path, f"table.{n}")
    if data_size == 0 or data_size % width:
        raise Damage(f"tokenized.{n}", f"{data_size:,} bytes, not a whole number (at least one) of {width}-byte tokens")
    ratio = pointer_width(data_size)
    expected = ratio * (data_size // width)
    if table_size != expected:
        raise Damage(f"table.{n}", f"{table_size:,} bytes, but tokenized.{n} ({data_size:,} bytes) needs {expected:,} ({ratio}-byte pointers, by infini-gram's rule)")
    data = _map(path / f"tokenized.{n}")
    offsets = _read_pointers(path, f"offset.{n}")
    _check_offsets(n, offsets, data, width)
    metadata = metaoff = None
    if (path / f"metadata.{n}").exists():
        metaoff = _read_pointers(path, f"metaoff.{n}")
        if file_size(path, f"metadata.{n}") == 0:
            raise Damage(f"metadata.{n}", "is empty")
        metadata = _map(path / f"metadata.{n}")
        _check_metaoff(n, metaoff, len(offsets), metadata)
    table = _map(path / f"table.{n}")
    if problem := suffix_order_problem(data, table, ratio, width):
        raise Damage(f"table.{n}", problem)
    return Shard(data=data, table=table, ratio=ratio, offsets=offsets, metadata=metadata, metaoff=metaoff, first_document=first)


def _check_layout(path: Path, token_width: int) -> tuple[IndexManifest | None, list[int]]:
    """The manifest and shard numbers, once the names and recorded sizes are right: file
    metadata only, so a driver that leaves the shards to other processes checks this much."""
    if not path.is_dir():
        raise IndexOpenError(f"{path}: no such index directory")
    manifest = load_manifest(path)
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


def _damaged(path: Path, damage: Damage, token_width: int) -> IndexOpenError:
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
    except Damage as damage:
        raise _damaged(path, damage, token_width) from None
    counts = [file_size(path, f"offset.{n}") // 8 for n in numbers]
    firsts = [sum(counts[:i]) for i in range(len(counts))]
    return Layout(manifest, numbers, firsts, [file_size(path, f"tokenized.{n}") for n in numbers])


def map_shards(path: Path, numbers: list[int], first_documents: list[int], token_width: int = 1) -> list[Shard]:
    """These shards, mapped, after each one's own checks (sizes and offsets by infini-gram's
    rules), or IndexOpenError naming the file at fault."""
    path = Path(path)
    try:
        return [_open_shard(path, n, token_width, first) for n, first in zip(numbers, first_documents, strict=True)]
    except Damage as damage:
        raise _damaged(path, damage, token_width) from None


def open_shards(path: Path, token_width: int = 1) -> tuple[IndexManifest | None, list[Shard]]:
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
