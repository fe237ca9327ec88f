"""Langlinks SQL dumps: parsing throughput beside mwsql, lookup build and lookup latency.

A synthetic dump in the shape of Wikimedia's (a `mysqldump` file with its schema, extended
INSERTs of about 1 MiB, its footer; gzipped) is made from real titles: the committed langlinks
rows and the demo corpus's Wikipedia article titles in several languages, over the wiki
prefixes a real dump links to.  Each step runs in a fresh process and reports its time and how
far that process's peak RSS (`VmHWM`) rose:
  - parse: `audit.links.sqldump.read_rows` against mwsql's `Dump.rows()` (the library a user
    would pick), both over every row, checked to give the same rows;
  - build: `audit langlinks build` (parse, load into SQLite, hash), with a page dump;
  - lookup: `LanglinksLookup.resolve` of random titles, median and 99th percentile.

    python bench/bench_langlinks.py --rows 2000000
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from fresh import in_fresh_process, measure

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "langlinks" / "langlinks_excerpts.sql"
CORPUS = ROOT / "audit" / "data" / "demo" / "corpus"
WIKIS = ("fr", "de", "es", "it", "ja", "ru", "zh", "pt", "pl", "nl", "ar", "fa", "uk", "sv", "vi", "ko", "he", "id", "tr", "cs",
         "fi", "hu", "no", "ca", "ro", "sr", "el", "hi", "bn", "th", "simple", "als", "zh-yue", "zh-min-nan", "be-tarask", "eo", "eu")


def titles() -> list[str]:
    """Real article titles: the langlinks fixture's and the demo corpus's."""
    import re

    found = re.findall(r"'((?:[^'\\]|\\.)*)'\)", FIXTURE.read_text(encoding="utf-8"))
    for path in sorted(CORPUS.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            found += [json.loads(line).get("title") or "" for line in handle]
    return sorted({t for t in found if t and "\\" not in t})


def sql(text: str) -> str:
    return text.replace("'", "\\'")


def write_dumps(directory: Path, rows: int, seed: int) -> tuple[Path, Path, list[str]]:
    rng = random.Random(seed)
    names = titles()
    pages = max(1, rows // 12)
    page_titles = [f"{rng.choice(names).replace(' ', '_')}_{n}" for n in range(pages)]
    langlinks = directory / "enwiki-20240601-langlinks.sql.gz"
    with gzip.open(langlinks, "wt", encoding="utf-8", compresslevel=1) as out:
        out.write("-- MySQL dump 10.19  Distrib 10.6.16-MariaDB\nCREATE TABLE `langlinks` (\n  `ll_from` int(8) unsigned NOT NULL DEFAULT 0,\n"
                  "  `ll_lang` varbinary(35) NOT NULL DEFAULT '',\n  `ll_title` varbinary(255) NOT NULL DEFAULT '',\n  PRIMARY KEY (`ll_from`,`ll_lang`)\n) ENGINE=InnoDB;\n")
        written, page = 0, 0
        while written < rows:
            batch = []
            while len(batch) < 8000 and written < rows:
                for wiki in rng.sample(WIKIS, k=min(len(WIKIS), 1 + rows // pages + rng.randrange(-3, 4))):
                    batch.append(f"({page + 1},'{wiki}','{sql(rng.choice(names))}')")
                    written += 1
                page = (page + 1) % pages
            out.write("INSERT INTO `langlinks` VALUES " + ",".join(batch) + ";\n")
        out.write("-- Dump completed on 2024-06-02  3:01:02\n")
    page_dump = directory / "enwiki-20240601-page.sql.gz"
    with gzip.open(page_dump, "wt", encoding="utf-8", compresslevel=1) as out:
        for start in range(0, pages, 8000):
            values = ",".join(f"({n + 1},0,'{sql(page_titles[n])}',0,0,0.5,'20240601000000',NULL,1,100,'wikitext',NULL)" for n in range(start, min(pages, start + 8000)))
            out.write(f"INSERT INTO `page` VALUES {values};\n")
    return langlinks, page_dump, page_titles


def fingerprint(rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """How many rows, and a hash of the first 100,000, to check two parsers agree."""
    digest, count = hashlib.sha256(), 0
    for row in rows:
        count += 1
        if count <= 100_000:
            digest.update(repr(tuple(row)).encode())
    return {"rows": count, "first_100k": digest.hexdigest()}


def parse_ours(dump: str) -> dict[str, Any]:
    from audit.links.sqldump import read_rows

    names = ("ll_from", "ll_lang", "ll_title")
    return fingerprint(read_rows(Path(dump), "langlinks", names, names))


def parse_mwsql(dump: str) -> dict[str, Any]:
    from mwsql import Dump

    return fingerprint(Dump.from_file(dump).rows(convert_dtypes=True))


def build_lookup(langlinks: str, page: str, out: str) -> dict[str, Any]:
    from audit.links.dump import build

    manifest = build([Path(langlinks), Path(page)], Path(out))
    return {"links": manifest["wikis"]["en"]["links"], "database_mib": round(manifest["database"]["bytes"] / 2**20, 1)}


def look_up(lookup_dir: str, titles_file: str) -> dict[str, Any]:
    from audit.links.lookup import LanglinksLookup

    lookup = LanglinksLookup.open(Path(lookup_dir))
    times = []
    for title in json.loads(Path(titles_file).read_text(encoding="utf-8")):
        began = time.perf_counter()
        found = lookup.resolve("en", title)
        times.append(time.perf_counter() - began)
        assert found.found, title
    return {"lookups": len(times), "median_us": round(statistics.median(times) * 1e6, 1), "p99_us": round(sorted(times)[int(len(times) * 0.99)] * 1e6, 1)}


STEPS: dict[str, Callable[..., dict[str, Any]]] = {"ours": parse_ours, "mwsql": parse_mwsql, "build": build_lookup, "lookup": look_up}


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(measure(lambda: STEPS[sys.argv[2]](*sys.argv[3:]))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--lookups", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work" / "langlinks")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    langlinks, page_dump, page_titles = write_dumps(args.work, args.rows, args.seed)
    print(f"dump: about {args.rows:,} rows, {langlinks.stat().st_size / 2**20:.1f} MiB gzipped; page dump {page_dump.stat().st_size / 2**20:.1f} MiB")
    ours, theirs = in_fresh_process(__file__, "ours", str(langlinks)), in_fresh_process(__file__, "mwsql", str(langlinks))
    assert ours["rows"] == theirs["rows"] and ours["first_100k"] == theirs["first_100k"], (ours, theirs)
    out = args.work / "lookup"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    built = in_fresh_process(__file__, "build", str(langlinks), str(page_dump), str(out))
    wanted = args.work / "titles.json"
    wanted.write_text(json.dumps(random.Random(args.seed).sample(page_titles, min(args.lookups, len(page_titles)))), encoding="utf-8")
    looked = in_fresh_process(__file__, "lookup", str(out), str(wanted))
    results = {
        "rows": ours["rows"],
        "parse_ours": {**ours, "rows_per_second": round(ours["rows"] / ours["seconds"])},
        "parse_mwsql": {**theirs, "rows_per_second": round(ours["rows"] / theirs["seconds"])},
        "parse_speedup": round(theirs["seconds"] / ours["seconds"], 2),
        "build": {**built, "rows_per_second": round(ours["rows"] / built["seconds"])},
        "lookup": looked,
        "projection_400m_rows_hours": {"parse": round(4e8 / (ours["rows"] / ours["seconds"]) / 3600, 2), "build": round(4e8 / (ours["rows"] / built["seconds"]) / 3600, 2)},
    }
    for name in ("parse_ours", "parse_mwsql", "build", "lookup"):
        print(name, json.dumps(results[name]))
    print("parse speedup over mwsql", results["parse_speedup"], "; 400M rows would take (h)", results["projection_400m_rows_hours"])
    (args.work / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
