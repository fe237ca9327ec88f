"""One SQLite file shared by the threads and processes of a run: the persistent caches (link
answers, probe outputs) keep their tables in one, in WAL mode with a connection per thread, and
report any failure as their own error naming the file."""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from audit.nospace import is_full_disk, no_space


class SqliteStore:
    """A cache file, checked whole at open (`quick_check`: caches are small, and a damaged one
    would otherwise answer from garbage or fail mid-run)."""

    def __init__(self, path: Path, schema: str, what: str, error: type[Exception]) -> None:
        self.path = Path(path)
        self._what = what
        self._error = error
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = self._connection()
            problems = connection.execute("PRAGMA quick_check(3)").fetchall()
            if problems != [("ok",)]:
                raise error(f"{self.path}: the {what} is damaged ({' '.join(' '.join(str(row[0]).split()) for row in problems)}); delete the file to start afresh")
            connection.executescript(schema)
        except (OSError, sqlite3.Error) as problem:
            if is_full_disk(problem):
                raise no_space(self.path) from None
            raise error(f"{self.path}: cannot open the {what} ({problem}); delete the file to start afresh if it is damaged") from None

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            self._local.connection = connection
        return connection

    def run(self, query: str, args: tuple = ()) -> list[tuple]:
        try:
            return self._connection().execute(query, args).fetchall()
        except sqlite3.Error as problem:
            if is_full_disk(problem):
                raise no_space(self.path) from None
            raise self._error(f"{self.path}: the {self._what} cannot be used ({problem}); delete the file to start afresh") from None
