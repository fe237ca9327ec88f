"""Build byte-level infini-gram indexes from corpus files: JSONL, plain text, Parquet and
Hugging Face `datasets` directories, in one pass.

Every file is parsed on forked worker processes (`audit.index.documents`), its documents'
languages found where they are parsed (`audit.index.langtable`), and the documents appended to
shards that fit the memory budget (`audit.index.shardwriter`), each then sorted.  The build
writes into a staging directory moved into place when whole (`audit.index.target`).
"""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

from audit.children import WorkerPool
from audit.index.corpusread import MAX_DOCUMENT, CorpusFile, ReadOptions, read_options, read_tasks
from audit.index.doclangs import summary
from audit.index.documents import ParsedChunk
from audit.index.errors import IndexBuildError
from audit.index.format import MANIFEST, FileInfo, IndexManifest, ShardInfo, SourceInfo, file_order
from audit.index.langtable import TableBuilder, parse_and_identify, write_languages
from audit.index.limits import BuildLimits
from audit.index.progress import ProgressHook, Stage
from audit.index.shardwriter import ShardWriter, write_suffix_array
from audit.index.sources import discover_sources
from audit.index.stamp import code_fingerprint
from audit.index.target import build_lock, check_target, commit_index
from audit.langid import preload
from audit.nospace import is_full_disk, no_space
from audit.outputs import OutputError, discard_staging, staging_directory


def source_info(name: str, format: str, options: ReadOptions) -> SourceInfo:
    """A source's manifest entry before its documents are counted."""
    is_text = format == "text"
    return SourceInfo(path=name, documents=0, format=format, text_field=None if is_text else options.text_field, text_docs=options.text_docs if is_text else None)


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
        return _write_index(files, out, inputs, options, BuildLimits(memory_bytes, workers), progress)


def _sort_shards(staging: Path, shards: list[ShardInfo], progress: ProgressHook | None) -> list[FileInfo]:
    """Each shard's suffix array, written beside its text; the tables' file records."""
    tables = []
    for i, shard in enumerate(shards):
        if progress:
            progress(Stage.SORT, i, len(shards))
        shard.ratio, table = write_suffix_array(staging / f"tokenized.{shard.name}", staging / f"table.{shard.name}")
        tables.append(table)
    if progress:
        progress(Stage.SORT, len(shards), len(shards))
    return tables


def _write_index(files: list[CorpusFile], out: Path, inputs: list[Path], options: ReadOptions, limits: BuildLimits, progress: ProgressHook | None) -> IndexManifest:
    """The build proper, in a staging directory moved into place when whole (see `build_index`)."""
    staging = staging_directory(out)
    try:
        manifest = _write_staged(staging, files, inputs, options, limits, progress)
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


def _write_staged(staging: Path, files: list[CorpusFile], inputs: list[Path], options: ReadOptions, limits: BuildLimits, progress: ProgressHook | None) -> IndexManifest:
    """Every file of the index written into `staging`; the manifest that records them."""
    started = time.perf_counter()
    total_input = sum(file.path.stat().st_size for file in files)
    digest = hashlib.blake2b(digest_size=16)
    writer = ShardWriter(staging, limits.shard_bytes, digest)
    done_input = 0

    def advance(n: int) -> None:
        nonlocal done_input
        done_input += n
        if progress:
            progress(Stage.READ, done_input, total_input)

    source_infos = [source_info(file.name, file.format, options) for file in files]
    languages = TableBuilder()
    for source, chunk in parsed_chunks(files, options, advance, limits.processes):
        writer.add(chunk)
        languages.add_chunk(chunk)
        source_infos[source].documents += len(chunk.text_sizes)
        source_infos[source].skipped_blank_lines += chunk.blank_lines
    shards = writer.close()
    if not shards:
        raise IndexBuildError(f"no documents found in {', '.join(str(p) for p in inputs)}")
    tables = _sort_shards(staging, shards, progress)
    table = languages.table()
    return IndexManifest.built(
        normalization=options.normalization,
        shards=shards,
        sources=source_infos,
        fingerprint=digest.hexdigest(),
        seconds=time.perf_counter() - started,
        code=code_fingerprint(),
        extra={"languages": summary(table)},
        files=sorted(writer.files + tables + write_languages(staging, table), key=file_order),
    )
