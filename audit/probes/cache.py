"""A persistent cache of model outputs, so a probe run can be replayed byte for byte, re-run
without asking the model, and answered `--offline`.

Outputs are keyed by `Request.key(model_id)`: the model (with its file's fingerprint, or its
endpoint), the messages and the decoding settings.  Only answers are stored, never errors, so a
failure is asked again next time.  The model behind a cache miss is loaded only when a miss
must be answered: a fully cached or offline run never loads or calls it.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from audit.probes.generation import Backend, Output, ProbeError, Progress, Request
from audit.store import SqliteStore
from audit.timestamps import utc_timestamp

SCHEMA = """
CREATE TABLE IF NOT EXISTS outputs (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL, text TEXT NOT NULL,
    finish_reason TEXT, created TEXT NOT NULL
);
"""
OFFLINE_MISS = "offline: this prompt is not in the probe cache"


class ProbeCache:
    def __init__(self, path: Path) -> None:
        self._store = SqliteStore(path, SCHEMA, "probe cache", ProbeError)
        self.path = self._store.path
        self._run = self._store.run

    def get(self, key: str) -> Output | None:
        rows = self._run("SELECT text, finish_reason FROM outputs WHERE key = ?", (key,))
        if not rows:
            return None
        text, finish_reason = rows[0]
        if not isinstance(text, str):
            raise ProbeError(f"{self.path}: a damaged entry {key[:12]}...; delete the file to start afresh")
        return Output(text, cached=True, finish_reason=finish_reason)

    def put(self, key: str, model_id: str, request: Request, output: Output) -> None:
        if output.text is None:
            return
        record = json.dumps(request.to_dict(), ensure_ascii=False, sort_keys=True)
        self._run("INSERT OR REPLACE INTO outputs VALUES (?, ?, ?, ?, ?, ?)", (key, model_id, record, output.text, output.finish_reason, utc_timestamp()))

    def count(self, model_id: str | None = None) -> int:
        if model_id is None:
            return self._run("SELECT COUNT(*) FROM outputs", ())[0][0]
        return self._run("SELECT COUNT(*) FROM outputs WHERE model = ?", (model_id,))[0][0]


class CachedModel:
    """A backend behind the cache: hits are answered from it, misses by the backend (loaded on
    the first miss by `load`), or, offline, with an error that leaves the probe undetermined.

    One `generate` call runs at a time, cache reads included: a local model is never run from
    two threads at once (a server's jobs share one), and a caller waiting behind another finds
    what that one just stored instead of generating it again.  A remote backend loses little:
    it sends each call's requests concurrently."""

    def __init__(self, name: str, model_id: str, description: dict[str, object], load: Callable[[], Backend], cache: ProbeCache | None, *, offline: bool = False) -> None:
        self.name = name
        self.model_id = model_id
        self._description = description
        self._load = load
        self._backend: Backend | None = None
        self._lock = threading.Lock()
        self._generating = threading.Lock()
        self.cache = cache
        self.offline = offline
        self.hits = 0
        self.asked = 0

    def describe(self) -> dict[str, object]:
        return {**self._description, "name": self.name, "model_id": self.model_id, "cache": str(self.cache.path) if self.cache else None, "offline": self.offline}

    def backend(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = self._load()
            return self._backend

    def answered(self) -> dict[str, int]:
        """Prompts answered so far from the cache and by the model."""
        with self._generating:
            return {"from_cache": self.hits, "from_model": self.asked}

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Output]:
        with self._generating:
            return self._generate(requests, progress)

    def _generate(self, requests: Sequence[Request], progress: Progress | None) -> list[Output]:
        keys = [request.key(self.model_id) for request in requests]
        outputs: list[Output | None] = [self.cache.get(key) if self.cache else None for key in keys]
        hits = sum(output is not None for output in outputs)
        self.hits += hits
        if progress and hits:
            progress(hits)
        missing = [index for index, output in enumerate(outputs) if output is None]
        if missing and self.offline:
            for index in missing:
                outputs[index] = Output(None, error=OFFLINE_MISS)
            if progress:
                progress(len(missing))
        elif missing:
            self.asked += len(missing)
            try:
                answered = self.backend().generate([requests[index] for index in missing], progress)
            except ProbeError as error:
                answered = [Output(None, error=str(error))] * len(missing)
            for index, output in zip(missing, answered, strict=True):
                outputs[index] = output
                if self.cache is not None:
                    self.cache.put(keys[index], self.model_id, requests[index], output)
        return [output for output in outputs if output is not None]
