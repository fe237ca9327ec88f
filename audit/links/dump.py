"""The langlinks lookup built from dumps: which other Wikipedias hold an article, as of the
dump's date, answered offline.

`build` streams each wiki's `langlinks` SQL dump (and its `page` dump, which maps titles to page
ids, and optionally its `redirect` dump), and the Wikidata JSON entity dump's Wikipedia
sitelinks, into one SQLite file in a staging directory, which is renamed into place with a
manifest: the wikis, their dump dates, the files (with sizes and hashes), the row counts, and
the SQLite file's own size and hash (blake2b-128, as index manifests record).
`audit.links.lookup.LanglinksLookup` opens it after checking the manifest, the file's size and
its tables, so a cut, swapped or damaged file is an error, never an empty answer.

The entity dump answers by Wikidata item (`resolve_qid`), and answers a title question that the
SQL dumps cannot (no page of that title, or no dump of that wiki) from the item whose sitelink
names the title, so an entity dump alone is a whole lookup.
"""
from __future__ import annotations

import bz2
import gzip
import json
import re
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlparse

from audit import __version__
from audit.index.format import hash_file
from audit.links.entities import WIKIDATA, dump_entity, sitelink_links
from audit.links.model import JsonObject, LinksError
from audit.links.sqldump import DumpError, DumpInfo, file_date, read_rows
from audit.links.wikis import WikiError, dbname_language, wiki_prefix
from audit.nospace import is_full_disk, no_space
from audit.outputs import check_directory_target, commit_directory, discard_staging, staging_directory
from audit.timestamps import utc_timestamp

DATABASE = "langlinks.sqlite"
MANIFEST = "audit-langlinks.json"
KIND = "langlinks lookup"
_BATCH = 50_000
# Entities between progress reports: most items carry no Wikipedia sitelink to fill a batch.
_ENTITY_STEP = 5_000
ENTITIES = "entities"
_ENTITY_DUMP = re.compile(r"-all\.json(?:\.gz|\.bz2)?$")
_ENTITY_DATE = re.compile(r"^(?:wikidata-)?(\d{8})-all\.json")
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
CREATE TABLE sitelinks (qid TEXT NOT NULL, wiki TEXT NOT NULL, title TEXT NOT NULL, PRIMARY KEY (qid, wiki)) WITHOUT ROWID;
"""
# Made once the sitelinks are in: one sort instead of an index kept up row by row.
_SITELINK_INDEX = "CREATE INDEX sitelinks_by_title ON sitelinks (wiki, title)"


@dataclass(frozen=True)
class DumpFile:
    """One dump file, by what its name says: the wiki, the table, the date."""

    path: Path
    wiki: str
    table: str

    @classmethod
    def of(cls, path: Path, wiki: str | None = None) -> DumpFile:
        name = path.name
        if _ENTITY_DUMP.search(name):
            return cls(path, WIKIDATA, ENTITIES)
        table = next((t for t in ("langlinks", "page", "redirect") if f"-{t}.sql" in name or name.startswith(f"{t}.sql")), None)
        if table is None:
            raise LinksError(f"{path}: not a langlinks, page or redirect dump, nor a Wikidata entity dump (expected a name like enwiki-20230701-langlinks.sql.gz or wikidata-20230703-all.json.gz)")
        try:
            found = wiki_prefix(wiki if wiki else dbname_language(name.split("-", 1)[0]))
        except WikiError as error:
            hint = "give its wiki's prefix (like en)" if wiki else f"name the file after its wiki, like enwiki-20230701-{table}.sql.gz, or give --wiki (like en)"
            raise LinksError(f"{path}: {error}; {hint}") from None
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


def entity_dump_date(path: Path) -> date | None:
    """The date in an entity dump's standard name (`wikidata-20230703-all.json.gz`); the
    `latest-all.json.gz` link has none."""
    found = _ENTITY_DATE.match(path.name)
    if not found:
        return None
    try:
        return datetime.strptime(found.group(1), "%Y%m%d").date()
    except ValueError:
        return None


def sitelink_title(title: str) -> str:
    """A sitelink's title as the page dumps key it, underscores for spaces, but its first letter
    kept: a sitelink already holds the canonical title, and `page_title`'s capital is wrong for
    the few scripts MediaWiki leaves alone (Georgian `ვერლა`)."""
    return "_".join(title.strip().replace("_", " ").split())


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
    if info.rows == 0 and not info.whole_dump:
        raise LinksError(f"{dump.path}: no rows: the file is empty or holds no INSERT INTO `{dump.table}` statement (not a {dump.table} dump?)")
    return loaded, info.completed


def _entity_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset in the JSON text, line) of a plain, gzipped or bzip2ed entity
    dump, streamed."""
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix)
    number = offset = 0
    with open(path, "rb") as raw, (opener(raw) if opener else raw) as stream:
        try:
            for number, line in enumerate(stream, 1):
                yield number, offset, line
                offset += len(line)
        except (EOFError, OSError, zlib.error) as error:
            raise LinksError(f"{path}: line {number + 1}, byte {offset}: the dump is cut short or damaged ({error})") from None


@cache
def _sitelink_wiki(site: str) -> str | None:
    """The wiki `sitelink_links` files a site's link under (None: no Wikipedia), worked out once
    a site: a few hundred sites recur in a hundred million entities, and naming one is slow."""
    links = sitelink_links({site: {"title": site}})
    return links[0].wiki if links else None


def _entity(where: str, line: bytes) -> tuple[str, dict]:
    """The id and sitelinks of one entity line, or an error saying where it is."""
    try:
        entity = dump_entity(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise LinksError(f"{where}: not valid UTF-8") from None
    except json.JSONDecodeError as error:
        raise LinksError(f"{where}: not JSON ({error.msg} at column {error.colno})") from None
    except ValueError as error:
        raise LinksError(f"{where}: not a Wikidata entity ({error})") from None
    if entity is None:
        raise LinksError(f"{where}: not a Wikidata entity (a bracket inside the dump)")
    qid, sitelinks = entity["id"], entity.get("sitelinks") or {}
    if not isinstance(qid, str) or not isinstance(sitelinks, dict):
        raise LinksError(f"{where}: not a Wikidata entity (id {qid!r}, sitelinks a {type(sitelinks).__name__})")
    return qid, sitelinks


def _sitelink_rows(qid: str, sitelinks: dict) -> Iterator[tuple[str, str, str]]:
    for site, sitelink in sitelinks.items():
        wiki, title = _sitelink_wiki(site), sitelink.get("title") if isinstance(sitelink, dict) else None
        if wiki is not None and isinstance(title, str) and title:
            yield qid, wiki, sitelink_title(title)


def _load_entities(database: sqlite3.Connection, dump: DumpFile, on_rows: Callable[[int], None]) -> tuple[int, int]:
    """(entities, sitelink rows) of one entity dump: `[`, one entity a line, `]`; a dump
    without its closing `]` was cut short, even at a line's end."""
    entities = loaded = pending = number = 0
    batch: list[tuple[str, str, str]] = []
    opened = closed = False

    def flush() -> None:
        nonlocal loaded, pending
        database.executemany("INSERT OR REPLACE INTO sitelinks VALUES (?, ?, ?)", batch)
        loaded += len(batch)
        on_rows(pending)
        batch.clear()
        pending = 0

    with closing(_entity_lines(dump.path)) as lines:
        for number, offset, line in lines:
            where = f"{dump.path}: line {number}, byte {offset}"
            bare = line.strip()
            if not bare:
                continue
            if closed:
                raise LinksError(f"{where}: text after the closing ]")
            if not opened:
                if bare != b"[":
                    raise LinksError(f"{where}: not a Wikidata JSON dump (its first line is not [)")
                opened = True
                continue
            if bare == b"]":
                closed = True
                continue
            qid, sitelinks = _entity(where, line)
            batch.extend(_sitelink_rows(qid, sitelinks))
            entities += 1
            pending += 1
            if len(batch) >= _BATCH or pending >= _ENTITY_STEP:
                flush()
    flush()
    if not closed:
        raise LinksError(f"{dump.path}: the dump is cut short: no closing ] " + (f"after line {number}" if number else "(the file is empty)"))
    return entities, loaded


def build(paths: list[Path], out: Path, *, wiki: str | None = None, dump_date: date | None = None, on_rows: Callable[[int], None] = lambda n: None) -> dict[str, object]:
    """Build the lookup from dump files into `out`, replaced only if this tool wrote it."""
    dumps = [DumpFile.of(path, wiki) for path in paths]
    if any(d.table != ENTITIES for d in dumps) and not any(d.table == "langlinks" for d in dumps):
        raise LinksError("no langlinks dump among the files (a name like enwiki-20230701-langlinks.sql.gz)")
    for dump in dumps:
        if dump.table == ENTITIES and not (dump_date or entity_dump_date(dump.path)):
            raise LinksError(f"{dump.path}: no date in its name (wikidata-YYYYMMDD-all.json.gz); give --dump-date")
    check_directory_target(out, KIND, inputs=paths)
    staging = staging_directory(out)
    try:
        manifest = _build_into(staging, dumps, dump_date, on_rows)
        commit_directory(staging, out, KIND, inputs=paths)
    except (OSError, sqlite3.OperationalError) as error:
        discard_staging(staging)
        if is_full_disk(error):
            name = Path(getattr(error, "filename", None) or DATABASE).name
            raise no_space(out / name) from None
        raise
    except BaseException:
        discard_staging(staging)
        raise
    return manifest


def _build_into(staging: Path, dumps: list[DumpFile], dump_date: date | None, on_rows: Callable[[int], None]) -> dict[str, object]:
    database = sqlite3.connect(staging / DATABASE)
    wikis: dict[str, WikiDumps] = {}
    wikidata = WikiDumps(WIKIDATA, counts={ENTITIES: 0})
    try:
        database.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        for dump in dumps:
            if dump.table == ENTITIES:
                entities, loaded = _load_entities(database, dump, on_rows)
                entry, described = wikidata, {"entities": entities}
                wikidata.counts[ENTITIES] += entities
                when, dated_by = dump_date or entity_dump_date(dump.path), "its name (wikidata-YYYYMMDD-all.json.gz)"
            else:
                loaded, completed = _load(database, dump, on_rows)
                entry, described = wikis.setdefault(dump.wiki, WikiDumps(dump.wiki)), {}
                when, dated_by = dump_date or file_date(dump.path) or completed, "its name or its footer"
            if when is None:
                raise LinksError(f"{dump.path}: no date in {dated_by}; give --dump-date")
            if entry.dump_date not in (None, when):
                raise LinksError(f"{dump.path}: dated {when}, but the {dump.wiki} files before it are dated {entry.dump_date}; build one snapshot at a time")
            entry.dump_date = when
            entry.files.append({"path": str(dump.path.resolve()), "table": dump.table, "bytes": dump.path.stat().st_size, "blake2b": hash_file(dump.path), "rows": loaded, **described})
        database.execute(_SITELINK_INDEX)
        database.commit()
        for name, entry in wikis.items():
            entry.counts = {table: database.execute(f"SELECT count(*) FROM {table} WHERE wiki = ?", (name,)).fetchone()[0] for table in _TABLES.values()}
        wikidata.counts["sitelinks"] = database.execute("SELECT count(*) FROM sitelinks").fetchone()[0]
    except DumpError as error:
        raise LinksError(str(error)) from None
    finally:
        database.close()
    manifest = {
        "tool": "corpus-audit",
        "version": __version__,
        "created": utc_timestamp(),
        "wikis": {name: entry.to_dict() for name, entry in wikis.items()},
        "wikidata": wikidata.to_dict() if wikidata.files else None,
        "database": {"bytes": (staging / DATABASE).stat().st_size, "blake2b": hash_file(staging / DATABASE)},
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


def summary(manifest: JsonObject) -> list[str]:
    """One line a snapshot of a build's manifest, what `audit langlinks build` reports."""
    lines = [f"{name}wiki as of {entry['dump_date']}: {entry['links']:,} langlinks, {entry['pages']:,} pages, {entry['redirects']:,} redirects" for name, entry in manifest["wikis"].items()]
    if wikidata := manifest.get("wikidata"):
        lines.append(f"wikidata as of {wikidata['dump_date']}: {wikidata['entities']:,} entities, {wikidata['sitelinks']:,} Wikipedia sitelinks")
    return lines
