"""Reading a benchmark as it grows: the peak memory and CPU of `load_benchmark(..., packed=True)`
(what `audit check` does before it checks anything) on BMLAMA-17 once, three and nine times
over, run by this working tree and by a baseline commit interleaved in one run.

    python bench/bench_reading.py --baseline 44d1d76 [--times 1,3,9] [--repeat 2]

Each read runs in a process of its own started in its code's tree (the baseline checked out
with `git worktree add` under bench/work/, as bench_throughput.py does); peak memory is the
process's summed PSS sampled every 0.1 s, CPU its user + sys time.  Both codes must read the
same items: each prints a digest of every item's pickle, which are compared.  Writes
bench/work/reading.json; prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_throughput import ROOT, Code, measured, mib, repeated_bmlama, two_codes

# Run in the code's tree: reads the benchmark packed and prints how many items and a digest.
READ = """
import hashlib, pickle, sys
from audit.readers import load_benchmark
items = load_benchmark(sys.argv[1], "bmlama", packed=True).items
digest = hashlib.sha256()
for item in items:
    digest.update(pickle.dumps(item, protocol=5))
print(len(items), digest.hexdigest())
"""


def read_once(code: Code, bench: Path, log: Path) -> dict:
    timed = measured([sys.executable, "-c", READ, str(bench)], code.env(), log, cwd=code.tree)
    count, digest = log.read_text().split()[-2:]
    return timed | {"items": int(count), "digest": digest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the commit the working tree is compared with")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    parser.add_argument("--times", default="1,3,9", help="how many times over BMLAMA-17 is read")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="the shared data: data/bench/bmlama")
    args = parser.parse_args()
    args.work = args.work.absolute()
    codes = two_codes(args.baseline, args.work)
    source = args.shared / "data" / "bench" / "bmlama" / "BMLAMA17"
    rows = []
    for times in map(int, args.times.split(",")):
        bench = source if times == 1 else repeated_bmlama(source, args.work / f"BMLAMA17x{times}", times)
        runs: dict[str, list[dict]] = {code.label: [] for code in codes}
        for repeat in range(args.repeat):
            for code in codes if repeat % 2 == 0 else codes[::-1]:
                runs[code.label].append(read_once(code, bench, args.work / f"reading-{code.label}.log"))
        digests = {run["digest"] for label in runs for run in runs[label]}
        row = {"times": times, "identical": len(digests) == 1}
        for label, done in runs.items():
            row[label] = {"items": done[0]["items"], "cpu_s": min(r["cpu_s"] for r in done), "wall_s": min(r["wall_s"] for r in done),
                          "peak_pss_bytes": max(r["peak_pss_bytes"] for r in done)}  # fmt: skip
        rows.append(row)
        print(f"x{times}: {row}", file=sys.stderr)
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "codes": [{"label": c.label, "commit": c.commit} for c in codes], "rows": rows}
    (args.work / "reading.json").write_text(json.dumps(results, indent=2))
    print(table(results))


def table(results: dict) -> str:
    base, new = (code["label"] for code in results["codes"])
    lines = [f"| BMLAMA-17 read | items | {base} CPU s / wall s / peak | {new} CPU s / wall s / peak | new/base peak | same items |", "|---|---|---|---|---|---|"]
    for row in results["rows"]:
        cells = [f"{row[label]['cpu_s']} / {row[label]['wall_s']} / {mib(row[label]['peak_pss_bytes'])}" for label in (base, new)]
        share = round(row[new]["peak_pss_bytes"] / row[base]["peak_pss_bytes"], 2)
        lines.append(f"| {row['times']} time(s) over | {row[new]['items']:,} | {cells[0]} | {cells[1]} | {share} | {row['identical']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
