"""The API client against small stdlib HTTP servers on 127.0.0.1 that misbehave on purpose
(failures, malformed, oversize and error answers: tests/replay/scripted.py).  No HTTP is
patched or mocked."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from replay.scripted import Script, serve_script, use

from audit.corpora.api import ApiOptions
from audit.corpora.client import (
    ApiQueryError,
    ApiResponseError,
    ApiUnavailable,
    ClientSettings,
    InfiniGramClient,
)


@pytest.fixture
def scripted() -> Iterator[tuple[Script, str]]:
    script = Script((200, b"{}", {}))
    with serve_script(script) as url:
        yield script, url


def client(url: str, **settings) -> InfiniGramClient:
    return InfiniGramClient(ClientSettings(url=url, index="test", backoff=0.01, max_backoff=0.05, **settings))


OK = (200, json.dumps({"count": 7, "approx": False}).encode(), {})


def test_retries_a_server_that_fails_then_answers(scripted):
    script, url = scripted
    use(script, (500, b'{"error": "[Flask] Web request timed out. Please try again later."}', {}), (502, b"bad gateway", {}), (503, b"", {"Retry-After": "0"}), OK)
    api = client(url, attempts=5)
    assert api.query("count", query="x")["count"] == 7
    assert script.calls == 4 and api.stats["retries"] == 3


def test_gives_up_after_the_last_attempt(scripted):
    script, url = scripted
    use(script, (503, b"overloaded", {}))
    with pytest.raises(ApiUnavailable, match="no answer after 3 attempts; last: HTTP 503: overloaded"):
        client(url, attempts=3).query("count", query="x")
    assert script.calls == 3


def test_retries_timeouts_and_rate_limits(scripted):
    script, url = scripted
    use(script, (200, b"{}", {"sleep": "0.6"}), (429, b"slow down", {"Retry-After": "0.01"}), OK)
    api = client(url, attempts=3, timeout=0.2)
    assert api.query("count", query="x")["count"] == 7 and api.stats["retries"] == 2


def test_error_key_on_http_200_is_an_error_and_not_retried(scripted):
    script, url = scripted
    use(script, (200, b'{"error": "Please limit your input to <= 1000 characters!"}', {}))
    with pytest.raises(ApiQueryError, match="Please limit your input"):
        client(url).query("count", query="x")
    assert script.calls == 1


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ((200, b"<html>maintenance</html>", {}), "response is not JSON: <html>maintenance</html>"),
        ((200, b"[1, 2]", {}), "response is a JSON list, not an object"),
        ((200, b'{"count": 1', {}), "response is not JSON"),
        ((404, b"not here", {}), "HTTP 404 response is not JSON: not here"),
        ((400, b'{"error": "[Flask] Invalid index: x"}', {}), "Invalid index: x"),
        ((200, b"x" * 5000, {}), "response of 5000 bytes is over the limit of 1000 bytes"),
        ((200, b"x" * 5000, {"Transfer-Encoding": "chunked", "Content-Length": "5000"}), "over the limit of 1000 bytes"),
    ],
)
def test_malformed_and_oversize_responses_are_clear_errors(scripted, answer, message):
    script, url = scripted
    use(script, answer)
    with pytest.raises((ApiResponseError, ApiQueryError), match=message.replace("[", r"\[").replace("]", r"\]")):
        client(url, max_response_bytes=1000).query("count", query="x")
    assert script.calls == 1


def test_unreachable_endpoint_is_unavailable_quickly():
    started = time.monotonic()
    api = client("http://127.0.0.1:9/", attempts=2)
    with pytest.raises(ApiUnavailable, match="ConnectionError"):
        api.query("count", query="x")
    assert time.monotonic() - started < 5 and api.stats["requests"] == 2
    with pytest.raises(ApiUnavailable, match="not retried for 30 s"):
        api.query("count", query="y")
    assert api.stats["requests"] == 2


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="not an http"):
        ClientSettings(url="ftp://x", index="i")
    with pytest.raises(ValueError, match="index is required"):
        ClientSettings(url="http://x/", index="")
    with pytest.raises(ValueError, match="longest_match"):
        ApiOptions(longest_match="guess")
