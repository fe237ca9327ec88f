"""The langlinks signal: did an article on the item's subject exist in each language's Wikipedia
when the model was trained?  ECLeKTic's premise (an article in one Wikipedia only means the fact
was seen in that language only), checked per item and language instead of assumed.

Every item's article (its URL, its title in its source language's wiki, or a Wikidata id) is
resolved once, in batches, before any variant is checked (`LinkChecker.prepare`), and with a
cutoff (`--as-of`) the creation date of every linked article in a benchmark language is asked
too.  Each variant then gets one piece of evidence for the field `article`:
- `existed = true`: an article in this language existed at the cutoff (or, with no cutoff, at
  the snapshot);
- `existed = false`: none did;
- unknown (status `unknown`, never `unseen`): the source could not answer (offline with
  nothing cached, an API failure, a title no snapshot has), or the snapshot cannot speak for
  the cutoff (an article that exists now but whose creation date is unknown; an absence in a
  snapshot taken before the cutoff, since an article may have been created in between);
- absent: the item names no article at all.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import partial

from audit.evidence import ABSENT, OK, UNKNOWN, Evidence, Json
from audit.items import Item
from audit.links.dump import parse_article
from audit.links.entities import is_qid
from audit.links.model import Answers, Article, Link, Resolution, article_url
from audit.links.sources import LinkSource
from audit.links.wikis import WikiError, wiki_for
from audit.rules import Rule
from audit.signals.langlinks_spec import FIELD, NAME, LanglinksConfig, Rules, fields_for
from audit.signals.spec import Opening, Runner

__all__ = ["FIELD", "NAME", "LanglinksConfig", "LinkChecker", "Rules", "fields_for", "item_article", "open_runner", "run", "variant_evidence"]

QID_KEYS = ("qid", "wikidata_id", "wikidata", "sub_uri")


def item_article(item: Item) -> Article | None:
    """The article an item names: its URL (the source variant's, else the item's), its title in
    the source language's wiki, or a Wikidata id (X-FACTR's subject)."""
    source = item.variants.get(item.source_lang)
    for url in (source.url if source else None, item.meta.get("url")):
        if isinstance(url, str) and url.strip():
            try:
                wiki, title = parse_article(url.strip())
            except ValueError:
                continue
            return Article(wiki=wiki, title=title)
    for title in (source.title if source else None, item.meta.get("title")):
        if isinstance(title, str) and title.strip():
            try:
                return Article(wiki=wiki_for(item.source_lang), title=title.strip())
            except (WikiError, ValueError):
                break
    for key in QID_KEYS:
        value = item.meta.get(key)
        if isinstance(value, str) and is_qid(value):
            return Article(qid=value.strip())
    return None


@dataclass
class LinkChecker:
    """One link source, the answers it gave for this audit's items, and the cutoff."""

    source: LinkSource
    cutoff: date | None = None
    ask_created: bool = True
    answers: Answers = field(default_factory=Answers)
    created: dict[tuple[str, str], str | None] = field(default_factory=dict)
    created_errors: dict[tuple[str, str], str] = field(default_factory=dict)

    def prepare(self, items: Sequence[Item], langs: Sequence[str] | None, progress: Callable[[str, int | None], Callable[[int], None]]) -> None:
        """Resolve every item's article, then (with a cutoff) the creation date of every linked
        article in a checked language: the slow, batched work, done once before any variant."""
        named = [(item, article) for item in items if (article := item_article(item)) is not None]
        articles = list(dict.fromkeys(article for _, article in named))
        self.answers = self.source.resolve(articles, progress(f"langlinks: resolving {len(articles)} articles via {self.source.name}", len(articles)))
        if self.cutoff is None or not self.ask_created:
            return
        pages = []
        for item, article in named:
            resolution = self.answers.found.get(article)
            if resolution is None or not resolution.found:
                continue
            for lang in item.variants:
                if langs is None or lang in langs:
                    link = _link(resolution, lang)
                    if link is not None:
                        pages.append((link.wiki, link.title))
        pages = list(dict.fromkeys(pages))
        self.created, self.created_errors = self.source.created(pages, progress(f"langlinks: creation dates of {len(pages)} articles", len(pages)))


def _link(resolution: Resolution, lang: str) -> Link | None:
    """The article in `lang`: the resolved article itself when it is that language's wiki."""
    try:
        wiki = wiki_for(lang)
    except (WikiError, ValueError):
        return None
    if resolution.wiki == wiki:
        return Link(wiki, lang, resolution.title, article_url(resolution.wiki, resolution.title))
    return resolution.in_language(lang)


def run(checker: LinkChecker, item: Item, lang: str, config: LanglinksConfig, rules: Mapping[str, Sequence[Rule]] | None = None) -> list[Evidence]:
    return [variant_evidence(checker, item, lang)]


def open_runner(source: LinkSource, opening: Opening) -> Runner:
    """A runner on one link source, judged at the cutoff; its `prepare` resolves every item's
    article in batches before any variant is checked."""
    checker = LinkChecker(source, opening.cutoff, opening.config.ask_created)
    return Runner(NAME, source.name, fields_for, partial(run, checker, config=opening.config), checker.prepare)


def _evidence(checker: LinkChecker, status: str, figures: dict[str, Json], provenance: list[dict[str, Json]] | None = None, error: str | None = None) -> Evidence:
    return Evidence(NAME, checker.source.name, FIELD, status=status, figures=figures, provenance=provenance or [], error=error)


def variant_evidence(checker: LinkChecker, item: Item, lang: str) -> Evidence:
    article = item_article(item)
    if article is None:
        return _evidence(checker, ABSENT, {"reason": "the item names no article (no Wikipedia URL, title or Wikidata id)"})
    figures: dict[str, Json] = {"item_article": str(article)}
    resolution = checker.answers.found.get(article)
    if resolution is None:
        return _evidence(checker, UNKNOWN, figures, error=checker.answers.errors.get(article, "the source gave no answer for it"))
    figures |= {"as_of": resolution.as_of, "answered_by": resolution.source}
    if resolution.redirected_from:
        figures["redirected_from"] = resolution.redirected_from
    if not resolution.found:
        return _evidence(checker, UNKNOWN, figures, error=resolution.reason or "the article was not found")
    cutoff = checker.cutoff
    figures["judged_at"] = cutoff.isoformat() if cutoff else resolution.as_of
    link = _link(resolution, lang)
    snapshot = _day(resolution.as_of)
    if link is None:
        figures["article"] = "absent"
        if cutoff is not None and (snapshot is None or snapshot < cutoff):
            return _evidence(checker, UNKNOWN, figures, error=f"no article in this language as of {resolution.as_of}, before the cutoff {cutoff}: one may have been created in between")
        return _evidence(checker, OK, figures | {"existed": False})
    figures |= {"article": "exists", "title": link.title, "url": link.url}
    created = checker.created.get((link.wiki, link.title), link.created)
    if created:
        figures["created"] = created
    provenance = [{"wiki": link.wiki, "title": link.title, "url": link.url, "as_of": resolution.as_of, "created": created, "source": resolution.source}]
    if cutoff is None:
        return _evidence(checker, OK, figures | {"existed": True}, provenance)
    created_day = _day(created)
    if created_day is not None:
        return _evidence(checker, OK, figures | {"existed": created_day <= cutoff}, provenance)
    if snapshot is not None and snapshot <= cutoff:
        return _evidence(checker, OK, figures | {"existed": True}, provenance)
    why = checker.created_errors.get((link.wiki, link.title), "its creation date was not asked")
    return _evidence(checker, UNKNOWN, figures, provenance, error=f"the article exists as of {resolution.as_of}, after the cutoff {cutoff}, and its creation date is unknown: {why}")


def _day(timestamp: str | None) -> date | None:
    if not timestamp:
        return None
    try:
        return date.fromisoformat(timestamp[:10])
    except ValueError:
        return None
