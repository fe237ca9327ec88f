"""Building the near-duplicate index of an existing index: windows sketched on forked workers,
bands sorted, written into a hidden sibling and moved in whole."""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from audit import __version__
from audit.children import WorkerPool
from audit.index.format import MANIFEST, FileInfo, IndexManifest, hash_file, read_manifest
from audit.neardup.family import Family, band_keys
from audit.neardup.source import Texts
from audit.neardup.store import MANIFEST_NAME, NEARDUP_DIR, WINDOW_DTYPE, NearDupError, NearDupManifest, ProgressHook
from audit.neardup.tokens import NearDupParams, code_points, shingle_hashes, tokenize_points
from audit.outputs import STAGING_TAG, atomic_write_text, discard_staging, marker_files, rewrite_marker, staging_directory
from audit.timestamps import utc_timestamp

TASK_BYTES = 1 << 21
BATCH_BYTES = 1 << 20

# Building.


def sketch_documents(documents: Iterable[tuple[int, bytes]], params: NearDupParams, family: Family | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The window table and signatures of a run of documents, in batches of about BATCH_BYTES."""
    family = family or Family(params)
    tables, signatures, batch, size = [], [], [], 0
    for document in documents:
        batch.append(document)
        size += len(document[1])
        if size >= BATCH_BYTES:
            table, sigs = _sketch_batch(batch, params, family)
            tables.append(table)
            signatures.append(sigs)
            batch, size = [], 0
    if batch or not tables:
        table, sigs = _sketch_batch(batch, params, family)
        tables.append(table)
        signatures.append(sigs)
    return np.concatenate(tables), np.concatenate(signatures)


def _utf8_widths(points: np.ndarray) -> np.ndarray:
    widths = 1 + (points >= 0x80).astype(np.int64) + (points >= 0x800) + (points >= 0x10000)
    widths[(points >= 0xD800) & (points < 0xE000)] = 1
    return widths


def _sketch_batch(batch: list[tuple[int, bytes]], params: NearDupParams, family: Family) -> tuple[np.ndarray, np.ndarray]:
    """Windows of a batch of documents, tokenised as one text (documents joined by a line end,
    a separator) so that every step runs over whole arrays."""
    empty = (np.zeros(0, dtype=WINDOW_DTYPE), np.zeros((0, params.num_perm), dtype=np.uint32))
    if not batch:
        return empty
    texts = [raw.decode("utf-8", "surrogateescape") for _, raw in batch]
    points = code_points("\n".join(texts))
    if not len(points):
        return empty
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    char_start = np.cumsum(lengths + 1) - (lengths + 1)
    widths = _utf8_widths(points)
    byte_at = np.concatenate(([0], np.cumsum(widths)))
    tokens = tokenize_points(points)
    if not len(tokens):
        return empty
    owner = np.searchsorted(char_start, tokens.starts, side="right") - 1
    numbers = np.arange(len(batch))
    first_token, end_token = np.searchsorted(owner, numbers, "left"), np.searchsorted(owner, numbers, "right")
    hashes, valid = shingle_hashes(tokens, params.shingle.table(), end_token[owner])
    stride, span = params.stride, params.window // params.stride
    counts = end_token - first_token
    blocks_per = -(-counts // stride)
    block_base = np.cumsum(blocks_per) - blocks_per
    block_doc = np.repeat(numbers, blocks_per)
    blocks = first_token[block_doc] + stride * (np.arange(blocks_per.sum()) - block_base[block_doc])
    windows_per = np.where(counts > 0, np.maximum(1, blocks_per - span + 1), 0)
    window_doc = np.repeat(numbers, windows_per)
    within = np.arange(windows_per.sum()) - np.repeat(np.cumsum(windows_per) - windows_per, windows_per)
    first = block_base[window_doc] + within
    last = block_base[window_doc] + blocks_per[window_doc] - 1
    starts = first_token[window_doc] + stride * within
    ends = np.minimum(starts + params.window, end_token[window_doc])
    before = np.concatenate(([0], np.cumsum(valid)))
    shingles = before[ends] - before[starts]
    keep = shingles > 0
    signatures = family.windows(hashes, valid, blocks, first[keep], last[keep], starts[keep], ends[keep])
    window_doc, starts, ends = window_doc[keep], starts[keep], ends[keep]
    doc_byte = byte_at[char_start[window_doc]]
    table = np.zeros(len(window_doc), dtype=WINDOW_DTYPE)
    table["document"] = np.array([number for number, _ in batch], dtype=np.uint64)[window_doc]
    table["offset"] = byte_at[tokens.starts[starts]] - doc_byte
    table["length"] = byte_at[tokens.ends[ends - 1]] - byte_at[tokens.starts[starts]]
    table["shingles"] = np.minimum(shingles[keep], np.iinfo(np.uint16).max)
    return table, signatures


# The corpus being sketched, set before the workers fork so that each inherits it, mapped.
_FORKED: list[Texts] = []


def _sketch_range(start: int, stop: int, params_json: str) -> tuple[np.ndarray, np.ndarray]:
    """A worker's task: documents start..stop-1 of the corpus the workers were forked with."""
    return sketch_documents(_FORKED[0].documents(start, stop), NearDupParams.model_validate_json(params_json))


def _tasks(corpus: Texts) -> list[tuple[int, int]]:
    documents = corpus.info.documents or 0
    per_task = max(1, int(documents * TASK_BYTES / max(1, corpus.info.bytes or 1)))
    return [(start, min(start + per_task, documents)) for start in range(0, documents, per_task)]


def _sketch_corpus(corpus: Texts, params: NearDupParams, workers: int, progress: ProgressHook | None) -> tuple[np.ndarray, np.ndarray]:
    """Every document's windows, in document order, on `workers` forked processes with a
    bounded number of tasks in flight (as the n-gram build parses its input)."""
    tasks = _tasks(corpus)
    total = corpus.info.documents or 0
    results: list[tuple[np.ndarray, np.ndarray]] = []
    if workers <= 1 or len(tasks) <= 1:
        family = Family(params)
        for start, stop in tasks:
            results.append(sketch_documents(corpus.documents(start, stop), params, family))
            if progress:
                progress("minhash", stop, total)
    else:
        results = _sketch_forked(corpus, tasks, params, workers, progress)
    if not results:
        return np.zeros(0, dtype=WINDOW_DTYPE), np.zeros((0, params.num_perm), dtype=np.uint32)
    return np.concatenate([table for table, _ in results]), np.concatenate([sigs for _, sigs in results])


def _sketch_forked(corpus: Texts, tasks: list[tuple[int, int]], params: NearDupParams, workers: int, progress: ProgressHook | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The tasks' windows on forked workers, which inherit the corpus already mapped."""
    total, settings, results = corpus.info.documents or 0, params.model_dump_json(), []
    _FORKED[:] = [corpus]
    try:
        with WorkerPool(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for ready in [pool.submit(os.getpid) for _ in range(workers)]:
                ready.result()
            pending: deque[tuple[int, Future[tuple[np.ndarray, np.ndarray]]]] = deque()
            for start, stop in tasks:
                pending.append((stop, pool.submit(_sketch_range, start, stop, settings)))
                while len(pending) > 2 * workers or (pending and stop == tasks[-1][1]):
                    done, future = pending.popleft()
                    results.append(future.result())
                    if progress:
                        progress("minhash", done, total)
    finally:
        _FORKED.clear()
    return results

NORMALIZATION = "the index's stored text (NFC, whitespace collapsed with --normalize text); tokens case-folded (simple folding); punctuation, symbols, spaces and controls separate tokens"


def _code_hash() -> str:
    return hashlib.blake2b(Path(__file__).read_bytes(), digest_size=8).hexdigest()


def _save(directory: Path, name: str, array: np.ndarray) -> FileInfo:
    path = directory / name
    np.save(path, array, allow_pickle=False)
    return FileInfo(name=name, bytes=path.stat().st_size, blake2b=hash_file(path))


def _write_arrays(directory: Path, table: np.ndarray, signatures: np.ndarray, params: NearDupParams, progress: ProgressHook | None) -> list[FileInfo]:
    """The window table, the signatures, and each band's keys sorted with their windows."""
    files = [_save(directory, "windows.npy", table), _save(directory, "signatures.npy", signatures)]
    keys = band_keys(signatures, params)
    id_type = np.uint32 if len(table) < 2**32 else np.uint64
    sorted_keys = np.empty((params.bands, len(table)), dtype=keys.dtype)
    owners = np.empty((params.bands, len(table)), dtype=id_type)
    for band in range(params.bands):
        order = np.argsort(keys[:, band], kind="stable")
        sorted_keys[band] = keys[order, band]
        owners[band] = order
        if progress:
            progress("bands", band + 1, params.bands)
    files.append(_save(directory, "bands.npy", sorted_keys))
    files.append(_save(directory, "band_windows.npy", owners))
    return files


def _require_writable_index(directory: Path) -> IndexManifest:
    """An index `audit index build` wrote (manifest with file hashes, and its marker), which
    the near-duplicate index can be added to and recorded in."""
    manifest = read_manifest(directory)
    if manifest is None or not manifest.files:
        raise NearDupError(f"{directory}: has no {MANIFEST} with file hashes, so a near-duplicate index could not be recorded in it; rebuild it with `audit index build`")
    if marker_files(directory, "index") is None:
        raise NearDupError(f"{directory}: has no .corpus-audit.json marker of an index audit wrote; rebuild it with `audit index build`")
    return manifest


def add_neardup(
    corpus: Texts,
    params: NearDupParams | None = None,
    *,
    force: bool = False,
    workers: int | None = None,
    progress: ProgressHook | None = None,
) -> NearDupManifest:
    """Build the near-duplicate index of an index (`corpus`, opened) into `minhash/` inside it.

    It is built in a hidden sibling of the index and moved in when complete; then the index's
    marker and `audit-index.json` are rewritten (each in one rename) to list its files, the
    marker first, so that at every moment `--force` may still replace the index and a crash
    leaves at worst files `audit index verify` reports.  Without `force` an existing one is
    refused."""
    directory = corpus.path
    params = params or NearDupParams()
    index_manifest = _require_writable_index(directory)
    target = directory / NEARDUP_DIR
    if (target.exists() or target.is_symlink()) and not force:
        raise NearDupError(f"{target}: already exists (use --force to rebuild it)")
    family = Family(params)
    staging = staging_directory(directory.parent / f"{directory.name}.{NEARDUP_DIR}")
    try:
        started = time.perf_counter()
        table, signatures = _sketch_corpus(corpus, params, workers or os.cpu_count() or 1, progress)
        files = _write_arrays(staging, table, signatures, params, progress)
        manifest = NearDupManifest(
            params=params.model_dump(),
            hash_family=family.describe(),
            normalization=NORMALIZATION,
            source={"fingerprint": index_manifest.fingerprint, "documents": index_manifest.documents, "bytes": index_manifest.bytes, "normalization": index_manifest.normalization},
            windows=len(table),
            documents=len(np.unique(table["document"])),
            created=utc_timestamp(),
            tool=f"corpus-audit {__version__}",
            build_seconds=round(time.perf_counter() - started, 3),
            code=_code_hash(),
            files=files,
        )
        (staging / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
        (staging / STAGING_TAG).unlink()
        records = [FileInfo(name=f"{NEARDUP_DIR}/{f.name}", bytes=f.bytes, blake2b=f.blake2b) for f in files]
        records.append(FileInfo(name=f"{NEARDUP_DIR}/{MANIFEST_NAME}", bytes=(staging / MANIFEST_NAME).stat().st_size, blake2b=hash_file(staging / MANIFEST_NAME)))
        _install(directory, staging, index_manifest, records)
        return manifest
    except BaseException:
        discard_staging(staging)
        raise


def _install(directory: Path, staging: Path, index_manifest: IndexManifest, records: list[FileInfo]) -> None:
    listed = marker_files(directory, "index") or []
    ours = [f.name for f in records]
    rewrite_marker(directory, "index", {*listed, *ours})
    target = directory / NEARDUP_DIR
    retired = None
    if target.exists() or target.is_symlink():
        retired = staging_directory(directory.parent / f"{directory.name}.{NEARDUP_DIR}-replaced")
        target.rename(retired / NEARDUP_DIR)
    staging.rename(target)
    index_manifest.minhash = records
    atomic_write_text(directory / MANIFEST, index_manifest.to_json())
    rewrite_marker(directory, "index", [name for name in listed if not name.startswith(f"{NEARDUP_DIR}/")] + ours)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)

