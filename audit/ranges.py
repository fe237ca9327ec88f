"""Half-open position ranges, as the API backend and the near-duplicate index both gather them."""
from __future__ import annotations

import os


def merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Position ranges with touching or overlapping ones joined, in order, and empty ones left
    out."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined


def check_workers(asked: int | None, variants: int, cpus: int | None = None) -> tuple[int, str | None]:
    """`audit check --workers`: the processes (or threads) to run, and a note when the number
    asked for was lowered.  More workers than variants have nothing to do, and more than four
    per CPU only contend for it; the default is one per CPU, within the same bounds."""
    cpus = cpus or os.cpu_count() or 1
    limit = max(1, min(variants, 4 * cpus))
    if asked is None:
        return min(cpus, limit), None
    if asked <= limit:
        return asked, None
    return limit, f"--workers {asked}: clamped to {limit} (at most one per variant, {variants}, and four per CPU, {4 * cpus})"
