"""The index's LSH bands in Redis, in datasketch's own Redis storage, to share one LSH between
processes and machines."""
from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

from audit.neardup.store import NearDupError, ProgressHook
from audit.neardup.tokens import NearDupParams
from audit.timestamps import utc_timestamp

READY = b":ready"


def redis_settings(url: str) -> dict[str, Any]:
    """datasketch's `redis` storage settings from a redis://[:password@]host[:port][/db] URL."""
    parsed = urlparse(url)
    if parsed.scheme != "redis" or not parsed.hostname:
        raise NearDupError(f"{url}: not a redis://host[:port][/db] URL")
    try:
        db = int(parsed.path.strip("/") or 0)
        port = parsed.port or 6379
    except ValueError:
        raise NearDupError(f"{url}: not a redis://host[:port][/db] URL") from None
    settings: dict[str, Any] = {"host": parsed.hostname, "port": port, "db": db}
    if parsed.password:
        settings["password"] = unquote(parsed.password)
    return settings



class RedisLSH:
    """The index's bands in Redis, as `datasketch.MinHashLSH` stores them, under a name derived
    from the near-duplicate manifest's hash: another index's bands can never be read for this
    one.  Keys are window numbers as 8 bytes, not pickles, so nothing read back is unpickled."""

    def __init__(self, url: str, digest: str, params: NearDupParams) -> None:
        try:
            import redis
        except ImportError:
            raise NearDupError(f"{url}: Redis needs the redis package: pip install 'corpus-audit[redis]'") from None
        from datasketch import MinHashLSH

        self.url = url
        self.params = params
        self.basename = f"corpus-audit:minhash:{digest}".encode()
        settings = redis_settings(url)
        self._client = redis.Redis(**settings)
        self._errors = (redis.exceptions.RedisError,)
        try:
            self.lsh = MinHashLSH(
                num_perm=params.num_perm,
                params=(params.bands, params.rows),
                storage_config={"type": "redis", "basename": self.basename, "redis": settings},
                prepickle=False,
            )
        except self._errors as error:
            raise NearDupError(f"{url}: {error}") from None

    def _ready_key(self) -> bytes:
        return self.basename + READY

    def loaded(self) -> dict | None:
        try:
            raw = self._client.get(self._ready_key())
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None
        return json.loads(raw) if raw else None

    def require_loaded(self, directory: Path, windows: int) -> None:
        state = self.loaded()
        if state is None or state.get("windows") != windows:
            raise NearDupError(f"{self.url}: the near-duplicate index of {directory} is not loaded there; load it with `audit index minhash {directory} --redis {self.url}`")

    def load(self, signatures: np.ndarray, progress: ProgressHook | None = None) -> None:
        """Replace whatever is stored under this name with the index's bands, then mark it
        loaded (last, so a load cut short is never taken for a whole one)."""
        from datasketch import MinHash

        try:
            self._client.delete(self._ready_key())
            for keys in _batches(self._client.scan_iter(match=self.basename + b"*", count=1000), 1000):
                self._client.delete(*keys)
            total = len(signatures)
            # A container for the values: the bands only read `hashvalues`, whatever the family.
            permutations = MinHash(num_perm=self.params.num_perm, seed=self.params.seed, scheme="affine32").permutations
            with self.lsh.insertion_session(buffer_size=10000) as session:
                for at in range(total):
                    sketch = MinHash(hashvalues=np.asarray(signatures[at]), permutations=permutations, scheme="affine32")
                    session.insert(_key(at), sketch, check_duplication=False)
                    if progress and (at % 4096 == 0 or at == total - 1):
                        progress("redis", at + 1, total)
            self._client.set(self._ready_key(), json.dumps({"windows": total, "loaded": utc_timestamp()}))
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None

    def band_members(self, chunks: np.ndarray, keys: np.ndarray) -> list[np.ndarray]:
        """Per band, the windows stored under any chunk's key (as `MinHashLSH.query` finds
        them for every chunk), with one pipelined request per band."""
        per_band = []
        try:
            for band, (start, end) in enumerate(self.lsh.hashranges):
                _, first = np.unique(keys[:, band], return_index=True)
                wanted = [self.lsh._H(chunks[i, start:end]) for i in first.tolist()]
                members = {int.from_bytes(member, "big") for found in self.lsh.hashtables[band].getmany(*wanted) for member in found}
                if members:
                    per_band.append(np.array(sorted(members), dtype=np.int64))
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None
        return per_band


def _key(window: int) -> bytes:
    return struct.pack(">Q", window)


def _batches(items: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


