"""A persistent cache of model outputs, so a probe run can be replayed byte for byte, re-run
without asking the model, and answered `--offline`.

Outputs are keyed by `Request.key(model_id)`: the model (with its file's fingerprint, or its
endpoint), the messages and the decoding settings.  Only answers are stored, never errors, so a
failure is asked again next time.  The model behind a cache miss is loaded only when a miss
must be answered: a fully cached or offline run never loads or calls it.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from audit.probes.generation import Backend, Output, ProbeError, Progress, Request, scored
from audit.probes.membership import TokenScores
from audit.store import SqliteStore
from audit.timestamps import utc_timestamp

SCHEMA = """
CREATE TABLE IF NOT EXISTS outputs (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL, text TEXT NOT NULL,
    finish_reason TEXT, created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS readings (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, tokens INTEGER NOT NULL, arrays BLOB NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS scores (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL, logprobs TEXT NOT NULL,
    created TEXT NOT NULL
);
"""
OFFLINE_MISS = "offline: this prompt is not in the probe cache"
OFFLINE_READING = "offline: this text's reading is not in the probe cache"
READ_CHUNK = 16


def reading_key(model_id: str, max_tokens: int, text: str) -> str:
    """What a text's reading is stored by: the model, the token cap and the text."""
    payload = json.dumps({"model": model_id, "max_tokens": max_tokens, "text": text}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ProbeCache:
    def __init__(self, path: Path) -> None:
        self._store = SqliteStore(path, SCHEMA, "probe cache", ProbeError)
        self.path = self._store.path
        self._run = self._store.run

    def get(self, key: str, request: Request) -> Output | None:
        if request.choices:
            return self._scores(key, request)
        rows = self._run("SELECT text, finish_reason FROM outputs WHERE key = ?", (key,))
        if not rows:
            return None
        text, finish_reason = rows[0]
        if not isinstance(text, str):
            raise ProbeError(f"{self.path}: a damaged entry {key[:12]}...; delete the file to start afresh")
        return Output(text, cached=True, finish_reason=finish_reason)

    def _scores(self, key: str, request: Request) -> Output | None:
        rows = self._run("SELECT logprobs FROM scores WHERE key = ?", (key,))
        if not rows:
            return None
        try:
            logprobs = json.loads(rows[0][0])
            valid = isinstance(logprobs, list) and len(logprobs) == len(request.choices) and all(isinstance(value, float) for value in logprobs)
        except (TypeError, ValueError):
            valid = False
        if not valid:
            raise ProbeError(f"{self.path}: a damaged scores entry {key[:12]}...; delete the file to start afresh")
        return replace(scored(request.choices, logprobs), cached=True)

    def put(self, key: str, model_id: str, request: Request, output: Output) -> None:
        if output.text is None:
            return
        record = json.dumps(request.to_dict(), ensure_ascii=False, sort_keys=True)
        if request.choices:
            if output.logprobs is not None:
                self._run("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?)", (key, model_id, record, json.dumps(list(output.logprobs)), utc_timestamp()))
            return
        self._run("INSERT OR REPLACE INTO outputs VALUES (?, ?, ?, ?, ?, ?)", (key, model_id, record, output.text, output.finish_reason, utc_timestamp()))

    def reading(self, key: str) -> TokenScores | None:
        """A text's stored TokenScores: three float64 arrays of `tokens` values, end to end."""
        rows = self._run("SELECT tokens, arrays FROM readings WHERE key = ?", (key,))
        if not rows:
            return None
        tokens, arrays = rows[0]
        if not isinstance(tokens, int) or not isinstance(arrays, bytes) or len(arrays) != 3 * 8 * tokens:
            raise ProbeError(f"{self.path}: a damaged reading {key[:12]}...; delete the file to start afresh")
        logprobs, means, stds = np.frombuffer(arrays, dtype="<f8").reshape(3, tokens)
        return TokenScores(logprobs, means, stds)

    def put_reading(self, key: str, model_id: str, read: TokenScores) -> None:
        arrays = np.concatenate([read.logprobs, read.means, read.stds]).astype("<f8").tobytes()
        self._run("INSERT OR REPLACE INTO readings VALUES (?, ?, ?, ?, ?)", (key, model_id, read.tokens, arrays, utc_timestamp()))

    def count(self, model_id: str | None = None) -> int:
        if model_id is None:
            return self._run("SELECT COUNT(*) FROM outputs", ())[0][0]
        return self._run("SELECT COUNT(*) FROM outputs WHERE model = ?", (model_id,))[0][0]

    def count_scores(self) -> int:
        return self._run("SELECT COUNT(*) FROM scores", ())[0][0]


class CachedModel:
    """A backend behind the cache: hits are answered from it, misses by the backend (loaded on
    the first miss by `load`), or, offline, with an error that leaves the probe undetermined.

    One `generate` call runs at a time, cache reads included: a local model is never run from
    two threads at once (a server's jobs share one), and a caller waiting behind another finds
    what that one just stored instead of generating it again.  A remote backend loses little:
    it sends each call's requests concurrently."""

    def __init__(self, name: str, model_id: str, description: dict[str, object], load: Callable[[], Backend], cache: ProbeCache | None, *, offline: bool = False,
                 reads_probabilities: bool = False, follows_schemas: bool = False) -> None:
        """`reads_probabilities`: the backend gives the log-probabilities of a given text, so
        it scores requests with choices and reads texts for membership (a local model does; an
        OpenAI-compatible endpoint does not).  `follows_schemas`: the endpoint constrains a
        reply to a request's JSON schema (structured outputs)."""
        self.name = name
        self.reads_probabilities = reads_probabilities
        self.follows_schemas = follows_schemas
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

    def token_scores(self, texts: Sequence[str], max_tokens: int, progress: Progress | None = None) -> list[TokenScores | str]:
        """Each text read once by the model (`TokenScores`), from the cache where it was read
        before, else by the backend; or why it could not be: offline and not cached, or a
        backend that gives no per-token probabilities (an OpenAI-compatible endpoint)."""
        with self._generating:
            keys = [reading_key(self.model_id, max_tokens, text) for text in texts]
            found: list[TokenScores | str | None] = [self.cache.reading(key) if self.cache else None for key in keys]
            missing = [index for index, read in enumerate(found) if read is None]
            if progress and len(missing) < len(texts):
                progress(len(texts) - len(missing))
            if missing:
                answered = self._read([texts[index] for index in missing], max_tokens, progress)
                for index, read in zip(missing, answered, strict=True):
                    found[index] = read
                    if self.cache is not None and isinstance(read, TokenScores):
                        self.cache.put_reading(keys[index], self.model_id, read)
            return [read for read in found if read is not None]

    def _read(self, texts: list[str], max_tokens: int, progress: Progress | None) -> list[TokenScores | str]:
        if self.offline:
            why = [OFFLINE_READING] * len(texts)
        elif not self.reads_probabilities:
            why = ["the model's endpoint gives no per-token probabilities of a given text"] * len(texts)
        else:
            try:
                reader = self.backend()
                read: list[TokenScores | str] = []
                for start in range(0, len(texts), READ_CHUNK):
                    read += reader.token_scores(texts[start : start + READ_CHUNK], max_tokens)  # type: ignore[attr-defined]
                    if progress:
                        progress(len(texts[start : start + READ_CHUNK]))
                return read
            except ProbeError as error:
                why = [str(error)] * len(texts)
        if progress:
            progress(len(texts))
        return list(why)

    def _generate(self, requests: Sequence[Request], progress: Progress | None) -> list[Output]:
        keys = [request.key(self.model_id) for request in requests]
        outputs: list[Output | None] = [self.cache.get(key, request) if self.cache else None for key, request in zip(keys, requests, strict=True)]
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
