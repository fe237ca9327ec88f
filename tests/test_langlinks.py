"""The langlinks lookup from SQL dumps: real `langlinks` rows (tests/fixtures/langlinks), with
`page` and `redirect` rows for the same page ids made here, in the shapes MediaWiki's dumps
have (an excerpt, and a whole `mysqldump` file with its header, schema and footer)."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from audit.cli import main
from audit.links.dump import MANIFEST, LanglinksLookup, LinksError, build, parse_article
from audit.links.sqldump import DumpError, DumpInfo, parse_tuple, read_rows
from audit.links.wikis import dbname_language, wiki_for, wiki_language

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
