"""A persistent cache of langlinks answers, so a re-run asks no API and `--offline` can answer.

Answers are keyed by the service that gave them, the wiki, the title (or `wikidata` and the
entity id) and the day they were retrieved: a later day's answer never replaces an earlier
one, so an audit can say which snapshot it used, and a cached answer older than `max_age_days`
is asked again when online.  Only answers are stored, never failures.  Creation dates (an
article's first revision) do not change, so they are keyed by wiki and title alone.
"""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from audit.links.model import Article, LinksError, Resolution
from audit.store import SqliteStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    service TEXT NOT NULL, wiki TEXT NOT NULL, title TEXT NOT NULL, day TEXT NOT NULL, resolution TEXT NOT NULL,
    PRIMARY KEY (service, wiki, title, day)
);
CREATE TABLE IF NOT EXISTS created (
    wiki TEXT NOT NULL, title TEXT NOT NULL, created TEXT, retrieved TEXT NOT NULL,
    PRIMARY KEY (wiki, title)
);
"""


def _key(article: Article) -> tuple[str, str]:
    if article.qid:
        return "wikidata", article.qid
    return article.wiki or "", article.title or ""


class LinksCache:
    def __init__(self, path: Path) -> None:
        self._store = SqliteStore(path, SCHEMA, "langlinks cache", LinksError)
        self.path = self._store.path
        self._run = self._store.run

    def get(self, service: str, article: Article, max_age_days: int | None = None) -> Resolution | None:
        """The newest answer, if it is at most `max_age_days` old (any age when None)."""
        wiki, title = _key(article)
        rows = self._run("SELECT day, resolution FROM answers WHERE service = ? AND wiki = ? AND title = ? ORDER BY day DESC LIMIT 1", (service, wiki, title))
        if not rows:
            return None
        day, stored = rows[0]
        if max_age_days is not None and day < (datetime.now(UTC) - timedelta(days=max_age_days)).date().isoformat():
            return None
        try:
            return Resolution.from_dict(json.loads(stored))
        except (ValueError, TypeError) as error:
            raise LinksError(f"{self.path}: a damaged answer for {article} ({error}); delete the file to start afresh") from None

    def put(self, service: str, article: Article, resolution: Resolution) -> None:
        wiki, title = _key(article)
        day = (resolution.as_of or datetime.now(UTC).isoformat())[:10]
        self._run("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)", (service, wiki, title, day, json.dumps(resolution.to_dict(), ensure_ascii=False)))

    def get_created(self, wiki: str, title: str) -> tuple[bool, str | None]:
        """(whether cached, the creation time or None for a page that did not exist)."""
        rows = self._run("SELECT created FROM created WHERE wiki = ? AND title = ?", (wiki, title))
        return (True, rows[0][0]) if rows else (False, None)

    def put_created(self, wiki: str, title: str, created: str | None) -> None:
        self._run("INSERT OR REPLACE INTO created VALUES (?, ?, ?, ?)", (wiki, title, created, datetime.now(UTC).isoformat(timespec="seconds")))

    def entries(self) -> int:
        return int(self._run("SELECT COUNT(*) FROM answers", ())[0][0])
