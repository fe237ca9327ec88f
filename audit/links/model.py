"""What every langlinks backend answers with (a dump lookup, the MediaWiki API, Wikidata), so the
signal, the cache and the command line never know which one answered.

A `Resolution` is where one article (or Wikidata entity) stands in one snapshot: whether it was
found, the other Wikipedias that hold it (`Link`s), and `as_of`, the snapshot's date (a dump's
date, or the time the API was asked).  Not found is never "no links": it carries a `reason`,
and the signal reads it as unknown.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cache
from urllib.parse import quote

from pydantic import JsonValue

from audit.errors import PlacedError
from audit.links.wikis import WikiError, wiki_for, wiki_language

# A JSON object: an API's answer, a dump's entity, a stored resolution or a source's description.
JsonObject = dict[str, JsonValue]


class LinksError(PlacedError):
    """A lookup or an answer that cannot be used; the message names the file or the request."""


@dataclass(frozen=True)
class Link:
    """One other Wikipedia's article: its wiki prefix (`zh-yue`), the language it holds (`yue`,
    None for a wiki that is no benchmark language, like `simple`), title and URL, and, when
    asked for (`--as-of`), when it was created (its first revision, ISO 8601 UTC)."""

    wiki: str
    lang: str | None
    title: str
    url: str
    created: str | None = None


@dataclass(frozen=True)
class Resolution:
    """Where one article stands in one snapshot."""

    wiki: str
    title: str
    found: bool
    as_of: str | None
    source: str
    page_id: int | None = None
    redirected_from: str | None = None
    links: tuple[Link, ...] = ()
    reason: str | None = None
    qid: str | None = None
    created: str | None = None

    def in_language(self, lang: str) -> Link | None:
        """The link to the wiki that holds benchmark language `lang` (`nb` and `no` alike)."""
        try:
            wanted = wiki_for(lang)
        except ValueError:  # a code no language table knows
            return None
        return next((link for link in self.links if link.wiki == wanted), None)

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> Resolution:
        links = tuple(Link(**link) for link in data.get("links", ()))
        return cls(**{**data, "links": links})


@dataclass(frozen=True)
class Article:
    """What an item names: a title in one wiki, or a Wikidata entity (`qid`)."""

    wiki: str | None = None
    title: str | None = None
    qid: str | None = None

    def __str__(self) -> str:
        return self.qid if self.qid else f"{self.wiki}:{self.title}"


@dataclass
class Answers:
    """Resolutions by article, with the articles a backend could not be asked about and why."""

    found: dict[Article, Resolution] = field(default_factory=dict)
    errors: dict[Article, str] = field(default_factory=dict)


def page_title(title: str) -> str:
    """A title as page dumps and the API key it: spaces as underscores, first letter capital."""
    text = "_".join(title.strip().replace("_", " ").split())
    return text[:1].upper() + text[1:]


def display_title(title: str) -> str:
    return title.replace("_", " ")


def article_url(wiki: str, title: str) -> str:
    return f"https://{wiki}.wikipedia.org/wiki/{quote(page_title(title), safe='()_,:;!$*+/@-')}"


def link_to(code: str, title: str, url: str | None = None, created: str | None = None) -> Link:
    """A link from what a backend calls the other wiki: an interwiki prefix (`no`, `zh-yue`, as
    older dumps have it) or a language code (`nb`, `yue`, as the API and newer dumps have it);
    both name the same wiki."""
    wiki, lang = _wiki_and_language(code)
    return Link(wiki, lang, display_title(title), url or article_url(wiki, title), created)


@cache
def _wiki_and_language(code: str) -> tuple[str, str | None]:
    """Cached: a wiki's answer lists a few hundred codes, and a code no table knows (`sh`,
    `jbo`) costs a did-you-mean search each time it is looked up."""
    try:
        lang = wiki_language(code)
    except WikiError:
        lang = None
    return (wiki_for(lang) if lang else code.strip().lower()), lang
