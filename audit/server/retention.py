"""How long finished jobs are kept: a job folder holds an upload of up to `--max-job-bytes`
and its audit file, so a server left running would otherwise fill the disk.

Finished jobs (done or failed) older than `max_age_seconds` are removed, then the oldest
finished ones until the jobs folder holds at most `max_bytes`.  Queued and running jobs are
never removed.  The server prunes at start, after every job and before taking a new one."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class Retention:
    max_age_seconds: float = 7 * 24 * 3600.0
    max_bytes: int = 1 << 30


@dataclass(frozen=True)
class Kept:
    """A job folder as retention sees it."""

    id: str
    finished: str | None
    size: int


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def expired(jobs: list[Kept], retention: Retention, now: datetime | None = None) -> list[str]:
    """The ids of the finished jobs to remove, oldest first; `finished` None means not finished."""
    now = now or datetime.now(UTC)
    total = sum(job.size for job in jobs)
    done = sorted((job for job in jobs if job.finished), key=lambda job: job.finished or "")
    removed = []
    for job in done:
        age = (now - _parse(job.finished or "")).total_seconds()
        if age > retention.max_age_seconds or total > retention.max_bytes:
            removed.append(job.id)
            total -= job.size
    return removed


def _parse(stamp: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
