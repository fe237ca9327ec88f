"""A persistent cache of infini-gram API responses, so a re-run costs no request at all.

Responses are keyed by the endpoint URL and the canonical JSON of the request (which names the
index): the same question to the same index at the same address.  Only successful responses are
stored.  One SQLite file serves any number of threads and processes (WAL journal; each thread
has its own connection).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from pydantic import JsonValue

from audit.errors import AuditError

# A request or an answer of the infini-gram API: a JSON object.
JsonObject = dict[str, JsonValue]

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    idx TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    stored REAL NOT NULL
)
"""


class CacheError(AuditError, RuntimeError):
    """The cache file cannot be opened or read; the message names it."""


def canonical(payload: JsonObject) -> str:
    """The request as one stable string: sorted keys, no whitespace, Unicode kept as is."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(endpoint: str, payload: JsonObject) -> str:
    return hashlib.sha256(f"{endpoint.rstrip('/')}\n{canonical(payload)}".encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection().execute(SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise CacheError(f"{self.path}: cannot open the response cache ({error})") from None

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            self._local.connection = connection
        return connection

    def get(self, endpoint: str, payload: JsonObject) -> JsonObject | None:
        try:
            row = self._connection().execute("SELECT response FROM responses WHERE key = ?", (cache_key(endpoint, payload),)).fetchone()
        except sqlite3.Error as error:
            raise CacheError(f"{self.path}: cannot read the response cache ({error})") from None
        return json.loads(row[0]) if row else None

    def put(self, endpoint: str, payload: JsonObject, response: JsonObject) -> None:
        try:
            self._connection().execute(
                "INSERT OR REPLACE INTO responses (key, endpoint, idx, request, response, stored) VALUES (?, ?, ?, ?, ?, ?)",
                (cache_key(endpoint, payload), endpoint.rstrip("/"), str(payload.get("index", "")), canonical(payload), json.dumps(response), time.time()),
            )
        except sqlite3.Error as error:
            raise CacheError(f"{self.path}: cannot write the response cache ({error})") from None

    def entries(self, endpoint: str | None = None, index: str | None = None) -> int:
        """How many responses are stored (for one endpoint and index, if given)."""
        query, args = "SELECT COUNT(*) FROM responses WHERE 1=1", []
        if endpoint is not None:
            query, args = query + " AND endpoint = ?", [*args, endpoint.rstrip("/")]
        if index is not None:
            query, args = query + " AND idx = ?", [*args, index]
        try:
            return int(self._connection().execute(query, args).fetchone()[0])
        except sqlite3.Error as error:
            raise CacheError(f"{self.path}: cannot read the response cache ({error})") from None
