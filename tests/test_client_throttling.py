"""Throttling, deterministic errors, adaptive concurrency and the request budget of the API
client, against stdlib HTTP servers on 127.0.0.1 that answer from a script (the answers are
the public services': infini-gram api/api_server.py at 37d2929 for the `[Flask] ...` errors,
the gateway's `403 {"message": "Forbidden"}`).  Waits are shortened through ClientSettings;
the only time asserted is a lower bound: a wait the server asked for was waited."""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from replay.scripted import Script, serve_script, use
from test_client_scripted import OK

from audit.corpora.api import ApiCorpus, ApiOptions
from audit.corpora.apirun import RequestsColumn, check_display
from audit.corpora.cache import ResponseCache
from audit.corpora.client import (
    Answer,
    ApiQueryError,
    ApiThrottled,
    ClientSettings,
    InfiniGramClient,
    RequestBudgetSpent,
    classify,
)
from audit.corpora.pacing import Bounds, HostPacer, Outcome, origin, pacer_for
from audit.exposure import decide
from audit.items import Item, Variant
from audit.policyfile import load_policy
from audit.signals import ngram

FORBIDDEN = (403, b'{"message": "Forbidden"}', {})
INTERNAL = (500, b'{"error": "[Flask] Internal server error: \'NoneType\' object is not subscriptable"}', {})


@pytest.fixture
def served():
    script = Script(OK)
    with serve_script(script) as url:
        yield script, url


def client(url: str, cache: ResponseCache | None = None, **settings) -> InfiniGramClient:
    base = {"backoff": 0.01, "max_backoff": 0.05, "throttle_wait": 0.02}
    return InfiniGramClient(ClientSettings(url=url, index="test", **(base | settings)), cache)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (403, b'{"message": "Forbidden"}', Answer.THROTTLED),
        (403, b"<html>Forbidden</html>", Answer.THROTTLED),
        (429, b'{"error": "slow down"}', Answer.THROTTLED),
        (403, b'{"error": "cross-origin request refused"}', Answer.DETERMINISTIC),
        (500, b'{"error": "[Flask] Internal server error: missing rank"}', Answer.DETERMINISTIC),
        (400, b'{"error": "[Flask] Invalid index: v2_cc_2025-05"}', Answer.DETERMINISTIC),
        (200, b'{"error": "Please limit your input to <= 1000 characters!"}', Answer.DETERMINISTIC),
        (500, b'{"error": "[Flask] Web request timed out. Please try again later."}', Answer.TRANSIENT),
        (500, b'{"error": "[Flask] Web request error: connection reset"}', Answer.TRANSIENT),
        (503, b'{"error": "12 queries are waiting; retry shortly"}', Answer.TRANSIENT),
        (502, b"<html>bad gateway</html>", Answer.TRANSIENT),
        (500, b"Internal Server Error", Answer.TRANSIENT),
        (200, b'{"count": 3}', Answer.OK),
    ],
)
def test_answers_are_told_apart(status, body, kind):
    assert classify(status, body) is kind


def test_the_gateways_403_is_waited_out_without_spending_an_attempt(served):
    script, url = served
    use(script, FORBIDDEN, FORBIDDEN, FORBIDDEN, OK)
    api = client(url, attempts=1)
    assert api.query("count", query="x")["count"] == 7
    assert script.calls == 4
    assert api.stats["throttled"] == 3 and api.stats["retries"] == 3 and api.stats["requests"] == 4


def test_retry_after_is_honoured_beyond_the_backoff_cap(served):
    script, url = served
    use(script, (429, b"slow down", {"Retry-After": "0.4"}), OK)
    api = client(url, max_backoff=0.01)
    assert api.query("count", query="x")["count"] == 7
    assert script.arrivals[1] - script.arrivals[0] >= 0.4


def test_without_retry_after_the_default_wait_applies(served):
    script, url = served
    use(script, FORBIDDEN, OK)
    api = client(url, throttle_wait=0.3)
    assert api.query("count", query="x")["count"] == 7
    assert script.arrivals[1] - script.arrivals[0] >= 0.3


def test_throttled_past_patience_is_unknown_and_starts_no_cool_down(served):
    script, url = served
    use(script, FORBIDDEN)
    api = client(url, throttle_wait=0.02, throttle_patience=0.1)
    with pytest.raises(ApiThrottled, match=r"throttled .*HTTP 403.* resume"):
        api.query("count", query="x")
    assert api.stats["throttled"] >= 3
    use(script, OK)
    assert api.query("count", query="y")["count"] == 7
    use(script, FORBIDDEN)
    corpus = ApiCorpus(api, "test", ApiOptions())
    item = Item(item_id="x", source_lang="en", variants={"en": Variant(question="Who was throttled today?", answer="no one")})
    evidence = ngram.run(corpus, item, "en", ngram.NgramConfig())
    field = {e.field: e for e in evidence}["question"]
    assert field.status == "failed" and "throttled" in field.error
    assert decide(load_policy(None), evidence).exposure == "unknown"


def test_a_deterministic_error_is_raised_at_once_and_the_next_request_goes_through(served):
    script, url = served
    use(script, INTERNAL, OK)
    api = client(url, attempts=5)
    with pytest.raises(ApiQueryError, match=r"\[Flask\] Internal server error: 'NoneType'"):
        api.query("get_doc_by_rank", query="x")
    assert script.calls == 1 and api.stats["retries"] == 0
    assert api.query("count", query="y")["count"] == 7


def test_throttling_halves_the_concurrency_and_fast_answers_raise_it(served):
    script, url = served
    use(script, (429, b"", {"Retry-After": "0"}), OK)
    api = client(url, start_concurrency=4, concurrency=8, fast_seconds=1e-9)
    before = api._pacer.limit
    api.query("count", query="x")
    assert before >= 2 and api.stats["concurrency"] == before // 2
    use(script, OK)
    fast = client(url + "?fast", start_concurrency=2, concurrency=3, fast_seconds=60)
    for k in range(12):
        fast.query("count", query=f"q{k}")
    assert fast.stats["concurrency"] == 3


def test_requests_in_flight_never_exceed_the_hosts_limit(served):
    script, url = served
    use(script, (200, json.dumps({"count": 1}).encode(), {"sleep": "0.05"}))
    api = client(url, start_concurrency=2, concurrency=2)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda k: api.query("count", query=f"q{k}"), range(24)))
    assert script.most_in_flight == 2 and api.pool_size == 2


def test_the_pacer_halves_once_per_burst_and_adds_one_per_window():
    pacer = HostPacer(Bounds(1, 4, 6, 1.0))
    burst = [pacer.acquire() for _ in range(4)]
    for ticket in burst:
        pacer.release(ticket, Outcome.BACK_OFF)
    assert pacer.limit == 2 and pacer.halved == 1
    for _ in range(2):
        pacer.release(pacer.acquire(), Outcome.FAST)
    assert pacer.limit == 3
    pacer.release(pacer.acquire(), Outcome.SLOW)
    for _ in range(2):
        pacer.release(pacer.acquire(), Outcome.FAST)
    assert pacer.limit == 3
    for _ in range(3 + 4 + 5 + 6):
        pacer.release(pacer.acquire(), Outcome.FAST)
    assert pacer.limit == 6
    for _ in range(5):
        pacer.release(pacer.acquire(), Outcome.BACK_OFF)
    assert pacer.limit == 1


def test_clients_of_one_host_share_its_pacer():
    bounds = ClientSettings(url="http://127.0.0.1:1/", index="a").bounds()
    assert pacer_for("http://127.0.0.1:1/", bounds) is pacer_for("http://127.0.0.1:1/other", bounds)
    assert pacer_for("http://127.0.0.1:1/", bounds) is not pacer_for("http://127.0.0.1:2/", bounds)
    assert origin("https://API.infini-gram.io/") == "https://api.infini-gram.io:443"


def test_the_request_budget_stops_asking_and_the_cache_still_answers(served, tmp_path: Path):
    script, url = served
    use(script, OK)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    api = client(url, cache, max_requests=3)
    for k in range(3):
        api.query("count", query=f"q{k}")
    with pytest.raises(RequestBudgetSpent, match=r"request budget of 3 requests is spent.*run the same command again"):
        api.query("count", query="q3")
    assert api.stats["requests"] == 3 and api.stats["not_asked"] == 1 and script.calls == 3
    assert api.query("count", query="q0")["count"] == 7 and api.stats["cache_hits"] == 1
    again = client(url, cache, max_requests=3)
    for k in range(5):
        again.query("count", query=f"q{k}")
    assert again.stats["requests"] == 2 and again.stats["cache_hits"] == 3


def test_bad_pacing_settings_are_refused():
    with pytest.raises(ValueError, match="concurrency bounds"):
        ClientSettings(url="http://x/", index="i", min_concurrency=0)
    with pytest.raises(ValueError, match="throttle_wait"):
        ClientSettings(url="http://x/", index="i", throttle_wait=-1)


def test_the_progress_bar_counts_requests_of_every_api_corpus(served):
    script, url = served
    use(script, FORBIDDEN, OK)
    first, second = client(url, max_requests=10), client(url, max_requests=5)
    first.query("count", query="x")
    second.query("count", query="y")
    display = check_display([first, second])
    column = next(c for c in display.columns if isinstance(c, RequestsColumn))
    assert column.render(None).plain == "3/15 requests (1 throttled)"
    second.query("count", query="z")
    assert column.render(None).plain == "4/15 requests (1 throttled)"
    assert not any(isinstance(c, RequestsColumn) for c in check_display([]).columns)


def test_a_question_asked_by_two_threads_at_once_is_sent_once(served):
    script, url = served
    use(script, (200, json.dumps({"count": 5}).encode(), {}))
    script.gate = threading.Event()
    api = client(url)
    with ThreadPoolExecutor(max_workers=6) as pool:
        asked = [pool.submit(api.query, "count", query="same") for _ in range(6)]
        while api.stats["shared"] < 5 and not any(future.done() for future in asked):
            time.sleep(0.01)
        script.gate.set()
        answers = [future.result() for future in asked]
    assert answers == [{"count": 5}] * 6 and script.calls == 1
    assert api.stats["requests"] == 1 and api.stats["shared"] == 5


def test_a_hold_is_abandoned_when_the_run_is_interrupted():
    pacer = HostPacer(Bounds(1, 1, 1, 1.0))
    pacer.hold(600)
    assert pacer.acquire(abandon=lambda: True) is None and pacer.in_flight == 0
