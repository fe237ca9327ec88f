"""An HTTP client for servers speaking the infini-gram API protocol (a JSON POST with
`index`, `query_type`, `query`, ...): the public infini-gram and infini-gram mini endpoints, or
a team's own `audit serve`.

Every response is checked for the `error` key, even with HTTP 200.  Answers fall in three kinds
(`Answer`), after what the public servers send (infini-gram api/api_server.py at 37d2929,
infini-gram-mini api/api_server.py at e628b09) and what their gateway sends:

- throttled: HTTP 429, or 403 without an `error` key (the gateway's `{"message": "Forbidden"}`
  to a client it finds too fast, lifted after about a minute).  The request waits (`Retry-After`
  when given, else `throttle_wait` seconds plus up to half as much again of jitter), holds every
  request to the host as long, and is asked again, for up to `throttle_patience` seconds in all;
  a throttled request never counts as a failed attempt nor starts the cool-down;
- transient: timeouts, dropped connections, 502/503/504, a 5xx that is not JSON, the proxy's
  `[Flask] Web request timed out` / `[Flask] Web request error`: retried with exponential backoff
  and jitter, `attempts` in all;
- deterministic: any other JSON `error` (400s, `[Flask] Internal server error: ...`, which the
  same request gets every time): raised at once, never retried.

How many requests are in flight to one host adapts to its answers (`audit.corpora.pacing`).
Successful responses go to a persistent cache (see `audit.corpora.cache`), so a re-run, or a
run resumed after an interruption, asks nothing already answered; `offline` mode answers from
the cache alone: a question it has no answer for raises `OfflineMiss`, which the signals record
as a failed check and the policy as `unknown`.  `max_requests` bounds the HTTP requests one
client sends; past it `RequestBudgetSpent` says so.  `stats` counts it all (the manifest records
it as the corpus's `requests`).
"""
from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import StrEnum

import requests
from pydantic import JsonValue

from audit.children import received
from audit.corpora.cache import JsonObject, ResponseCache, canonical
from audit.corpora.pacing import Bounds, HostPacer, Outcome, RequestBudget, pacer_for
from audit.errors import AuditError
from audit.responses import OversizeResponse, backoff_delay, read_limited, snippet
from audit.responses import retry_after as parse_retry_after

PUBLIC_ENDPOINT = "https://api.infini-gram.io/"
COOLDOWN_SECONDS = 30.0
# The public servers' own words for a failure of the backend they forward to: worth asking again.
TRANSIENT_ERRORS = ("[Flask] Web request timed out", "[Flask] Web request error")
RESUME_HINT = "run the same command again to resume: every answer so far is in the response cache"


class ApiError(AuditError, RuntimeError):
    """The API could not answer a question (a RuntimeError, so a signal records the check as
    failed and the policy tags the variant `unknown`)."""


class ApiQueryError(ApiError):
    """The server answered with `{"error": ...}`: the request itself was refused."""


class ApiResponseError(ApiError):
    """The response was not what the protocol promises: not JSON, not an object, or too large."""


class ApiUnavailable(ApiError):
    """No answer after every retry: the server is down, overloaded or unreachable."""


class ApiThrottled(ApiError):
    """Still refused as too fast after `throttle_patience` seconds of waiting."""


class RequestBudgetSpent(ApiError):
    """The run's request budget (`max_requests`) is spent: this question was not asked."""


class OfflineMiss(ApiError):
    """Offline, and the cache holds no answer to this request."""


class Answer(StrEnum):
    OK = "ok"
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    DETERMINISTIC = "deterministic"


@dataclass(frozen=True)
class ClientSettings:
    url: str = PUBLIC_ENDPOINT
    index: str = ""
    timeout: float = 20.0
    attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 8.0
    # In flight to one host: adapts between min_concurrency and concurrency (the upper bound,
    # which sizes callers' thread pools), starting at start_concurrency (capped at concurrency).
    concurrency: int = 8
    min_concurrency: int = 1
    start_concurrency: int = 4
    fast_seconds: float = 1.0
    throttle_wait: float = 60.0
    throttle_patience: float = 1800.0
    max_requests: int = 0
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
        if self.throttle_wait < 0 or self.throttle_patience < 0 or self.max_requests < 0:
            raise ValueError("throttle_wait, throttle_patience and max_requests must be 0 or more")
        self.bounds()

    def bounds(self) -> Bounds:
        low = min(self.min_concurrency, self.concurrency)
        return Bounds(low, max(low, min(self.start_concurrency, self.concurrency)), self.concurrency, self.fast_seconds)


def classify(status: int, body: bytes) -> Answer:
    """Which kind of answer this is (see the module docstring)."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if status == 429 or (status == 403 and error is None):
        return Answer.THROTTLED
    if status in (502, 503, 504) or (status >= 500 and (error is None or str(error).startswith(TRANSIENT_ERRORS))):
        return Answer.TRANSIENT
    return Answer.DETERMINISTIC if error is not None or status >= 400 else Answer.OK


@dataclass
class Sent:
    """One HTTP exchange: its kind, and what a retry or an error message needs of it."""

    answer: Answer
    status: int = 0
    body: bytes = b""
    failure: str = ""
    retry_after: float | None = None


class InfiniGramClient:
    """One index at one endpoint: cached, retried, paced protocol requests.

    Once a request has failed every attempt, requests fail at once for `COOLDOWN_SECONDS`
    instead of each retrying again, so an audit against an unreachable endpoint ends quickly,
    its checks `unknown`, rather than waiting out every backoff.  Throttling and deterministic
    errors never start the cool-down."""

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
        self._pacer: HostPacer = pacer_for(settings.url, settings.bounds())
        self._budget = RequestBudget(settings.max_requests)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.stats: dict[str, int] = dict.fromkeys(("requests", "cache_hits", "shared", "retries", "throttled", "dropped", "timeouts", "offline_misses", "not_asked"), 0)
        self.stats.update(max_requests=settings.max_requests, **self._pacer.snapshot())
        self._asking: dict[str, Future] = {}
        self._down_until = 0.0
        self._down_reason = ""

    @property
    def pool_size(self) -> int:
        """The most requests this client may ever have in flight at once (the upper bound of
        its adaptive concurrency): a caller issuing independent requests side by side sizes
        its thread pool by it."""
        return self.settings.concurrency

    def limit_requests(self, limit: int) -> None:
        """Send at most `limit` more HTTP requests (0: no limit), e.g. `audit check --max-requests`."""
        self._budget = RequestBudget(limit)
        with self._lock:
            self.stats["max_requests"] = limit

    @property
    def stopped_on_budget(self) -> bool:
        return self.stats["not_asked"] > 0

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

    def query(self, query_type: str, **params: JsonValue) -> JsonObject:
        """The response to one request (`index` is added), from the cache when it has it; a
        request another thread is already asking waits for that answer (`shared`)."""
        payload = {"index": self.settings.index, "query_type": query_type, **params}
        if self.cache is not None:
            cached = self.cache.get(self.settings.url, payload)
            if cached is not None:
                self._count("cache_hits")
                return cached
        key = canonical(payload)
        with self._lock:
            asked = self._asking.get(key)
            if asked is None:
                mine = self._asking[key] = Future()
        if asked is not None:
            self._count("shared")
            return copy.deepcopy(asked.result())
        try:
            response = self._answer(payload)
        except BaseException as error:
            mine.set_exception(error)
            raise
        else:
            mine.set_result(response)
            return response
        finally:
            with self._lock:
                del self._asking[key]

    def _answer(self, payload: JsonObject) -> JsonObject:
        """The server's answer to a request the cache lacks, stored there."""
        if self.settings.offline:
            self._count("offline_misses")
            asked = payload.get("query", payload.get("query_ids", ""))
            raise OfflineMiss(f"offline: no cached answer for {payload['query_type']} {asked!r} on {self.settings.index}")
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

    def _post(self, payload: JsonObject) -> JsonObject:
        settings = self.settings
        where = f"{settings.url} ({settings.index})"
        attempt, throttled_for = 0, 0.0
        while True:
            if (signum := received()) is not None:
                raise ApiUnavailable(f"{where}: not asked: the run was interrupted (signal {signum}); {RESUME_HINT}")
            if not self._budget.take():
                self._count("not_asked")
                raise RequestBudgetSpent(f"{where}: the request budget of {self._budget.limit:,} requests is spent, so this was not asked; {RESUME_HINT}")
            sent = self._send(payload, where)
            if sent.answer in (Answer.OK, Answer.DETERMINISTIC):
                return self._parse(sent.body, sent.status, where)
            if sent.answer is Answer.THROTTLED:
                wait = max(0.01, sent.retry_after if sent.retry_after is not None else settings.throttle_wait * (1 + self._rng.uniform(0, 0.5)))
                if throttled_for + wait > settings.throttle_patience:
                    raise ApiThrottled(f"{where}: throttled ({sent.failure}) for {throttled_for:.0f} s, the patience allowed (throttle_patience); {RESUME_HINT}")
                throttled_for += wait
                self._pacer.hold(wait)
                self._count("retries")
                continue
            attempt += 1
            if attempt >= settings.attempts:
                raise ApiUnavailable(f"{where}: no answer after {settings.attempts} attempts; last: {sent.failure}")
            self._count("retries")
            self._sleep(backoff_delay(attempt, settings.backoff, settings.max_backoff, self._rng, sent.retry_after))

    def _send(self, payload: JsonObject, where: str) -> Sent:
        """One POST under the host's pacer, which learns from how it went."""
        ticket = self._pacer.acquire(abandon=lambda: received() is not None)
        if ticket is None:
            raise ApiUnavailable(f"{where}: not asked: the run was interrupted; {RESUME_HINT}")
        backing_off, neutral = False, False
        try:
            self._count("requests")
            try:
                response = self._session().post(self.settings.url, json=payload, timeout=self.settings.timeout, stream=True)
                body = self._read(response, where)
            except requests.Timeout as error:
                backing_off = True
                self._count("timeouts")
                return Sent(Answer.TRANSIENT, failure=f"{type(error).__name__}: {error}")
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as error:
                neutral = True  # says nothing of the host's load, fast as it fails
                self._count("dropped")
                return Sent(Answer.TRANSIENT, failure=f"{type(error).__name__}: {error}")
            answer = classify(response.status_code, body)
            backing_off = answer is Answer.THROTTLED or response.status_code == 503
            if answer is Answer.THROTTLED:
                self._count("throttled")
            hint = parse_retry_after(response.headers.get("Retry-After"))
            return Sent(answer, response.status_code, body, f"HTTP {response.status_code}: {snippet(body)}", hint)
        finally:
            self._pacer.release(ticket, Outcome.NEUTRAL if neutral else self._pacer.outcome(ticket, backing_off))
            pacing = self._pacer.snapshot()
            with self._lock:
                self.stats.update(pacing)

    def _read(self, response: requests.Response, where: str) -> bytes:
        try:
            return read_limited(response, self.settings.max_response_bytes)
        except OversizeResponse as error:
            raise ApiResponseError(f"{where}: {error}") from None

    @staticmethod
    def _parse(body: bytes, status: int, where: str) -> JsonObject:
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
    if classify(response.status_code, response.content) is Answer.THROTTLED:
        return False, f"throttled (HTTP {response.status_code}): the service finds this client too fast; try again in a minute"
    try:
        data = InfiniGramClient._parse(response.content, response.status_code, settings.url)
    except ApiError as error:
        return False, str(error)
    return True, f"{int(data.get('count', 0)):,} tokens"
