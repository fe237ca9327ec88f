"""Ranges: half-open position ranges, as the API backend and the near-duplicate index both
gather them; and the ranges a command's numeric options must fall in (memory budgets, worker
counts), one rule for every command that takes them."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from audit.errors import AuditError

# The smallest memory budget that holds a real shard: a few MiB of text and its suffix array.
MIN_MEMORY = 16 << 20
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", re.IGNORECASE)


class RangeError(AuditError, ValueError):
    """An option's value outside its range; the message names the option and the value."""


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


def machine_memory() -> int | None:
    """Physical memory in bytes, None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _size_text(n: int) -> str:
    exponent = 0
    while n >= 1024 and n % 1024 == 0 and exponent < 4:
        n, exponent = n // 1024, exponent + 1
    return f"{n}{' KMGT'[exponent].strip()}"


def parse_size(value: str, option: str) -> int:
    """A size like 512M, 8G or 4096, in bytes (powers of 1024)."""
    match = _SIZE.fullmatch(value)
    if not match:
        raise RangeError(f"{option} {value!r}: not a size like 512M or 8G")
    return int(float(match[1]) * 1024 ** " KMGT".index(match[2].upper() or " "))


def document_limit(value: str, option: str = "--max-document") -> int:
    """The largest document (or line) a build reads, at least 1K: a bound on what one line of
    a compressed corpus file can make the build hold in memory."""
    size = parse_size(value, option)
    if size < 1024:
        raise RangeError(f"{option} {value!r}: too small; give at least 1K")
    total = machine_memory()
    if total is not None and size > total // 4:
        raise RangeError(f"{option} {value!r}: more than a quarter of this machine's memory ({total / (1 << 30):.1f} GiB); a document is held several times over while it is read")
    return size


def memory_budget(value: str, option: str = "--mem") -> int:
    """A memory budget like 512M or 8G, in bytes, between MIN_MEMORY and the machine's memory:
    a smaller one cannot hold a shard worth the name, a larger one would be swapped, not used."""
    size = parse_size(value, option)
    if size < MIN_MEMORY:
        raise RangeError(f"{option} {value!r}: too small; give at least {_size_text(MIN_MEMORY)} (a shard's text and its suffix array must fit)")
    total = machine_memory()
    if total is not None and size > total:
        raise RangeError(f"{option} {value!r}: more than this machine's memory ({total / (1 << 30):.1f} GiB); give at most that")
    return size


@dataclass(frozen=True)
class Workers:
    """How many processes a command runs, and the one-line note saying why, when that is fewer
    than were asked for."""

    count: int
    note: str = ""


def worker_count(requested: int | None, work: int | None = None, option: str = "--workers") -> Workers:
    """The processes to start: `requested` (default: every CPU), clamped to the CPU count and to
    the pieces of `work` there are, since a process beyond either only waits and takes memory.
    Below 1 is refused."""
    cpus = os.cpu_count() or 1
    if requested is not None and requested < 1:
        raise RangeError(f"{option} {requested}: give at least 1")
    wanted = cpus if requested is None else requested
    bounds = [(cpus, f"the {cpus} CPUs of this machine")]
    if work is not None:
        bounds.append((max(1, work), f"the {work} pieces of work"))
    limit, why = min(bounds, key=lambda bound: bound[0])
    if wanted <= limit:
        return Workers(wanted)
    note = f"{option} {requested}: using {limit}, {why}" if requested is not None else ""
    return Workers(limit, note)


REMOTE_WORKERS = 8


def check_workers(asked: int | None, variants: int, cpus: int | None = None, remote: bool = False) -> tuple[int, str | None]:
    """`audit check --workers`: the processes (or threads) to run, and a note when the number
    asked for was lowered.  More workers than variants have nothing to do, and more than four
    per CPU only contend for it; the default is one per CPU, within the same bounds.  Against
    remote corpora only (threads waiting on answers) the default is REMOTE_WORKERS, enough
    variants at once to keep a host's requests in flight at its adaptive limit."""
    cpus = cpus or os.cpu_count() or 1
    limit = max(1, min(variants, 4 * cpus))
    if asked is None:
        return min(REMOTE_WORKERS if remote else cpus, limit), None
    if asked <= limit:
        return asked, None
    return limit, f"--workers {asked}: clamped to {limit} (at most one per variant, {variants}, and four per CPU, {4 * cpus})"
