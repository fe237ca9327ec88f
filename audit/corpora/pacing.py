"""How fast to ask one host: a concurrency that adapts to its answers, and a pause it imposes.

The public infini-gram services sit behind a gateway that refuses a client it finds too fast
(HTTP 403 `{"message": "Forbidden"}`, or 429) for about a minute.  Asking harder then only
prolongs the refusal, so every client of one host shares one `HostPacer`:

- at most `limit` requests are in flight; the limit starts at `start` and rises by one after
  `limit` answers in a row came back within `fast_seconds` (additive increase), and halves on a
  throttled answer, a timeout or an overloaded server (multiplicative decrease), never below
  `low` nor above `high`.  Only a request sent since the last decrease can halve it again, so a
  burst of refusals to requests sent side by side counts once;
- a throttled answer holds every request to the host until the wait it was given has passed.

Only `fast_seconds` and holds are measured in time: how the limit moves follows from the
sequence of outcomes alone (what the tests check).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit


class Outcome(StrEnum):
    """What one request's answer says about the host's load."""

    FAST = "fast"
    SLOW = "slow"
    BACK_OFF = "back off"
    NEUTRAL = "neutral"


@dataclass(frozen=True)
class Bounds:
    low: int
    start: int
    high: int
    fast_seconds: float

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.start <= self.high:
            raise ValueError(f"concurrency bounds must satisfy 1 <= min ({self.low}) <= start ({self.start}) <= max ({self.high})")
        if self.fast_seconds <= 0:
            raise ValueError("fast_seconds must be positive")


class Ticket:
    """One request's place: which decrease epoch it was sent in, and when."""

    __slots__ = ("epoch", "sent")

    def __init__(self, epoch: int, sent: float) -> None:
        self.epoch, self.sent = epoch, sent


class HostPacer:
    """The in-flight limit and the hold of one host (see the module docstring)."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.limit = bounds.start
        self.in_flight = 0
        self.hold_until = 0.0
        self.epoch = 0
        self.streak = 0
        self.raised = 0
        self.halved = 0
        self._ready = threading.Condition()

    def acquire(self, abandon: Callable[[], bool] = lambda: False) -> Ticket | None:
        """Wait for a place under the limit and past any hold; None if `abandon()` turns true
        meanwhile (it is asked at least once a second, so an interrupted run need not wait
        out a minute's hold)."""
        with self._ready:
            while True:
                if abandon():
                    return None
                wait = self.hold_until - time.monotonic()
                if wait <= 0 and self.in_flight < self.limit:
                    self.in_flight += 1
                    return Ticket(self.epoch, time.monotonic())
                self._ready.wait(timeout=min(wait, 1.0) if wait > 0 else 1.0)

    def release(self, ticket: Ticket, outcome: Outcome) -> None:
        """Give the place back and adapt the limit to what the answer said."""
        with self._ready:
            self.in_flight -= 1
            self._adapt(ticket, outcome)
            self._ready.notify_all()

    def hold(self, seconds: float) -> None:
        """Ask nothing of this host for `seconds` (a throttled answer's wait)."""
        with self._ready:
            self.hold_until = max(self.hold_until, time.monotonic() + seconds)

    def outcome(self, ticket: Ticket, backing_off: bool) -> Outcome:
        if backing_off:
            return Outcome.BACK_OFF
        return Outcome.FAST if time.monotonic() - ticket.sent <= self.bounds.fast_seconds else Outcome.SLOW

    def _adapt(self, ticket: Ticket, outcome: Outcome) -> None:
        if outcome is Outcome.BACK_OFF:
            self.streak = 0
            if ticket.epoch == self.epoch and self.limit > self.bounds.low:
                self.limit = max(self.bounds.low, self.limit // 2)
                self.halved += 1
            if ticket.epoch == self.epoch:
                self.epoch += 1
        elif outcome is Outcome.FAST:
            self.streak += 1
            if self.streak >= self.limit and self.limit < self.bounds.high:
                self.limit += 1
                self.raised += 1
                self.streak = 0
        elif outcome is Outcome.SLOW:
            self.streak = 0

    def snapshot(self) -> dict[str, int]:
        with self._ready:
            return {"concurrency": self.limit, "concurrency_raised": self.raised, "concurrency_halved": self.halved}


_PACERS: dict[tuple[str, Bounds], HostPacer] = {}
_PACERS_LOCK = threading.Lock()


def origin(url: str) -> str:
    """scheme://host:port, the unit a gateway throttles."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def pacer_for(url: str, bounds: Bounds) -> HostPacer:
    """The pacer every client of this host with these bounds shares, in this process."""
    key = (origin(url), bounds)
    with _PACERS_LOCK:
        pacer = _PACERS.get(key)
        if pacer is None:
            pacer = _PACERS[key] = HostPacer(bounds)
        return pacer


class RequestBudget:
    """At most `limit` HTTP requests (0: no limit), counted across every thread of a client."""

    def __init__(self, limit: int = 0) -> None:
        if limit < 0:
            raise ValueError("max_requests must be 0 (no limit) or more")
        self.limit = limit
        self.spent = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Whether one more request may be sent (and, if so, count it)."""
        with self._lock:
            if self.limit and self.spent >= self.limit:
                return False
            self.spent += 1
            return True
