"""Langlinks asked of the live wikis: the MediaWiki API (an article's langlinks, and when a page
was created) and the Wikidata API (an entity's sitelinks), answering with the same `Resolution`s
as the dumps, dated by when they were asked.

Wikimedia asks API clients to name themselves in the User-Agent, to ask for many pages at once
rather than one by one, not to hurry, and to send `maxlag` so they hold back while replicas lag.
Hence up to 50 titles a request, request starts spaced `min_interval` apart across threads, and a
`maxlag` refusal waited out and asked again.  5xx, 429, timeouts, dropped connections and cut-off
JSON are retried with exponential backoff and jitter.  A batch that still fails, or that the API
refuses, leaves its titles in `Answers.errors` with the reason while the other batches go on: one
bad request never costs the whole lookup, and every asked title gets an answer or an error.
"""
from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import requests

from audit.links.entities import entity_resolution, is_qid
from audit.links.http import DEFAULT_HTTP, ApiClient, HttpSettings, LinksApiError
from audit.links.model import Answers, Article, JsonObject, LinksError, Resolution, link_to
from audit.responses import snippet
from audit.timestamps import utc_timestamp

# Titles or ids in one request: the API's limit for clients without the `apihighlimits` right.
BATCH = 50
WIKI_PREFIX = re.compile(r"[a-z][a-z0-9-]*")


@dataclass
class _Answer:
    """One batch's `query` objects, continuations merged: how titles were renamed (normalised,
    converted to the wiki's main variant, redirected) and the pages, by title."""

    renamed: dict[str, str] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    interwiki: dict[str, str] = field(default_factory=dict)
    pages: dict[str, JsonObject] = field(default_factory=dict)
    links: dict[str, dict[tuple[str, str], JsonObject]] = field(default_factory=dict)

    def add(self, query: JsonObject) -> None:
        for key in ("normalized", "converted"):
            self.renamed.update((entry["from"], entry["to"]) for entry in query.get(key) or ())
        self.redirects.update((entry["from"], entry["to"]) for entry in query.get("redirects") or ())
        self.interwiki.update((entry["title"], entry.get("iw", "")) for entry in query.get("interwiki") or ())
        pages = query.get("pages") or {}
        for page in pages.values() if isinstance(pages, dict) else pages:
            title = page["title"]
            self.pages.setdefault(title, {}).update((key, value) for key, value in page.items() if key != "langlinks")
            known = self.links.setdefault(title, {})
            for link in page.get("langlinks") or ():
                known.setdefault((link["lang"], link.get("*") or link.get("title") or ""), link)

    def find(self, sent: str) -> tuple[str, str | None, JsonObject | None]:
        """Where a title sent ends: its last name, the name a redirect was followed from, its page."""
        title, seen = sent, {sent}
        while title in self.renamed and self.renamed[title] not in seen:
            title = self.renamed[title]
            seen.add(title)
        redirected_from = None
        if title in self.redirects:
            redirected_from, title = title, self.redirects[title]
        return title, redirected_from, self.pages.get(title)


class MediaWikiApi(ApiClient):
    """Langlinks and creation dates from each wiki's action API (`{wiki}` in the endpoint is the
    wiki prefix: `en`, `zh-yue`)."""

    name = "wikipedia-api"

    def __init__(
        self,
        endpoint: str = "https://{wiki}.wikipedia.org/w/api.php",
        settings: HttpSettings = DEFAULT_HTTP,
        *,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(endpoint, settings, session, sleep)

    def langlinks(self, wiki: str, titles: Sequence[str]) -> Answers:
        """Each title's article and its langlinks, keyed by the title as asked, whatever the API
        normalised or redirected it to."""
        answers = Answers()
        asked = _unique(titles)
        if not asked:
            return answers
        try:
            url, where = self._wiki(wiki)
        except LinksApiError as error:
            answers.errors.update((Article(wiki, title), str(error)) for title in asked)
            return answers
        by_sent: dict[str, list[str]] = {}
        for title in asked:
            problem = _unsendable(title)
            if problem:
                answers.found[Article(wiki, title)] = Resolution(wiki, title, False, utc_timestamp(), self.name, reason=f"{title!r} is no {wiki} Wikipedia title: {problem}")
            else:
                by_sent.setdefault(unicodedata.normalize("NFC", title), []).append(title)
        for batch in _batches(list(by_sent)):
            as_of = utc_timestamp()
            try:
                answer = self._langlinks_batch(url, where, batch)
            except LinksApiError as error:
                answers.errors.update((Article(wiki, title), str(error)) for sent in batch for title in by_sent[sent])
                continue
            for sent in batch:
                for title in by_sent[sent]:
                    resolution = self._resolution(wiki, title, answer.find(sent), answer, as_of)
                    if resolution is None:
                        answers.errors[Article(wiki, title)] = f"{where}: the answer names no page for {title!r}"
                    else:
                        answers.found[Article(wiki, title)] = resolution
        return answers

    def created(self, wiki: str, titles: Sequence[str]) -> dict[str, str | None]:
        """Each title's first revision time (ISO 8601, as the API gives it), None where there is
        no such page.  One request a title: the API gives the oldest revision of one page only."""
        url, where = self._wiki(wiki)
        created: dict[str, str | None] = {}
        for title in _unique(titles):
            if _unsendable(title):
                created[title] = None
                continue
            sent = unicodedata.normalize("NFC", title)
            params = {"action": "query", "prop": "revisions", "rvlimit": "1", "rvdir": "newer", "rvprop": "timestamp", "redirects": "1", "titles": sent}
            answer = self._merged(url, where, params, follow=False)
            final, _, page = answer.find(sent)
            if final in answer.interwiki or (page is not None and {"missing", "invalid", "special"} & page.keys()):
                created[title] = None
                continue
            revisions = page.get("revisions") if page is not None else None
            timestamp = revisions[0].get("timestamp") if isinstance(revisions, list) and revisions and isinstance(revisions[0], dict) else None
            if not isinstance(timestamp, str):
                raise LinksApiError(f"{where}: the answer gives no first revision of {title!r}")
            created[title] = timestamp
        return created

    def _wiki(self, wiki: str) -> tuple[str, str]:
        """The wiki's endpoint, and how messages name it."""
        if not WIKI_PREFIX.fullmatch(wiki):
            raise LinksApiError(f"{wiki!r} is not a wiki prefix (like en or zh-yue)")
        url = self.endpoint.replace("{wiki}", wiki)
        return url, f"{wiki} Wikipedia ({urlsplit(url).netloc})"

    def _langlinks_batch(self, url: str, where: str, titles: list[str]) -> _Answer:
        params = {"action": "query", "prop": "langlinks", "lllimit": "max", "llprop": "url", "redirects": "1", "titles": "|".join(titles)}
        return self._merged(url, where, params, follow=True)

    def _merged(self, url: str, where: str, params: dict[str, str], *, follow: bool) -> _Answer:
        """The answer to a query, with every continuation when `follow`: each response's
        `continue` keys go back with the first request's parameters."""
        answer, extra, seen = _Answer(), {}, set()
        while True:
            data = self.ask(url, {**params, **extra}, where)
            query = data.get("query")
            if not isinstance(query, dict):
                raise LinksApiError(f"{where}: the response has no query object: {snippet(json.dumps(data).encode())}")
            try:
                answer.add(query)
            except (KeyError, TypeError, AttributeError) as error:
                raise LinksApiError(f"{where}: malformed query object ({type(error).__name__}: {error})") from None
            more = data.get("continue")
            if not follow or not isinstance(more, dict) or not more:
                return answer
            extra = {str(key): str(value) for key, value in more.items()}
            if tuple(sorted(extra.items())) in seen:
                raise LinksApiError(f"{where}: the API repeats its continuation {extra}")
            seen.add(tuple(sorted(extra.items())))

    def _resolution(self, wiki: str, title: str, found: tuple[str, str | None, JsonObject | None], answer: _Answer, as_of: str) -> Resolution | None:
        final, redirected_from, page = found
        if final in answer.interwiki:
            reason = f"{title!r} names a page of another wiki ({answer.interwiki[final]}:), not a {wiki} Wikipedia article"
            return Resolution(wiki, title, False, as_of, self.name, reason=reason)
        if page is None:
            return None
        if "invalid" in page:
            return Resolution(wiki, title, False, as_of, self.name, reason=f"{title!r} is no {wiki} Wikipedia title: {page.get('invalidreason', 'invalid')}")
        if "missing" in page or "special" in page:
            reason = f"no article {title!r} in the {wiki} Wikipedia" + (f" (redirected to {final!r})" if redirected_from else "")
            return Resolution(wiki, title, False, as_of, self.name, redirected_from=redirected_from, reason=reason)
        links = tuple(link_to(lang, linked, link.get("url")) for (lang, linked), link in answer.links.get(final, {}).items())
        return Resolution(wiki, final, True, as_of, self.name, page_id=page.get("pageid"), redirected_from=redirected_from, links=links)


class WikidataApi(ApiClient):
    """Entities' Wikipedia sitelinks from `wbgetentities`."""

    name = "wikidata-api"

    def __init__(
        self,
        endpoint: str = "https://www.wikidata.org/w/api.php",
        settings: HttpSettings = DEFAULT_HTTP,
        *,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(endpoint, settings, session, sleep)

    def sitelinks(self, qids: Sequence[str]) -> Answers:
        """Each item's Wikipedias, keyed by the id as asked, also when Wikidata has merged it into
        another item (a redirect)."""
        answers = Answers()
        where = f"Wikidata ({urlsplit(self.endpoint).netloc})"
        wanted = []
        for qid in _unique(qids):
            if is_qid(qid):
                wanted.append(qid)
            else:
                answers.errors[Article(qid=qid)] = f"{qid!r} is not a Wikidata item id (Q and a number)"
        for batch in _batches(wanted):
            as_of = utc_timestamp()
            ids = list(dict.fromkeys(qid.strip() for qid in batch))
            try:
                data = self.ask(self.endpoint, {"action": "wbgetentities", "ids": "|".join(ids), "props": "sitelinks/urls"}, where)
                entities = data.get("entities")
                if not isinstance(entities, dict):
                    raise LinksApiError(f"{where}: the response has no entities object: {snippet(json.dumps(data).encode())}")
            except LinksApiError as error:
                answers.errors.update((Article(qid=qid), str(error)) for qid in batch)
                continue
            by_id: dict[str, JsonObject] = {}
            for key, entity in entities.items():
                if isinstance(entity, dict):
                    redirect = entity.get("redirects") if isinstance(entity.get("redirects"), dict) else {}
                    for name in (key, entity.get("id"), redirect.get("from")):
                        if isinstance(name, str):
                            by_id.setdefault(name, entity)
            for qid in batch:
                entity = by_id.get(qid.strip())
                if entity is None:
                    answers.errors[Article(qid=qid)] = f"{where}: the answer names no entity {qid.strip()}"
                    continue
                if entity.get("id") == qid.strip():
                    entity = {key: value for key, value in entity.items() if key != "redirects"}
                try:
                    answers.found[Article(qid=qid)] = entity_resolution(entity, as_of=as_of, source=self.name)
                except LinksError as error:
                    answers.errors[Article(qid=qid)] = f"{where}: {error}"
        return answers


def _unique(values: Sequence[str]) -> list[str]:
    if isinstance(values, str):
        raise TypeError("expected a sequence of titles or ids, not one string")
    return list(dict.fromkeys(values))


def _batches(values: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(values), BATCH):
        yield values[start:start + BATCH]


def _unsendable(title: str) -> str | None:
    """Why a title cannot go in a request: titles are sent joined by `|`, which no title holds."""
    if not title.strip():
        return "the title is empty"
    if "|" in title:
        return "a title cannot contain '|'"
    return None
