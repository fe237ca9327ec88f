"""The langlinks lookup built from SQL dumps: which other Wikipedias hold an article, as of the
dump's date, answered offline.

`build` streams each wiki's `langlinks` dump (and its `page` dump, which maps titles to page
ids, and optionally its `redirect` dump) into one SQLite file in a staging directory, which is
renamed into place with a manifest: the wikis, their dump dates, the files (with sizes and
hashes), the row counts, and the SQLite file's own size and hash (blake2b-128, as index
manifests record).  `LanglinksLookup.open` checks the manifest and the file's size before
answering, so a cut or swapped file is an error, never an empty answer.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

from audit import __version__
from audit.indexing import hash_file
from audit.links.sqldump import DumpError, DumpInfo, file_date, read_rows
from audit.links.wikis import WikiError, dbname_language, wiki_language
from audit.outputs import check_directory_target, commit_directory, discard_staging, staging_directory
from audit.timestamps import utc_timestamp

DATABASE = "langlinks.sqlite"
MANIFEST = "audit-langlinks.json"
KIND = "langlinks lookup"
_BATCH = 50_000
# Each dump's table in the lookup, also the name of its count in the manifest.
_TABLES = {"langlinks": "links", "page": "pages", "redirect": "redirects"}
# Column orders of dumps that carry no CREATE TABLE (excerpts), as MediaWiki documents them.
LANGLINKS_COLUMNS = ("ll_from", "ll_lang", "ll_title")
PAGE_COLUMNS = ("page_id", "page_namespace", "page_title", "page_is_redirect", "page_is_new", "page_random", "page_touched", "page_links_updated", "page_latest", "page_len", "page_content_model", "page_lang")
REDIRECT_COLUMNS = ("rd_from", "rd_namespace", "rd_title", "rd_interwiki", "rd_fragment")
_SCHEMA = """
CREATE TABLE pages (wiki TEXT NOT NULL, title TEXT NOT NULL, page_id INTEGER NOT NULL, redirect INTEGER NOT NULL, PRIMARY KEY (wiki, title)) WITHOUT ROWID;
CREATE TABLE redirects (wiki TEXT NOT NULL, page_id INTEGER NOT NULL, target TEXT NOT NULL, PRIMARY KEY (wiki, page_id)) WITHOUT ROWID;
CREATE TABLE links (wiki TEXT NOT NULL, page_id INTEGER NOT NULL, lang TEXT NOT NULL, title TEXT NOT NULL, PRIMARY KEY (wiki, page_id, lang)) WITHOUT ROWID;
"""


class LinksError(Exception):
    """A lookup that cannot be built or opened; the message names the file."""


@dataclass(frozen=True)
class DumpFile:
    """One dump file, by what its name says: the wiki, the table, the date."""

    path: Path
    wiki: str
    table: str

    @classmethod
    def of(cls, path: Path, wiki: str | None = None) -> DumpFile:
        name = path.name
        table = next((t for t in ("langlinks", "page", "redirect") if f"-{t}.sql" in name), None)
        if table is None:
            raise LinksError(f"{path}: not a langlinks, page or redirect dump (expected a name like enwiki-20230701-langlinks.sql.gz)")
        try:
            found = wiki or dbname_language(name.split("-", 1)[0])
        except WikiError as error:
            raise LinksError(f"{path}: {error}; give --wiki") from None
        return cls(path, found, table)


@dataclass
class WikiDumps:
    """One wiki's snapshot: its date, its files, and the rows each lookup table holds."""

    wiki: str
    dump_date: date | None = None
    files: list[dict[str, object]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"dump_date": self.dump_date.isoformat() if self.dump_date else None, **self.counts, "files": self.files}


def page_title(title: str) -> str:
    """A title as page dumps and the API key it: spaces as underscores, first letter capital."""
    text = "_".join(title.strip().replace("_", " ").split())
    return text[:1].upper() + text[1:]


def display_title(title: str) -> str:
    return title.replace("_", " ")


def article_url(wiki: str, title: str) -> str:
    return f"https://{wiki}.wikipedia.org/wiki/{quote(page_title(title), safe='()_,:;!$*+/@-')}"


def parse_article(value: str, wiki: str | None = None) -> tuple[str, str]:
    """(wiki, title) from an article URL (`https://fr.m.wikipedia.org/wiki/Paris`), or from a
    title with its wiki given."""
    if value.startswith(("http://", "https://")):
        parsed = urlparse(value)
        host = parsed.netloc.lower().split(".")
        if len(host) < 3 or host[-2:] != ["wikipedia", "org"] or not parsed.path.startswith("/wiki/"):
            raise ValueError(f"{value!r} is not a Wikipedia article URL (https://LANG.wikipedia.org/wiki/TITLE)")
        return host[0], unquote(parsed.path.removeprefix("/wiki/"))
    if not wiki:
        raise ValueError(f"{value!r}: a title needs its wiki (--lang)")
    return wiki, value


def _batched(rows: Iterable[tuple], size: int = _BATCH) -> Iterator[list[tuple]]:
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _load(database: sqlite3.Connection, dump: DumpFile, on_rows: Callable[[int], None]) -> tuple[int, date | None]:
    info = DumpInfo()
    if dump.table == "langlinks":
        rows = ((dump.wiki, page_id, lang, title) for page_id, lang, title in read_rows(dump.path, "langlinks", LANGLINKS_COLUMNS, ("ll_from", "ll_lang", "ll_title"), info) if title)
        statement = "INSERT OR REPLACE INTO links VALUES (?, ?, ?, ?)"
    elif dump.table == "page":
        wanted = ("page_id", "page_namespace", "page_title", "page_is_redirect")
        rows = ((dump.wiki, title, page_id, redirect) for page_id, namespace, title, redirect in read_rows(dump.path, "page", PAGE_COLUMNS, wanted, info) if namespace == 0)
        statement = "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)"
    else:
        wanted = ("rd_from", "rd_namespace", "rd_title")
        rows = ((dump.wiki, page_id, title) for page_id, namespace, title in read_rows(dump.path, "redirect", REDIRECT_COLUMNS, wanted, info) if namespace == 0)
        statement = "INSERT OR REPLACE INTO redirects VALUES (?, ?, ?)"
    loaded = 0
    for batch in _batched(rows):
        database.executemany(statement, batch)
        loaded += len(batch)
        on_rows(len(batch))
    return loaded, info.completed


def build(paths: list[Path], out: Path, *, wiki: str | None = None, dump_date: date | None = None, on_rows: Callable[[int], None] = lambda n: None) -> dict[str, object]:
    """Build the lookup from dump files into `out`, replaced only if this tool wrote it."""
    dumps = [DumpFile.of(path, wiki) for path in paths]
    if not any(d.table == "langlinks" for d in dumps):
        raise LinksError("no langlinks dump among the files (a name like enwiki-20230701-langlinks.sql.gz)")
    check_directory_target(out, KIND, inputs=paths)
    staging = staging_directory(out)
    try:
        manifest = _build_into(staging, dumps, dump_date, on_rows)
        commit_directory(staging, out, KIND, inputs=paths)
    except BaseException:
        discard_staging(staging)
        raise
    return manifest


def _build_into(staging: Path, dumps: list[DumpFile], dump_date: date | None, on_rows: Callable[[int], None]) -> dict[str, object]:
    database = sqlite3.connect(staging / DATABASE)
    wikis: dict[str, WikiDumps] = {}
    try:
        database.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        for dump in dumps:
            loaded, completed = _load(database, dump, on_rows)
            entry = wikis.setdefault(dump.wiki, WikiDumps(dump.wiki))
            when = dump_date or file_date(dump.path) or completed
            if when is None:
                raise LinksError(f"{dump.path}: no date in its name or its footer; give --dump-date")
            if entry.dump_date not in (None, when):
                raise LinksError(f"{dump.path}: dated {when}, but the {dump.wiki} files before it are dated {entry.dump_date}; build one snapshot at a time")
            entry.dump_date = when
            entry.files.append({"path": str(dump.path.resolve()), "table": dump.table, "bytes": dump.path.stat().st_size, "blake2b": hash_file(dump.path), "rows": loaded})
        database.commit()
        for name, entry in wikis.items():
            entry.counts = {table: database.execute(f"SELECT count(*) FROM {table} WHERE wiki = ?", (name,)).fetchone()[0] for table in _TABLES.values()}
    except DumpError as error:
        raise LinksError(str(error)) from None
    finally:
        database.close()
    manifest = {
        "tool": "corpus-audit",
        "version": __version__,
        "created": utc_timestamp(),
        "wikis": {name: entry.to_dict() for name, entry in wikis.items()},
        "database": {"bytes": (staging / DATABASE).stat().st_size, "blake2b": hash_file(staging / DATABASE)},
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


@dataclass(frozen=True)
class Link:
    wiki: str
    lang: str | None
    title: str
    url: str


@dataclass(frozen=True)
class Resolution:
    """Where one article stands in a snapshot: its page (or why none), and its langlinks."""

    wiki: str
    title: str
    found: bool
    as_of: str | None
    source: str
    page_id: int | None = None
    redirected_from: str | None = None
    links: tuple[Link, ...] = ()
    reason: str | None = None

    def in_language(self, lang: str) -> Link | None:
        return next((link for link in self.links if link.lang == lang), None)


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
        except FileNotFoundError:
            raise LinksError(f"{directory}: no langlinks lookup here ({MANIFEST} missing); build one with `audit langlinks build`") from None
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise LinksError(f"{manifest_path}: damaged manifest ({error})") from None
        size = database_path.stat().st_size if database_path.is_file() else None
        if size != expected:
            raise LinksError(f"{database_path}: {size if size is not None else 'no'} bytes where the manifest says {expected}: the lookup is damaged; build it again")
        database = sqlite3.connect(f"file:{database_path}?mode=ro", uri=True, check_same_thread=False)
        return cls(directory, manifest, database)

    def verify(self) -> None:
        """Re-hash the database against the manifest (a slow, whole-file check)."""
        if hash_file(self.directory / DATABASE) != self.manifest["database"]["blake2b"]:
            raise LinksError(f"{self.directory / DATABASE}: its hash differs from the manifest's: the lookup is damaged")

    @property
    def wikis(self) -> list[str]:
        return list(self.manifest["wikis"])

    def as_of(self, wiki: str) -> str | None:
        return self.manifest["wikis"].get(wiki, {}).get("dump_date")

    def resolve(self, wiki: str, title: str) -> Resolution:
        source = f"langlinks dump {self.directory}"
        if wiki not in self.manifest["wikis"]:
            return Resolution(wiki, title, False, None, source, reason=f"no {wiki} dump in this lookup (it has {', '.join(self.wikis)})")
        key, as_of = page_title(title), self.as_of(wiki)
        page = self.database.execute("SELECT page_id, redirect FROM pages WHERE wiki = ? AND title = ?", (wiki, key)).fetchone()
        redirected_from = None
        if page is not None and page[1]:
            target = self.database.execute("SELECT target FROM redirects WHERE wiki = ? AND page_id = ?", (wiki, page[0])).fetchone()
            if target is None:
                return Resolution(wiki, title, False, as_of, source, reason=f"{display_title(key)!r} is a redirect and the lookup has no {wiki} redirect dump")
            redirected_from, key = display_title(key), target[0]
            page = self.database.execute("SELECT page_id, redirect FROM pages WHERE wiki = ? AND title = ?", (wiki, key)).fetchone()
        if page is None:
            has_pages = self.manifest["wikis"][wiki].get("pages", 0) > 0
            reason = f"no article {display_title(key)!r} in the {wiki} page dump" if has_pages else f"the lookup has no {wiki} page dump to find {display_title(key)!r} by title"
            return Resolution(wiki, title, False, as_of, source, reason=reason)
        rows = self.database.execute("SELECT lang, title FROM links WHERE wiki = ? AND page_id = ? ORDER BY lang", (wiki, page[0])).fetchall()
        links = tuple(Link(prefix, _language(prefix), linked, article_url(prefix, linked)) for prefix, linked in rows)
        return Resolution(wiki, display_title(key), True, as_of, source, page_id=page[0], redirected_from=redirected_from, links=links)


def _language(prefix: str) -> str | None:
    try:
        return wiki_language(prefix)
    except WikiError:
        return None
