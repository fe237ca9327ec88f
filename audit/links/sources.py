"""Where `audit check --links` gets its answers: a lookup built from dumps, or the Wikimedia APIs
behind a persistent cache.  Both answer the same two questions, so the signal never knows which
it asked: which Wikipedias hold these articles (`resolve`), and when each linked article was
created (`created`, for `--as-of`).

`--links` names a lookup directory, the built-in `wikipedia-api`, or an entry of the registry
file's `[links.NAME]` tables (another endpoint, cache or request rate):

    [links.mirror]
    backend = "api"
    endpoint = "http://127.0.0.1:8080/{wiki}/w/api.php"
    wikidata_endpoint = "http://127.0.0.1:8080/wikidata/w/api.php"
    cache = "cache/links.sqlite"
    min_interval = 0.5

    [links.july-2023]
    backend = "dump"
    path = "langlinks-20230701"       # built by `audit langlinks build`
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from audit.entries import EntryPlace, validate_entry
from audit.links.cache import LinksCache
from audit.links.entries import DEFAULT_ENDPOINT, DEFAULT_WIKIDATA, ENTRY_KINDS, MAX_AGE_DAYS, DumpKeys
from audit.links.lookup import LanglinksLookup
from audit.links.model import Answers, Article, JsonObject, LinksError
from audit.paths import cache_dir, registry_entries

API = "wikipedia-api"
Progress = Callable[[int], None]


class LinkSource(Protocol):
    name: str

    def describe(self) -> JsonObject: ...

    def resolve(self, articles: Sequence[Article], on_done: Progress = ...) -> Answers: ...

    def created(self, pages: Sequence[tuple[str, str]], on_done: Progress = ...) -> tuple[dict[tuple[str, str], str | None], dict[tuple[str, str], str]]: ...


def _nothing(done: int) -> None:
    """A progress callback that shows nothing."""


class DumpSource:
    """A lookup built from langlinks (and Wikidata entity) dumps: answers as of each dump's
    date, offline.  Dumps carry no creation dates."""

    def __init__(self, lookup: LanglinksLookup, name: str) -> None:
        self.lookup, self.name = lookup, name

    def describe(self) -> JsonObject:
        described = {"name": self.name, "backend": "dump", "path": str(self.lookup.directory.resolve()), "wikis": {wiki: self.lookup.as_of(wiki) for wiki in self.lookup.wikis}}
        if self.lookup.wikidata_as_of:
            described["wikidata"] = self.lookup.wikidata_as_of
        return described

    def resolve(self, articles: Sequence[Article], on_done: Progress = _nothing) -> Answers:
        answers = Answers()
        for article in articles:
            if article.qid:
                answers.found[article] = self.lookup.resolve_qid(article.qid)
            else:
                answers.found[article] = self.lookup.resolve(article.wiki or "", article.title or "")
            on_done(1)
        return answers

    def created(self, pages: Sequence[tuple[str, str]], on_done: Progress = _nothing) -> tuple[dict[tuple[str, str], str | None], dict[tuple[str, str], str]]:
        on_done(len(pages))
        return {}, {page: "a dump records no creation dates (use --links wikipedia-api with --as-of)" for page in pages}


@dataclass(frozen=True)
class ApiSettings:
    """An API entry's keys; the HTTP ones pass to the clients as they are."""

    endpoint: str = DEFAULT_ENDPOINT
    wikidata_endpoint: str = DEFAULT_WIKIDATA
    cache: Path | None = None
    max_age_days: int = MAX_AGE_DAYS
    http: dict[str, str | int | float] = field(default_factory=dict)


class ApiSource:
    """The MediaWiki API for titles and the Wikidata API for entity ids, each answer cached.
    Offline, only the cache answers; what it lacks is an error (unknown), never absent."""

    def __init__(self, name: str, settings: ApiSettings, *, offline: bool = False) -> None:
        from audit.links.api import MediaWikiApi, WikidataApi
        from audit.links.http import HttpSettings

        http = HttpSettings(**settings.http)
        self.name, self.settings, self.offline = name, settings, offline
        self.cache = LinksCache(settings.cache or cache_dir() / "langlinks-cache.sqlite")
        self.wikipedia = MediaWikiApi(settings.endpoint, http)
        self.wikidata = WikidataApi(settings.wikidata_endpoint, http)

    def describe(self) -> JsonObject:
        return {
            "name": self.name, "backend": "api", "endpoint": self.settings.endpoint, "wikidata_endpoint": self.settings.wikidata_endpoint,
            "cache": str(self.cache.path), "offline": self.offline, "max_age_days": self.settings.max_age_days,
        }

    def resolve(self, articles: Sequence[Article], on_done: Progress = _nothing) -> Answers:
        answers, missing = Answers(), []
        for article in dict.fromkeys(articles):
            cached = self.cache.get(self.name, article, None if self.offline else self.settings.max_age_days)
            if cached is not None:
                answers.found[article] = cached
                on_done(1)
            elif self.offline:
                answers.errors[article] = "offline, and the langlinks cache has no answer for it"
                on_done(1)
            else:
                missing.append(article)
        by_wiki: dict[str, list[Article]] = {}
        for article in missing:
            by_wiki.setdefault("wikidata" if article.qid else article.wiki or "", []).append(article)
        for wiki, asked in by_wiki.items():
            fetched = self.wikidata.sitelinks([a.qid or "" for a in asked]) if wiki == "wikidata" else self.wikipedia.langlinks(wiki, [a.title or "" for a in asked])
            for article, resolution in fetched.found.items():
                self.cache.put(self.name, article, resolution)
            answers.found.update(fetched.found)
            answers.errors.update(fetched.errors)
            on_done(len(asked))
        return answers

    def created(self, pages: Sequence[tuple[str, str]], on_done: Progress = _nothing) -> tuple[dict[tuple[str, str], str | None], dict[tuple[str, str], str]]:
        dates: dict[tuple[str, str], str | None] = {}
        errors: dict[tuple[str, str], str] = {}
        for wiki, title in dict.fromkeys(pages):
            cached, when = self.cache.get_created(wiki, title)
            if cached:
                dates[wiki, title] = when
            elif self.offline:
                errors[wiki, title] = "offline, and the langlinks cache has no creation date for it"
            else:
                try:
                    when = self.wikipedia.created(wiki, [title]).get(title)
                except LinksError as error:
                    errors[wiki, title] = str(error)
                else:
                    dates[wiki, title] = when
                    if when is not None:
                        self.cache.put_created(wiki, title, when)
            on_done(1)
        return dates, errors


def _entry(registry: Path, name: str, table: object, offline: bool) -> LinkSource:
    place = EntryPlace(registry, "links", name)
    keys = validate_entry(ENTRY_KINDS, table, place, LinksError)
    if isinstance(keys, DumpKeys):
        return DumpSource(LanglinksLookup.open(registry.parent / keys.path), name)
    settings = ApiSettings(keys.endpoint, keys.wikidata_endpoint, registry.parent / keys.cache if keys.cache else None, keys.max_age_days, keys.http())
    try:
        return ApiSource(name, settings, offline=offline)
    except ValueError as error:
        raise place.error(LinksError, None, str(error)) from None


def open_links(value: str, registry: Path | None = None, *, offline: bool = False) -> LinkSource:
    """The source a `--links` value names: a registry entry, `wikipedia-api`, or a lookup
    directory (a damaged one is an error here, before any item is checked)."""
    path, entries = registry_entries(registry, "links", LinksError)
    if path is not None and value in entries:
        return _entry(path, value, entries[value], offline)
    if value == API:
        return ApiSource(API, ApiSettings(), offline=offline)
    directory = Path(value)
    if directory.is_dir():
        return DumpSource(LanglinksLookup.open(directory), directory.resolve().name)
    known = ", ".join([API, *entries])
    raise LinksError(f"--links {value}: not {known}, nor a lookup directory built by `audit langlinks build`")

