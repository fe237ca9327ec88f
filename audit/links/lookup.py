"""A langlinks lookup built by `audit.links.dump`, opened after its checks and answered
offline: by title from the SQL dumps' tables, by Wikidata item from the entity dump's
sitelinks.  A damaged database is an error naming it, at open or at the query that meets the
damage, never a traceback or an empty answer."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from audit.index.format import hash_file
from audit.links.dump import DATABASE, MANIFEST, sitelink_title
from audit.links.entities import WIKIDATA, is_qid
from audit.links.model import Link, LinksError, Resolution, display_title, link_to, page_title

# Lookups up to this size get SQLite's whole-file `integrity_check` at every open (under a second).
THOROUGH_CHECK_BYTES = 16 << 20


class LanglinksLookup:
    """A built lookup, opened after its checks."""

    def __init__(self, directory: Path, manifest: dict, database: sqlite3.Connection) -> None:
        self.directory, self.manifest, self.database = directory, manifest, database

    @classmethod
    def open(cls, directory: Path) -> LanglinksLookup:
        manifest_path, database_path = directory / MANIFEST, directory / DATABASE
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            expected = int(manifest["database"]["bytes"])
            wikis = manifest["wikis"]
            if not isinstance(wikis, dict):
                raise TypeError("wikis is not a table")
            if not isinstance(manifest.get("wikidata") or {}, dict):
                raise TypeError("wikidata is not a table")
        except FileNotFoundError:
            raise LinksError(f"{directory}: no langlinks lookup here ({MANIFEST} missing); build one with `audit langlinks build`") from None
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise LinksError(f"{manifest_path}: damaged manifest ({error})") from None
        size = database_path.stat().st_size if database_path.is_file() else None
        if size != expected:
            raise LinksError(f"{database_path}: {size if size is not None else 'no'} bytes where the manifest says {expected}: the lookup is damaged; build it again")
        lookup = cls(directory, manifest, sqlite3.connect(f"file:{database_path}?mode=ro", uri=True, check_same_thread=False))
        lookup.check(thorough=size <= THOROUGH_CHECK_BYTES)
        return lookup

    def check(self, thorough: bool) -> None:
        """The database's tables are there and readable, and, when `thorough`, every page is
        sound and every index agrees with its table (SQLite's `integrity_check`, which reads the
        whole file, so only small lookups get it at open; `verify` hashes a large one)."""
        found = {name for (name,) in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = sorted({"pages", "redirects", "links", "sitelinks"} - found)
        if missing:
            raise LinksError(f"{self.directory / DATABASE}: not a langlinks database (no table {', '.join(missing)}): the lookup is damaged; build it again")
        for table in ("pages", "redirects", "links", "sitelinks"):
            self._rows(f"SELECT * FROM {table} LIMIT 1")
        if thorough and (problems := self._rows("PRAGMA integrity_check(3)")) != [("ok",)]:
            raise LinksError(f"{self.directory / DATABASE}: damaged pages ({' '.join(' '.join(str(row[0]).split()) for row in problems)}): the lookup is damaged; build it again")

    def _rows(self, query: str, args: tuple = ()) -> list[tuple]:
        """A query's rows, or LinksError naming the database when SQLite finds it damaged."""
        try:
            return self.database.execute(query, args).fetchall()
        except sqlite3.DatabaseError as error:
            raise LinksError(f"{self.directory / DATABASE}: cannot be read ({error}): the lookup is damaged; build it again") from None

    def _row(self, query: str, args: tuple = ()) -> tuple | None:
        rows = self._rows(query, args)
        return rows[0] if rows else None

    def verify(self) -> None:
        """Re-hash the database against the manifest (a slow, whole-file check)."""
        if hash_file(self.directory / DATABASE) != self.manifest["database"]["blake2b"]:
            raise LinksError(f"{self.directory / DATABASE}: its hash differs from the manifest's: the lookup is damaged")

    @property
    def wikis(self) -> list[str]:
        return list(self.manifest["wikis"])

    def as_of(self, wiki: str) -> str | None:
        return self.manifest["wikis"].get(wiki, {}).get("dump_date")

    @property
    def wikidata_as_of(self) -> str | None:
        """The entity dump's date, None when the lookup was built without one."""
        return (self.manifest.get("wikidata") or {}).get("dump_date")

    def resolve_qid(self, qid: str) -> Resolution:
        """A Wikidata item's Wikipedia articles, from the entity dump's sitelinks."""
        qid = qid.strip().upper()
        source, as_of = f"wikidata entity dump {self.directory}", self.wikidata_as_of
        if not is_qid(qid):
            return Resolution(WIKIDATA, qid, False, as_of, source, qid=qid, reason=f"{qid!r} is not a Wikidata item id (Q and a number, like Q571)")
        if as_of is None:
            return Resolution(WIKIDATA, qid, False, None, source, qid=qid, reason="no Wikidata entity dump in this lookup (build it with a wikidata-YYYYMMDD-all.json.gz)")
        links = self._sitelinks(qid)
        if not links:
            return Resolution(WIKIDATA, qid, False, as_of, source, qid=qid, reason=f"no Wikipedia sitelink of {qid} in the Wikidata dump of {as_of} (no such item, or no Wikipedia has its article)")
        return Resolution(WIKIDATA, qid, True, as_of, source, qid=qid, links=links)

    def _sitelinks(self, qid: str) -> tuple[Link, ...]:
        rows = self._rows("SELECT wiki, title FROM sitelinks WHERE qid = ? ORDER BY wiki", (qid,))
        return tuple(link_to(wiki, title) for wiki, title in rows)

    def _by_sitelink(self, wiki: str, title: str, redirected_from: str | None = None) -> Resolution | None:
        """The answer of the item whose sitelink names (wiki, title), when the SQL dumps had none."""
        if self.wikidata_as_of is None:
            return None
        keys = (page_title(title), sitelink_title(title))
        row = self._row("SELECT qid, title FROM sitelinks WHERE wiki = ? AND title IN (?, ?) ORDER BY length(qid), qid LIMIT 1", (wiki, *keys))
        if row is None:
            return None
        qid, key = row
        links = tuple(link for link in self._sitelinks(qid) if link.wiki != wiki)
        source = f"wikidata entity dump {self.directory} (sitelinks of {qid})"
        return Resolution(wiki, display_title(key), True, self.wikidata_as_of, source, redirected_from=redirected_from, links=links, qid=qid)

    def _no_sitelink(self, wiki: str, title: str) -> str:
        if self.wikidata_as_of is None:
            return ""
        return f"; no item of the Wikidata dump of {self.wikidata_as_of} has a sitelink to {wiki}:{display_title(title)!r}"

    def resolve(self, wiki: str, title: str) -> Resolution:
        """An article's langlinks from the SQL dumps, or else from the Wikidata item whose
        sitelink names it."""
        source = f"langlinks dump {self.directory}"
        if wiki not in self.manifest["wikis"]:
            if found := self._by_sitelink(wiki, title):
                return found
            held = ", ".join(self.wikis) or "none"
            return Resolution(wiki, title, False, self.wikidata_as_of, source, reason=f"no {wiki} dump in this lookup (it has {held}){self._no_sitelink(wiki, title)}")
        key, as_of = page_title(title), self.as_of(wiki)
        page = self._row("SELECT page_id, redirect FROM pages WHERE wiki = ? AND title = ?", (wiki, key))
        redirected_from = None
        if page is not None and page[1]:
            target = self._row("SELECT target FROM redirects WHERE wiki = ? AND page_id = ?", (wiki, page[0]))
            if target is None:
                return Resolution(wiki, title, False, as_of, source, reason=f"{display_title(key)!r} is a redirect and the lookup has no {wiki} redirect dump")
            redirected_from, key = display_title(key), target[0]
            page = self._row("SELECT page_id, redirect FROM pages WHERE wiki = ? AND title = ?", (wiki, key))
        if page is None:
            if found := self._by_sitelink(wiki, key if redirected_from else title, redirected_from):
                return found
            has_pages = self.manifest["wikis"][wiki].get("pages", 0) > 0
            reason = f"no article {display_title(key)!r} in the {wiki} page dump" if has_pages else f"the lookup has no {wiki} page dump to find {display_title(key)!r} by title"
            return Resolution(wiki, title, False, as_of, source, reason=reason + self._no_sitelink(wiki, key))
        rows = self._rows("SELECT lang, title FROM links WHERE wiki = ? AND page_id = ? ORDER BY lang", (wiki, page[0]))
        links = tuple(link_to(code, linked) for code, linked in rows)
        return Resolution(wiki, display_title(key), True, as_of, source, page_id=page[0], redirected_from=redirected_from, links=links)

