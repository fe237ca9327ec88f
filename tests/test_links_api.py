"""The MediaWiki and Wikidata API clients against a replay server on 127.0.0.1 that answers from
real recorded API responses (tests/fixtures/langlinks/api, see tests/fixtures/SOURCES.md).  No
HTTP is patched or mocked: the clients' own `requests` calls reach the server, which records
what it was sent and, when told to, misbehaves the way Wikimedia's servers do."""
from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests

from audit import __version__
from audit.links.api import MediaWikiApi, WikidataApi
from audit.links.http import DEFAULT_USER_AGENT, HttpSettings, LinksApiError
from audit.links.model import Article, Link, link_to

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "langlinks" / "api"
# The body of the one interaction of Wikipedia-API's cassette: `action=query&prop=langlinks` for
# Python_(programming_language) on the English Wikipedia (formatversion 1, 117 links).
PYTHON_BODY = (FIXTURES / "wikipedia-api-cassettes" / "TestVcrWikiLanglinks.test_langlinks.body.json").read_bytes()
PYTHON_PAGE = json.loads(PYTHON_BODY)["query"]["pages"]["23862"]
# The Wikipedia Android app's recorded langlinks of Scientology (no `url`: asked without llprop=url).
SCIENTOLOGY_PAGE = json.loads((FIXTURES / "wikipedia-android-app" / "lang_links.json").read_bytes())["query"]["pages"]["13118744"]
WIKIDATA = FIXTURES / "wikidata-sitelinks"
ENTITIES = {
    **json.loads((WIKIDATA / "wbgetentities_response.json").read_bytes())["entities"],
    **{qid: json.loads((WIKIDATA / f"{qid}.json").read_bytes()) for qid in ("Q217447", "Q328212")},
}
INVALID_CHARACTERS = "<>[]{}|#"


@dataclass
class Seen:
    method: str
    wiki: str
    params: dict[str, str]
    user_agent: str | None
    started: float


@dataclass
class Replay:
    """The action API of a few wikis and of Wikidata, answering in MediaWiki's formatversion 1
    from the recorded pages and entities.  What the recordings lack is made here in the same
    documented format and is marked so: the pages of `make_pages`, redirects, creation dates
    (`prop=revisions`), faults, and the `llcontinue` paging of the recorded langlinks when a
    test lowers `limit` (the real API pages at 500 links a response, more than one page holds)."""

    endpoint: str = ""
    pages: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    redirects: dict[str, dict[str, str]] = field(default_factory=dict)
    created: dict[tuple[str, str], str] = field(default_factory=dict)
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)
    entity_redirects: dict[str, str] = field(default_factory=dict)
    limit: int = 500
    formatversion: int = 1
    faults: list[tuple[Any, ...]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_page(self, wiki: str, page: dict[str, Any], created: str | None = None) -> None:
        self.pages.setdefault(wiki, {})[page["title"]] = page
        if created:
            self.created[(wiki, page["title"])] = created

    def make_pages(self, wiki: str, count: int, links: int = 5, prefix: str = "Replay page") -> list[str]:
        """Pages the recordings lack, shaped like the recorded one: links to the wikis the
        Python article links to, in the same order, with made titles and URLs."""
        titles = []
        for n in range(count):
            title = f"{prefix} {n}"
            made = [{"lang": link["lang"], "url": f"{link['url'].rsplit('/wiki/', 1)[0]}/wiki/{title.replace(' ', '_')}_{link['lang']}", "*": f"{title} {link['lang']}"}
                    for link in PYTHON_PAGE["langlinks"][:links]]
            self.add_page(wiki, {"pageid": 5_000_000 + len(self.pages.get(wiki, {})), "ns": 0, "title": title, "langlinks": made})
            titles.append(title)
        return titles

    def next_fault(self) -> tuple[Any, ...] | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None

    def answer(self, wiki: str, params: dict[str, str]) -> dict[str, Any]:
        if params.get("action") == "wbgetentities":
            return self.wbgetentities(params["ids"].split("|"))
        titles = params["titles"].split("|")
        if params.get("prop") == "revisions":
            return self.revisions(wiki, titles, params)
        answer = self.langlinks(wiki, titles, params)
        return as_formatversion_2(answer) if self.formatversion == 2 else answer

    def resolve(self, wiki: str, titles: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """MediaWiki's title handling: normalisation (underscores to spaces, a capital first
        letter), invalid titles, redirects (one step), missing pages with negative keys."""
        query: dict[str, Any] = {}
        pages: list[dict[str, Any]] = []
        for title in titles:
            if not title.strip() or any(char in title for char in INVALID_CHARACTERS):
                bad = next((char for char in title if char in INVALID_CHARACTERS), "")
                reason = f'The requested page title contains invalid characters: "{bad}".' if bad else "The requested page title is empty or contains only the name of a namespace."
                pages.append({"title": title, "invalidreason": reason, "invalid": ""})
                continue
            name = " ".join(title.replace("_", " ").split())
            name = name[:1].upper() + name[1:]
            if name != title:
                query.setdefault("normalized", []).append({"from": title, "to": name})
            if name in self.redirects.get(wiki, {}):
                query.setdefault("redirects", []).append({"from": name, "to": self.redirects[wiki][name]})
                name = self.redirects[wiki][name]
            page = self.pages.get(wiki, {}).get(name)
            pages.append(page if page is not None else {"ns": 0, "title": name, "missing": ""})
        return query, pages

    def langlinks(self, wiki: str, titles: list[str], params: dict[str, str]) -> dict[str, Any]:
        query, pages = self.resolve(wiki, titles)
        unique = {page["title"]: page for page in pages}
        limit = self.limit if params.get("lllimit") == "max" else min(self.limit, int(params.get("lllimit", 10)))
        # Langlinks in the API's order (by page id, then wiki prefix); a continuation names the
        # next one to give as `pageid|prefix`.
        ordered = [(page["pageid"], link) for page in sorted((p for p in unique.values() if "pageid" in p), key=lambda p: p["pageid"]) for link in page["langlinks"]]
        keys = [f"{pageid}|{prefix(link)}" for pageid, link in ordered]
        start = keys.index(params["llcontinue"]) if "llcontinue" in params else 0
        given = ordered[start:start + limit]
        out_pages: dict[str, Any] = {}
        missing = 0
        for page in unique.values():
            if "pageid" in page:
                entry = {key: value for key, value in page.items() if key != "langlinks"}
                chunk = [link for pageid, link in given if pageid == page["pageid"]]
                if chunk:
                    entry["langlinks"] = chunk
                out_pages[str(page["pageid"])] = entry
            else:
                missing -= 1
                out_pages[str(missing)] = page
        answer: dict[str, Any] = {}
        if start + limit < len(ordered):
            answer["continue"] = {"llcontinue": keys[start + limit], "continue": "||"}
        else:
            answer["batchcomplete"] = ""
        answer["query"] = {**query, "pages": out_pages}
        return answer

    def revisions(self, wiki: str, titles: list[str], params: dict[str, str]) -> dict[str, Any]:
        if len(titles) > 1 and params.get("rvdir") == "newer":
            return {"error": {"code": "multpages", "info": "titles, pageids or a generator was used to supply multiple pages, but the rvlimit, rvstartid, rvendid, rvdir=newer, rvuser, rvexcludeuser, rvstart, and rvend parameters may only be used on a single page."}}
        query, pages = self.resolve(wiki, titles)
        out_pages: dict[str, Any] = {}
        for n, page in enumerate(pages, start=1):
            if "pageid" not in page:
                out_pages[str(-n)] = page
                continue
            out_pages[str(page["pageid"])] = {"pageid": page["pageid"], "ns": 0, "title": page["title"], "revisions": [{"timestamp": self.created[(wiki, page["title"])]}]}
        return {"continue": {"rvcontinue": "20011220131500|1000", "continue": "||"}, "query": {**query, "pages": out_pages}}

    def wbgetentities(self, ids: list[str]) -> dict[str, Any]:
        """`props=sitelinks/urls`: the recorded entities' sitelinks, as recorded (without `url`)."""
        entities: dict[str, Any] = {}
        for qid in ids:
            target = self.entity_redirects.get(qid, qid)
            entity = self.entities.get(target)
            if entity is None:
                entities[qid] = {"id": qid, "missing": ""}
                continue
            kept = {key: entity[key] for key in ("pageid", "ns", "title", "lastrevid", "modified", "type", "id", "sitelinks") if key in entity}
            if target != qid:
                kept["redirects"] = {"from": qid, "to": target}
            entities[target] = kept
        return {"entities": entities, "success": 1}


def as_formatversion_2(answer: dict[str, Any]) -> dict[str, Any]:
    """MediaWiki's formatversion=2 of an answer: pages as a list, flags as booleans, a link's
    title under `title` instead of `*`."""
    def page(entry: dict[str, Any]) -> dict[str, Any]:
        out = {key: True if value == "" and key in ("missing", "invalid") else value for key, value in entry.items()}
        if "langlinks" in out:
            out["langlinks"] = [{"lang": link["lang"], "url": link["url"], "title": link["*"]} for link in out["langlinks"]]
        return out

    query = {**answer["query"], "pages": [page(entry) for entry in answer["query"]["pages"].values()]}
    return {**{key: True if key == "batchcomplete" else value for key, value in answer.items()}, "query": query}


def prefix(link: dict[str, Any]) -> str:
    return urlsplit(link["url"]).netloc.split(".")[0] if "url" in link else link["lang"]


MAXLAG = {"code": "maxlag", "info": "Waiting for db1: 3 seconds lagged.", "host": "db1", "lag": 3, "type": "db", "*": "See https://en.wikipedia.org/w/api.php for API usage."}


@pytest.fixture
def replay() -> Iterator[Replay]:
    state = Replay()
    state.add_page("en", PYTHON_PAGE, created="2001-12-20T13:15:00Z")
    state.add_page("en", SCIENTOLOGY_PAGE, created="2002-05-01T10:00:00Z")
    state.entities.update(ENTITIES)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            self.reply(urlsplit(self.path).query)

        def do_POST(self) -> None:
            self.reply(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())

        def reply(self, query: str) -> None:
            started = time.monotonic()
            params = dict(parse_qsl(query, keep_blank_values=True))
            wiki = self.path.split("/")[1]
            with state.lock:
                state.seen.append(Seen(self.command, wiki, params, self.headers.get("User-Agent"), started))
            fault = state.next_fault()
            status, headers, body = 200, {}, b""
            if fault is None or fault[0] == "slow":
                if fault:
                    time.sleep(fault[1])
                body = json.dumps(state.answer(wiki, params)).encode()
            elif fault[0] == "status":
                status, headers, body = fault[1], fault[2], b"<html><body>Our servers are currently under maintenance or experiencing a technical problem.</body></html>"
            elif fault[0] == "malformed":
                body = json.dumps(state.answer(wiki, params)).encode()[:40]
            elif fault[0] == "error":
                headers, body = fault[2], json.dumps({"error": fault[1], "servedby": "mw-replay"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    state.endpoint = f"http://127.0.0.1:{server.server_address[1]}/{{wiki}}/w/api.php"
    yield state
    server.shutdown()
    server.server_close()


class Sleeps(list):
    """Records every wait the client asks for, without waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def wiki_api(replay: Replay, sleeps: Sleeps | None = None, **settings: Any) -> MediaWikiApi:
    return MediaWikiApi(replay.endpoint, HttpSettings(**{"min_interval": 0.0, "backoff": 0.01, **settings}), sleep=sleeps if sleeps is not None else Sleeps())


def wikidata_api(replay: Replay, **settings: Any) -> WikidataApi:
    return WikidataApi(replay.endpoint.replace("{wiki}", "wikidata"), HttpSettings(**{"min_interval": 0.0, "backoff": 0.01, **settings}), sleep=Sleeps())


def without_date(resolution: Any) -> dict[str, Any]:
    return {**resolution.to_dict(), "as_of": None}


def test_the_replay_server_answers_the_recorded_request_with_the_recorded_body(replay: Replay):
    recorded = "format=json&redirects=1&action=query&prop=langlinks&titles=Python_%28programming_language%29&lllimit=500&llprop=url"
    response = requests.get(replay.endpoint.replace("{wiki}", "en") + "?" + recorded, timeout=10)
    assert response.json() == json.loads(PYTHON_BODY)


def test_one_title_gives_the_recorded_langlinks(replay: Replay):
    answers = wiki_api(replay).langlinks("en", ["Python_(programming_language)"])
    assert not answers.errors
    found = answers.found[Article("en", "Python_(programming_language)")]
    assert (found.wiki, found.title, found.found, found.page_id, found.redirected_from, found.source) == ("en", "Python (programming language)", True, 23862, None, "wikipedia-api")
    assert found.as_of and found.as_of.endswith("Z")
    recorded = PYTHON_PAGE["langlinks"]
    assert len(found.links) == len(recorded) == 117
    for link, raw in zip(found.links, recorded, strict=True):
        assert (link.title, link.url) == (raw["*"], raw["url"])
        assert link.wiki == urlsplit(raw["url"]).netloc.split(".")[0]
    by_wiki = {link.wiki: link for link in found.links}
    assert by_wiki["af"] == Link("af", "af", "Python (programmeertaal)", "https://af.wikipedia.org/wiki/Python_(programmeertaal)")
    assert (by_wiki["als"].lang, by_wiki["no"].lang, by_wiki["zh-yue"].lang, by_wiki["zh-min-nan"].lang) == ("gsw", "nb", "yue", "nan")
    assert by_wiki["simple"].lang is None
    assert found.in_language("gsw") is by_wiki["als"] and found.in_language("nb") is by_wiki["no"]
    [request] = replay.seen
    assert request.params == {"action": "query", "prop": "langlinks", "lllimit": "max", "llprop": "url", "redirects": "1",
                              "titles": "Python_(programming_language)", "format": "json", "maxlag": "5"}


def test_links_recorded_without_urls_get_the_article_url(replay: Replay):
    found = wiki_api(replay).langlinks("en", ["Scientology"]).found[Article("en", "Scientology")]
    assert found.links == (
        Link("af", "af", "Sciëntologie", "https://af.wikipedia.org/wiki/Sci%C3%ABntologie"),
        link_to("ar", "سينتولوجيا"),
        link_to("arz", "سيينتولوجيا"),
    )


def test_titles_go_fifty_a_request_and_every_title_is_answered(replay: Replay):
    made = replay.make_pages("en", 100)
    unknown = [f"No such page {n}" for n in range(18)]
    titles = ["Python (programming language)", "Scientology", *made, *unknown]
    answers = wiki_api(replay).langlinks("en", [*titles, "Scientology", made[0]])
    assert [len(seen.params["titles"].split("|")) for seen in replay.seen] == [50, 50, 20]
    assert not answers.errors and set(answers.found) == {Article("en", title) for title in titles}
    for title in unknown:
        missing = answers.found[Article("en", title)]
        assert not missing.found and not missing.links and missing.reason == f"no article '{title}' in the en Wikipedia"
    page = answers.found[Article("en", made[7])]
    assert page.found and [link.wiki for link in page.links] == ["af", "als", "an", "ar", "as"] and page.links[0].title == "Replay page 7 af"


def test_continuation_crosses_responses_and_pages(replay: Replay):
    made = replay.make_pages("en", 3, links=4)
    titles = ["Scientology", "Python (programming language)", *made]
    whole = wiki_api(replay).langlinks("en", titles)
    replay.seen.clear()
    replay.limit = 7
    paged = wiki_api(replay).langlinks("en", titles)
    assert {article: without_date(found) for article, found in paged.found.items()} == {article: without_date(found) for article, found in whole.found.items()}
    assert len(paged.found[Article("en", "Python (programming language)")].links) == 117
    total = 117 + 3 + 3 * 4
    assert len(replay.seen) == math.ceil(total / 7)
    first = replay.seen[0].params
    for seen in replay.seen[1:]:
        assert {key: value for key, value in seen.params.items() if key not in ("llcontinue", "continue")} == first
        assert seen.params["continue"] == "||" and "|" in seen.params["llcontinue"]
    # One response ends the Python article's links and begins the first made page's.
    assert any(seen.params["llcontinue"].startswith("23862|") for seen in replay.seen[1:])
    assert any(seen.params["llcontinue"].startswith(f"{replay.pages['en'][made[0]]['pageid']}|") for seen in replay.seen[1:])


def test_formatversion_2_answers_read_the_same(replay: Replay):
    titles = ["Python_(programming_language)", "No such page", "Foo<bar>", *replay.make_pages("en", 2)]
    first = wiki_api(replay).langlinks("en", titles)
    replay.formatversion, replay.limit = 2, 50
    second = wiki_api(replay).langlinks("en", titles)
    assert {article: without_date(found) for article, found in second.found.items()} == {article: without_date(found) for article, found in first.found.items()}
    assert len(first.found) == 5 and len(replay.seen) == 1 + math.ceil((117 + 2 * 5) / 50)


def test_normalised_and_redirected_titles_map_back_to_the_title_asked(replay: Replay):
    replay.redirects["en"] = {"Python language": "Python (programming language)", "Scientology (disambiguation)": "Gone page"}
    asked = ["python language", "Python_(programming_language)", "python_(programming_language)", "Scientology_(disambiguation)", "Foo<bar>", "A|B", "  "]
    answers = wiki_api(replay).langlinks("en", asked)
    assert not answers.errors and set(answers.found) == {Article("en", title) for title in asked}
    redirected = answers.found[Article("en", "python language")]
    assert (redirected.title, redirected.redirected_from, len(redirected.links)) == ("Python (programming language)", "Python language", 117)
    for title in ("Python_(programming_language)", "python_(programming_language)"):
        assert answers.found[Article("en", title)].title == "Python (programming language)" and answers.found[Article("en", title)].redirected_from is None
    gone = answers.found[Article("en", "Scientology_(disambiguation)")]
    assert not gone.found and gone.redirected_from == "Scientology (disambiguation)" and "Gone page" in gone.reason
    invalid = answers.found[Article("en", "Foo<bar>")]
    assert not invalid.found and 'contains invalid characters: "<"' in invalid.reason
    assert not answers.found[Article("en", "A|B")].found and not answers.found[Article("en", "  ")].found
    [request] = replay.seen
    assert "A|B" not in request.params["titles"] and len(request.params["titles"].split("|")) == 5


def test_nothing_asked_sends_nothing(replay: Replay):
    api = wiki_api(replay)
    assert api.langlinks("en", []).found == {} and api.created("en", []) == {}
    assert WikidataApi(replay.endpoint, sleep=Sleeps()).sitelinks([]).found == {}
    answers = api.langlinks("en/../de", ["Scientology"])
    assert "is not a wiki prefix" in answers.errors[Article("en/../de", "Scientology")]
    with pytest.raises(TypeError, match="not one string"):
        api.langlinks("en", "Scientology")
    assert replay.seen == []


def test_429_is_retried_after_the_retry_after_seconds_or_date(replay: Replay):
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    replay.faults = [("status", 429, {"Retry-After": "2"}), ("status", 429, {"Retry-After": later})]
    sleeps = Sleeps()
    answers = wiki_api(replay, sleeps).langlinks("en", ["Scientology"])
    assert answers.found[Article("en", "Scientology")].found and len(replay.seen) == 3
    assert sleeps[0] == 2 and 25 <= sleeps[1] <= 30


def test_a_batch_whose_retries_are_spent_is_in_errors_and_the_others_go_on(replay: Replay):
    made = replay.make_pages("en", 120)
    replay.faults = [("status", 503, {})] * 3
    answers = wiki_api(replay, attempts=3).langlinks("en", made)
    assert set(answers.errors) == {Article("en", title) for title in made[:50]}
    assert set(answers.found) == {Article("en", title) for title in made[50:]} and all(found.found for found in answers.found.values())
    message = answers.errors[Article("en", made[0])]
    assert message.startswith("en Wikipedia (127.0.0.1:") and "no answer after 3 attempts; last: HTTP 503" in message
    assert len(replay.seen) == 5


def test_an_unreachable_wiki_is_retried_then_an_error():
    sleeps = Sleeps()
    api = MediaWikiApi("http://127.0.0.1:9/{wiki}/w/api.php", HttpSettings(attempts=2, min_interval=0, timeout=2), sleep=sleeps)
    answers = api.langlinks("en", ["Scientology"])
    assert "no answer after 2 attempts; last: ConnectionError" in answers.errors[Article("en", "Scientology")] and len(sleeps) == 1


def test_malformed_json_is_retried_and_an_answer_never_well_formed_is_an_error(replay: Replay):
    replay.faults = [("malformed",)]
    assert wiki_api(replay).langlinks("en", ["Scientology"]).found[Article("en", "Scientology")].found
    replay.faults = [("malformed",)] * 3
    answers = wiki_api(replay, attempts=3).langlinks("en", ["Scientology"])
    assert "response is not JSON" in answers.errors[Article("en", "Scientology")]
    assert len(replay.seen) == 2 + 3


def test_an_error_object_is_an_error_naming_its_code_and_is_not_retried(replay: Replay):
    replay.faults = [("error", {"code": "badvalue", "info": 'Unrecognized value for parameter "prop": langlink.'}, {})]
    answers = wiki_api(replay).langlinks("en", ["Scientology", "Python (programming language)"])
    assert answers.errors[Article("en", "Scientology")] == f"en Wikipedia (127.0.0.1:{urlsplit(replay.endpoint).port}): refused: badvalue: Unrecognized value for parameter \"prop\": langlink."
    assert len(answers.errors) == 2 and len(replay.seen) == 1


def test_maxlag_is_waited_out_and_retried(replay: Replay):
    replay.faults = [("error", MAXLAG, {"Retry-After": "5", "X-Database-Lag": "3"}), ("error", MAXLAG, {})]
    sleeps = Sleeps()
    answers = wiki_api(replay, sleeps).langlinks("en", ["Scientology"])
    assert answers.found[Article("en", "Scientology")].found and len(replay.seen) == 3
    assert sleeps == [5, 3]


def test_an_answer_slower_than_the_timeout_is_retried(replay: Replay):
    replay.faults = [("slow", 1.0)]
    answers = wiki_api(replay, timeout=0.3).langlinks("en", ["Scientology"])
    assert answers.found[Article("en", "Scientology")].found and len(replay.seen) == 2


def test_an_oversize_answer_is_an_error(replay: Replay):
    answers = wiki_api(replay, max_response_bytes=1000).langlinks("en", ["Python (programming language)"])
    assert "over the limit of 1000 bytes" in answers.errors[Article("en", "Python (programming language)")] and len(replay.seen) == 1


def test_long_batches_are_posted(replay: Replay):
    made = replay.make_pages("en", 50, prefix="長い題名の記事" * 4)
    answers = wiki_api(replay).langlinks("en", made)
    assert all(found.found for found in answers.found.values()) and len(answers.found) == 50
    assert [seen.method for seen in replay.seen] == ["POST"]


def test_every_request_names_the_client_and_sends_maxlag(replay: Replay):
    assert f"corpus-audit/{__version__} (" in DEFAULT_USER_AGENT and "https://" in DEFAULT_USER_AGENT
    replay.faults = [("status", 503, {}), ("error", MAXLAG, {})]
    replay.limit = 50
    api = wiki_api(replay)
    api.langlinks("en", ["Python (programming language)", "Scientology"])
    api.created("en", ["Scientology"])
    wikidata_api(replay).sitelinks(["Q217447"])
    assert len(replay.seen) == 2 + 3 + 1 + 1
    assert {(seen.user_agent, seen.params["maxlag"], seen.params["format"]) for seen in replay.seen} == {(DEFAULT_USER_AGENT, "5", "json")}


class StampedSession(requests.Session):
    """A session that notes the monotonic time each request is handed to it: the moment the
    pacer let it go, without the socket's and the server's delays a loaded machine adds."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[float] = []
        self._stamps_lock = threading.Lock()

    def request(self, *args, **kwargs):
        with self._stamps_lock:
            self.stamps.append(time.monotonic())
        return super().request(*args, **kwargs)


def test_request_starts_are_min_interval_apart_across_threads(replay: Replay):
    made = replay.make_pages("en", 4)
    waits = Sleeps()

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    session = StampedSession()
    api = MediaWikiApi(replay.endpoint, HttpSettings(min_interval=0.1), session=session, sleep=sleep)
    threads = [threading.Thread(target=lambda t=title: [api.langlinks("en", [t]) for _ in range(2)]) for title in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(replay.seen) == 8 and len(session.stamps) == 8 and len(waits) >= 7
    # Unpaced, the gaps would be about a millisecond.  They are read as each request leaves the
    # pacer (the server's clock, reading arrivals, saw one lag 10 ms behind the next on a machine
    # running two test suites); a thread descheduled between the two can still shorten one gap.
    assert min(b - a for a, b in pairwise(session.stamps)) >= 0.1 - 0.01


def test_created_gives_each_first_revision_and_none_for_no_page(replay: Replay):
    replay.redirects["en"] = {"Python language": "Python (programming language)"}
    api = wiki_api(replay)
    created = api.created("en", ["Python_(programming_language)", "python language", "Scientology", "No such page", "Foo<bar>"])
    assert created == {"Python_(programming_language)": "2001-12-20T13:15:00Z", "python language": "2001-12-20T13:15:00Z",
                       "Scientology": "2002-05-01T10:00:00Z", "No such page": None, "Foo<bar>": None}
    assert [seen.params["titles"] for seen in replay.seen] == ["Python_(programming_language)", "python language", "Scientology", "No such page", "Foo<bar>"]
    assert {(seen.params["prop"], seen.params["rvdir"], seen.params["rvlimit"], seen.params["rvprop"]) for seen in replay.seen} == {("revisions", "newer", "1", "timestamp")}
    replay.faults = [("status", 503, {})] * 2
    with pytest.raises(LinksApiError, match=r"en Wikipedia \(127.0.0.1:\d+\): no answer after 2 attempts"):
        wiki_api(replay, attempts=2).created("en", ["Scientology"])


def test_wikidata_sitelinks_are_the_recorded_wikipedias(replay: Replay):
    replay.entity_redirects["Q999000001"] = "Q328212"
    answers = wikidata_api(replay).sitelinks(["Q3235026", "Q217447", "Q328212", "Q999000001", "Q999000002", "Q217447", "P31"])
    assert answers.errors == {Article(qid="P31"): "'P31' is not a Wikidata item id (Q and a number)"}
    assert [seen.params["ids"] for seen in replay.seen] == ["Q3235026|Q217447|Q328212|Q999000001|Q999000002"]
    assert replay.seen[0].params["props"] == "sitelinks/urls" and replay.seen[0].params["action"] == "wbgetentities"
    assert answers.found[Article(qid="Q3235026")].links == (link_to("fr", "Les Quatre Princes de Ganahan"),)
    verla = answers.found[Article(qid="Q217447")]
    assert verla.found and verla.source == "wikidata-api" and len(verla.links) == 31
    assert {link.wiki for link in verla.links} == {site.removesuffix("wiki") for site in ENTITIES["Q217447"]["sitelinks"]}
    roth = answers.found[Article(qid="Q328212")]
    sites = ENTITIES["Q328212"]["sitelinks"]
    assert {"enwikiquote", "itwikiquote", "simplewiki"} <= set(sites)
    assert {link.wiki for link in roth.links} == {site.removesuffix("wiki") for site in sites if site.endswith("wiki")}
    assert next(link for link in roth.links if link.wiki == "simple").lang is None
    merged = answers.found[Article(qid="Q999000001")]
    assert (merged.qid, merged.redirected_from, merged.links) == ("Q328212", "Q999000001", roth.links) and roth.redirected_from is None
    missing = answers.found[Article(qid="Q999000002")]
    assert not missing.found and missing.reason == "no Wikidata item Q999000002"


def test_wikidata_ids_go_fifty_a_request_with_the_same_error_rules(replay: Replay):
    qids = ["Q217447", *[f"Q{900_000 + n}" for n in range(119)]]
    replay.faults = [("status", 503, {})] * 2
    answers = wikidata_api(replay, attempts=2).sitelinks(qids)
    assert [len(seen.params["ids"].split("|")) for seen in replay.seen] == [50, 50, 50, 20]
    assert set(answers.errors) == {Article(qid=qid) for qid in qids[:50]} and "Wikidata (127.0.0.1:" in answers.errors[Article(qid="Q217447")]
    assert set(answers.found) == {Article(qid=qid) for qid in qids[50:]} and not any(found.found for found in answers.found.values())


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="must be positive"):
        HttpSettings(attempts=0)
    with pytest.raises(ValueError, match="cannot be negative"):
        HttpSettings(min_interval=-1)
    with pytest.raises(ValueError, match="user_agent is required"):
        HttpSettings(user_agent=" ")
    with pytest.raises(ValueError, match="not an http"):
        MediaWikiApi("ftp://example.org/{wiki}")
