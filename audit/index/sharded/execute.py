"""Where a sharded build's shards run: spawned processes on this machine, or Ray tasks.  The one
place the build consults its executor."""
from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, wait
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from itertools import islice
from types import ModuleType

from audit.children import WorkerPool
from audit.executors import Executor, ExecutorError
from audit.index.errors import IndexBuildError
from audit.index.sharded.records import ShardResult, ShardTask
from audit.index.sharded.worker import build_shard

RAY_RETRIES = 3


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


@dataclass(frozen=True)
class Placement:
    """Where the shards of one build run, reached before any work starts: `name` is what the
    manifest records (`local`, `ray`), `ray` the connected module on a cluster."""

    name: str
    ray: ModuleType | None = None

    def results(self, tasks: list[ShardTask], workers: int) -> AbstractContextManager[Iterator[ShardResult]]:
        """Shard results as they finish (`workers` processes at a time on this machine)."""
        return _ray_results(self.ray, tasks) if self.ray is not None else _local_results(tasks, workers)


def place(executor: Executor) -> Placement:
    """The placement `executor` names, connected to its cluster when it has one."""
    try:
        return Placement(executor.kind.value, executor.cluster())
    except ExecutorError as error:
        raise IndexBuildError(str(error)) from None
