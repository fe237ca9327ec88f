"""The langlinks lookup from SQL dumps: real `langlinks` rows (tests/fixtures/langlinks), with
`page` and `redirect` rows for the same page ids made here, in the shapes MediaWiki's dumps
have (an excerpt, and a whole `mysqldump` file with its header, schema and footer).  And from
the Wikidata JSON entity dump: real entities (tests/fixtures/langlinks/wikidata) written here
one a line, as the dump lays them out, plain, gzipped and bzip2ed."""
from __future__ import annotations

import bz2
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from audit.cli import main
from audit.links.cache import LinksCache
from audit.links.dump import MANIFEST, DumpFile, LinksError, build, entity_dump_date, parse_article
from audit.links.entities import sitelink_links
from audit.links.lookup import LanglinksLookup
from audit.links.sqldump import DumpError, DumpInfo, parse_tuple, read_rows
from audit.links.wikis import WikiError, dbname_language, wiki_for, wiki_language, wiki_prefix
from audit.probes.cache import ProbeCache
from audit.probes.generation import ProbeError

EXCERPT = FIXTURES / "langlinks" / "langlinks_excerpts.sql"
LANGLINKS = ("ll_from", "ll_lang", "ll_title")


def real_rows() -> list[tuple[int, str, str]]:
    """The fixture's rows, read independently of the parser under test."""
    text = EXCERPT.read_text(encoding="utf-8")
    return [(int(a), b, c) for a, b, c in re.findall(r"\((\d+),'(\w+)','((?:[^'\\]|\\.)*)'\)", text)]


@pytest.mark.parametrize(
    ("wiki", "lang"),
    [("als", "gsw"), ("no", "nb"), ("zh-yue", "yue"), ("zh-min-nan", "nan"), ("zh-classical", "lzh"), ("bat-smg", "sgs"),
     ("fiu-vro", "vro"), ("roa-rup", "rup"), ("cbk-zam", "cbk"), ("nds-nl", "nds-NL"), ("be-tarask", "be-tarask"), ("fr", "fr"), ("zh", "zh")],
)
def test_wiki_prefixes_and_benchmark_codes_map_both_ways(wiki, lang):
    assert wiki_language(wiki) == lang
    assert wiki_for(lang) == wiki


def test_wikis_that_name_no_benchmark_language():
    assert wiki_language("simple") is None  # Simple English is not English
    assert wiki_language("be-x-old") == "be-tarask"  # the old prefix of the same wiki
    assert (wiki_for("zh-Hans"), wiki_for("pt-BR"), wiki_for("ita_Latn")) == ("zh", "pt", "it")
    assert (dbname_language("enwiki"), dbname_language("zh_yuewiki")) == ("en", "zh-yue")


def test_values_with_escapes_and_nulls():
    assert parse_tuple(r"(7,'l\'été','a\\b\nc',NULL,-2.5,'(x),y')") == [7, "l'été", "a\\b\nc", None, -2.5, "(x),y"]


def test_real_rows_are_read_in_order():
    info = DumpInfo()
    rows = list(read_rows(EXCERPT, "langlinks", LANGLINKS, LANGLINKS, info))
    assert rows == real_rows() and info.rows == 29 and not info.whole_dump
    assert (47926106, "fr", "") in rows


def whole_dump(rows: list[tuple[int, str, str]], *, footer: bool = True) -> str:
    """A `mysqldump` file as Wikimedia publishes one, columns in MediaWiki 1.4x order."""
    values = ",".join(f"({a},'{b}','{c}')" for a, b, c in rows)
    text = (
        "-- MySQL dump 10.19  Distrib 10.3.38-MariaDB, for debian-linux-gnu (x86_64)\n--\n-- Host: db1    Database: enwiki\n"
        "DROP TABLE IF EXISTS `langlinks`;\nCREATE TABLE `langlinks` (\n"
        "  `ll_from` int(8) unsigned NOT NULL DEFAULT 0,\n  `ll_lang` varbinary(35) NOT NULL DEFAULT '',\n"
        "  `ll_title` varbinary(255) NOT NULL DEFAULT '',\n  PRIMARY KEY (`ll_from`,`ll_lang`)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=binary;\n"
        f"INSERT INTO `langlinks` VALUES {values};\n"
    )
    return text + ("-- Dump completed on 2023-07-02  4:12:31\n" if footer else "")


def page_dump(pages: list[tuple[int, str, int]]) -> str:
    values = ",".join(f"({i},0,'{t}',{r},0,0.1,'20230701000000','20230701000000',1,100,'wikitext',NULL)" for i, t, r in pages)
    values += ",(5,1,'Talk_page',0,0,0.1,'20230701000000',NULL,1,100,'wikitext',NULL)"
    return f"INSERT INTO `page` VALUES {values};\n"


@pytest.fixture
def dumps(tmp_path: Path) -> list[Path]:
    rows = real_rows()
    gz = tmp_path / "enwiki-20230701-langlinks.sql.gz"
    gz.write_bytes(gzip.compress(whole_dump(rows).encode()))
    page = tmp_path / "enwiki-20230701-page.sql"
    page.write_text(page_dump([(34893, "1640", 0), (20540019, "Algerian", 0), (35202, "1641", 0), (999, "Year_1640", 1)]), encoding="utf-8")
    redirect = tmp_path / "enwiki-20230701-redirect.sql"
    redirect.write_text("INSERT INTO `redirect` VALUES (999,0,'1640','','');\n", encoding="utf-8")
    return [gz, page, redirect]


def test_a_whole_dump_is_read_by_its_schema_and_dated_by_its_footer(dumps):
    info = DumpInfo()
    rows = list(read_rows(dumps[0], "langlinks", ("ll_lang", "ll_from", "ll_title"), LANGLINKS, info))
    assert rows == real_rows()
    assert info.columns == LANGLINKS and info.whole_dump and str(info.completed) == "2023-07-02"


def test_the_lookup_answers_with_titles_urls_and_the_dump_date(dumps, tmp_path):
    manifest = build(dumps, tmp_path / "lookup")
    entry = manifest["wikis"]["en"]
    assert entry["dump_date"] == "2023-07-01" and entry["pages"] == 4 and entry["redirects"] == 1
    assert entry["links"] == len({(a, b) for a, b, c in real_rows() if c}) == 26  # a repeated statement replaces its rows
    lookup = LanglinksLookup.open(tmp_path / "lookup")
    found = lookup.resolve("en", "1640")
    assert found.found and found.as_of == "2023-07-01" and found.page_id == 34893
    assert [(link.wiki, link.lang, link.title, link.url) for link in found.links] == [("fr", "fr", "1640", "https://fr.wikipedia.org/wiki/1640")]
    spanish = lookup.resolve(*parse_article("https://en.wikipedia.org/wiki/Algerian"))
    assert spanish.in_language("es").title == "Algerian" and spanish.in_language("fr") is None
    moved = lookup.resolve("en", "year 1640")
    assert moved.found and moved.redirected_from == "Year 1640" and moved.title == "1640"
    absent = lookup.resolve("en", "No such article")
    assert not absent.found and "no article 'No such article' in the en page dump" in absent.reason
    other = lookup.resolve("de", "1640")
    assert not other.found and "no de dump" in other.reason


def test_cli_build_and_lookup(dumps, tmp_path):
    runner = CliRunner()
    built = runner.invoke(main, ["langlinks", "build", *map(str, dumps), "--out", str(tmp_path / "lookup")])
    assert built.exit_code == 0, built.output
    assert "enwiki as of 2023-07-01: 26 langlinks, 4 pages, 1 redirects" in built.output
    found = runner.invoke(main, ["langlinks", "lookup", "https://en.wikipedia.org/wiki/Year_1640", "--dump", str(tmp_path / "lookup"), "--json"])
    assert found.exit_code == 0, found.output
    answer = json.loads(found.output)
    assert answer["redirected_from"] == "Year 1640" and answer["links"][0]["lang"] == "fr"
    missing = runner.invoke(main, ["langlinks", "lookup", "Nothing", "--lang", "en", "--dump", str(tmp_path / "lookup")])
    assert missing.exit_code == 1 and "unknown: no article 'Nothing'" in missing.output


def _cut(text: str) -> bytes:
    whole = gzip.compress(text.encode())
    return whole[: len(whole) * 2 // 3]


@pytest.mark.parametrize(
    ("damage", "message", "located"),
    [
        (_cut, "the dump is cut short or damaged", True),
        (lambda text: gzip.compress(text.replace("(34893,'fr'", "[34893,'fr'", 1).encode()), "not a row of values", True),
        (lambda text: gzip.compress(text.replace("-- Dump completed", "-- Dump", 1).encode()), "no closing '-- Dump completed on' line", False),
    ],
    ids=["gzip cut short", "corrupt row", "no footer"],
)
def test_a_damaged_dump_names_the_file_and_leaves_no_lookup(dumps, tmp_path, damage, message, located):
    dumps[0].write_bytes(damage(gzip.decompress(dumps[0].read_bytes()).decode()))
    result = CliRunner().invoke(main, ["langlinks", "build", *map(str, dumps), "--out", str(tmp_path / "lookup")])
    assert result.exit_code == 2, result.output
    assert str(dumps[0]) in result.output and message in result.output
    assert bool(re.search(r"byte \d+", result.output)) is located
    assert not (tmp_path / "lookup").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in dumps)


def test_a_corrupt_row_reports_its_byte_offset(tmp_path):
    text = EXCERPT.read_text(encoding="utf-8").replace("(35202,'fr','1641')", "(35202,'fr','1641'", 1)
    bad = tmp_path / "frwiki-20230701-langlinks.sql"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(DumpError) as error:
        list(read_rows(bad, "langlinks", LANGLINKS, LANGLINKS))
    offset = int(re.search(r"byte (\d+)", str(error.value)).group(1))
    assert text.encode()[offset:].startswith(b"(35202,'fr','1641'")


def test_a_damaged_lookup_is_refused_never_read_as_empty(dumps, tmp_path):
    build(dumps, tmp_path / "lookup")
    database = tmp_path / "lookup" / "langlinks.sqlite"
    data = database.read_bytes()
    database.write_bytes(data[: len(data) // 2])
    with pytest.raises(LinksError, match="bytes where the manifest says"):
        LanglinksLookup.open(tmp_path / "lookup")
    database.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(LinksError, match="its hash differs from the manifest"):
        LanglinksLookup.open(tmp_path / "lookup").verify()
    (tmp_path / "lookup" / MANIFEST).write_text("{", encoding="utf-8")
    with pytest.raises(LinksError, match="damaged manifest"):
        LanglinksLookup.open(tmp_path / "lookup")


def test_build_never_replaces_a_directory_it_did_not_write(dumps, tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(main, ["langlinks", "build", *map(str, dumps), "--out", str(mine)])
    assert result.exit_code == 2 and (mine / "keep.txt").read_text(encoding="utf-8") == "mine"


WIKIDATA = FIXTURES / "langlinks" / "wikidata"
ITEMS = ("Q217447", "Q4132785", "Q571")


def entity(qid: str) -> dict:
    return json.loads((WIKIDATA / f"{qid}.json").read_text(encoding="utf-8"))


def entity_text(qids: tuple[str, ...] = ITEMS) -> str:
    """A JSON entity dump's text as Wikidata publishes it: `[`, one entity a line, each but the
    last followed by `,`, then `]`."""
    lines = [json.dumps(entity(qid), ensure_ascii=False, separators=(",", ":")) for qid in qids]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def write_dump(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else bz2.compress(data) if path.suffix == ".bz2" else data)
    return path


def test_entity_dumps_are_known_by_their_names():
    for name in ("wikidata-20230703-all.json.gz", "wikidata-20230703-all.json.bz2", "wikidata-20230703-all.json", "latest-all.json.gz"):
        dump = DumpFile.of(Path(name), wiki="en")
        assert (dump.wiki, dump.table) == ("wikidata", "entities"), name
    assert entity_dump_date(Path("wikidata-20230703-all.json.bz2")) == date(2023, 7, 3)
    assert entity_dump_date(Path("latest-all.json.gz")) is None and entity_dump_date(Path("wikidata-20231399-all.json")) is None
    with pytest.raises(LinksError, match="nor a Wikidata entity dump"):
        DumpFile.of(Path("wikidata-20230703-lexemes.json.gz"))


@pytest.mark.parametrize("suffix", [".json.gz", ".json.bz2", ".json"])
def test_an_entity_dump_gives_each_item_its_wikipedia_sitelinks(tmp_path, suffix):
    dump = write_dump(tmp_path / f"wikidata-20230703-all{suffix}", entity_text())
    progress: list[int] = []
    manifest = build([dump], tmp_path / "lookup", on_rows=progress.append)
    assert manifest["wikis"] == {} and sum(progress) == 3
    wikidata = manifest["wikidata"]
    assert (wikidata["dump_date"], wikidata["entities"], wikidata["sitelinks"]) == ("2023-07-03", 3, 31 + 3 + 158)
    assert [(f["bytes"], f["rows"], f["entities"], len(f["blake2b"])) for f in wikidata["files"]] == [(dump.stat().st_size, 192, 3, 32)]
    lookup = LanglinksLookup.open(tmp_path / "lookup")
    lookup.verify()
    for qid in ITEMS:
        found = lookup.resolve_qid(qid)
        assert found.found and (found.wiki, found.title, found.qid, found.as_of) == ("wikidata", qid, qid, "2023-07-03")
        assert found.links == sitelink_links(entity(qid)["sitelinks"])
    book = {link.wiki: link for link in lookup.resolve_qid("Q571").links}
    sites = entity("Q571")["sitelinks"]
    assert len(book) == len([site for site in sites if site.endswith("wiki")]) - 1 == 158  # every Wikipedia, not Commons
    assert "commonswiki" in sites and "enwikiquote" in sites and "commons" not in book and all("wikiquote" not in link.url for link in book.values())
    assert (book["als"].lang, book["als"].title, book["als"].url) == ("gsw", "Buch", "https://als.wikipedia.org/wiki/Buch")
    assert (book["zh-yue"].lang, book["simple"].lang, book["ka"].title) == ("yue", None, "წიგნი")
    absent = lookup.resolve_qid("Q1")
    assert not absent.found and absent.as_of == "2023-07-03" and "no Wikipedia sitelink of Q1" in absent.reason


def test_an_entity_dump_alone_answers_titles_by_sitelink(tmp_path):
    build([write_dump(tmp_path / "wikidata-20230703-all.json.gz", entity_text())], tmp_path / "lookup")
    lookup = LanglinksLookup.open(tmp_path / "lookup")
    novel = lookup.resolve(*parse_article("https://en.wikipedia.org/wiki/Bring_the_Jubilee"))
    assert novel.found and novel.qid == "Q4132785" and novel.as_of == "2023-07-03" and "sitelinks of Q4132785" in novel.source
    assert [(link.wiki, link.title) for link in novel.links] == [("es", "Lo que el tiempo se llevó"), ("zh", "把銀禧帶來")]
    assert lookup.resolve("en", "book").title == "Book" and lookup.resolve("als", "Buch").in_language("gsw") is None
    assert lookup.resolve("ka", "ვერლა").qid == "Q217447"  # a Georgian title keeps its first letter
    absent = lookup.resolve("en", "Nothing")
    assert not absent.found and "no en dump in this lookup (it has none)" in absent.reason and "no item of the Wikidata dump of 2023-07-03 has a sitelink to en:'Nothing'" in absent.reason


def test_sql_and_entity_dumps_in_one_lookup(dumps, tmp_path):
    build(dumps, tmp_path / "sql")
    assert not LanglinksLookup.open(tmp_path / "sql").resolve_qid("Q571").found
    assert "no Wikidata entity dump" in LanglinksLookup.open(tmp_path / "sql").resolve_qid("Q571").reason
    entities = write_dump(tmp_path / "wikidata-20230703-all.json.bz2", entity_text())
    manifest = build([*dumps, entities], tmp_path / "both")
    assert manifest["wikis"]["en"]["links"] == 26 and manifest["wikidata"]["sitelinks"] == 192
    lookup = LanglinksLookup.open(tmp_path / "both")
    year = lookup.resolve("en", "1640")
    assert (year.page_id, year.qid, year.as_of, year.source) == (34893, None, "2023-07-01", f"langlinks dump {tmp_path / 'both'}")
    verla = lookup.resolve("en", "Verla")  # in no page dump: its item answers
    assert verla.found and verla.qid == "Q217447" and verla.as_of == "2023-07-03" and verla.in_language("fi").title == "Verla"
    assert not lookup.resolve("en", "Nothing").found and lookup.resolve_qid("Q571").found


def test_an_audit_names_each_snapshot_it_asked(dumps, tmp_path):
    from audit.links.sources import DumpSource

    build(dumps, tmp_path / "sql")
    assert "wikidata" not in DumpSource(LanglinksLookup.open(tmp_path / "sql"), "sql").describe()
    build([*dumps, write_dump(tmp_path / "wikidata-20230703-all.json.bz2", entity_text())], tmp_path / "both")
    described = DumpSource(LanglinksLookup.open(tmp_path / "both"), "both").describe()
    assert (described["wikis"], described["wikidata"]) == ({"en": "2023-07-01"}, "2023-07-03")


def test_an_entity_dump_is_dated_by_its_name_or_by_dump_date(tmp_path):
    latest = write_dump(tmp_path / "latest-all.json.gz", entity_text(("Q4132785",)))
    with pytest.raises(LinksError, match=r"latest-all\.json\.gz: no date in its name .*give --dump-date"):
        build([latest], tmp_path / "lookup")
    assert not (tmp_path / "lookup").exists()
    manifest = build([latest], tmp_path / "lookup", dump_date=date(2023, 7, 10))
    assert manifest["wikidata"]["dump_date"] == "2023-07-10" and LanglinksLookup.open(tmp_path / "lookup").resolve_qid("Q4132785").as_of == "2023-07-10"


def _bad_line(text: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[2] = lines[2].replace('{"sitelinks":', '{"sitelinks"', 1)  # Q4132785, its keys in another order
    return "".join(lines)


@pytest.mark.parametrize(
    ("suffix", "damage", "message"),
    [
        (".json", _bad_line, r"line 3, byte \d+: not JSON"),
        (".json.gz", lambda text: text.replace('"type":"item","id":"Q571"', '"type":"item","qid":"Q571"', 1), r"line 4, byte \d+: not a Wikidata entity \(not an entity object"),
        (".json.gz", None, r"line \d+, byte \d+: the dump is cut short or damaged \(Compressed file ended"),
        (".json.bz2", None, r"line \d+, byte \d+: the dump is cut short or damaged \(Compressed file ended"),
        (".json.bz2", lambda text: text.removesuffix("]\n"), "the dump is cut short: no closing ] after line 4"),
    ],
    ids=["not JSON", "not an entity", "gzip cut short", "bzip2 cut short", "no closing bracket"],
)
def test_a_damaged_entity_dump_names_the_file_and_leaves_the_lookup_alone(tmp_path, suffix, damage, message):
    dump = write_dump(tmp_path / f"wikidata-20230703-all{suffix}", entity_text())
    runner, out = CliRunner(), tmp_path / "lookup"
    assert runner.invoke(main, ["langlinks", "build", str(dump), "--out", str(out)]).exit_code == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    if damage is None:
        dump.write_bytes(dump.read_bytes()[: dump.stat().st_size * 2 // 3])
    else:
        write_dump(dump, damage(entity_text()))
    for target in (out, tmp_path / "new"):
        result = runner.invoke(main, ["langlinks", "build", str(dump), "--out", str(target)])
        assert result.exit_code == 2, result.output
        assert str(dump) in result.output and re.search(message, result.output), result.output
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([dump.name, "lookup"])


def test_a_bad_line_is_found_at_its_byte_offset(tmp_path):
    text = _bad_line(entity_text())
    dump = write_dump(tmp_path / "wikidata-20230703-all.json.gz", text)
    with pytest.raises(LinksError) as error:
        build([dump], tmp_path / "lookup")
    offset = int(re.search(r"line 3, byte (\d+)", str(error.value)).group(1))
    assert text.encode()[offset:].startswith(b'{"sitelinks"{')


def test_cli_build_reports_the_entity_dump(tmp_path):
    dump = write_dump(tmp_path / "wikidata-20230703-all.json.gz", entity_text())
    built = CliRunner().invoke(main, ["langlinks", "build", str(dump), "--out", str(tmp_path / "lookup")])
    assert built.exit_code == 0, built.output
    assert "wikidata as of 2023-07-03: 3 entities, 192 Wikipedia sitelinks" in built.output


def test_wiki_names_are_prefixes_or_database_names_of_real_wikis():
    assert [wiki_prefix(name) for name in ("en", "zh-yue", "enwiki", "zh_min_nanwiki", " simple ")] == ["en", "zh-yue", "en", "zh-min-nan", "simple"]
    for bad in ("x y!", "", "EN", "../en", "qqq", "xxwiki"):
        with pytest.raises(WikiError):
            wiki_prefix(bad)
    with pytest.raises(LinksError, match=r"langlinks\.sql: .*name the file after its wiki, like enwiki-20230701-langlinks\.sql\.gz, or give --wiki"):
        DumpFile.of(Path("langlinks.sql"))
    assert DumpFile.of(Path("langlinks.sql"), wiki="dewiki").wiki == "de"


def test_an_empty_dump_is_refused_and_a_whole_dump_of_no_rows_is_not(tmp_path):
    empty = write_dump(tmp_path / "enwiki-20230701-langlinks.sql.gz", "")
    with pytest.raises(LinksError, match="no rows: the file is empty"):
        build([empty], tmp_path / "lookup")
    assert not (tmp_path / "lookup").exists()
    none = write_dump(tmp_path / "dewiki-20230701-langlinks.sql", whole_dump([]).replace("INSERT INTO `langlinks` VALUES ;\n", ""))
    assert build([none], tmp_path / "lookup")["wikis"]["de"]["links"] == 0


def reversed_pages(path: Path) -> None:
    data = path.read_bytes()
    pages = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    path.write_bytes(b"".join([pages[0], *reversed(pages[1:])]))


@pytest.mark.parametrize("damage", ["garbage", "pages reversed"])
def test_a_damaged_lookup_database_of_the_right_size_is_named(dumps, tmp_path, damage):
    build(dumps, tmp_path / "lookup")
    database = tmp_path / "lookup" / "langlinks.sqlite"
    if damage == "garbage":
        database.write_bytes(os.urandom(database.stat().st_size))
    else:
        reversed_pages(database)
    with pytest.raises(LinksError, match=r"langlinks\.sqlite: .*the lookup is damaged; build it again"):
        LanglinksLookup.open(tmp_path / "lookup")
    result = CliRunner().invoke(main, ["langlinks", "lookup", "1640", "--lang", "en", "--links", str(tmp_path / "lookup")])
    assert result.exit_code == 2 and "langlinks.sqlite" in result.output and isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("damage", ["garbage", "pages reversed"])
def test_a_damaged_cache_is_named_and_left_alone(tmp_path, damage):
    """The langlinks and probe caches share one SQLite store; both name a damaged file."""
    links, probes = tmp_path / "langlinks-cache.sqlite", tmp_path / "probe-cache.sqlite"
    if damage == "garbage":
        for cache in (links, probes):
            cache.write_bytes(b"SQLite format 3\0" + os.urandom(8192))
    else:
        filled = LinksCache(links)
        for n in range(400):
            filled.put_created("en", f"Title {n} " + "x" * 200, None)
        del filled
        shutil.copy(links, probes)
        for cache in (links, probes):
            reversed_pages(cache)
    before = links.read_bytes()
    with pytest.raises(LinksError, match=r"langlinks-cache\.sqlite: .*delete the file to start afresh"):
        LinksCache(links)
    with pytest.raises(ProbeError, match=r"probe-cache\.sqlite: .*delete the file to start afresh"):
        ProbeCache(probes)
    assert links.read_bytes() == before


def test_a_full_disk_leaves_no_lookup_and_says_where(dumps, tmp_path):
    """A real 256 KiB tmpfs in a mount namespace of its own, filled by the build."""
    big = tmp_path / "enwiki-20230701-langlinks.sql"
    big.write_text("INSERT INTO `langlinks` VALUES " + ",".join(f"({n},'fr','Titre_{n}_{n * 7919}')" for n in range(30000)) + ";\n", encoding="utf-8")
    (tmp_path / "full").mkdir()
    script = 'mount -t tmpfs -o size=256k tmpfs full || exit 99; "$@"; status=$?; echo "left: $(ls -A full)"; exit $status'
    audit = str(Path(sys.executable).with_name("audit"))
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", audit, "langlinks", "build", big.name, "--out", "full/lookup"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "AUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no space left on " in done.stderr and f"(mounted at {tmp_path / 'full'}) while writing full/lookup/langlinks.sqlite" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.splitlines()[-1].strip() == "left:"
