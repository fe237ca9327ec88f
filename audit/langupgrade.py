"""`audit index languages INDEX`: write the per-document language table of an index built
before tables were written, in place.

The documents are read back from the index's own files (the stored text and metadata line of
each), and each one's language is found exactly as a build finds it (`audit.index.langtable`), so an
upgraded index has the table a new build of the same input would have.  The table is written
in a hidden sibling and moved in; the marker is rewritten to list it first, then the manifest
(each in one rename), so at every moment the index opens and `--force` may still replace it.
"""
from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit.children import WorkerPool
from audit.corpora.shards import IndexOpenError, Shard, map_shards
from audit.corpora.soundness import foreign_files
from audit.errors import AuditError
from audit.index.doclangs import HEADER, TABLE, DocumentLanguages, has_table, summary
from audit.index.documents import ParsedChunk
from audit.index.format import INDEX_FILE, MANIFEST, IndexManifest, file_order, read_manifest
from audit.index.langtable import TableBuilder, chunk_languages, write_languages
from audit.index.progress import ProgressHook
from audit.langid import preload
from audit.outputs import atomic_write_text, discard_staging, marker_files, rewrite_marker, staging_directory

# Documents sent to a worker at a time.
BATCH = 2048
TABLE_FILES = (TABLE, HEADER)


class LanguageUpgradeError(AuditError):
    """The index cannot be given a table: not one the tool wrote, damaged, or it has one."""


@dataclass(frozen=True)
class Upgrade:
    """What `add_languages` did: the table's summary (`audit.index.doclangs.summary`), whether it
    replaced a table the index had, and how long it took."""

    summary: dict
    replaced: bool
    seconds: float


def _require_index(directory: Path, force: bool) -> IndexManifest:
    """The manifest of an index `audit index build` wrote; refused when it already has a table
    (unless `force`) or when any of its own files is missing, stray or the wrong size."""
    try:
        manifest = read_manifest(directory)
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise LanguageUpgradeError(f"{directory / MANIFEST}: not a readable index manifest ({error})") from None
    if not directory.is_dir() or manifest is None or not manifest.files or marker_files(directory, "index") is None:
        raise LanguageUpgradeError(f"{directory}: not an index audit wrote (no {MANIFEST} with file hashes and marker), so a language table could not be recorded in it; rebuild it with `audit index build`")
    recorded = {f.name for f in manifest.files} & set(TABLE_FILES)
    if (recorded or has_table(directory)) and not force:
        raise LanguageUpgradeError(f"{directory}: already has a language table ({', '.join(sorted(recorded) or TABLE_FILES)}); --force writes it anew")
    if foreign := foreign_files(directory, manifest):
        raise LanguageUpgradeError(f"{directory / foreign[0]}: a file the index did not write; move it out of the index directory")
    for info in manifest.files:
        path = directory / info.name
        if INDEX_FILE.fullmatch(info.name) and (not path.is_file() or path.stat().st_size != info.bytes):
            problem = "is missing" if not path.is_file() else f"{path.stat().st_size:,} bytes, but the manifest records {info.bytes:,}"
            raise LanguageUpgradeError(f"{path}: {problem}. The index is damaged: rebuild it (`audit index build ... --force`)")
    return manifest


def _shards(directory: Path, manifest: IndexManifest) -> list[Shard]:
    numbers = [int(shard.name) for shard in manifest.shards]
    firsts = [sum(shard.documents for shard in manifest.shards[:k]) for k in range(len(numbers))]
    try:
        return map_shards(directory, numbers, firsts)
    except IndexOpenError as error:
        raise LanguageUpgradeError(str(error)) from None


def _chunks(shard: Shard) -> Iterator[ParsedChunk]:
    """The shard's documents as the build's parser handed them over, BATCH at a time."""
    starts = np.append(shard.offsets, len(shard.data))
    meta = np.append(shard.metaoff, len(shard.metadata)) if shard.metadata is not None and shard.metaoff is not None else None
    for first in range(0, len(shard.offsets), BATCH):
        last = min(first + BATCH, len(shard.offsets))
        texts = bytes(shard.data[starts[first] : starts[last]])
        if meta is not None:
            metadata, meta_sizes = bytes(shard.metadata[meta[first] : meta[last]]), np.diff(meta[first : last + 1]).tolist()
        else:
            metadata, meta_sizes = b"{}\n" * (last - first), [3] * (last - first)
        yield ParsedChunk(texts, np.diff(starts[first : last + 1]).tolist(), metadata, meta_sizes)


def _identify(shards: list[Shard], workers: int, progress: ProgressHook | None) -> TableBuilder:
    """Every document's language, in global order, on `workers` forked processes."""
    languages = TableBuilder()
    total, done = sum(len(shard.offsets) for shard in shards), 0
    preload()
    with WorkerPool(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        pending: deque[Future] = deque()

        def collect(future: Future) -> None:
            nonlocal done
            entries = future.result()
            languages.add(entries)
            done += len(entries)
            if progress:
                progress("languages", done, total)

        for shard in shards:
            for chunk in _chunks(shard):
                pending.append(pool.submit(chunk_languages, chunk))
                while len(pending) > 2 * workers:
                    collect(pending.popleft())
        while pending:
            collect(pending.popleft())
    return languages


def install_table(directory: Path, table: DocumentLanguages) -> dict:
    """Put a table made elsewhere (a corpus's own language labels, a test's) into the index
    at `directory`, recorded as one the build wrote; returns its summary."""
    directory = Path(directory)
    manifest = _require_index(directory, force=True)
    if table.documents != manifest.documents:
        raise LanguageUpgradeError(f"{directory}: the table has {table.documents:,} documents, the index {manifest.documents:,}")
    staging = staging_directory(directory.parent / f"{directory.name}.languages")
    try:
        return _install(directory, staging, manifest, table)
    finally:
        discard_staging(staging)


def _install(directory: Path, staging: Path, manifest: IndexManifest, table: DocumentLanguages) -> dict:
    """Move the table in and record it: marker first, then the files, then the manifest."""
    records = write_languages(staging, table)
    listed = marker_files(directory, "index") or []
    rewrite_marker(directory, "index", {*listed, *TABLE_FILES})
    for record in records:
        os.replace(staging / record.name, directory / record.name)
    manifest.files = sorted([f for f in manifest.files if f.name not in TABLE_FILES] + records, key=file_order)
    manifest.extra = {**manifest.extra, "languages": summary(table)}
    atomic_write_text(directory / MANIFEST, manifest.to_json())
    return manifest.extra["languages"]


def add_languages(directory: Path, *, force: bool = False, workers: int | None = None, progress: ProgressHook | None = None) -> Upgrade:
    """Write the language table of the index at `directory` in place (see the module's doc).
    Without `force`, an index that has a table is refused; with it, the table (even a damaged
    one) is written anew."""
    directory = Path(directory)
    started = time.perf_counter()
    manifest = _require_index(directory, force)
    replaced = has_table(directory)
    shards = _shards(directory, manifest)
    if sum(len(shard.offsets) for shard in shards) != manifest.documents:
        raise LanguageUpgradeError(f"{directory / MANIFEST}: records {manifest.documents:,} documents, but the shards hold another number; rebuild the index")
    languages = _identify(shards, workers or os.cpu_count() or 1, progress)
    staging = staging_directory(directory.parent / f"{directory.name}.languages")
    try:
        done = _install(directory, staging, manifest, languages.table())
    finally:
        discard_staging(staging)
    return Upgrade(done, replaced, round(time.perf_counter() - started, 3))
