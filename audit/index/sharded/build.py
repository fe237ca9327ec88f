"""Sharded index builds: the input cut into N shards of about equal size (`cuts`), each built apart
(`worker`, on local processes or as Ray tasks), kept as it finishes, so a failed or interrupted
build resumes: running the same command again keeps every shard whose record and files still
agree and builds the rest (`staging`).  Once all are done the manifest is written (`assemble`)
and the directory is moved into place like any build."""
from __future__ import annotations

import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from audit.executors import LOCAL, Executor
from audit.index.corpusread import MAX_DOCUMENT, ReadOptions, read_options
from audit.index.errors import IndexBuildError
from audit.index.format import MANIFEST, IndexManifest
from audit.index.limits import BuildLimits
from audit.index.progress import ProgressHook, Stage
from audit.index.sharded.assemble import assemble
from audit.index.sharded.cuts import make_plan
from audit.index.sharded.execute import place
from audit.index.sharded.plan import PlannedSource, check_budget, plan_digest, planned_sources
from audit.index.sharded.records import ShardRecord, ShardTask
from audit.index.sharded.staging import check_staging, clear_work, finished_count, resumable, staging_path, start_staging
from audit.index.sources import discover_sources
from audit.index.stamp import code_fingerprint
from audit.index.target import build_lock, check_target, commit_index
from audit.nospace import is_full_disk, no_space
from audit.outputs import OutputError, atomic_write_text, discard_staging


@dataclass(frozen=True)
class ShardedBuild:
    manifest: IndexManifest
    built: int
    reused: int


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

    Options mean what they mean to `audit.index.build.build_index`; `memory_bytes` bounds each
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
    check_staging(staging, inputs)
    planned = planned_sources(discover_sources(inputs))
    with build_lock(out):
        return _build_planned(planned, out, inputs, staging, options, shards=shards, executor=executor, limits=BuildLimits(memory_bytes, workers), force=force, progress=progress)


def _build_planned(
    planned: tuple[PlannedSource, ...],
    out: Path,
    inputs: list[Path],
    staging: Path,
    options: ReadOptions,
    *,
    shards: int,
    executor: Executor,
    limits: BuildLimits,
    force: bool,
    progress: ProgressHook | None,
) -> ShardedBuild:
    """The sharded build proper, under the build lock of `out` (see `build_sharded`)."""
    code = code_fingerprint()
    digest = plan_digest(planned, options, shards, code)
    plan = resumable(staging, digest)
    fresh = plan is None
    plan = plan or make_plan(planned, options, shards, digest, code)
    budget = check_budget(plan, limits.memory_bytes)
    placement = place(executor)
    if fresh:
        start_staging(staging, plan)
    tasks = [ShardTask(str(staging), k, digest, code, options, plan.sources, pieces, budget) for k, pieces in enumerate(plan.shards)]
    started = time.perf_counter()
    records: dict[int, ShardRecord] = {}
    reused = 0
    try:
        with placement.results(tasks, limits.processes) as results:
            if progress:
                progress(Stage.SHARDS, 0, len(tasks))
            for result in results:
                records[int(result.record.shard.name)] = result.record
                reused += result.reused
                if progress:
                    progress(Stage.SHARDS, len(records), len(tasks))
    except (IndexBuildError, KeyboardInterrupt, BrokenProcessPool, OSError) as error:
        reason = {KeyboardInterrupt: "interrupted", BrokenProcessPool: "a shard's process died (out of memory?)"}.get(type(error), str(error))
        kept = f"; {finished_count(staging, plan)} of {len(tasks)} shards finished; run the same command again to resume"
        if is_full_disk(error):
            raise no_space(staging, kept) from None
        raise IndexBuildError(f"{reason}{kept}") from None
    manifest = assemble(plan, [records[k] for k in range(len(tasks))], placement.name, time.perf_counter() - started, staging)
    atomic_write_text(staging / MANIFEST, manifest.to_json())
    check_target(out, inputs, force)
    clear_work(staging)
    try:
        commit_index(staging, out, inputs)
    except OutputError as error:
        discard_staging(staging)
        raise IndexBuildError(str(error)) from None
    return ShardedBuild(manifest, built=len(tasks) - reused, reused=reused)
