"""An HTTP client for servers speaking the infini-gram API protocol (a JSON POST with
`index`, `query_type`, `query`, ...): the public infini-gram and infini-gram mini endpoints, or
a team's own `audit serve`.

Every response is checked for the `error` key, even with HTTP 200.  5xx, 429, timeouts and
connection failures are retried with exponential backoff and jitter; a bounded number of
requests is in flight at once across all threads.  Successful responses go to a persistent
cache (see `audit.corpora.cache`), so a re-run is free and `offline` mode answers from the cache
alone: a question it has no answer for raises `OfflineMiss`, which the signals record as a
failed check and the policy as `unknown`.
"""
from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from audit.corpora.cache import ResponseCache
from audit.responses import OversizeResponse, backoff_delay, read_limited, snippet
from audit.responses import retry_after as parse_retry_after

PUBLIC_ENDPOINT = "https://api.infini-gram.io/"
COOLDOWN_SECONDS = 30.0


class ApiError(RuntimeError):
    """The API could not answer a question (a RuntimeError, so a signal records the check as
    failed and the policy tags the variant `unknown`)."""


class ApiQueryError(ApiError):
    """The server answered with `{"error": ...}`: the request itself was refused."""


class ApiResponseError(ApiError):
    """The response was not what the protocol promises: not JSON, not an object, or too large."""


class ApiUnavailable(ApiError):
    """No answer after every retry: the server is down, overloaded or unreachable."""


class OfflineMiss(ApiError):
    """Offline, and the cache holds no answer to this request."""


@dataclass(frozen=True)
class ClientSettings:
    url: str = PUBLIC_ENDPOINT
    index: str = ""
    timeout: float = 20.0
    attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 8.0
    concurrency: int = 4
    max_response_bytes: int = 16 << 20
    offline: bool = False
    # Sent as `Authorization: Bearer TOKEN` to a server that asks for one (`audit serve --token`);
    # never part of a cache key, a manifest or a repr.
    token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} is not an http(s) URL")
        if not self.index:
            raise ValueError("index is required (an infini-gram index id such as v4_pileval_llama)")
        if self.attempts < 1 or self.concurrency < 1 or self.timeout <= 0 or self.max_response_bytes < 1:
            raise ValueError("attempts, concurrency, timeout and max_response_bytes must be positive")


class InfiniGramClient:
    """One index at one endpoint: cached, retried, bounded-concurrency protocol requests.

    Once a request has failed every attempt, requests fail at once for `COOLDOWN_SECONDS`
    instead of each retrying again, so an audit against an unreachable endpoint ends quickly,
    its checks `unknown`, rather than waiting out every backoff."""

    def __init__(
        self,
        settings: ClientSettings,
        cache: ResponseCache | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.cache = cache
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "cache_hits": 0, "retries": 0, "offline_misses": 0}
        self._down_until = 0.0
        self._down_reason = ""

    @property
    def pool_size(self) -> int:
        """The most requests this client may ever have in flight at once: a caller issuing
        independent requests side by side sizes its thread pool by it."""
        return self.settings.concurrency

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            if self.settings.token:
                session.headers["Authorization"] = f"Bearer {self.settings.token}"
        return session

    def query(self, query_type: str, **params: Any) -> dict[str, Any]:
        """The response to one request (`index` is added), from the cache when it has it."""
        payload = {"index": self.settings.index, "query_type": query_type, **params}
        if self.cache is not None:
            cached = self.cache.get(self.settings.url, payload)
            if cached is not None:
                self._count("cache_hits")
                return cached
        if self.settings.offline:
            self._count("offline_misses")
            raise OfflineMiss(f"offline: no cached answer for {query_type} {params.get('query', params.get('query_ids', ''))!r} on {self.settings.index}")
        if time.monotonic() < self._down_until:
            raise ApiUnavailable(f"{self.settings.url} ({self.settings.index}): not retried for {COOLDOWN_SECONDS:.0f} s after: {self._down_reason}")
        try:
            response = self._post(payload)
        except ApiUnavailable as error:
            with self._lock:
                self._down_until, self._down_reason = time.monotonic() + COOLDOWN_SECONDS, str(error)
            raise
        if self.cache is not None:
            self.cache.put(self.settings.url, payload, response)
        return response

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        settings = self.settings
        where = f"{settings.url} ({settings.index})"
        failure = ""
        for attempt in range(1, settings.attempts + 1):
            retry_after: float | None = None
            try:
                with self._slots:
                    self._count("requests")
                    response = self._session().post(settings.url, json=payload, timeout=settings.timeout, stream=True)
                    body = self._read(response, where)
            except (requests.Timeout, requests.ConnectionError) as error:
                failure = f"{type(error).__name__}: {error}"
            else:
                if response.status_code >= 500 or response.status_code == 429:
                    failure = f"HTTP {response.status_code}: {snippet(body)}"
                    retry_after = parse_retry_after(response.headers.get("Retry-After"))
                else:
                    return self._parse(body, response.status_code, where)
            if attempt < settings.attempts:
                self._count("retries")
                self._sleep(backoff_delay(attempt, settings.backoff, settings.max_backoff, self._rng, retry_after))
        raise ApiUnavailable(f"{where}: no answer after {settings.attempts} attempts; last: {failure}")

    def _read(self, response: requests.Response, where: str) -> bytes:
        try:
            return read_limited(response, self.settings.max_response_bytes)
        except OversizeResponse as error:
            raise ApiResponseError(f"{where}: {error}") from None

    @staticmethod
    def _parse(body: bytes, status: int, where: str) -> dict[str, Any]:
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiResponseError(f"{where}: HTTP {status} response is not JSON: {snippet(body)}") from None
        if not isinstance(data, dict):
            raise ApiResponseError(f"{where}: HTTP {status} response is a JSON {type(data).__name__}, not an object")
        if "error" in data:
            raise ApiQueryError(f"{where}: {data['error']}")
        if status >= 400:
            raise ApiQueryError(f"{where}: HTTP {status}: {snippet(body)}")
        return data


def probe(client: InfiniGramClient) -> tuple[bool, str]:
    """Whether the endpoint answers a trivial query for this index (a count of the empty
    string: the index's size in tokens), without the cache or retries."""
    settings = client.settings
    try:
        response = client._session().post(settings.url, json={"index": settings.index, "query_type": "count", "query": ""}, timeout=settings.timeout)
    except requests.RequestException as error:
        return False, f"unreachable ({type(error).__name__})"
    try:
        data = InfiniGramClient._parse(response.content, response.status_code, settings.url)
    except ApiError as error:
        return False, str(error)
    return True, f"{int(data.get('count', 0)):,} tokens"
