"""The suffix-array searches and the signals of a default check, timed alone: this working
tree against a baseline commit, alternately in one run, on the fields of the ECLeKTic-sized
benchmark and of BMLAMA-17.

    python bench/bench_search_parts.py --baseline 705abb2            # 7 rounds, about 5 minutes
    python bench/bench_search_parts.py --baseline 705abb2 --index bench/work/index-100MiB

A whole `audit check` varies by 10-15% from run to run on a shared 2-core machine, more than a
change to one part saves; each part timed by itself in a process of its own, best of several
rounds, does not.  Per code (its tree on PYTHONPATH, its extension built in place, its own cache
with the demo index, or with `--index` the index given, the same for both: the ~100 MiB one
bench_throughput.py builds has ranges about four times longer), a child process reads the first `--items` items of the benchmark
(bench_report.py's, 12 languages, long passages) and, for every field, as the n-gram signal
asks them:

- the longest match at each character start over every document (`LocalIndex.match_lengths`),
- then the same in the field's language (`LanguageView.match_lengths`, the restricted search),
- and the counts of its 3-word shingles in their casings (`casing_counts`, what the
  common-shingle cut asks; whole fields of unsegmented scripts give 3-character shingles);
- and, per variant of those items, the whole n-gram and near-duplicate signals with the
  default policy (the evidence records digested); the same for the first `--bmlama-items`
  items of BMLAMA-17 (17 languages, short prompts), a benchmark whose cost is per field, not
  per byte.

It prints the CPU seconds of each part and a digest of every answer; the parent alternates the
codes round by round, requires equal digests, and prints each part's best and median time and
the ratio of the bests.  Writes bench/work/search_parts.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import SAMPLE
from bench_report import synthetic_benchmark
from bench_throughput import ROOT, Code, Workload, baseline_tree, build_extension, git, run_check

SIGNAL_PARTS = {
    "n-gram signal": ("ngram", "eclektic"),
    "near-duplicate signal": ("minhash", "eclektic"),
    "n-gram signal, BMLAMA-17": ("ngram", "bmlama"),
    "near-duplicate signal, BMLAMA-17": ("minhash", "bmlama"),
}
PARTS = ("unrestricted longest match", "restricted longest match", "shingle counts", *SIGNAL_PARTS)


def shingles(text: str) -> list[str]:
    """A field's distinct 3-word shingles (3-character ones where it has no spaces), the
    surfaces whose casings the common-shingle cut counts."""
    words = text.split()
    grams = {" ".join(words[i : i + 3]) for i in range(len(words) - 2)} if len(words) > 2 else {text[i : i + 3] for i in range(len(text) - 2)}
    return sorted(grams)


def child(bench: Path, items: int, bmlama: Path, bmlama_items: int, searched: Path | None) -> None:
    """One round in the code on PYTHONPATH, on `searched` or else the code's demo index: the
    seconds of each part and the digest of its answers."""
    import glob
    import os

    from audit import _suffix
    from audit.corpora.inlanguage import LanguageView
    from audit.corpora.local import LocalIndex
    from audit.text import normalize

    index = LocalIndex(searched or Path(glob.glob(os.path.join(os.environ["AUDIT_CACHE_DIR"], "indexes", "demo-*[0-9a-f]"))[0]))
    fields = []
    with open(bench, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            fields += [(lang, normalize(v[f])) for lang, v in record["variants"].items() for f in ("question", "answer", "context") if v.get(f)]
            if len(fields) >= items * 36:
                break
    views: dict[str, LanguageView] = {}
    seconds = dict.fromkeys(PARTS, 0.0)
    digests = {part: hashlib.sha256() for part in PARTS}
    # Each code's shards as its own index passes them: with their sampled keys where it has them.
    shards = [(shard.data, shard.table, shard.ratio, *([shard.keys] if hasattr(shard, "keys") else [])) for group in index.groups for shard in group.shards]

    def timed(part: str, ask: Callable[..., object], *args: object) -> None:
        started = time.process_time()
        answer = ask(*args)
        seconds[part] += time.process_time() - started
        digests[part].update(repr(answer).encode())

    for lang, text in fields:
        view = views.get(lang) or views.setdefault(lang, LanguageView(index, frozenset({lang}), False))
        timed(PARTS[0], lambda corpus, t: corpus.match_lengths(t).lengths, index, text)
        timed(PARTS[1], lambda corpus, t: (lambda m: (m.lengths, m.highest))(corpus.match_lengths(t)), view, text)
        timed(PARTS[2], lambda surfaces: _suffix.casing_counts(shards, surfaces), shingles(text))
    signals(index, {"eclektic": (bench, None, items), "bmlama": (bmlama, "bmlama", bmlama_items)}, timed)
    print(json.dumps({"fields": len(fields), "seconds": seconds, "digests": {p: d.hexdigest() for p, d in digests.items()}}))


def signals(index: object, benchmarks: dict[str, tuple[Path, str | None, int]], timed: Callable[..., None]) -> None:
    """Each signal of `SIGNAL_PARTS` on every variant of its benchmark's first items, as a check
    runs it (the default policy, one runner per signal)."""
    from audit.policyfile import load_policy
    from audit.readers import load_benchmark
    from audit.signals import plan

    policy = load_policy()
    loaded = {name: load_benchmark(path, fmt).items[:count] for name, (path, fmt, count) in benchmarks.items()}
    for part, (signal, benchmark) in SIGNAL_PARTS.items():
        runner = plan([index], [signal], policy.configs, policy.rules)[0][0]
        for item in loaded[benchmark]:
            for lang in item.variants:
                timed(part, runner, item, lang)


def one_round(code: Code, bench: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(bench), "--items", str(args.items), "--bmlama", str(args.bmlama), "--bmlama-items", str(args.bmlama_items)]
    command += ["--index", str(args.index)] if args.index else []
    done = subprocess.run(command, env=code.env(), cwd=code.tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{code.label} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="705abb2", help="the commit the working tree is compared with")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--items", type=int, default=39, help="benchmark items read (12 languages, 3 fields each)")
    parser.add_argument("--bmlama", type=Path, default=ROOT.parent / "shared" / "data" / "bench" / "bmlama" / "BMLAMA17", help="BMLAMA-17's directory of per-language TSV files")
    parser.add_argument("--bmlama-items", type=int, default=300, help="BMLAMA-17 items read (17 languages each)")
    parser.add_argument("--index", type=Path, help="an index directory both codes search instead of their own demo index "
                        "(bench_throughput.py's ~100 MiB one is WORK/index-100MiB)")  # fmt: skip
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.items, args.bmlama, args.bmlama_items, args.index)
        return
    args.index = args.index.absolute() if args.index else None
    args.work = args.work.absolute()
    args.work.mkdir(parents=True, exist_ok=True)
    bench = args.work / "eclektic384.jsonl"
    if not bench.exists():
        synthetic_benchmark(bench)
    base_tree = baseline_tree(args.baseline, args.work)
    build_extension(ROOT)
    head = git("rev-parse", "HEAD") + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")
    codes = [Code("baseline", base_tree, git("rev-parse", "HEAD", cwd=base_tree), args.work / "cache-baseline"), Code("new", ROOT, head, args.work / "cache-new")]
    for code in codes:  # each builds its demo index in its cache, untimed (a fresh work directory has none)
        run_check(code, Workload("warm-up", SAMPLE, 468, "demo"), False, 2, args.work)
    rounds: dict[str, list[dict]] = {code.label: [] for code in codes}
    for n in range(args.rounds):
        for code in codes if n % 2 == 0 else codes[::-1]:
            rounds[code.label].append(one_round(code, bench, args))
            print(f"  round {n + 1} {code.label}: {json.dumps(rounds[code.label][-1]['seconds'])}", file=sys.stderr)
    digests = {label: {json.dumps(r["digests"], sort_keys=True) for r in found} for label, found in rounds.items()}
    if any(len(found) != 1 for found in digests.values()) or digests["baseline"] != digests["new"]:
        raise SystemExit(f"the answers differ: {digests}")
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "fields": rounds["new"][0]["fields"], "rounds": args.rounds,
               "codes": [{"label": c.label, "commit": c.commit} for c in codes], "parts": {}}  # fmt: skip
    print(f"| part ({results['fields']} fields, best / median of {args.rounds} rounds, CPU s) | baseline `{codes[0].commit[:7]}` | new `{codes[1].commit[:7]}` | best new/base |")
    print("|---|---|---|---|")
    for part in PARTS:
        times = {label: sorted(r["seconds"][part] for r in found) for label, found in rounds.items()}
        best = {label: t[0] for label, t in times.items()}
        results["parts"][part] = {label: {"best": round(best[label], 3), "median": round(statistics.median(t), 3)} for label, t in times.items()}
        cells = [f"{best[label]:.2f} / {statistics.median(times[label]):.2f}" for label in ("baseline", "new")]
        print(f"| {part} | {cells[0]} | {cells[1]} | {best['new'] / best['baseline']:.2f} |")
    print("\nanswers identical between the codes: True")
    (args.work / "search_parts.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
