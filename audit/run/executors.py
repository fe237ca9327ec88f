"""Where variants are checked: on threads, on forked processes, or in Ray tasks.

Each executor maps the signal runners over the variants and returns every variant's evidence
in the order asked; nothing is decided there, so a tag is decided in one place (the run's
`check_items`) whichever executor gathered its evidence.  `choose_executor` makes the choice
once, from where the user asked the work to go, the workers and the kinds of the sources.
"""
from __future__ import annotations

import multiprocessing
import os
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.pool import Pool
from types import TracebackType

from audit.children import end_pool, pool_options, sigint_blocked
from audit.corpora.local import LocalIndex
from audit.evidence import Evidence
from audit.executors import Executor, connect
from audit.items import Item
from audit.signals import Runner

Task = tuple[Item, str]
Advance = Callable[[], None]
# Variants one Ray task checks: few round trips, and little to redo when a worker is lost.
RAY_CHUNK = 8
# A Ray task whose worker died is re-run this many times before its variants are `failed`.
RAY_RETRIES = 3


def no_progress() -> None:
    """The advance of a run nobody watches."""


def gathered(task: Task, runners: Sequence[Runner]) -> list[Evidence]:
    """One variant's evidence from every runner, in the runners' order."""
    item, lang = task
    return [evidence for run in runners for evidence in run(item, lang)]


class VariantExecutor(ABC):
    """Maps runners over variants.  Entered before any thread starts (a progress display), so
    an executor that forks does so while no other thread holds a lock."""

    # Where the manifest says variants were checked; None when on this machine.
    recorded: str | None = None

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1

    def __enter__(self) -> VariantExecutor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        return None

    @property
    def where(self) -> str:
        """What the progress line adds after the sources: empty on this machine."""
        return f" on {self.recorded}" if self.recorded else ""

    @abstractmethod
    def evidence(self, tasks: list[Task], runners: Sequence[Runner], on_done: Advance = no_progress) -> list[list[Evidence]]:
        """Every task's evidence, in task order, calling `on_done` as each variant finishes."""


class Threads(VariantExecutor):
    """A thread pool in this process: the searches release the GIL, and a remote source's
    threads mostly wait on answers."""

    def evidence(self, tasks: list[Task], runners: Sequence[Runner], on_done: Advance = no_progress) -> list[list[Evidence]]:
        def run(task: Task) -> list[Evidence]:
            found = gathered(task, runners)
            on_done()
            return found

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(run, tasks))


# What forked workers check with: set before the fork, so each child inherits the runners with
# their open indexes and memory maps instead of receiving them pickled.
_FORKED: list[Sequence[Runner]] = []


def _gather_forked(task: Task) -> list[Evidence]:
    return gathered(task, _FORKED[-1])


class Forked(VariantExecutor):
    """Forked processes, for local indexes: most of a signal's work is Python holding the GIL.
    The pool forks on entering, with the runners it will use; a pool left by an exception is
    ended at once (`end_pool`)."""

    def __init__(self, workers: int, runners: Sequence[Runner]) -> None:
        super().__init__(workers)
        self.runners = runners
        self._pool: Pool | None = None

    def __enter__(self) -> Forked:
        _FORKED.append(self.runners)
        with sigint_blocked():
            self._pool = multiprocessing.get_context("fork").Pool(self.workers, **pool_options())
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        _FORKED.clear()
        if self._pool is not None:
            end_pool(self._pool) if kind is not None else self._pool.terminate()
            self._pool = None

    def evidence(self, tasks: list[Task], runners: Sequence[Runner], on_done: Advance = no_progress) -> list[list[Evidence]]:
        if self._pool is None or runners is not self.runners:
            raise RuntimeError("a forked executor checks with the runners it forked with, once entered")
        found = []
        for evidence in self._pool.imap(_gather_forked, tasks, chunksize=4):
            found.append(evidence)
            on_done()
        return found


def _shipped_evidence(token: str, shipped: list[object], tasks: list[Task]) -> list[list[list[Evidence]]]:
    """On a Ray worker: each variant's evidence from each shipped runner.  The runners arrive
    once per worker process (wrapped in a list, so Ray passes the reference unresolved)."""
    if token not in _SHIPPED:
        import ray

        _SHIPPED.clear()
        _SHIPPED[token] = ray.get(shipped[0])
    return [[run(item, lang) for run in _SHIPPED[token]] for item, lang in tasks]


_SHIPPED: dict[str, list[Runner]] = {}


class RayTasks(VariantExecutor):
    """A Ray cluster: runners whose source can travel (`portable`: a local index, re-opened on
    the worker and asking the same shard actors) run in Ray tasks of RAY_CHUNK variants; the
    others (an API cache, a link source, a model) run here on threads.  A task Ray could not
    finish even after retrying its lost workers leaves its runners' fields `failed`, which the
    policy reads as `unknown`."""

    def __init__(self, cluster: Executor, workers: int | None = None) -> None:
        super().__init__(workers)
        self.cluster = cluster
        self.recorded = str(cluster)

    def evidence(self, tasks: list[Task], runners: Sequence[Runner], on_done: Advance = no_progress) -> list[list[Evidence]]:
        shipped = [i for i, run in enumerate(runners) if run.portable]
        kept = [i for i in range(len(runners)) if i not in shipped]
        table: list[list[list[Evidence]]] = [[[] for _ in runners] for _ in tasks]
        waiting = [len([part for part in (shipped, kept) if part])] * len(tasks)
        lock = threading.Lock()

        def finished(position: int) -> None:
            with lock:
                waiting[position] -= 1
                if waiting[position] == 0:
                    on_done()

        def run_kept(position: int) -> None:
            item, lang = tasks[position]
            for i in kept:
                table[position][i] = runners[i](item, lang)
            finished(position)

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            pending = [pool.submit(run_kept, position) for position in range(len(tasks))] if kept else []
            if shipped:
                self._ship(tasks, [runners[i] for i in shipped], shipped, table, finished)
            for future in pending:
                future.result()
        return [[evidence for found in per_runner for evidence in found] for per_runner in table]

    def _ship(self, tasks: list[Task], runners: list[Runner], positions: list[int], table: list[list[list[Evidence]]], finished: Callable[[int], None]) -> None:
        """Run `runners` (at `positions` among all) over the tasks in Ray, filling `table`."""
        ray = connect(self.cluster)
        remote = ray.remote(_shipped_evidence).options(max_retries=RAY_RETRIES, num_cpus=1)
        token, reference = uuid.uuid4().hex, ray.put(runners)
        chunks = {remote.remote(token, [reference], tasks[start : start + RAY_CHUNK]): start for start in range(0, len(tasks), RAY_CHUNK)}
        while chunks:
            ready, _ = ray.wait(list(chunks), num_returns=1)
            start = chunks.pop(ready[0])
            part = tasks[start : start + RAY_CHUNK]
            try:
                found = ray.get(ready[0])
            except ray.exceptions.RayError as error:
                found = [[run.failed(item, error) for run in runners] for item, _ in part]
            for offset, per_runner in enumerate(found):
                for i, evidence in zip(positions, per_runner, strict=True):
                    table[start + offset][i] = evidence
                finished(start + offset)


def choose_executor(where: Executor, workers: int, runners: Sequence[Runner], sources: Sequence[object], *, fork: bool = True) -> VariantExecutor:
    """The one choice of where variants run: Ray when the user named a cluster; forked
    processes when every source is a local index and more than one worker is wanted (and the
    caller may fork: a server's threads may not); else threads."""
    if where.distributed:
        return RayTasks(where, workers)
    if fork and workers > 1 and all(isinstance(source, LocalIndex) for source in sources):
        return Forked(workers, runners)
    return Threads(workers)
