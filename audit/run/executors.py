"""Where items are checked: on threads, on forked processes, or in Ray tasks.

Each executor runs an `ItemWork` over the items and yields every item's outcome (the audit
file's lines and their tally) in item order, as soon as it and those before it are done, so a
run writes records as they come and holds none.  The work decides each variant with the one
function that decides (`audit.run.check.decided`) wherever the evidence was gathered.
`choose_executor` makes the choice once, from where the user asked the work to go, the workers
and the kinds of the sources.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from multiprocessing.process import BaseProcess
from types import TracebackType

from audit.children import WorkerDied, WorkerPool, frozen_for_fork, how_ended
from audit.corpora.local import LocalIndex
from audit.evidence import Evidence
from audit.executors import Executor, connect
from audit.items import Item, PackedItems
from audit.policyfile import Policy
from audit.records import ExposureRecord
from audit.run.check import ItemOutcome, ItemWork
from audit.signals import Runner

Task = tuple[Item, str]
Advance = Callable[[], None]
# Variants one Ray task checks: few round trips, and little to redo when a worker is lost.
RAY_CHUNK = 8
# Items whose variants are in Ray at once: enough to keep a cluster busy, few enough that
# their evidence, held until each item is finished here, stays small.
RAY_ITEMS = 256
# A Ray task whose worker died is re-run this many times before its variants are `failed`.
RAY_RETRIES = 3


def no_progress() -> None:
    """The advance of a run nobody watches."""


def _advance(on_done: Advance, checked: ItemOutcome) -> ItemOutcome:
    for _ in range(checked.variants):
        on_done()
    return checked


class VariantExecutor(ABC):
    """Runs the work over items.  Entered before any thread starts (a progress display), so an
    executor that forks does so while no other thread holds a lock."""

    # Where the manifest says variants were checked; None when on this machine.
    recorded: str | None = None

    def __init__(self, work: ItemWork, workers: int | None = None) -> None:
        self.work = work
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
    def checked(self, items: Sequence[Item], on_done: Advance = no_progress) -> Iterator[ItemOutcome]:
        """Every item's outcome, in item order, calling `on_done` once per variant checked."""


class Threads(VariantExecutor):
    """A thread pool in this process: the searches release the GIL, and a remote source's
    threads mostly wait on answers.  Variants are the unit here (nothing is sent anywhere), so
    even one item's languages are asked at once; each item is finished as its turn comes.  At
    most `ahead` items are asked before the oldest is finished: submitting every item at once
    held every item and all its evidence until the run ended."""

    def checked(self, items: Sequence[Item], on_done: Advance = no_progress) -> Iterator[ItemOutcome]:
        work, ahead = self.work, max(MIN_AHEAD, 2 * self.workers)

        def run(task: Task) -> list[Evidence]:
            found = work.gather(*task)
            on_done()
            return found

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            pending: deque[tuple[Item, list[Future[list[Evidence]]]]] = deque()
            for item in items:
                pending.append((item, [pool.submit(run, (item, lang)) for lang in work.languages(item)]))
                if len(pending) > ahead:
                    yield _finished(work, *pending.popleft())
            while pending:
                yield _finished(work, *pending.popleft())


# Items a thread pool is asked ahead of the one it finishes next, at the least.
MIN_AHEAD = 16


def _finished(work: ItemWork, item: Item, futures: list[Future[list[Evidence]]]) -> ItemOutcome:
    return work.finish(item, [future.result() for future in futures])


# What forked workers check with, and the items they check: set before the fork, so each child
# inherits the runners with their open indexes and memory maps instead of receiving them pickled.
_FORKED: list[tuple[ItemWork, PackedItems]] = []


def _check_forked(position: int) -> ItemOutcome:
    work, items = _FORKED[-1]
    return work(items[position])


class Forked(VariantExecutor):
    """Forked processes, for local indexes: most of a signal's work is Python holding the GIL.
    The pool forks on entering, with the work it will do and the items it will check, pickled
    into one buffer first (`Packed`): a child is sent an item's position and reads the item
    from there, and its outcome comes back as lines and counts.  So the parent writes nothing
    it shares with its children: pickling each item as it was sent wrote the reference counts
    of its objects, and every page written was copied while the children kept the old one
    (117 MiB more by the end of BMLAMA-17).  At most `ahead` items are in the pool before the
    oldest is yielded.  The pool is a `WorkerPool`, not multiprocessing's `Pool`: that pool's
    thread minding its workers woke for every message on the result pipe and, until the
    result thread had read the message, woke again at once, 456,000 times on BMLAMA-17, half
    the parent's CPU.  Leaving kills the workers, busy or idle (`WorkerPool.end`)."""

    def __init__(self, work: ItemWork, workers: int, items: Sequence[Item]) -> None:
        super().__init__(work, workers)
        self.items = items
        self._pool: WorkerPool | None = None
        self._processes: list[BaseProcess] = []
        self._frozen = ExitStack()

    def __enter__(self) -> Forked:
        _FORKED.append((self.work, PackedItems.of(self.items)))
        self._frozen.enter_context(frozen_for_fork())  # the items and opened indexes stay shared
        self._pool = WorkerPool(self.workers, multiprocessing.get_context("fork"))
        # The workers fork at the first task: here, before a progress display starts its thread.
        self._pool.submit(os.getpid).result()
        self._processes = self._pool.workers()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        _FORKED.clear()
        self._frozen.close()
        if self._pool is not None:
            self._pool.end()
            self._pool = None

    @property
    def pids(self) -> list[int]:
        """The workers' process ids."""
        return [process.pid for process in self._processes]

    def checked(self, items: Sequence[Item], on_done: Advance = no_progress) -> Iterator[ItemOutcome]:
        if self._pool is None:
            raise RuntimeError("a forked executor checks once entered")
        if items is not self.items:
            raise ValueError("a forked executor checks the items it was made with, which its workers hold")
        try:
            yield from self._in_order(self._pool, items, on_done)
        except BrokenProcessPool:
            raise WorkerDied(f"a worker process checking items died ({how_ended(self._causes())})") from None

    def _causes(self) -> list[int | None]:
        """The exit codes of the workers that died of something else than the SIGTERM the pool
        sends the others once one is gone; each waited for a moment, since the pool may report
        the loss before the dead worker is reaped."""
        for process in self._processes:
            process.join(DEAD_WORKER_WAIT)
        return [p.exitcode for p in self._processes if p.exitcode not in (None, 0, -signal.SIGTERM)]

    def _in_order(self, pool: WorkerPool, items: Sequence[Item], on_done: Advance) -> Iterator[ItemOutcome]:
        ahead = max(MIN_AHEAD, FORKED_AHEAD * self.workers)
        pending: deque[Future[ItemOutcome]] = deque()
        for position in range(len(items)):
            pending.append(pool.submit(_check_forked, position))
            if len(pending) > ahead:
                yield _advance(on_done, pending.popleft().result())
        while pending:
            yield _advance(on_done, pending.popleft().result())


# Items per worker a forked pool holds before yielding the oldest: a slow item does not leave
# the other workers idle, and the outcomes waiting behind it are a few lines each.
FORKED_AHEAD = 8
# Seconds a dead pool's workers are waited for, to say how the first of them ended.
DEAD_WORKER_WAIT = 2.0


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
    others (an API cache, a link source, a model) run here on threads.  Items go to the cluster
    RAY_ITEMS at a time and are finished here.  A task Ray could not finish even after retrying
    its lost workers leaves its runners' fields `failed`, which the policy reads as `unknown`."""

    def __init__(self, work: ItemWork, cluster: Executor, workers: int | None = None) -> None:
        super().__init__(work, workers)
        self.cluster = cluster
        self.recorded = str(cluster)

    def checked(self, items: Sequence[Item], on_done: Advance = no_progress) -> Iterator[ItemOutcome]:
        for start in range(0, len(items), RAY_ITEMS):
            batch = items[start : start + RAY_ITEMS]
            tasks = [(item, lang) for item in batch for lang in self.work.languages(item)]
            found = iter(self.evidence(tasks, on_done))
            for item in batch:
                yield self.work.finish(item, [next(found) for _ in self.work.languages(item)])

    def evidence(self, tasks: list[Task], on_done: Advance = no_progress) -> list[list[Evidence]]:
        """Every variant's evidence from every runner, in task order."""
        runners = self.work.runners
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


def choose_executor(
    where: Executor, workers: int, work: ItemWork, sources: Sequence[object], items: Sequence[Item], *, fork: bool = True
) -> VariantExecutor:
    """The one choice of where `items` run: Ray when the user named a cluster; forked processes
    when every source is a local index and more than one worker is wanted (and the caller may
    fork: a server's threads may not); else threads."""
    if where.distributed:
        return RayTasks(work, where, workers)
    if fork and workers > 1 and all(isinstance(source, LocalIndex) for source in sources):
        return Forked(work, workers, items)
    return Threads(work, workers)


def check_items(
    items: list[Item],
    runners: Sequence[Runner],
    policy: Policy,
    *,
    langs: list[str] | None = None,
    workers: int | None = None,
    executor: Callable[[ItemWork, Sequence[Item]], VariantExecutor] | None = None,
) -> list[ExposureRecord]:
    """Records in item order then language order, on `workers` threads (or the executor made
    for the work and the items): the whole list, for callers that want records in memory, not
    a file."""
    work = ItemWork(runners, policy, langs, keep=True)
    chosen = executor(work, items) if executor else Threads(work, workers)
    with chosen:
        return [record for checked in chosen.checked(items) for record in checked.records or []]
