"""Wikidata entities as langlinks: an entity's `sitelinks` name its article in every Wikipedia,
whether it comes from `wbgetentities` or from a line of the JSON entity dump.

Only Wikipedias count: a sitelink's site is a database name (`enwiki`, `zh_yuewiki`), and
Wikidata also links Wikiquote (`enwikiquote`), Commons (`commonswiki`) and other projects whose
pages say nothing of a language's Wikipedia.
"""
from __future__ import annotations

import json
import re

from audit.links.model import JsonObject, Link, LinksError, Resolution, link_to
from audit.links.wikis import WikiError, dbname_language

QID = re.compile(r"Q[1-9][0-9]*")
WIKIDATA = "wikidata"
# Sites named `...wiki` that are not a language's Wikipedia.
NOT_WIKIPEDIA = frozenset({
    "commonswiki", "specieswiki", "metawiki", "mediawikiwiki", "wikidatawiki", "sourceswiki", "incubatorwiki",
    "outreachwiki", "wikimaniawiki", "foundationwiki", "wikifunctionswiki", "testwiki", "test2wiki", "testwikidatawiki",
    "betawikiversitywiki", "strategywiki", "otrs_wikiwiki", "ombudsmenwiki", "advisorywiki", "electcomwiki",
})


def is_qid(value: str) -> bool:
    return QID.fullmatch(value.strip()) is not None


def wikipedia_of(site: str) -> str | None:
    """The wiki prefix of a sitelink's site when it is a Wikipedia (`zh_yuewiki` → `zh-yue`)."""
    if site in NOT_WIKIPEDIA or not site.endswith("wiki"):
        return None
    try:
        return dbname_language(site)
    except WikiError:
        return None


def sitelink_links(sitelinks: JsonObject) -> tuple[Link, ...]:
    """The Wikipedia articles among an entity's sitelinks, ordered by wiki."""
    links = []
    for site, sitelink in sitelinks.items():
        wiki = wikipedia_of(site)
        title = sitelink.get("title") if isinstance(sitelink, dict) else None
        if wiki is None or not isinstance(title, str) or not title:
            continue
        link = link_to(wiki, title, sitelink.get("url"))
        links.append(link)
    return tuple(sorted(links, key=lambda link: link.wiki))


def entity_resolution(entity: JsonObject, *, as_of: str | None, source: str) -> Resolution:
    """An entity's Wikipedias.  A `missing` entity (the API's answer for an unknown id) is not
    found; a redirected one (merged into another item) names the id it was asked by."""
    qid = entity.get("id")
    if not isinstance(qid, str) or not is_qid(qid):
        raise LinksError(f"not a Wikidata item: its id is {qid!r}")
    if "missing" in entity:
        return Resolution(WIKIDATA, qid, False, as_of, source, qid=qid, reason=f"no Wikidata item {qid}")
    sitelinks = entity.get("sitelinks", {})
    if not isinstance(sitelinks, dict):
        raise LinksError(f"{qid}: sitelinks is not an object")
    redirected = entity.get("redirects", {}).get("from") if isinstance(entity.get("redirects"), dict) else None
    return Resolution(WIKIDATA, qid, True, as_of, source, qid=qid, links=sitelink_links(sitelinks), redirected_from=redirected)


def dump_entity(line: str) -> JsonObject | None:
    """One entity from a line of the JSON dump (`[`, `{...},` lines, `]`); None for the
    brackets.  A line that is not an entity raises ValueError, for the caller to place."""
    text = line.strip().rstrip(",")
    if text in ("", "[", "]"):
        return None
    entity = json.loads(text)
    if not isinstance(entity, dict) or "id" not in entity:
        raise ValueError("not an entity object (no id)")
    return entity
