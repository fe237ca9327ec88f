"""One shard's build, wherever the executor runs it: a local process or a Ray worker on any node.

Each attempt at a shard writes into a directory of its own (with `attempt.json`: its process and
host) and renames its files into place only when they are complete, then writes the record; an
attempt that dies leaves no record, and a shard whose record and files still agree is kept."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
from pathlib import Path

from audit.index.corpusread import CorpusFile, Span, read_tasks
from audit.index.errors import IndexBuildError
from audit.index.format import FileInfo, ShardInfo, file_order, hash_file, new_file_hash
from audit.index.langtable import TableBuilder, parse_and_identify
from audit.index.limits import describe_size
from audit.index.sharded.plan import PlannedSource
from audit.index.sharded.records import ShardRecord, ShardResult, ShardTask, SourceCount, read_record, record_path
from audit.index.shardwriter import ShardWriter, write_suffix_array
from audit.index.stamp import code_fingerprint
from audit.outputs import atomic_write_text
from audit.timestamps import utc_timestamp

ATTEMPT = "attempt.json"


def _finished(task: ShardTask) -> ShardRecord | None:
    """The shard's record, if it belongs to this plan and every file it lists still has the
    recorded size and hash; a record that fails is removed, so it is not counted as done."""
    staging = Path(task.staging)
    record = read_record(staging, task.shard)
    if record is None:
        return None
    if record.digest != task.digest or record.shard.name != str(task.shard) or not all(_intact(staging / f.name, f) for f in record.files):
        record_path(staging, task.shard).unlink(missing_ok=True)
        return None
    return record


def _intact(path: Path, info: FileInfo) -> bool:
    return path.is_file() and path.stat().st_size == info.bytes and hash_file(path) == info.blake2b


def _ignore(_: int) -> None:
    """Shards report progress when they finish, not by bytes read."""


def _check_source(source: PlannedSource) -> None:
    size = Path(source.path).stat().st_size
    if size != source.bytes:
        raise IndexBuildError(f"{source.path}: {size:,} bytes, but {source.bytes:,} when the build was planned; run the same command again to plan it anew")


def _write_shard(task: ShardTask, directory: Path) -> tuple[ShardInfo, list[FileInfo], list[SourceCount], TableBuilder]:
    """Parse the shard's pieces in order into its files in `directory`, then sort it; its
    documents' languages are identified as they are parsed."""
    digest = new_file_hash()
    writer = ShardWriter(directory, task.budget, digest, first=task.shard)
    languages = TableBuilder()
    counts = []
    try:
        for piece in task.pieces:
            source = task.sources[piece.source]
            _check_source(source)
            file = CorpusFile(Path(source.path), source.name, source.format)
            span = None if (piece.start, piece.end) == (0, source.bytes) else Span(piece.start, piece.end, piece.first_line)
            documents = blank = 0
            for function, arguments in read_tasks(file, task.options, _ignore, span):
                chunk = parse_and_identify(function, arguments)
                writer.add(chunk)
                languages.add_chunk(chunk)
                if len(writer.shards) > 1:
                    raise IndexBuildError(
                        f"shard {task.shard}: its text passes {describe_size(task.budget)}, what --mem lets one shard sort "
                        "(compressed input grows when read); use more shards or a larger --mem"
                    )
                documents += len(chunk.text_sizes)
                blank += chunk.blank_lines
            counts.append(SourceCount(piece.source, documents, blank))
    finally:
        shards = writer.close()
    if not shards:
        raise IndexBuildError(f"shard {task.shard}: no documents in its part of the input (blank lines only); use fewer shards")
    info = shards[0]
    info.ratio, table = write_suffix_array(directory / f"tokenized.{info.name}", directory / f"table.{info.name}")
    info.fingerprint = digest.hexdigest()
    return info, sorted([*writer.files, table], key=file_order), counts, languages


def build_shard(task: ShardTask) -> ShardResult:
    """Build one shard, or return its record when it is already finished and intact.

    Runs wherever the executor puts it (a local process, a Ray worker on any node), so the
    finished-shard check and the file hashing happen there, not in the driver.  The attempt
    writes into a directory of its own, announced by `attempt.json`, and renames its files into
    place only when all are written; the record comes last, so a worker that dies leaves none.
    """
    staging = Path(task.staging)
    done = _finished(task)
    if done is not None:
        return ShardResult(done, reused=True)
    if code_fingerprint() != task.code:
        raise IndexBuildError(f"{socket.gethostname()}: runs other corpus-audit code than the build's driver; install the same version on every node")
    attempt = staging / f"shard-{task.shard}.attempt-{os.getpid()}-{secrets.token_hex(4)}"
    attempt.mkdir()
    try:
        atomic_write_text(attempt / ATTEMPT, json.dumps({"shard": task.shard, "pid": os.getpid(), "host": socket.gethostname(), "started": utc_timestamp()}))
        info, files, counts, languages = _write_shard(task, attempt)
        for file in files:
            os.replace(attempt / file.name, staging / file.name)
        record = ShardRecord(task.digest, info, files, counts, attempt.name, languages.part())
        atomic_write_text(record_path(staging, task.shard), record.to_json())
    finally:
        shutil.rmtree(attempt, ignore_errors=True)
    return ShardResult(record, reused=False)
