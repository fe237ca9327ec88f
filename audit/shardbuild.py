"""Sharded index builds: the input cut into N shards of about equal size, each built apart (on
local processes or as Ray tasks), kept as it finishes, so a failed or interrupted build resumes.

The input, every discovered file in order, is cut into N contiguous runs of bytes, so shard 0
holds the first documents and documents keep their global order.  Uncompressed JSONL files, and
text files read a block per document, are cut between lines (between blocks) near the balanced
cut points; compressed, Parquet and Arrow files, and text files read whole, go to one shard
whole.  Each document's metadata (`path`, `linenum`) is what the plain build records.

A build works in a stable hidden sibling of the index, `.NAME.sharded-build/`, holding
`plan.json` (the cut, and a digest of everything that decides the bytes) and, per finished
shard, its five files and a completion record `shards/K.json` with their sizes and hashes.
Each attempt at a shard writes into a directory of its own (with `attempt.json`: its process
and host) and renames its files into place only when they are complete, then writes the record;
an attempt that dies leaves no record.  Running the same command again keeps every shard whose
record and files still agree and builds the rest; once all are done the manifest is written and
the directory is moved into place like any build.

A sharded index's fingerprint is blake2b-128 over its shards' fingerprints in order (each the
blake2b-128 of the shard's texts and metadata), so it differs from the plain build's
fingerprint of the same input, which hashes all texts and metadata in one pass.
"""
from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import secrets
import shutil
import socket
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from itertools import accumulate, islice, pairwise
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

from audit import __version__
from audit.children import WorkerPool
from audit.corpusread import MAX_DOCUMENT, CorpusFile, ReadOptions, Span, read_tasks
from audit.documents import IndexBuildError
from audit.executors import LOCAL, Executor, ExecutorError
from audit.indexing import (
    MANIFEST,
    MANIFEST_VERSION,
    FileInfo,
    IndexManifest,
    ProgressHook,
    ShardInfo,
    ShardWriter,
    build_lock,
    check_target,
    code_fingerprint,
    commit_index,
    describe_size,
    discover_sources,
    file_order,
    hash_file,
    holds,
    new_file_hash,
    read_options,
    shard_budget,
    source_info,
    write_languages,
    write_suffix_array,
)
from audit.langtable import TableBuilder, parse_and_identify, summary
from audit.nospace import is_full_disk, no_space
from audit.outputs import STAGING_TAG, OutputError, atomic_write_text, discard_staging
from audit.timestamps import utc_timestamp

PLAN = "plan.json"
PLAN_KIND = "sharded-build"
PLAN_VERSION = 1
RECORDS = "shards"
ATTEMPT = "attempt.json"
RAY_RETRIES = 3
COUNT_BLOCK = 1 << 24
COMPRESSED = (".gz", ".zst")


@dataclass(frozen=True)
class PlannedSource:
    """An input file as planned: a change of its size or modification time makes a new plan."""

    path: str
    name: str
    format: str
    bytes: int
    mtime_ns: int


@dataclass(frozen=True)
class Piece:
    """Bytes `start` to `end` of source `source`, whose first line is line `first_line`."""

    source: int
    start: int
    end: int
    first_line: int


@dataclass(frozen=True)
class ShardPlan:
    """The cut of one build: `shards[K]` is the pieces shard K reads, in order."""

    digest: str
    code: str
    options: ReadOptions
    sources: tuple[PlannedSource, ...]
    shards: tuple[tuple[Piece, ...], ...]

    def input_bytes(self, shard: int) -> int:
        return sum(piece.end - piece.start for piece in self.shards[shard])

    def to_json(self) -> str:
        return json.dumps({"kind": PLAN_KIND, "tool": f"corpus-audit {__version__}", "plan_version": PLAN_VERSION, **asdict(self)}, ensure_ascii=False, indent=1)

    @classmethod
    def from_dict(cls, data: dict) -> ShardPlan:
        return cls(
            digest=data["digest"],
            code=data["code"],
            options=ReadOptions(**data["options"]),
            sources=tuple(PlannedSource(**s) for s in data["sources"]),
            shards=tuple(tuple(Piece(**p) for p in pieces) for pieces in data["shards"]),
        )


@dataclass(frozen=True)
class ShardTask:
    """Everything one shard's build needs, sent to a worker process or a Ray task."""

    staging: str
    shard: int
    digest: str
    code: str
    options: ReadOptions
    sources: tuple[PlannedSource, ...]
    pieces: tuple[Piece, ...]
    budget: int


@dataclass(frozen=True)
class SourceCount:
    """Documents and skipped blank lines one shard read from one source."""

    source: int
    documents: int
    skipped_blank_lines: int


@dataclass
class ShardRecord:
    """`shards/K.json`: a finished shard, its files as written and what it read; `attempt`
    names the attempt directory that wrote it; `languages`, its documents' languages
    (`TableBuilder.to_json`), which the assembled index's table concatenates in shard order."""

    digest: str
    shard: ShardInfo
    files: list[FileInfo]
    sources: list[SourceCount]
    attempt: str
    languages: dict

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, data: dict) -> ShardRecord:
        return cls(
            digest=data["digest"],
            shard=ShardInfo(**data["shard"]),
            files=[FileInfo(**f) for f in data["files"]],
            sources=[SourceCount(**s) for s in data["sources"]],
            attempt=data["attempt"],
            languages=dict(data["languages"]),
        )


@dataclass(frozen=True)
class ShardResult:
    """A shard task's answer: its record, and whether it was found finished (not rebuilt)."""

    record: ShardRecord
    reused: bool


@dataclass(frozen=True)
class ShardedBuild:
    manifest: IndexManifest
    built: int
    reused: int


def staging_path(out: Path) -> Path:
    """The stable hidden sibling a sharded build of `out` works in, found again on resume."""
    out = Path(out).absolute()
    return out.parent / f".{out.name}.sharded-build"


def planned_sources(files: list[CorpusFile]) -> tuple[PlannedSource, ...]:
    found = []
    for file in files:
        stat = file.path.stat()
        found.append(PlannedSource(str(file.path.absolute()), file.name, file.format, stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def plan_digest(sources: tuple[PlannedSource, ...], options: ReadOptions, shards: int, code: str) -> str:
    """A hash of everything that decides a sharded build's bytes."""
    decided = {"sources": [asdict(s) for s in sources], "options": asdict(options), "shards": shards, "code": code, "plan_version": PLAN_VERSION}
    return hashlib.blake2b(json.dumps(decided, sort_keys=True).encode(), digest_size=16).hexdigest()


def splittable(source: PlannedSource, options: ReadOptions) -> bool:
    """Whether a file may be cut: uncompressed JSONL between lines, uncompressed text read a
    block per document between blocks; everything else is read whole by one shard."""
    if Path(source.path).name.lower().endswith(COMPRESSED):
        return False
    return source.format == "jsonl" or (source.format == "text" and options.text_docs == "block")


def _next_line_start(handle: BinaryIO, offset: int) -> int:
    """The first line start at or after `offset` (the file's size if none)."""
    if offset <= 0:
        return 0
    handle.seek(offset - 1)
    return offset - 1 + len(handle.readline())


def _blank_line_before(handle: BinaryIO, end: int) -> bool:
    """Whether the line that ends at `end` (just after its line break) is blank."""
    at = end - 1
    while at > 0:
        begin = max(0, at - 4096)
        handle.seek(begin)
        block = handle.read(at - begin)
        newline = block.rfind(b"\n")
        if block[newline + 1 :].strip():
            return False
        if newline >= 0:
            return True
        at = begin
    return True


def next_cut(handle: BinaryIO, offset: int, size: int, blocks: bool) -> int:
    """The first place at or after `offset` a file may be cut: a line start, or with `blocks`
    a line start after a blank line, so no block is split (the file's size if none)."""
    start = _next_line_start(handle, offset)
    if not blocks or start in (0, size) or _blank_line_before(handle, start):
        return start
    handle.seek(start)
    for line in iter(handle.readline, b""):
        start += len(line)
        if not line.strip():
            return start
    return size


class _Layout:
    """The input as one run of bytes: the non-empty files one after another, in order."""

    def __init__(self, sources: tuple[PlannedSource, ...], options: ReadOptions) -> None:
        self.sources = sources
        self.files = [i for i, source in enumerate(sources) if source.bytes]
        self.starts = list(accumulate((sources[i].bytes for i in self.files), initial=0))
        self.total = self.starts[-1]
        self.split = [splittable(sources[i], options) for i in self.files]
        self.blocks = [sources[i].format == "text" for i in self.files]

    def locate(self, at: int) -> tuple[int, int]:
        """(file position in `files`, offset in it) of a byte before the end."""
        j = bisect_right(self.starts, at) - 1
        return j, at - self.starts[j]

    def at_or_after(self, at: int) -> int:
        """The first cut point at or after `at`: a file's start, or a cut inside a splittable file."""
        if at >= self.total:
            return self.total
        j, offset = self.locate(at)
        if offset == 0:
            return at
        if not self.split[j]:
            return self.starts[j + 1]
        source = self.sources[self.files[j]]
        with open(source.path, "rb") as handle:
            return self.starts[j] + next_cut(handle, offset, source.bytes, self.blocks[j])

    def near(self, target: int) -> int:
        """The cut point for a balanced `target`: the next one in a splittable file, else the
        nearer end of the file it falls in."""
        j, offset = self.locate(target)
        if offset == 0 or self.split[j]:
            return self.at_or_after(target)
        return self.starts[j] if 2 * offset < self.starts[j + 1] - self.starts[j] else self.starts[j + 1]

    def all_cuts(self) -> list[int]:
        """Every cut point strictly inside the input (a full read of the splittable files)."""
        found: list[int] = []
        for j, i in enumerate(self.files):
            if self.starts[j]:
                found.append(self.starts[j])
            if not self.split[j]:
                continue
            source = self.sources[i]
            with open(source.path, "rb") as handle:
                cut = next_cut(handle, 1, source.bytes, self.blocks[j])
                while cut < source.bytes:
                    found.append(self.starts[j] + cut)
                    cut = next_cut(handle, cut + 1, source.bytes, self.blocks[j])
        return found


def _too_many(shards: int, allowed: int) -> IndexBuildError:
    return IndexBuildError(
        f"the input cannot be cut into {shards} non-empty shards: it allows at most {allowed} "
        "(uncompressed JSONL is cut between lines and text read in blocks between blocks; compressed, Parquet and Arrow files and text read whole are never cut)"
    )


def cut_points(layout: _Layout, shards: int) -> list[int]:
    """0 = c_0 < c_1 < ... < c_N = total: each cut the cut point at or next to the balanced one
    (K * total / N), moved on when it would leave a shard empty.  When that fails, every cut
    point is listed and the cuts chosen among them."""
    total = layout.total
    cuts = [0]
    for k in range(1, shards):
        cut = max(layout.near(k * total // shards), layout.at_or_after(cuts[-1] + 1))
        if cut >= total:
            return _exact_cuts(layout, shards)
        cuts.append(cut)
    return [*cuts, total]


def _exact_cuts(layout: _Layout, shards: int) -> list[int]:
    points = layout.all_cuts()
    if len(points) + 1 < shards:
        raise _too_many(shards, len(points) + 1)
    cuts, j = [0], -1
    for k in range(1, shards):
        j = max(j + 1, min(bisect_left(points, k * layout.total // shards), len(points) - shards + k))
        cuts.append(points[j])
    return [*cuts, layout.total]


def _count_lines(handle: BinaryIO, start: int, end: int) -> int:
    handle.seek(start)
    count, left = 0, end - start
    while left > 0 and (block := handle.read(min(COUNT_BLOCK, left))):
        count += block.count(b"\n")
        left -= len(block)
    return count


def _first_lines(layout: _Layout, cuts: list[int]) -> dict[tuple[int, int], int]:
    """(source, offset) -> the line number there, for every cut inside a file, counted once
    front to back per file."""
    inside: dict[int, list[int]] = {}
    for cut in cuts[1:-1]:
        j, offset = layout.locate(cut)
        if offset:
            inside.setdefault(j, []).append(offset)
    lines: dict[tuple[int, int], int] = {}
    for j, offsets in inside.items():
        source = layout.files[j]
        with open(layout.sources[source].path, "rb") as handle:
            at, line = 0, 1
            for offset in offsets:
                line += _count_lines(handle, at, offset)
                lines[source, offset] = line
                at = offset
    return lines


def make_plan(sources: tuple[PlannedSource, ...], options: ReadOptions, shards: int, digest: str, code: str) -> ShardPlan:
    """Cut the input into `shards` contiguous, byte-balanced shards of pieces."""
    layout = _Layout(sources, options)
    if layout.total == 0:
        raise IndexBuildError("no input: every source file is empty")
    cuts = cut_points(layout, shards)
    lines = _first_lines(layout, cuts)
    planned = []
    for low, high in pairwise(cuts):
        pieces = []
        j = layout.locate(low)[0]
        while j < len(layout.files) and layout.starts[j] < high:
            source, base = layout.files[j], layout.starts[j]
            start, end = max(low, base) - base, min(high, layout.starts[j + 1]) - base
            pieces.append(Piece(source, start, end, lines.get((source, start), 1)))
            j += 1
        planned.append(tuple(pieces))
    return ShardPlan(digest=digest, code=code, options=options, sources=sources, shards=tuple(planned))


def check_budget(plan: ShardPlan, memory_bytes: int) -> int:
    """The most one shard may hold, once every planned shard's input is known to fit it."""
    budget = shard_budget(memory_bytes)
    shards = len(plan.shards)
    largest = max(range(shards), key=plan.input_bytes)
    size = plan.input_bytes(largest)
    if size <= budget:
        return budget
    whole = [p for pieces in plan.shards for p in pieces if p.end - p.start > budget and not splittable(plan.sources[p.source], plan.options)]
    limit = f"more than --mem {describe_size(memory_bytes)} lets one shard sort ({describe_size(budget)})"
    if whole:
        source = plan.sources[whole[0].source]
        raise IndexBuildError(f"{source.path}: {describe_size(source.bytes)}, read whole by one shard, is {limit}; give a larger --mem")
    total = sum(s.bytes for s in plan.sources)
    needed = max(shards + 1, math.ceil(total / budget))
    raise IndexBuildError(f"shard {largest}'s input is {describe_size(size)}, {limit}: use --shards {needed} or more, or a larger --mem")


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _record_path(staging: Path, shard: int) -> Path:
    return staging / RECORDS / f"{shard}.json"


def _read_record(staging: Path, shard: int) -> ShardRecord | None:
    data = _read_json(_record_path(staging, shard))
    try:
        return ShardRecord.from_dict(data) if data else None
    except (KeyError, TypeError):
        return None


def _finished(task: ShardTask) -> ShardRecord | None:
    """The shard's record, if it belongs to this plan and every file it lists still has the
    recorded size and hash; a record that fails is removed, so it is not counted as done."""
    staging = Path(task.staging)
    record = _read_record(staging, task.shard)
    if record is None:
        return None
    if record.digest != task.digest or record.shard.name != str(task.shard) or not all(_intact(staging / f.name, f) for f in record.files):
        _record_path(staging, task.shard).unlink(missing_ok=True)
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
        record = ShardRecord(task.digest, info, files, counts, attempt.name, languages.to_json())
        atomic_write_text(_record_path(staging, task.shard), record.to_json())
    finally:
        shutil.rmtree(attempt, ignore_errors=True)
    return ShardResult(record, reused=False)


def _is_tool_staging(staging: Path) -> bool:
    plan = _read_json(staging / PLAN)
    return (staging / STAGING_TAG).is_file() or (plan is not None and plan.get("kind") == PLAN_KIND)


def _check_staging(staging: Path, inputs: list[Path]) -> None:
    """Refuse a staging path the build may not use: not a directory, holding an input, or a
    directory the tool did not write."""
    if not (staging.exists() or staging.is_symlink()):
        return
    if staging.is_symlink() or not staging.is_dir():
        raise IndexBuildError(f"{staging}: is not a directory; the sharded build works there (remove it)")
    if any(holds(staging, p) for p in (Path.cwd(), *inputs)):
        raise IndexBuildError(f"{staging}: holds this command's input or the current directory; the sharded build works there")
    if not _is_tool_staging(staging):
        raise IndexBuildError(f"{staging}: exists and was not written by audit; refusing to replace it (the sharded build works there; remove it yourself)")


def _resumable(staging: Path, digest: str) -> ShardPlan | None:
    data = _read_json(staging / PLAN)
    if not data or data.get("digest") != digest or not (staging / RECORDS).is_dir():
        return None
    try:
        return ShardPlan.from_dict(data)
    except (KeyError, TypeError):
        return None


def _start_staging(staging: Path, plan: ShardPlan) -> None:
    """A fresh staging directory for `plan`; `plan.json` comes last, so its presence means the
    directory is ready."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    (staging / STAGING_TAG).touch()
    (staging / RECORDS).mkdir()
    atomic_write_text(staging / PLAN, plan.to_json())


def _finished_count(staging: Path, plan: ShardPlan) -> int:
    return sum(1 for k in range(len(plan.shards)) if (record := _read_record(staging, k)) and record.digest == plan.digest)


@contextmanager
def _sort_threads(count: int) -> Iterator[None]:
    """OMP_NUM_THREADS for the processes started inside, unless the user set it: the suffix
    sort's OpenMP runtime reads it once, when it loads, and otherwise starts a thread per CPU
    in every process (Ray gives its one-CPU tasks one)."""
    if "OMP_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OMP_NUM_THREADS"] = str(count)
    try:
        yield
    finally:
        os.environ.pop("OMP_NUM_THREADS", None)


@contextmanager
def _local_results(tasks: list[ShardTask], workers: int) -> Iterator[Iterator[ShardResult]]:
    """Shard results as they finish, one shard per process.  No more shards are handed out
    than there are processes, so after a failure or an interruption only the running ones
    finish (their work is kept) and nothing queued runs on.

    The processes are spawned, not forked: the suffix sort's OpenMP runtime hangs in a child
    forked from a process that has sorted before (a test run, a server, any library caller);
    a shard outlasts a fresh interpreter's start many times over."""
    count = max(1, min(workers, len(tasks)))
    waiting = iter(tasks)
    with WorkerPool(max_workers=count, mp_context=multiprocessing.get_context("spawn")) as pool:
        with _sort_threads(max(1, (os.cpu_count() or 1) // count)):
            running = {pool.submit(build_shard, task) for task in islice(waiting, count)}

        def results() -> Iterator[ShardResult]:
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    running.remove(future)
                    result = future.result()
                    if (task := next(waiting, None)) is not None:
                        running.add(pool.submit(build_shard, task))
                    yield result

        yield results()


def _cluster_error(shard: int, error: Exception) -> IndexBuildError:
    """A Ray failure as the build's own error: a bad input's IndexBuildError as the shard raised
    it, anything else named with its shard."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, IndexBuildError):
        return IndexBuildError(str(cause))
    detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(error).strip().splitlines()[0]
    return IndexBuildError(f"shard {shard} failed on the Ray cluster ({detail})")


@contextmanager
def _ray_results(ray: ModuleType, tasks: list[ShardTask]) -> Iterator[Iterator[ShardResult]]:
    """Shard results as they finish, one Ray task per shard (one CPU each), retried by Ray when
    its worker dies.  On failure or interruption the tasks not finished are cancelled."""
    remote = ray.remote(num_cpus=1, max_retries=RAY_RETRIES)(build_shard)
    pending = {remote.remote(task): task.shard for task in tasks}

    def results() -> Iterator[ShardResult]:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                shard = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayError as error:
                    raise _cluster_error(shard, error) from None

    try:
        yield results()
    finally:
        for ref in pending:
            ray.cancel(ref)


def _assemble_languages(staging: Path, records: list[ShardRecord]) -> tuple[list[FileInfo], dict]:
    """The shards' language tables concatenated in shard order (global document order), written
    into the staging directory: their file records and the manifest's summary."""
    languages = TableBuilder()
    for record in records:
        languages.extend(TableBuilder.from_json(record.languages))
    table = languages.table()
    return write_languages(staging, table), summary(table)


def _assemble(plan: ShardPlan, records: list[ShardRecord], executor: Executor, seconds: float, staging: Path) -> IndexManifest:
    """The manifest of a finished sharded build, from its shards' records in order; the
    language table is written beside the shards."""
    language_files, languages = _assemble_languages(staging, records)
    sources = [source_info(s.name, s.format, plan.options) for s in plan.sources]
    for record in records:
        for count in record.sources:
            sources[count.source].documents += count.documents
            sources[count.source].skipped_blank_lines += count.skipped_blank_lines
    shards = [record.shard for record in records]
    fingerprint = hashlib.blake2b(b"".join(bytes.fromhex(s.fingerprint) for s in shards), digest_size=16).hexdigest()
    return IndexManifest(
        format="infini-gram",
        version=4,
        manifest_version=MANIFEST_VERSION,
        token_dtype="u8",
        normalization=plan.options.normalization,
        shards=shards,
        sources=sources,
        documents=sum(s.documents for s in shards),
        bytes=sum(s.bytes for s in shards),
        fingerprint=fingerprint,
        created=utc_timestamp(),
        tool=f"corpus-audit {__version__}",
        build_seconds=round(seconds, 3),
        code=plan.code,
        extra={"build": {"shards": len(shards), "executor": executor.kind.value}, "languages": languages},
        files=sorted([*(f for record in records for f in record.files), *language_files], key=file_order),
    )


def _clear_work(staging: Path) -> None:
    """Remove what only the build needed, leaving the index files and the manifest."""
    for attempt in staging.glob("shard-*.attempt-*"):
        shutil.rmtree(attempt, ignore_errors=True)
    shutil.rmtree(staging / RECORDS)
    (staging / PLAN).unlink()


def build_sharded(
    sources: list[Path],
    out: Path,
    *,
    shards: int,
    executor: Executor = LOCAL,
    memory_bytes: int = 8 << 30,
    normalization: str = "text",
    text_field: str = "text",
    text_docs: str = "file",
    force: bool = False,
    workers: int | None = None,
    progress: ProgressHook | None = None,
    max_document: int = MAX_DOCUMENT,
) -> ShardedBuild:
    """Build an index at `out` in `shards` shards, each built apart by `executor`.

    Options mean what they mean to `audit.indexing.build_index`; `memory_bytes` bounds each
    shard (the local executor runs `workers` shards at once, default one per CPU, in spawned
    processes, so a script calling this needs the `if __name__ == "__main__":` guard; on Ray
    every node must see the sources and `out`'s directory at the same paths).  Progress is
    reported as ("shards", finished, total).  A failure or an interruption keeps the finished
    shards and raises IndexBuildError saying how many there are; the same call resumes.
    """
    if shards < 1:
        raise IndexBuildError(f"--shards {shards}: a build needs at least one shard")
    options = read_options(normalization, text_field, text_docs, max_document)
    out = Path(out)
    inputs = [Path(p) for p in sources]
    check_target(out, inputs, force)
    staging = staging_path(out)
    _check_staging(staging, inputs)
    planned = planned_sources(discover_sources(inputs))
    with build_lock(out):
        return _build_planned(planned, out, inputs, staging, options, shards=shards, executor=executor, memory_bytes=memory_bytes, force=force, workers=workers, progress=progress)


def _build_planned(
    planned: tuple[PlannedSource, ...],
    out: Path,
    inputs: list[Path],
    staging: Path,
    options: ReadOptions,
    *,
    shards: int,
    executor: Executor,
    memory_bytes: int,
    force: bool,
    workers: int | None,
    progress: ProgressHook | None,
) -> ShardedBuild:
    """The sharded build proper, under the build lock of `out` (see `build_sharded`)."""
    code = code_fingerprint()
    digest = plan_digest(planned, options, shards, code)
    plan = _resumable(staging, digest)
    fresh = plan is None
    plan = plan or make_plan(planned, options, shards, digest, code)
    budget = check_budget(plan, memory_bytes)
    try:
        ray = executor.cluster()
    except ExecutorError as error:
        raise IndexBuildError(str(error)) from None
    if fresh:
        _start_staging(staging, plan)
    tasks = [ShardTask(str(staging), k, digest, code, options, plan.sources, pieces, budget) for k, pieces in enumerate(plan.shards)]
    started = time.perf_counter()
    records: dict[int, ShardRecord] = {}
    reused = 0
    try:
        with _ray_results(ray, tasks) if ray is not None else _local_results(tasks, workers or os.cpu_count() or 1) as results:
            if progress:
                progress("shards", 0, len(tasks))
            for result in results:
                records[int(result.record.shard.name)] = result.record
                reused += result.reused
                if progress:
                    progress("shards", len(records), len(tasks))
    except (IndexBuildError, KeyboardInterrupt, BrokenProcessPool, OSError) as error:
        reason = {KeyboardInterrupt: "interrupted", BrokenProcessPool: "a shard's process died (out of memory?)"}.get(type(error), str(error))
        kept = f"; {_finished_count(staging, plan)} of {len(tasks)} shards finished; run the same command again to resume"
        if is_full_disk(error):
            raise no_space(staging, kept) from None
        raise IndexBuildError(f"{reason}{kept}") from None
    manifest = _assemble(plan, [records[k] for k in range(len(tasks))], executor, time.perf_counter() - started, staging)
    atomic_write_text(staging / MANIFEST, manifest.to_json())
    check_target(out, inputs, force)
    _clear_work(staging)
    try:
        commit_index(staging, out, inputs)
    except OutputError as error:
        discard_staging(staging)
        raise IndexBuildError(str(error)) from None
    return ShardedBuild(manifest, built=len(tasks) - reused, reused=reused)

