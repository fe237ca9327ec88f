"""What a forked check's pool costs its parent: multiprocessing's `Pool.imap`, which the forked
executor used, against the tool's `WorkerPool` (concurrent.futures) as the executor now runs it,
on the same tasks: BMLAMA-17's shape by default, 6,792 items each coming back as about 77 KB
of audit lines.

    python bench/bench_pool_parent.py                   # about four minutes
    python bench/bench_pool_parent.py --items 384 --size 110000 --work-ms 50   # ECLeKTic-sized

Each worker spends `--work-ms` of CPU per item (a signal's work) and returns `--size` bytes.
Per pool and round it prints the parent's CPU (all its threads), the children's, the wall time,
and for `Pool` how often its thread minding the workers woke (`Pool._wait_for_updates`): that
thread also wakes for every message on the result pipe and, until the result thread has read
it, wakes again at once.  Rounds alternate the two pools.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from collections import deque
from collections.abc import Callable
from multiprocessing import pool as mp_pool

from audit.children import WorkerPool

WAKES = [0]


def _counted(wait: Callable[..., None]) -> staticmethod:
    """`Pool._wait_for_updates`, counting its calls (the worker-minding thread's wake-ups)."""

    def wait_counted(*args: object, **kwargs: object) -> None:
        WAKES[0] += 1
        return wait(*args, **kwargs)

    return staticmethod(wait_counted)


def task(spec: tuple[int, int]) -> bytes:
    """One item: `work_ms` of CPU, then `size` bytes of lines."""
    size, work_ms = spec
    until = time.process_time() + work_ms / 1000
    while time.process_time() < until:
        pass
    return b"x" * (size - 1) + b"\n"


def usage() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def run(kind: str, items: int, size: int, work_ms: int, workers: int) -> dict:
    """Every item through one pool, its results read in order as the executor reads them."""
    context = multiprocessing.get_context("fork")
    WAKES[0], received = 0, 0
    before, started = usage(), time.perf_counter()
    spec = (size, work_ms)
    if kind == "Pool":
        with context.Pool(workers) as pool:
            for lines in pool.imap(task, [spec] * items, chunksize=1):
                received += len(lines)
    else:
        with WorkerPool(workers, context) as pool:
            pending: deque = deque()
            for _ in range(items):
                pending.append(pool.submit(task, spec))
                if len(pending) > 8 * workers:
                    received += len(pending.popleft().result())
            while pending:
                received += len(pending.popleft().result())
    after = usage()
    return {"pool": kind, "wall_s": round(time.perf_counter() - started, 2), "parent_cpu_s": round(after[0] - before[0], 2),
            "children_cpu_s": round(after[1] - before[1], 2), "wakes": WAKES[0] if kind == "Pool" else None, "bytes": received}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=6792)
    parser.add_argument("--size", type=int, default=77000, help="bytes each item returns")
    parser.add_argument("--work-ms", type=int, default=10, help="CPU milliseconds a worker spends on each item")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mp_pool.Pool._wait_for_updates = _counted(mp_pool.Pool._wait_for_updates)
    rows = [run(kind, args.items, args.size, args.work_ms, args.workers) for _ in range(args.rounds) for kind in ("Pool", "WorkerPool")]
    for row in rows:
        print(json.dumps(row))
    for kind in ("Pool", "WorkerPool"):
        mine = [row for row in rows if row["pool"] == kind]
        print(f"{kind}: parent CPU {min(r['parent_cpu_s'] for r in mine)}-{max(r['parent_cpu_s'] for r in mine)} s, "
              f"wall {min(r['wall_s'] for r in mine)}-{max(r['wall_s'] for r in mine)} s")


if __name__ == "__main__":
    main()
