"""What every HTTP client of the project does alike with an answer: read it whole but never more
than it is willing to hold (a misbehaving server, or a proxy's error page in a loop, must not fill
the memory), quote a bit of it in an error, and work out how long to wait before trying again."""
from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import requests

from audit.errors import AuditError


class OversizeResponse(AuditError):
    """The answer is over the limit; the message says by how much, for the caller to place."""


def read_limited(response: requests.Response, limit: int) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        response.close()
        raise OversizeResponse(f"response of {int(declared)} bytes is over the limit of {limit} bytes")
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=1 << 16):
        size += len(chunk)
        if size > limit:
            response.close()
            raise OversizeResponse(f"response is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def snippet(body: bytes, limit: int = 200) -> str:
    text = body[:limit].decode("utf-8", errors="replace")
    return text + ("..." if len(body) > limit else "")


def seconds(value: Any) -> float | None:
    """A finite, non-negative number of seconds, or None for anything else."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, number) if math.isfinite(number) else None


def retry_after(value: str | None) -> float | None:
    """A Retry-After header in seconds: it is either a number of seconds or an HTTP date."""
    if not value:
        return None
    found = seconds(value)
    if found is not None:
        return found
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff_delay(attempt: int, backoff: float, max_backoff: float, rng: random.Random, hint: float | None = None) -> float:
    """Exponential backoff with jitter (half fixed, half random), or the server's hint when
    longer; at most `max_backoff` either way, so a client never stalls for long."""
    base = min(max_backoff, backoff * 2 ** (attempt - 1))
    delay = base / 2 + rng.uniform(0, base / 2)
    return min(max_backoff, max(delay, hint or 0.0))
