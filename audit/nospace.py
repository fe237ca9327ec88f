"""A full disk, said in one line naming the filesystem and the file: the index, langlinks and
cache writers catch it (an `OSError` with ENOSPC, or SQLite's "database or disk is full") and
raise this instead of a traceback, after removing what they had half written."""
from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from audit.outputs import OutputError


def is_full_disk(error: BaseException) -> bool:
    """Whether an error means the filesystem (or the user's quota on it) ran out of room."""
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(error, sqlite3.OperationalError) and "disk is full" in str(error)


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding `path` (or the nearest existing folder above)."""
    at = Path(os.path.abspath(path))
    while not at.exists() and at != at.parent:
        at = at.parent
    while not os.path.ismount(at) and at != at.parent:
        at = at.parent
    return at


def no_space(path: Path) -> OutputError:
    """The error a writer raises when the disk filled while it wrote `path`."""
    return OutputError(f"no space left on {mount_point(path)} while writing {path} (free some room and run it again)")
