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

import fcntl
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
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pydivsufsort

from audit import __version__
from audit.children import WorkerPool
from audit.index.corpusread import MAX_DOCUMENT, CorpusFile, ReadOptions, read_tasks
from audit.index.doclangs import HEADER, TABLE, DocumentLanguages, write_table
from audit.index.documents import NORMALIZERS, IndexBuildError, ParsedChunk
from audit.index.langtable import TableBuilder, parse_and_identify, summary
from audit.langid import identifier, preload
from audit.nospace import is_full_disk, no_space
from audit.outputs import MARKER, STAGING_TAG, OutputError, check_directory_target, commit_directory, discard_staging, staging_directory
from audit.timestamps import utc_timestamp

MANIFEST = "audit-index.json"
MANIFEST_VERSION = 2
KINDS = ("tokenized", "table", "offset", "metadata", "metaoff")
INDEX_FILE = re.compile(rf"({'|'.join(KINDS)})\.(\d+)")
HASH_BLOCK = 1 << 24
# The modules whose code decides the bytes of an index (its language table included); their hash,
# with the language identifier's version, is the `code` a manifest records.
BUILD_CODE = ("index/build.py", "index/corpusread.py", "index/documents.py", "text.py", "langid.py", "index/langtable.py", "index/doclangs.py")
SA_CHUNK = 1 << 24
WRITE_BUFFER = 1 << 22
TEXT_SUFFIXES = (".txt", ".txt.gz", ".txt.zst", ".md")
DATASETS_MARKERS = ("state.json", "dataset_info.json", "dataset_dict.json")
TEXT_DOCS = ("file", "block")

ProgressHook = Callable[[str, int, int], None]


@dataclass
class ShardInfo:
    """One shard's size, documents and pointer width; `fingerprint` (blake2b-128 of its texts and
    metadata) is recorded by a sharded build (`audit.index.sharded.build`), which hashes shards apart."""

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
    digest.update(json.dumps(identifier(), sort_keys=True).encode())
    for name in BUILD_CODE:
        source = Path(__file__).parents[1] / name
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


# Files that mark a directory as one this tool wrote (an index, a langlinks lookup, a report) or
# is writing (a build's staging directory).
OUTPUT_MARKERS = (MANIFEST, "audit-langlinks.json", MARKER, STAGING_TAG)


def is_tool_output(directory: Path) -> bool:
    return any((directory / marker).is_file() for marker in OUTPUT_MARKERS)


def nested_outputs(paths: list[Path]) -> list[Path]:
    """Directories below the source directories that this tool wrote (an index built inside
    its own sources, a report): their files are never documents, and a build skips them."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir() or is_datasets_directory(path):
            continue
        for folder, directories, files in os.walk(path):
            if folder != str(path) and not set(OUTPUT_MARKERS).isdisjoint(files):
                found.append(Path(folder))
                directories.clear()
    return sorted(found)


def _directory_files(path: Path) -> list[Path]:
    """Every `*.json*` file below a source directory, but none inside a directory this tool wrote."""
    if is_tool_output(path):
        raise IndexBuildError(f"{path}: a directory audit wrote (an index, a lookup or a report), not a corpus; name the corpus files instead")
    skipped = {directory.relative_to(path) for directory in nested_outputs([path])}
    files = (p for p in path.glob("**/*.json*") if p.is_file())
    return sorted(p for p in files if not any(parent in skipped for parent in p.relative_to(path).parents))


def discover_sources(paths: list[Path]) -> list[CorpusFile]:
    """Each file of documents with the name its documents' metadata records.

    A file is read by its suffix (`file_format`); a `datasets` directory contributes its Arrow
    files.  Any other directory contributes every `*.json*` file below it in sorted order,
    named relative to the directory, which is how infini-gram's indexer orders and names them;
    other formats in it are left alone, so a README or a notes file never becomes a document,
    and so are directories this tool wrote (`nested_outputs`).
    """
    found: list[CorpusFile] = []
    for path in paths:
        if path.is_dir() and is_datasets_directory(path):
            found.extend(datasets_files(path))
        elif path.is_dir():
            files = _directory_files(path)
            if not files:
                raise IndexBuildError(f"{path}: no *.json, *.jsonl or *.jsonl.gz files below it (Parquet, Arrow and text files are read when named one by one)")
            nested = next((p for p in sorted({f.parent for f in files}) if is_datasets_directory(p)), None)
            if nested:
                raise IndexBuildError(f"{nested}: a datasets directory inside {path}, whose JSON files are not documents; name it as a source of its own")
            found.extend(CorpusFile(f, str(f.relative_to(path)), "jsonl") for f in files)
        elif path.is_file():
            found.append(CorpusFile(path, path.name, file_format(path)))
        elif path.exists():
            raise IndexBuildError(f"{path}: not a regular file or a directory (a pipe, a socket or a device); name corpus files")
        else:
            raise IndexBuildError(f"{path}: no such file or directory")
    return found
































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
    preload()
    with WorkerPool(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        for ready in [pool.submit(os.getpid) for _ in range(workers)]:
            ready.result()
        pending: deque[tuple[int, Future]] = deque()
        for source, file in enumerate(files):
            for function, arguments in read_tasks(file, options, on_bytes):
                pending.append((source, pool.submit(parse_and_identify, function, arguments)))
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
        entry.is_file() and not entry.is_symlink() and (entry.name in (MANIFEST, TABLE, HEADER) or INDEX_FILE.fullmatch(entry.name))
        for entry in path.iterdir()
    )
    return isinstance(tool, str) and tool.startswith("corpus-audit") and names_ok


def _lock_holder(handle: IO[str]) -> str:
    handle.seek(0)
    return handle.read().strip() or "?"


@contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold the lock of builds of `out` (a hidden sibling file holding the builder's pid), or
    IndexBuildError naming the build that holds it: two builds of one index would take each
    other's staging directory away."""
    path = out.parent / f".{out.name}.audit-build.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held until the build ends)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(handle)
            handle.close()
            raise IndexBuildError(f"another build (pid {holder}) is writing {out}; wait for it to end, or stop it, and run again") from None
        # The lock counts only if the file is still the one at `path` (a finishing build removes it).
        if path.exists() and path.stat().st_ino == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        path.unlink(missing_ok=True)
        handle.close()


def check_target(out: Path, inputs: list[Path], force: bool) -> None:
    """Refuse, before the long build, an `out` the build may not replace, or one inside a source
    directory, where the next build of that directory would find it."""
    for source in inputs:
        if source.is_dir() and holds(source, out) and not holds(out, source):
            raise IndexBuildError(f"{out}: inside the source directory {source}; give --out outside it, so the index is never read back as a source")
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


def file_order(info: FileInfo) -> tuple[int, int, str]:
    """Shard files by shard and kind, then any other file of the index (the language table) by name."""
    if found := INDEX_FILE.fullmatch(info.name):
        return int(found[2]), KINDS.index(found[1]), ""
    return sys.maxsize, 0, info.name


def write_languages(directory: Path, table: DocumentLanguages) -> list[FileInfo]:
    """The language table's two files written into `directory` (a build's staging), recorded."""
    return [FileInfo(name=path.name, bytes=path.stat().st_size, blake2b=hash_file(path)) for path in write_table(directory, table)]


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
    max_document: int = MAX_DOCUMENT,
) -> IndexManifest:
    """Build an index at `out` from corpus files (see `discover_sources`).

    `text_field` names the JSONL field or Parquet/Arrow column holding the text; every other
    field is kept as the document's metadata.  `text_docs` says what a document of a plain-text
    file is: the whole `"file"`, or each blank-line-separated `"block"`.

    `normalization="text"` stores every document as queries are issued (NFC, whitespace runs
    collapsed to one space), so a passage matches whatever its line breaks or Unicode form;
    `"none"` stores the raw bytes, exactly as infini-gram's own indexer does.  With `force`, an
    existing `out` is replaced only if this tool wrote it (see `audit.outputs`).  A document
    (a line, a block, a text file read whole) longer than `max_document` bytes is an error.
    """
    options = read_options(normalization, text_field, text_docs, max_document)
    out = Path(out)
    inputs = [Path(p) for p in sources]
    check_target(out, inputs, force)
    files = discover_sources(inputs)
    with build_lock(out):
        return _write_index(files, out, inputs, options, memory_bytes, workers or os.cpu_count() or 1, progress)


def _sort_shards(staging: Path, shards: list[ShardInfo], progress: ProgressHook | None) -> list[FileInfo]:
    """Each shard's suffix array, written beside its text; the tables' file records."""
    tables = []
    for i, shard in enumerate(shards):
        if progress:
            progress("sort", i, len(shards))
        shard.ratio, table = write_suffix_array(staging / f"tokenized.{shard.name}", staging / f"table.{shard.name}")
        tables.append(table)
    if progress:
        progress("sort", len(shards), len(shards))
    return tables


def _write_index(files: list[CorpusFile], out: Path, inputs: list[Path], options: ReadOptions, memory_bytes: int, workers: int, progress: ProgressHook | None) -> IndexManifest:
    """The build proper, in a staging directory moved into place when whole (see `build_index`)."""
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
        languages = TableBuilder()
        for source, chunk in parsed_chunks(files, options, advance, workers):
            writer.add(chunk)
            languages.add_chunk(chunk)
            source_infos[source].documents += len(chunk.text_sizes)
            source_infos[source].skipped_blank_lines += chunk.blank_lines
        shards = writer.close()
        if not shards:
            raise IndexBuildError(f"no documents found in {', '.join(str(p) for p in inputs)}")
        tables = _sort_shards(staging, shards, progress)
        table = languages.table()
        manifest = IndexManifest(
            format="infini-gram",
            version=4,
            manifest_version=MANIFEST_VERSION,
            token_dtype="u8",
            normalization=options.normalization,
            shards=shards,
            sources=source_infos,
            documents=sum(s.documents for s in shards),
            bytes=sum(s.bytes for s in shards),
            fingerprint=digest.hexdigest(),
            created=utc_timestamp(),
            tool=f"corpus-audit {__version__}",
            build_seconds=round(time.perf_counter() - started, 3),
            code=code_fingerprint(),
            extra={"languages": summary(table)},
            files=sorted(writer.files + tables + write_languages(staging, table), key=file_order),
        )
        (staging / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
        commit_index(staging, out, inputs)
        return manifest
    except OutputError as error:
        discard_staging(staging)
        raise IndexBuildError(str(error)) from None
    except OSError as error:
        discard_staging(staging)
        if is_full_disk(error):
            raise no_space(out) from None
        raise
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
