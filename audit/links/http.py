"""Paced, retried requests to a Wikimedia API, each answered with its JSON object (see
`audit.links.api` for why they are paced and retried as they are)."""
from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

import requests
from pydantic import JsonValue

from audit import __version__
from audit.links.model import JsonObject, LinksError
from audit.responses import OversizeResponse, backoff_delay, read_limited, retry_after, seconds, snippet

DEFAULT_USER_AGENT = f"corpus-audit/{__version__} (langlinks signal; https://github.com/corpus-audit/corpus-audit)"
# Past this many bytes of query string a request is POSTed: caches refuse long URLs (HTTP 414)
# before the API sees them, and 50 titles in a non-Latin script reach that.
LONG_QUERY = 4096
# Connection failures that a later try may not meet; a cut-off body arrives as ChunkedEncodingError.
TRANSIENT = (requests.Timeout, requests.ConnectionError, requests.exceptions.ChunkedEncodingError)


class LinksApiError(LinksError):
    """A request that failed after every retry, or that the API refused; the message names the
    wiki and its host, and what happened."""


@dataclass(frozen=True)
class HttpSettings:
    """How to ask.  `backoff` is the first wait between tries; it doubles, with jitter, up to
    `max_backoff`, which also caps a server's Retry-After, so a lookup never stalls for long."""

    timeout: float = 30.0
    attempts: int = 5
    backoff: float = 1.0
    max_backoff: float = 60.0
    min_interval: float = 0.1
    maxlag: int = 5
    user_agent: str = DEFAULT_USER_AGENT
    max_response_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.timeout <= 0 or self.max_response_bytes < 1:
            raise ValueError("attempts, timeout and max_response_bytes must be positive")
        if min(self.backoff, self.max_backoff, self.min_interval, self.maxlag) < 0:
            raise ValueError("backoff, max_backoff, min_interval and maxlag cannot be negative")
        if not self.user_agent.strip():
            raise ValueError("user_agent is required: Wikimedia refuses clients that do not say who they are")


DEFAULT_HTTP = HttpSettings()


class ApiClient:
    """Paced, retried requests to one API, each answered with its JSON object."""

    def __init__(self, endpoint: str, settings: HttpSettings, session: requests.Session | None, sleep: Callable[[float], None]) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"endpoint {endpoint!r} is not an http(s) URL")
        self.endpoint = endpoint
        self.settings = settings
        self.stats = {"requests": 0, "retries": 0}
        self._given_session = session
        self._local = threading.local()
        self._sleep = sleep
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._pace = threading.Lock()
        self._last_start = -math.inf

    def _session(self) -> requests.Session:
        if self._given_session is not None:
            return self._given_session
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _wait_turn(self) -> None:
        """Wait until `min_interval` has passed since the last request started, in any thread.
        The wait holds the pacing lock, so a thread that woke late pushes the next start back
        instead of leaving it closer than the interval."""
        with self._pace:
            wait = self._last_start + self.settings.min_interval - time.monotonic()
            if wait > 0:
                self._sleep(wait)
            self._last_start = time.monotonic()
        with self._lock:
            self.stats["requests"] += 1

    def ask(self, url: str, params: dict[str, str], where: str) -> JsonObject:
        settings = self.settings
        params = {**params, "format": "json", "maxlag": str(settings.maxlag)}
        post = len(urlencode(params)) > LONG_QUERY
        failure = ""
        for attempt in range(1, settings.attempts + 1):
            hint: float | None = None
            self._wait_turn()
            try:
                response = self._session().request(
                    "POST" if post else "GET", url, params=None if post else params, data=params if post else None,
                    headers={"User-Agent": settings.user_agent}, timeout=settings.timeout, stream=True,
                )
                body = self._read(response, where)
            except TRANSIENT as error:
                failure = f"{type(error).__name__}: {error}"
            except requests.RequestException as error:
                raise LinksApiError(f"{where}: {type(error).__name__}: {error}") from None
            else:
                status = response.status_code
                if status == 429 or status >= 500:
                    failure, hint = f"HTTP {status}: {snippet(body)}", retry_after(response.headers.get("Retry-After"))
                elif status >= 400:
                    raise LinksApiError(f"{where}: HTTP {status}: {snippet(body)}")
                else:
                    try:
                        data = json.loads(body)
                    except ValueError:
                        failure = f"HTTP {status} response is not JSON: {snippet(body)}"
                    else:
                        if not isinstance(data, dict):
                            raise LinksApiError(f"{where}: the response is a JSON {type(data).__name__}, not an object")
                        error = data.get("error")
                        if error is None:
                            return data
                        if not (isinstance(error, dict) and error.get("code") == "maxlag"):
                            raise LinksApiError(f"{where}: refused: {_error_text(error)}")
                        failure = f"maxlag: {error.get('info', '')}"
                        hint = retry_after(response.headers.get("Retry-After")) or seconds(error.get("lag"))
            if attempt < settings.attempts:
                with self._lock:
                    self.stats["retries"] += 1
                self._sleep(backoff_delay(attempt, settings.backoff, settings.max_backoff, self._rng, hint))
        raise LinksApiError(f"{where}: no answer after {settings.attempts} attempts; last: {failure}")

    def _read(self, response: requests.Response, where: str) -> bytes:
        try:
            return read_limited(response, self.settings.max_response_bytes)
        except OversizeResponse as error:
            raise LinksApiError(f"{where}: {error}") from None


def _error_text(error: JsonValue) -> str:
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('info', '')}".rstrip(": ")
    return str(error)
