"""Reading a benchmark as it grows: the peak memory and CPU of `load_benchmark(..., packed=True)`
(what `audit check` does before it checks anything) on BMLAMA-17 once, three and nine times
over, or on ECLeKTic's long CSV (the 468-row subset in ../shared, a row per language of an
item, so items are whole only at the end of the file) once, 30 and 100 times over, run by
this working tree and by a baseline commit interleaved in one run.

    python bench/bench_reading.py --baseline 44d1d76 [--times 1,3,9] [--repeat 2]
    python bench/bench_reading.py --baseline 24f5ced --benchmark eclektic-csv --times 1,30,100
    python bench/bench_reading.py --baseline eedbd12 --benchmark bmlama-tables-en --times 1,9

`bmlama-tables` reads BMLAMA-17's files as per-language tables (`--format per-language`, no
`zh.tsv`, whose header names `Ans` twice), `bmlama-tables-en` the same with the source
language given, which joins the rows as they are read.  `xquad` reads the XQuAD subset in
tests/fixtures/xquad with each file's articles repeated.

Each read runs in a process of its own started in its code's tree (the baseline checked out
with `git worktree add` under bench/work/, as bench_throughput.py does); peak memory is the
process's summed PSS sampled every 0.1 s, CPU its user + sys time.  Both codes must read the
same items: each prints a digest of every item's `repr` (every field, dicts in their order), which
are compared.  Not of their pickles: those also record which equal strings are one object, and
items joined through a temporary file share fewer.  Writes bench/work/reading-{benchmark}.json;
prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_throughput import ROOT, Code, measured, mib, repeated_bmlama, repeated_eclektic, two_codes

# Run in the code's tree: reads the benchmark packed and prints how many items and a digest.
READ = """
import hashlib, sys
from audit.readers import ReadOptions, load_benchmark, parse_mapping
options = ReadOptions(mapping=parse_mapping(sys.argv[3]), source_lang=sys.argv[4] or None) if len(sys.argv) > 3 else None
items = load_benchmark(sys.argv[1], sys.argv[2], packed=True, options=options).items
digest = hashlib.sha256()
for item in items:
    digest.update(repr(item).encode("utf-8"))
print(len(items), digest.hexdigest())
"""


# Each benchmark as it is read: the format and, for tables, the column mapping and source language.
HOW = {
    "bmlama": ["bmlama"],
    "eclektic-csv": ["eclektic-csv"],
    "bmlama-tables": ["per-language", "question=Prompt,answer=Ans", ""],
    "bmlama-tables-en": ["per-language", "question=Prompt,answer=Ans", "en"],
    "xquad": ["squad"],
}


def read_once(code: Code, bench: Path, benchmark: str, log: Path) -> dict:
    timed = measured([sys.executable, "-c", READ, str(bench), *HOW[benchmark]], code.env(), log, cwd=code.tree)
    count, digest = log.read_text().split()[-2:]
    return timed | {"items": int(count), "digest": digest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the commit the working tree is compared with")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    parser.add_argument("--benchmark", choices=tuple(HOW), default="bmlama")
    parser.add_argument("--times", default="1,3,9", help="how many times over the benchmark is read")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="the shared data: data/bench/bmlama, data/bench/eclektic")
    args = parser.parse_args()
    args.work = args.work.absolute()
    codes = two_codes(args.baseline, args.work)
    rows = []
    for times in map(int, args.times.split(",")):
        bench = repeated(args.benchmark, args.shared, args.work, times)
        runs: dict[str, list[dict]] = {code.label: [] for code in codes}
        for repeat in range(args.repeat):
            for code in codes if repeat % 2 == 0 else codes[::-1]:
                runs[code.label].append(read_once(code, bench, args.benchmark, args.work / f"reading-{code.label}.log"))
        digests = {run["digest"] for label in runs for run in runs[label]}
        row = {"times": times, "identical": len(digests) == 1}
        for label, done in runs.items():
            row[label] = {"items": done[0]["items"], "cpu_s": min(r["cpu_s"] for r in done), "wall_s": min(r["wall_s"] for r in done),
                          "peak_pss_bytes": max(r["peak_pss_bytes"] for r in done)}  # fmt: skip
        rows.append(row)
        print(f"x{times}: {row}", file=sys.stderr)
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "benchmark": args.benchmark, "codes": [{"label": c.label, "commit": c.commit} for c in codes], "rows": rows}
    (args.work / f"reading-{args.benchmark}.json").write_text(json.dumps(results, indent=2))
    print(table(results))


def repeated(benchmark: str, shared: Path, work: Path, times: int) -> Path:
    """The benchmark `times` over, each copy's items of their own."""
    if benchmark == "bmlama":
        source = shared / "data" / "bench" / "bmlama" / "BMLAMA17"
        return source if times == 1 else repeated_bmlama(source, work / f"BMLAMA17x{times}", times)
    if benchmark == "xquad":
        return repeated_xquad(ROOT / "tests" / "fixtures" / "xquad", work / f"xquad-x{times}", times)
    if benchmark.startswith("bmlama-tables"):
        return repeated_bmlama(shared / "data" / "bench" / "bmlama" / "BMLAMA17", work / f"BMLAMA16-tables-x{times}", times, skip=("zh.tsv",))
    return repeated_eclektic(shared / "data" / "bench" / "eclektic" / "eclektic_long_subset.csv", work / f"eclektic_long_x{times}.csv", times)


def repeated_xquad(source: Path, target: Path, times: int) -> Path:
    """The XQuAD subset the tests read (35 questions in six languages) with each file's articles
    `times` over, each copy's question ids suffixed with its number (34 times is about XQuAD's
    1,190 questions)."""
    target.mkdir(parents=True, exist_ok=True)
    for file in sorted(source.glob("xquad.*.json")):
        articles = json.loads(file.read_text(encoding="utf-8"))["data"]
        copies = []
        for copy in range(times):
            for article in articles:
                paragraphs = [dict(p, qas=[dict(qa, id=f"{qa['id']}-{copy}") for qa in p["qas"]]) for p in article["paragraphs"]]
                copies.append(dict(article, paragraphs=paragraphs))
        (target / file.name).write_text(json.dumps({"version": "1.1", "data": copies}, ensure_ascii=False), encoding="utf-8")
    return target


def table(results: dict) -> str:
    base, new = (code["label"] for code in results["codes"])
    name = {"bmlama": "BMLAMA-17", "eclektic-csv": "ECLeKTic long CSV", "bmlama-tables": "BMLAMA-16 as tables", "bmlama-tables-en": "BMLAMA-16 as tables, source given", "xquad": "XQuAD subset (SQuAD-style JSON)"}[results.get("benchmark", "bmlama")]
    lines = [f"| {name} read | items | {base} CPU s / wall s / peak | {new} CPU s / wall s / peak | new/base peak | same items |", "|---|---|---|---|---|---|"]
    for row in results["rows"]:
        cells = [f"{row[label]['cpu_s']} / {row[label]['wall_s']} / {mib(row[label]['peak_pss_bytes'])}" for label in (base, new)]
        share = round(row[new]["peak_pss_bytes"] / row[base]["peak_pss_bytes"], 2)
        lines.append(f"| {row['times']} time(s) over | {row[new]['items']:,} | {cells[0]} | {cells[1]} | {share} | {row['identical']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
