"""A full disk met by the writers that catch it themselves (the index builds, langlinks and the
SQLite stores) so they can remove what they had half written first: they raise the one message
`audit.outputs.disk_full` words for every writer, as the `DiskFull` (an OSError) every command
reports with exit status 1."""
from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from audit.outputs import DiskFull, disk_full


def is_full_disk(error: BaseException) -> bool:
    """Whether an error means the filesystem (or the user's quota on it) ran out of room."""
    if isinstance(error, sqlite3.OperationalError):
        return "disk is full" in str(error)
    return disk_full(error) is not None


def no_space(path: Path, after: str = "") -> DiskFull:
    """The error a writer raises when the disk filled while it wrote `path`; `after` adds what
    was kept (a sharded build's finished shards)."""
    full = disk_full(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), path)
    return DiskFull(errno.ENOSPC, f"{full} (free some room and run it again){after}")
