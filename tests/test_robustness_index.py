"""The index and langlinks commands against bad input: `index build`, `index info`, `index
verify`, `index minhash`, `langlinks build`, `langlinks lookup` and `corpora`, and `check` on a
damaged index.  Bad sources, odd encodings, links, pipes, devices, empty, garbage and scrambled
files, bad names and options out of range are refused with a message naming what is wrong;
the valid-but-odd inputs at the end must succeed.  The harness is `tests/hostile.py`."""
from __future__ import annotations

import gzip
import os
import shutil
from datetime import date
from pathlib import Path

import numpy as np
import pytest
import zstandard
from conftest import FIXTURES
from hostile import BINARY, CHECK, Case, both, halve_table, run_case, write

from audit.links.dump import DATABASE, build

BUILD = ("index", "build")
EXCERPT = FIXTURES / "langlinks" / "langlinks_excerpts.sql"
PAGES = "INSERT INTO `page` VALUES (34893,0,'1640',0,0,0.1,'20230701000000','20230701000000',1,100,'wikitext',NULL);\n"


def scramble_table(root: Path) -> None:
    """table.0 with its pointers shuffled: every size the same, the order gone."""
    table = root / "index" / "table.0"
    ratio = table.stat().st_size // (root / "index" / "tokenized.0").stat().st_size
    pointers = np.frombuffer(table.read_bytes(), dtype=np.uint8).reshape(-1, ratio).copy()
    np.random.default_rng(7).shuffle(pointers)
    table.write_bytes(pointers.tobytes())


def swap_table_halves(root: Path) -> None:
    """table.0's two halves swapped at a page boundary: every pointer valid, runs in order."""
    table = root / "index" / "table.0"
    data = table.read_bytes()
    ratio = table.stat().st_size // (root / "index" / "tokenized.0").stat().st_size
    cut = (len(data) // 2) // (4096 * ratio) * (4096 * ratio)
    table.write_bytes(data[cut:] + data[:cut])


def reverse_text(root: Path) -> None:
    text = root / "index" / "tokenized.0"
    text.write_bytes(text.read_bytes()[::-1])


def link(name: str, target: str) -> callable:
    def prepare(root: Path) -> None:
        (root / name).symlink_to(target)

    return prepare


def fifo(name: str) -> callable:
    def prepare(root: Path) -> None:
        os.mkfifo(root / name)

    return prepare


def copy_index(into: str) -> callable:
    def prepare(root: Path) -> None:
        shutil.copytree(root / "index", root / into)

    return prepare


def lookup(root: Path) -> None:
    """A real langlinks lookup in `lookup/`, built from real langlinks rows."""
    dumps = root / "dumps"
    dumps.mkdir()
    shutil.copy(EXCERPT, dumps / "enwiki-20230701-langlinks.sql")
    (dumps / "enwiki-20230701-page.sql").write_text(PAGES, encoding="utf-8")
    build(sorted(dumps.iterdir()), root / "lookup", dump_date=date(2023, 7, 1))


def garbage_database(root: Path) -> None:
    database = root / "lookup" / DATABASE
    database.write_bytes(bytes(range(256)) * (database.stat().st_size // 256) + b"\0" * (database.stat().st_size % 256))


def scramble_database(root: Path) -> None:
    """The lookup's SQLite pages in reverse order after the first: same size, same header."""
    database = root / "lookup" / DATABASE
    data = database.read_bytes()
    pages = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    database.write_bytes(b"".join([pages[0], *reversed(pages[1:])]))


def garbage_cache(root: Path) -> None:
    cache = root.parent / "cache"
    cache.mkdir(exist_ok=True)
    (cache / "langlinks-cache.sqlite").write_bytes(b"SQLite format 3\0" + BINARY * 8)


LONG_LINE = ('{"text": "' + "a" * 8192 + '"}\n').encode()
DOC = '{"text": "A corpus document of its own."}\n'

CASES = [
    # index build: sources
    Case("build: missing source", (*BUILD, "nope.jsonl", "--out", "new"), ("nope.jsonl", "no such file")),
    Case("build: empty source", (*BUILD, "empty.jsonl", "--out", "new"), ("no documents", "empty.jsonl"), prepare=write("empty.jsonl", "")),
    Case("build: blank lines only", (*BUILD, "blank.jsonl", "--out", "new"), ("no documents",), prepare=write("blank.jsonl", "\n\n  \n")),
    Case("build: binary source", (*BUILD, "blob.jsonl", "--out", "new"), ("blob.jsonl",), prepare=write("blob.jsonl", BINARY)),
    Case("build: latin-1 source", (*BUILD, "latin.jsonl", "--out", "new"), ("latin.jsonl:1", "UTF-8"), prepare=write("latin.jsonl", '{"text": "Molière est né à Paris"}\n'.encode("latin-1"))),
    Case("build: a JSON array, not an object", (*BUILD, "array.jsonl", "--out", "new"), ("array.jsonl:1", "JSON object"), prepare=write("array.jsonl", "[1, 2]\n")),
    Case("build: no text field", (*BUILD, "body.jsonl", "--out", "new"), ("body.jsonl", "text"), prepare=write("body.jsonl", '{"body": "x"}\n')),
    Case("build: text not a string", (*BUILD, "num.jsonl", "--out", "new"), ("num.jsonl", "text"), prepare=write("num.jsonl", '{"text": 5}\n')),
    Case("build: a lone surrogate escaped", (*BUILD, "sur.jsonl", "--out", "new"), ("sur.jsonl:1", "lone surrogate"), prepare=write("sur.jsonl", '{"text": "\\ud800 alone"}\n')),
    Case("build: a line cut mid-record", (*BUILD, "cut.jsonl", "--out", "new"), ("cut.jsonl:2", "not valid JSON"), prepare=write("cut.jsonl", DOC + '{"text": "cut sh')),
    Case("build: truncated gzip", (*BUILD, "cut.jsonl.gz", "--out", "new"), ("cut.jsonl.gz", "cut short"), prepare=write("cut.jsonl.gz", gzip.compress(DOC.encode() * 500)[:80])),
    Case("build: not gzip at all", (*BUILD, "fake.jsonl.gz", "--out", "new"), ("fake.jsonl.gz",), prepare=write("fake.jsonl.gz", BINARY)),
    Case("build: truncated zstd", (*BUILD, "cut.jsonl.zst", "--out", "new"), ("cut.jsonl.zst", "cut short"),
         prepare=write("cut.jsonl.zst", zstandard.ZstdCompressor().compress(os.urandom(4000).hex().encode())[:200])),
    Case("build: garbage parquet", (*BUILD, "blob.parquet", "--out", "new"), ("blob.parquet", "Parquet"), prepare=write("blob.parquet", BINARY)),
    Case("build: garbage arrow", (*BUILD, "blob.arrow", "--out", "new"), ("blob.arrow", "Arrow"), prepare=write("blob.arrow", BINARY)),
    Case("build: gzip inflating to one long line", (*BUILD, "bomb.jsonl.gz", "--out", "new", "--max-document", "4K"), ("bomb.jsonl.gz", "line 1", "--max-document"),
         prepare=write("bomb.jsonl.gz", gzip.compress(LONG_LINE))),
    Case("build: zstd inflating to one long line", (*BUILD, "bomb.jsonl.zst", "--out", "new", "--max-document", "4K"), ("bomb.jsonl.zst", "line 2", "--max-document"),
         prepare=write("bomb.jsonl.zst", zstandard.ZstdCompressor().compress(DOC.encode() + LONG_LINE))),
    Case("build: a text file over the document limit", (*BUILD, "long.txt", "--out", "new", "--max-document", "4K"), ("long.txt", "--max-document"),
         prepare=write("long.txt", "word " * 2000)),
    Case("build: a named pipe", (*BUILD, "pipe.jsonl", "--out", "new"), ("pipe.jsonl", "not a regular file"), prepare=fifo("pipe.jsonl")),
    Case("build: a device", (*BUILD, "/dev/zero", "--out", "new"), ("/dev/zero", "not a regular file")),
    Case("build: a dangling link", (*BUILD, "gone.jsonl", "--out", "new"), ("gone.jsonl", "no such file"), prepare=link("gone.jsonl", "nowhere.jsonl")),
    Case("build: a folder of no JSON", (*BUILD, "mine", "--out", "new"), ("mine", "no *.json")),
    Case("build: an index as its source", (*BUILD, "index", "--out", "new"), ("index", "not a corpus")),
    Case("build: a datasets folder without data", (*BUILD, "ds", "--out", "new"), ("ds",), prepare=write("ds/state.json", '{"_data_files": []}')),
    # index build: where it writes
    Case("build: --out inside its source", (*BUILD, "docs", "--out", "docs/idx"), ("docs/idx", "inside the source directory docs")),
    Case("build: --out deep inside its source", (*BUILD, "docs", "--out", "docs/a/b/idx"), ("docs/a/b/idx", "inside the source directory")),
    Case("build: --out its source", (*BUILD, "docs", "--out", "docs", "--force"), ("docs", "input")),
    Case("build: --out holding its source", (*BUILD, "docs/wiki.jsonl", "--out", "docs", "--force"), ("docs", "input")),
    Case("build: --out the current directory", (*BUILD, "docs", "--out", ".", "--force"), ("current directory",)),
    Case("build: --out a user's folder", (*BUILD, "docs", "--out", "mine", "--force"), ("mine", "not written by audit")),
    Case("build: --out a user's file", (*BUILD, "docs", "--out", "mine/notes.txt", "--force"), ("mine/notes.txt",)),
    Case("build: --out an index, no --force", (*BUILD, "docs", "--out", "index"), ("index", "already exists")),
    Case("build: --out an index holding a user's file", (*BUILD, "docs", "--out", "index", "--force"), ("notes.txt",), prepare=write("index/notes.txt", "mine\n")),
    # index build: options out of range
    Case("build: --mem 0", (*BUILD, "docs", "--out", "new", "--mem", "0"), ("--mem '0'", "too small")),
    Case("build: --mem 1 byte", (*BUILD, "docs", "--out", "new", "--mem", "1"), ("--mem '1'", "too small")),
    Case("build: --mem 1K", (*BUILD, "docs", "--out", "new", "--mem", "1K"), ("--mem '1K'", "16M")),
    Case("build: --mem beyond the machine", (*BUILD, "docs", "--out", "new", "--mem", "900T"), ("--mem '900T'", "this machine's memory")),
    Case("build: --mem negative", (*BUILD, "docs", "--out", "new", "--mem", "-8G"), ("--mem '-8G'", "not a size")),
    Case("build: --mem in petabytes", (*BUILD, "docs", "--out", "new", "--mem", "1P"), ("--mem '1P'", "not a size")),
    Case("build: --workers 0", (*BUILD, "docs", "--out", "new", "--workers", "0"), ("--workers",)),
    Case("build: --workers negative", (*BUILD, "docs", "--out", "new", "--workers", "-2"), ("--workers",)),
    Case("build: --shards 0", (*BUILD, "docs", "--out", "new", "--shards", "0"), ("--shards",)),
    Case("build: --workers on Ray", (*BUILD, "docs", "--out", "new", "--shards", "2", "--executor", "ray", "--workers", "2"), ("--workers",)),
    Case("build: unknown executor", (*BUILD, "docs", "--out", "new", "--shards", "2", "--executor", "cloud"), ("cloud",)),
    Case("build: --max-document 0", (*BUILD, "docs", "--out", "new", "--max-document", "0"), ("--max-document '0'", "too small")),
    Case("build: --max-document words", (*BUILD, "docs", "--out", "new", "--max-document", "lots"), ("--max-document 'lots'", "not a size")),
    Case("build: empty --text-field", (*BUILD, "docs", "--out", "new", "--text-field", ""), ("text field",)),
    Case("build: unknown --normalize", (*BUILD, "docs", "--out", "new", "--normalize", "nfkc"), ("--normalize",)),
    Case("build: missing policy", (*BUILD, "docs", "--out", "new", "--policy", "nope.toml"), ("nope.toml",)),
    # index info and opens
    Case("info: no such directory", ("index", "info", "nowhere"), ("nowhere",)),
    Case("info: a folder that is no index", ("index", "info", "mine"), ("mine", "tokenized")),
    Case("info: a user's file in the index", ("index", "info", "index"), ("index/notes.txt", "did not write"), prepare=write("index/notes.txt", "mine\n")),
    Case("info: a user's folder in the index", ("index", "info", "index"), ("index/drafts/a.md", "did not write"), prepare=write("index/drafts/a.md", "# draft\n")),
    Case("info: a link in the index", ("index", "info", "index"), ("index/elsewhere", "did not write"), prepare=link("index/elsewhere", "../mine")),
    Case("info: a hidden file in the index", ("index", "info", "index"), ("index/.DS_Store", "did not write"), prepare=write("index/.DS_Store", BINARY)),
    Case("info: a stray shard file", ("index", "info", "index"), ("table.9",), prepare=write("index/table.9", b"")),
    Case("info: table scrambled at its size", ("index", "info", "index"), ("table.0", "out of order", "audit index verify"), prepare=scramble_table),
    Case("info: table halves swapped", ("index", "info", "index"), ("table.0", "out of order"), prepare=swap_table_halves),
    Case("info: text reversed at its size", ("index", "info", "index"), ("tokenized.0",), prepare=reverse_text),
    Case("info: table halved", ("index", "info", "index"), ("table.0",), prepare=halve_table),
    Case("info: garbage manifest", ("index", "info", "index"), ("audit-index.json",), prepare=write("index/audit-index.json", BINARY)),
    Case("info: manifest emptied", ("index", "info", "index"), ("audit-index.json",), prepare=write("index/audit-index.json", "")),
    # index verify
    Case("verify: a user's file in the index", ("index", "verify", "index"), ("unexpected extra file", "notes.txt"), exit_code=1, prepare=write("index/notes.txt", "mine\n")),
    Case("verify: table scrambled at its size", ("index", "verify", "index"), ("hash differs", "table.0"), exit_code=1, prepare=scramble_table),
    Case("verify: not an index", ("index", "verify", "mine"), ("mine", "not an index directory")),
    # index minhash
    Case("minhash: a user's file in the index", ("index", "minhash", "index", "--force"), ("notes.txt", "did not write"), prepare=write("index/notes.txt", "mine\n")),
    Case("minhash: table scrambled", ("index", "minhash", "index", "--force"), ("table.0", "out of order"), prepare=scramble_table),
    Case("minhash: not an index", ("index", "minhash", "mine"), ("mine",)),
    Case("minhash: unknown sketcher", ("index", "minhash", "index", "--sketcher", "fast"), ("--sketcher",)),
    # check and corpora on a damaged index
    Case("check: a user's file in the index", CHECK, ("index/notes.txt", "did not write"), prepare=write("index/notes.txt", "mine\n")),
    Case("check: table scrambled at its size", CHECK, ("table.0", "out of order"), prepare=scramble_table),
    Case("check: an index inside the corpus folder is no corpus", ("check", "bench.jsonl", "--corpus", "docs"), ("docs",), prepare=copy_index("docs/idx")),
    # langlinks build
    Case("langlinks: empty dump", ("langlinks", "build", "enwiki-20230701-langlinks.sql", "--out", "lk"), ("enwiki-20230701-langlinks.sql", "no rows"),
         prepare=write("enwiki-20230701-langlinks.sql", "")),
    Case("langlinks: empty gzip dump", ("langlinks", "build", "enwiki-20230701-langlinks.sql.gz", "--out", "lk"), ("no rows",),
         prepare=write("enwiki-20230701-langlinks.sql.gz", gzip.compress(b""))),
    Case("langlinks: a dump of comments only", ("langlinks", "build", "enwiki-20230701-langlinks.sql", "--out", "lk"), ("no rows",),
         prepare=write("enwiki-20230701-langlinks.sql", "-- nothing here\n")),
    Case("langlinks: --wiki with a space and a bang", ("langlinks", "build", "d-langlinks.sql", "--out", "lk", "--wiki", "x y!"), ("x y!", "prefix"),
         prepare=write("d-langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: --wiki no language", ("langlinks", "build", "d-langlinks.sql", "--out", "lk", "--wiki", "qqq"), ("qqq",),
         prepare=write("d-langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: --wiki a path", ("langlinks", "build", "d-langlinks.sql", "--out", "lk", "--wiki", "../en"), ("../en",),
         prepare=write("d-langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: a dump named without its wiki", ("langlinks", "build", "langlinks.sql", "--out", "lk"), ("langlinks.sql", "enwiki-20230701-langlinks.sql.gz", "--wiki"),
         prepare=write("langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: a dump named latest-", ("langlinks", "build", "latest-langlinks.sql", "--out", "lk"), ("latest", "name the file after its wiki"),
         prepare=write("latest-langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: a dump of a wiki no one knows", ("langlinks", "build", "xxwiki-20230701-langlinks.sql", "--out", "lk"), ("xx",),
         prepare=write("xxwiki-20230701-langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: binary dump", ("langlinks", "build", "enwiki-20230701-langlinks.sql", "--out", "lk"), ("enwiki-20230701-langlinks.sql",),
         prepare=write("enwiki-20230701-langlinks.sql", BINARY)),
    Case("langlinks: truncated gzip dump", ("langlinks", "build", "enwiki-20230701-langlinks.sql.gz", "--out", "lk"), ("cut short",),
         prepare=write("enwiki-20230701-langlinks.sql.gz", gzip.compress(EXCERPT.read_bytes())[:300])),
    Case("langlinks: no langlinks dump", ("langlinks", "build", "enwiki-20230701-page.sql", "--out", "lk"), ("no langlinks dump",),
         prepare=write("enwiki-20230701-page.sql", PAGES)),
    Case("langlinks: empty entity dump", ("langlinks", "build", "wikidata-20230703-all.json", "--out", "lk"), ("wikidata-20230703-all.json", "empty"),
         prepare=write("wikidata-20230703-all.json", "")),
    Case("langlinks: --out a user's folder", ("langlinks", "build", "enwiki-20230701-langlinks.sql", "--out", "mine"), ("mine", "not written by audit"),
         prepare=write("enwiki-20230701-langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: --out an index", ("langlinks", "build", "enwiki-20230701-langlinks.sql", "--out", "index"), ("index",),
         prepare=write("enwiki-20230701-langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    # langlinks lookup
    Case("lookup: no such lookup", ("langlinks", "lookup", "1640", "--lang", "en", "--links", "nowhere"), ("nowhere",)),
    Case("lookup: garbage database at its size", ("langlinks", "lookup", "1640", "--lang", "en", "--links", "lookup"), ("lookup/langlinks.sqlite", "damaged"),
         prepare=both(lookup, garbage_database)),
    Case("lookup: database pages scrambled at its size", ("langlinks", "lookup", "1640", "--lang", "en", "--links", "lookup"), ("lookup/langlinks.sqlite", "damaged"),
         prepare=both(lookup, scramble_database)),
    Case("lookup: database cut short", ("langlinks", "lookup", "1640", "--lang", "en", "--links", "lookup"), ("langlinks.sqlite",),
         prepare=both(lookup, lambda root: os.truncate(root / "lookup" / DATABASE, 4096))),
    Case("lookup: garbage manifest", ("langlinks", "lookup", "1640", "--lang", "en", "--links", "lookup"), ("audit-langlinks.json",),
         prepare=both(lookup, write("lookup/audit-langlinks.json", BINARY))),
    Case("lookup: garbage cache file", ("langlinks", "lookup", "1640", "--lang", "en", "--links", "wikipedia-api", "--offline"), ("langlinks-cache.sqlite",),
         prepare=garbage_cache),
    Case("corpora: a registry of binary", ("corpora", "--registry", "blob.toml"), ("blob.toml",), prepare=write("blob.toml", BINARY)),
    # valid but odd: these must succeed
    Case("build: --workers 200 is clamped with a note", (*BUILD, "docs", "--out", "new", "--workers", "200", "--no-minhash"), ("--workers 200: using",), exit_code=0),
    Case("build: --workers 200 on 2 shards is clamped", (*BUILD, "docs", "--out", "new", "--workers", "200", "--shards", "2", "--no-minhash"), ("--workers 200: using", "2 shard(s)"), exit_code=0),
    Case("build: an old index inside the corpus folder is skipped", (*BUILD, "docs", "--out", "new", "--no-minhash"), ("skipping docs/idx", "159 documents"), exit_code=0,
         prepare=copy_index("docs/idx")),
    Case("build: a linked source file", (*BUILD, "linked.jsonl", "--out", "new", "--no-minhash"), ("159 documents",), exit_code=0, prepare=link("linked.jsonl", "docs/wiki.jsonl")),
    Case("build: --mem 16M and a spaced unit", (*BUILD, "docs", "--out", "new", "--mem", " 16 MiB ", "--no-minhash"), ("159 documents",), exit_code=0),
    Case("build: a document at the limit", (*BUILD, "edge.jsonl", "--out", "new", "--max-document", "8K", "--no-minhash"), ("1 documents",), exit_code=0,
         prepare=write("edge.jsonl", LONG_LINE[:8180].rstrip(b'a') + b'"}\n')),
    Case("info: an index with its near-duplicate index", ("index", "info", "index"), ('"documents": 159',), exit_code=0),
    Case("langlinks: a dump named without its wiki, --wiki given", ("langlinks", "build", "langlinks.sql", "--out", "lk", "--wiki", "en", "--dump-date", "2023-07-01"),
         ("enwiki as of 2023-07-01",), exit_code=0, prepare=write("langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("langlinks: --wiki as a database name", ("langlinks", "build", "langlinks.sql", "--out", "lk", "--wiki", "zh_yuewiki", "--dump-date", "2023-07-01"),
         ("zh-yuewiki as of 2023-07-01",), exit_code=0, prepare=write("langlinks.sql", EXCERPT.read_text(encoding="utf-8"))),
    Case("lookup: a sound lookup answers", ("langlinks", "lookup", "1640", "--lang", "en", "--links", "lookup"), ("fr",), exit_code=0, prepare=lookup),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_index_and_langlinks_inputs(case: Case, sandbox: Path, capfd) -> None:
    run_case(case, sandbox, capfd)
