"""ECLeKTic's premise, checked against the langlinks signal's evidence: an item whose article
existed in its source language's Wikipedia only was seen in that language only.  The premise
fails for an item as soon as any link source shows an article in another audited language at
the cutoff (or at the snapshot, without one); it holds only when every other language was
answered and none had one, so a source that could not answer leaves the item unknown rather
than counted as single-language."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from audit.auditfile import AuditFile
from audit.evidence import ABSENT, OK
from audit.records import JsonObject
from audit.signals.langlinks_spec import NAME

HOLDS, FAILS, UNKNOWN, NO_ARTICLE = "holds", "fails", "unknown", "no_article"


@dataclass
class _Item:
    item_id: str
    source_lang: str
    resolved: bool = False
    named: bool = False
    article: JsonObject = field(default_factory=dict)
    item_article: str | None = None
    answered: set[str] = field(default_factory=set)
    targets: set[str] = field(default_factory=set)
    existing: dict[str, list[JsonObject]] = field(default_factory=dict)

    def add(self, lang: str, evidence: JsonObject) -> None:
        figures = evidence.get("figures") or {}
        self.named = self.named or evidence.get("status") != ABSENT
        self.resolved = self.resolved or "article" in figures
        self.item_article = self.item_article or figures.get("item_article")
        if lang == self.source_lang:
            if figures.get("title") and not self.article:
                self.article = {"title": figures["title"], "url": figures.get("url")}
            return
        self.targets.add(lang)
        if evidence.get("status") == OK:
            self.answered.add(lang)
        if figures.get("existed") is True:
            self.existing.setdefault(lang, []).append(
                {"source": evidence.get("source"), "title": figures.get("title"), "url": figures.get("url"), "created": figures.get("created"), "as_of": figures.get("as_of")}
            )

    def verdict(self) -> str:
        if self.existing:
            return FAILS
        if not self.named:
            return NO_ARTICLE
        return HOLDS if self.answered == self.targets else UNKNOWN

    def articles(self) -> list[JsonObject]:
        """One article per language where one existed: the one with the earliest known creation
        date among the sources that showed one."""
        return [{"lang": lang} | min(found, key=_earliest) for lang, found in sorted(self.existing.items())]


def _earliest(article: JsonObject) -> tuple[bool, str]:
    return (article["created"] is None, article["created"] or article["as_of"] or "")


def _since(articles: list[JsonObject]) -> JsonObject:
    """When an article in another language existed: the earliest creation date known, and the
    earliest snapshot that showed one (it existed by then).  The creation date says since when
    (`exact`) only if no snapshot shows an article, of unknown age, before it."""
    created = min((a["created"] for a in articles if a["created"]), default=None)
    by = min((a["as_of"] for a in articles if a["as_of"]), default=None)
    return {"created": created, "by": by, "exact": created is not None and (by is None or created[:10] <= by[:10])}


def _summary(items: list[_Item], rows: dict[str, JsonObject]) -> JsonObject:
    verdicts = Counter(item.verdict() for item in items)
    failing = [article for item in items if item.existing for article in rows[item.item_id]["articles"]]
    return {
        "items": len(items),
        "resolved": sum(item.resolved for item in items),
        **{verdict: verdicts.get(verdict, 0) for verdict in (HOLDS, FAILS, UNKNOWN, NO_ARTICLE)},
        "fails_in": dict(sorted(Counter(article["lang"] for article in failing).items())),
        "since": _since(failing),
    }


class Premise:
    """The premise section read one record at a time: only the langlinks evidence is kept."""

    def __init__(self) -> None:
        self.items: dict[str, _Item] = {}
        self.answered: dict[str, list[str]] = {}

    def add(self, record: JsonObject) -> None:
        for evidence in record["evidence"]:
            if evidence.get("signal") != NAME:
                continue
            item = self.items.setdefault(record["item_id"], _Item(record["item_id"], record["source_lang"]))
            item.add(record["lang"], evidence)
            as_of = (evidence.get("figures") or {}).get("as_of")
            self.answered.setdefault(str(evidence.get("source")), []).extend([as_of] if as_of else [])

    def section(self, manifest: JsonObject) -> JsonObject | None:
        """Per source language, how many items keep the premise, and the items that do not, each
        with the articles that break it; None when the langlinks signal did not run."""
        if not self.items:
            return None
        items = list(self.items.values())
        rows = {
            item.item_id: {"item_id": item.item_id, "source_lang": item.source_lang, "article": {"item_article": item.item_article} | item.article, "articles": item.articles()}
            for item in items
            if item.existing
        }
        for row in rows.values():
            row["since"] = _since(row["articles"])
        by_source: dict[str, list[_Item]] = {}
        for item in items:
            by_source.setdefault(item.source_lang, []).append(item)
        return {
            "cutoff": (manifest.get("links") or {}).get("as_of"),
            "sources": self._sources(manifest),
            "total": _summary(items, rows),
            "per_source_lang": {lang: _summary(group, rows) for lang, group in sorted(by_source.items())},
            "items": list(rows.values()),
        }

    def _sources(self, manifest: JsonObject) -> list[JsonObject]:
        """The link sources the audit asked, each with the snapshot dates its manifest entry
        names (a dump's per wiki) and the range of dates its answers carry (an API's retrieval
        times)."""
        described = {source["name"]: source for source in (manifest.get("links") or {}).get("sources", [])}
        return [
            {"name": name}
            | {key: value for key, value in described.get(name, {}).items() if key in ("backend", "path", "endpoint", "wikis", "wikidata")}
            | {"answers_as_of": [min(dates), max(dates)] if dates else None}
            for name, dates in self.answered.items()
        ]


def premise_section(audit: AuditFile) -> JsonObject | None:
    """The premise section of a whole audit (see `Premise.section`)."""
    premise = Premise()
    for record in audit.records:
        premise.add(record)
    return premise.section(audit.manifest)
