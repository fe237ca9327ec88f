"""Child processes that end with their parent, and signals that end a command in one line.

A pool worker blocked on its task pipe never learns that its parent was killed (SIGKILL runs
no clean-up), so every pool the tool starts runs `worker_setup` first: on Linux the kernel
sends the worker SIGKILL when its parent dies.  Workers also ignore SIGINT: Ctrl-C reaches the
whole process group, and a worker that dies of it mid-message leaves the pool's pipes and
locks in a state its parent can wait on forever; the parent alone is interrupted and ends
the pool.  A spawned pool's resource tracker needs nothing: it exits when the last process
holding its pipe does.

SIGINT and SIGTERM in the command's own process raise `Interrupted` (a KeyboardInterrupt,
so every `finally` and staging clean-up runs); the CLI turns it into one line and the
conventional exit status 128 + signal.
"""
from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import ParamSpec, TypeVar

from audit.errors import AuditError

PR_SET_PDEATHSIG = 1
P = ParamSpec("P")
T = TypeVar("T")


class Interrupted(KeyboardInterrupt):
    """The command received SIGINT or SIGTERM."""

    def __init__(self, signum: int) -> None:
        super().__init__("interrupted")
        self.signum = signum


def _die_with(parent: int) -> None:
    """Ask the kernel for SIGKILL when the parent dies, then make sure it had not already died
    (the request covers only deaths after it)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def worker_setup(parent: int) -> None:
    """Pool initializer: die with `parent`, leave SIGINT to it, and stop at once on SIGTERM
    (the signal pools end their workers with; a handler inherited from the parent, such as the
    one `ray.init` installs, could delay it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with(parent)


def pool_options() -> dict[str, Callable[[int], None] | tuple[int]]:
    """`initializer` and `initargs` for a ProcessPoolExecutor."""
    return {"initializer": worker_setup, "initargs": (os.getpid(),)}


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Hold SIGINT back while workers start (a pool starts them as tasks are submitted): a
    child inherits the blocked signal, so Ctrl-C cannot reach it before `worker_setup` makes
    it ignore SIGINT, even in a spawned child still importing; here the signal is delivered
    when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def frozen_for_fork() -> Iterator[None]:
    """Objects made before this block are left out of the garbage collections of processes
    forked inside it, which would otherwise write to every one of them and so copy each page
    of the parent's memory (a benchmark's items, an audit's records) into every child."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


# Allocations of container objects between two collections of the youngest generation while
# items are checked: Python's 700 collected about 850 times on a 4,608-variant benchmark, half
# a second of a 20 s check, and almost nothing a signal allocates outlives its field.
CHECK_YOUNG_COLLECTION = 10_000


_SPACED: list[tuple[int, int, int]] = []  # the thresholds as each open block found them: the first are put back
_SPACED_LOCK = threading.Lock()


@contextmanager
def spaced_collections(young: int = CHECK_YOUNG_COLLECTION) -> Iterator[None]:
    """The youngest generation collected every `young` allocations inside this block (and in
    processes forked inside it); the older generations' thresholds are kept.  Blocks may
    overlap (a server's checks, each on its own thread): the thresholds are put back when the
    last one ends."""
    with _SPACED_LOCK:
        _SPACED.append(gc.get_threshold())
        gc.set_threshold(max(young, _SPACED[-1][0]), *_SPACED[0][1:])
    try:
        yield
    finally:
        with _SPACED_LOCK:
            before = _SPACED.pop()
            if not _SPACED:
                gc.set_threshold(*before)


_BY_HAND: list[bool] = []  # whether collections were on as each open block found them: the first is put back
_BY_HAND_LOCK = threading.Lock()


@contextmanager
def collected_by_hand() -> Iterator[Callable[[], object]]:
    """Python's own collections off inside this block; the function it yields collects the
    youngest generation, for the caller to call when a unit of work (a report's page) ends
    and its reference cycles (Jinja's contexts) are garbage.  Left to Python, collections in
    the middle of a page move its live objects to the older generations, where the cycles
    pile up between ever longer full collections: about a tenth of the pages' time on
    BMLAMA-17's report.  Blocks may overlap (a server's reports, each on its own thread)."""
    with _BY_HAND_LOCK:
        _BY_HAND.append(gc.isenabled())
        gc.disable()
    try:
        yield lambda: gc.collect(0)
    finally:
        with _BY_HAND_LOCK:
            enabled = _BY_HAND.pop()
            if not _BY_HAND and enabled:
                gc.enable()


class WorkerDied(AuditError):
    """A worker process ended in the middle of the work (killed: often the system out of
    memory), so its results will never come."""


def how_ended(exitcodes: list[int | None]) -> str:
    """How dead workers ended, in words: a signal by name, or an exit status."""
    if not exitcodes:
        return "cause unknown"
    code = exitcodes[0]
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return f"killed by {name}" + (", which the system sends when memory runs out" if -code == signal.SIGKILL else "")
    return f"exit status {code}"


class WorkerPool(ProcessPoolExecutor):
    """A process pool whose workers are set up by `worker_setup`, and which, left by an
    exception (an interruption, a failed task), kills its workers instead of waiting for their
    tasks to finish: nobody will read those results, and a shard or a figure can take minutes."""

    def __init__(self, max_workers: int, mp_context: BaseContext) -> None:
        super().__init__(max_workers=max_workers, mp_context=mp_context, **pool_options())

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with sigint_blocked():
            return super().submit(fn, *args, **kwargs)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> bool | None:
        if kind is not None:
            self.end()
        return super().__exit__(kind, value, traceback)

    def workers(self) -> list[BaseProcess]:
        """The worker processes started so far; a caller that wants them after the pool is shut
        down keeps this list, since the pool forgets them."""
        return list((self._processes or {}).values())

    def end(self) -> None:
        """Kill the workers, busy or idle, and shut the pool down without waiting for any task."""
        self._kill_workers()
        self.shutdown(wait=True, cancel_futures=True)

    def _kill_workers(self) -> None:
        """Kill the workers and reap them.  One killed while writing a result leaves half a
        message in the result pipe, and the pool's manager thread would wait for the rest
        forever; with every worker gone, closing this process's own writing end of that pipe
        turns the wait into end-of-file, which the pool takes for a broken pool and ends.
        The task pipe has the opposite trouble: its feeding thread may be blocked writing a
        large task (a record batch) that no worker will read, and the pool's manager thread,
        seeing the workers die, joins that thread.  So the join is cancelled before any worker
        is killed: the thread is left to the process's end, and nothing it holds is wanted.
        (Closing the reading end here instead would race the thread's own close of it.)"""
        self._call_queue.cancel_join_thread()
        processes = list((self._processes or {}).values())
        for process in processes:
            if process.is_alive():
                process.kill()
        for process in processes:
            process.join()
        self._result_queue._writer.close()


_received: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    """Raise `Interrupted` once; a second signal while the first is being cleaned up ends the
    process at once, as a user pressing Ctrl-C twice expects."""
    if _received:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _received.append(signum)
    raise Interrupted(signum)


def catch_signals() -> None:
    """Turn SIGINT and SIGTERM into `Interrupted` in this process (the main thread only)."""
    _received.clear()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)


@contextmanager
def signals_caught() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` while a command runs in the main thread; the
    handlers before are restored after, for callers that embed the CLI."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    catch_signals()
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def received() -> int | None:
    """The signal that interrupted the command, if one did (errors raised while unwinding
    from it are then reported as the interruption)."""
    return _received[0] if _received else None
