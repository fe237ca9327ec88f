"""The index's LSH bands in Redis, to share one LSH between processes and machines.

Stored through datasketch's public storage interface (`datasketch.storage.unordered_storage`,
the Redis set storage its `MinHashLSH` uses): one set table per band, a band key as 8 big-endian
bytes, its members the windows as 8 big-endian bytes, so nothing read back is unpickled.  The
keys are the ones the memory-mapped bands sort (`audit.neardup.family.band_keys`), loaded from
those files, so both stores answer a query with the same windows.  A band is asked for all of
a query's distinct keys in one pipelined request.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

from audit.neardup.bands import MappedBands, distinct_per_band
from audit.neardup.store import NearDupError, ProgressHook
from audit.timestamps import utc_timestamp

READY = b":ready"
# Bumped when the layout in Redis changes: bands loaded in another layout read as not loaded.
LAYOUT = "bands1"


def redis_settings(url: str) -> dict[str, str | int]:
    """The `redis.Redis` settings of a redis://[:password@]host[:port][/db] URL."""
    parsed = urlparse(url)
    if parsed.scheme != "redis" or not parsed.hostname:
        raise NearDupError(f"{url}: not a redis://host[:port][/db] URL")
    try:
        db = int(parsed.path.strip("/") or 0)
        port = parsed.port or 6379
    except ValueError:
        raise NearDupError(f"{url}: not a redis://host[:port][/db] URL") from None
    settings: dict[str, str | int] = {"host": parsed.hostname, "port": port, "db": db}
    if parsed.password:
        settings["password"] = unquote(parsed.password)
    return settings


def _key(value: int) -> bytes:
    return value.to_bytes(8, "big")


class RedisBands:
    """The bands of one index in Redis, under a name derived from its near-duplicate
    manifest's hash: another index's bands can never be read for this one."""

    def __init__(self, url: str, digest: str, bands: int) -> None:
        try:
            import redis
            from datasketch.storage import unordered_storage
        except ImportError:
            raise NearDupError(f"{url}: Redis needs the redis package: pip install 'corpus-audit[redis]'") from None
        self.url = url
        self.basename = f"corpus-audit:minhash:{LAYOUT}:{digest}".encode()
        settings = redis_settings(url)
        self._client = redis.Redis(**settings)
        self._errors = (redis.exceptions.RedisError,)
        config = {"type": "redis", "redis": settings}
        self._tables = [unordered_storage(config, name=self.basename + f":band{band}:".encode()) for band in range(bands)]

    def _ready_key(self) -> bytes:
        return self.basename + READY

    def loaded(self) -> dict[str, int | str] | None:
        try:
            raw = self._client.get(self._ready_key())
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None
        return json.loads(raw) if raw else None

    def require_loaded(self, directory: Path, windows: int) -> None:
        state = self.loaded()
        if state is None or state.get("windows") != windows:
            raise NearDupError(f"{self.url}: the near-duplicate index of {directory} is not loaded there; load it with `audit index minhash {directory} --redis {self.url}`")

    def load(self, bands: MappedBands, progress: ProgressHook | None = None) -> None:
        """Replace whatever is stored under this name with the index's bands, then mark it
        loaded (last, so a load cut short is never taken for a whole one)."""
        total = len(self._tables)
        try:
            self._client.delete(self._ready_key())
            for keys in _batches(self._client.scan_iter(match=self.basename + b"*", count=1000), 1000):
                self._client.delete(*keys)
            for band, table in enumerate(self._tables):
                keys, starts, ends = bands.runs(band)
                windows = bands.windows[band]
                for key, start, end in zip(keys.tolist(), starts.tolist(), ends.tolist(), strict=True):
                    table.insert(_key(key), *map(_key, windows[start:end].tolist()), buffer=True)
                table.empty_buffer()
                if progress:
                    progress("redis", band + 1, total)
            self._client.set(self._ready_key(), json.dumps({"windows": bands.windows.shape[1], "loaded": utc_timestamp()}))
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None

    def members(self, keys: np.ndarray) -> np.ndarray:
        """Per band, the windows stored under any chunk's key, in one pipelined request."""
        found: list[int] = []
        try:
            for table, wanted in zip(self._tables, distinct_per_band(keys), strict=True):
                members = {member for stored in table.getmany(*map(_key, wanted.tolist())) for member in stored}
                found += [int.from_bytes(member, "big") for member in members]
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None
        return np.array(found, dtype=np.int64)

    def collisions(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The `members`, counted once each."""
        windows, counts = np.unique(self.members(keys), return_counts=True)
        return windows, counts.astype(np.int64)


def _batches(items: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
