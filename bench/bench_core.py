"""Core benchmark: `audit index build` and the n-gram longest match, side by side with
infini-gram's own indexer and engine, on the demo corpus and on a >=100 MB multilingual corpus.

    pip install '.[bench]'
    python bench/bench_core.py            # about 5 minutes on 2 cores

Prints a Markdown table (paste into bench/README.md) and writes bench/work/core.json.
Every build runs `--repeat` times (default 2) and the fastest is reported, for both tools.
Each build runs in its own process; peak memory is the summed PSS (proportional set size) of
that process tree, sampled every 50 ms: worker processes count, and pages they share with
their parent after a fork count once, not once per process as an RSS sum would.
"""
from __future__ import annotations

import argparse
import contextlib
import filecmp
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
SHARED_CORPUS = ROOT.parent / "shared" / "data" / "corpus"
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"


def tree_memory(process: psutil.Process) -> int:
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += member.memory_full_info().pss
    return total


def run_measured(command: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall time and peak summed PSS of a command's whole process tree."""
    started = time.perf_counter()
    process = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    peak = 0
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, tree_memory(process))
        time.sleep(0.05)
    output = process.stdout.read().decode("utf-8", errors="replace")
    if process.returncode != 0:
        raise SystemExit(f"command failed ({process.returncode}): {' '.join(command)}\n{output[-3000:]}")
    return {"seconds": round(time.perf_counter() - started, 2), "peak_pss_bytes": peak}


def assemble_big_corpus(directory: Path) -> Path:
    """Every JSONL document file in ../shared/data/corpus, decompressed (infini-gram reads .jsonl)."""
    directory.mkdir(parents=True, exist_ok=True)
    for source in sorted(SHARED_CORPUS.glob("**/*.jsonl.gz")):
        target = directory / (source.parent.name + "__" + source.name.removesuffix(".gz"))
        if not target.exists():
            with gzip.open(source, "rb") as inp, open(target, "wb") as out:
                shutil.copyfileobj(inp, out)
    return directory


def demo_corpus(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    corpus = Path(str(resources.files("audit").joinpath("data/demo/corpus")))
    for source in sorted(corpus.glob("*.jsonl.gz")):
        target = directory / source.name.removesuffix(".gz")
        if not target.exists():
            with gzip.open(source, "rb") as inp, open(target, "wb") as out:
                shutil.copyfileobj(inp, out)
    return directory


def best_of(repeat: int, command: list[str], out: Path) -> dict:
    """Fastest wall time and highest peak memory over `repeat` fresh builds into `out`."""
    runs = []
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        runs.append(run_measured(command))
    return {"seconds": min(r["seconds"] for r in runs), "peak_pss_bytes": max(r["peak_pss_bytes"] for r in runs), "runs": runs}


def build_both(name: str, source: Path, work: Path, repeat: int) -> dict:
    ig_dir, ours_raw, ours_norm = work / f"{name}-infinigram", work / f"{name}-audit-raw", work / f"{name}-audit"
    hard_files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    infinigram_command = [
        sys.executable, "-m", "infini_gram.indexing", "--data_dir", str(source), "--save_dir", str(ig_dir),
        "--token_dtype", "u8", "--add_metadata", "--cpus", str(os.cpu_count()), "--mem", "16", "--ulimit", str(hard_files),
    ]
    audit_cli = [sys.executable, "-m", "audit.cli", "index", "build", str(source)]
    infinigram = best_of(repeat, infinigram_command, ig_dir)
    # The same work as infini-gram's indexer: the raw bytes' suffix array, without the
    # near-duplicate index a default build adds after it.
    ours = best_of(repeat, [*audit_cli, "--out", str(ours_raw), "--normalize", "none", "--no-minhash"], ours_raw)
    normalized = best_of(repeat, [*audit_cli, "--out", str(ours_norm)], ours_norm)
    corpus_bytes = (ig_dir / "tokenized.0").stat().st_size
    return {
        "corpus": name,
        "corpus_bytes": corpus_bytes,
        "documents": json.loads((ours_raw / "audit-index.json").read_text())["documents"],
        "infinigram": infinigram,
        "audit_raw": ours,
        "audit_normalized": normalized,
        "speedup": round(infinigram["seconds"] / ours["seconds"], 2),
        "peak_vs_corpus": round(ours["peak_pss_bytes"] / corpus_bytes, 2),
        "identical": {kind: filecmp.cmp(ig_dir / f"{kind}.0", ours_raw / f"{kind}.0", shallow=False) for kind in ("tokenized", "table", "offset")},
        "index_dirs": {"infinigram": str(ig_dir), "audit_raw": str(ours_raw)},
    }


def query_texts() -> list[bytes]:
    """The ECLeKTic sample's questions, answers and passages in all 12 languages."""
    from audit.readers import load_benchmark
    from audit.text import normalize

    texts = []
    for item in load_benchmark(SAMPLE).items:
        for variant in item.variants.values():
            texts += [normalize(t).encode() for t in (variant.question, variant.answer, variant.context) if t]
    return texts


def longest_match(build: dict, engine_kb: int) -> dict:
    from infini_gram.engine import InfiniGramEngine

    from audit.corpora.local import LocalIndex
    from audit.corpora.shardread import char_starts

    engine = InfiniGramEngine(index_dir=build["index_dirs"]["infinigram"], eos_token_id=0, vocab_size=255, token_dtype="u8")
    ours = LocalIndex(Path(build["index_dirs"]["audit_raw"]))
    texts = query_texts()
    started = time.perf_counter()
    mine = [ours.longest_match_bytes(t) for t in texts]
    ours_seconds = time.perf_counter() - started
    started = time.perf_counter()
    chars = [ours.longest_char_bytes(t) for t in texts]
    chars_seconds = time.perf_counter() - started
    chars_mismatches = sum(1 for t, found, every in zip(texts, chars, mine, strict=True) if not np.array_equal(found, every[char_starts(t)]))
    ours_kb = sum(map(len, texts)) / 1024
    subset, size = [], 0
    for i in range(0, len(texts), max(1, len(texts) // 200)):
        if size >= engine_kb * 1024:
            break
        subset.append(i)
        size += len(texts[i])
    started = time.perf_counter()
    theirs = {i: np.array(engine.creativity(list(texts[i]))["rs"]) - np.arange(len(texts[i])) for i in subset}
    engine_seconds = time.perf_counter() - started
    mismatches = sum(1 for i in subset if not np.array_equal(theirs[i], mine[i]))
    ours_ms_per_kb = 1000 * ours_seconds / ours_kb
    engine_ms_per_kb = 1000 * engine_seconds / (size / 1024)
    return {
        "ours_kb": round(ours_kb, 1),
        "ours_ms_per_kb": round(ours_ms_per_kb, 3),
        "ours_chars_ms_per_kb": round(1000 * chars_seconds / ours_kb, 3),
        "chars_mismatches": chars_mismatches,
        "engine_kb": round(size / 1024, 1),
        "engine_ms_per_kb": round(engine_ms_per_kb, 1),
        "speedup": round(engine_ms_per_kb / ours_ms_per_kb, 1),
        "compared_texts": len(subset),
        "mismatches": mismatches,
    }


def audit_check_seconds(work: Path) -> dict:
    cache = work / "check-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "AUDIT_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "audit.cli", "check", str(SAMPLE), "--corpus", "demo", "--out", str(work / "sample.audit.jsonl")]
    return {"cold_first_use": run_measured(command, env), "warm": run_measured(command, env)}


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def table(results: dict) -> str:
    lines = [
        "| corpus | size | infini-gram build | audit build (raw) | speed-up | audit build (default: normalised, with the near-duplicate index) | peak PSS infini-gram | peak PSS audit (raw) | audit peak / corpus | tables identical |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in results["builds"]:
        lines.append(
            f"| {b['corpus']} | {mib(b['corpus_bytes'])}, {b['documents']:,} docs | {b['infinigram']['seconds']} s | {b['audit_raw']['seconds']} s "
            f"| **{b['speedup']}x** | {b['audit_normalized']['seconds']} s | {mib(b['infinigram']['peak_pss_bytes'])} | {mib(b['audit_raw']['peak_pss_bytes'])} "
            f"| {b['peak_vs_corpus']}x | {all(b['identical'].values())} |"
        )
    lines += [
        "",
        "| corpus | engine `creativity` | audit longest match | speed-up | at character starts (the signal's pass) | texts compared | mismatches |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in results["longest_match"].items():
        lines.append(
            f"| {name} | {m['engine_ms_per_kb']} ms/KB ({m['engine_kb']} KB) | {m['ours_ms_per_kb']} ms/KB ({m['ours_kb']} KB) | **{m['speedup']}x** "
            f"| {m['ours_chars_ms_per_kb']} ms/KB ({m['chars_mismatches']} differ from every byte's) | {m['compared_texts']} | {m['mismatches']} |"
        )
    check = results["audit_check"]
    lines += [
        "",
        f"`audit check` of the ECLeKTic sample (39 items x 12 languages) against `demo`: "
        f"{check['warm']['seconds']} s warm, {check['cold_first_use']['seconds']} s on first use (includes building the demo index); "
        f"peak PSS {mib(check['warm']['peak_pss_bytes'])}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    parser.add_argument("--engine-kb", type=int, default=64, help="KB of query text given to the (slow) engine per corpus")
    parser.add_argument("--skip-big", action="store_true", help="only the demo corpus")
    parser.add_argument("--repeat", type=int, default=2, help="builds per tool and corpus; the fastest is reported")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    corpora = {"demo": demo_corpus(args.work / "src-demo")}
    if not args.skip_big:
        corpora["shared-100MB"] = assemble_big_corpus(args.work / "src-big")
    results = {"machine": {"cpus": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total}, "builds": [], "longest_match": {}}
    for name, source in corpora.items():
        print(f"building {name} both ways ...", file=sys.stderr)
        build = build_both(name, source, Path(tempfile.mkdtemp(dir=args.work)), args.repeat)
        results["builds"].append(build)
        print(f"longest match on {name} ...", file=sys.stderr)
        results["longest_match"][name] = longest_match(build, args.engine_kb)
    big = [b for b in results["builds"] if b["corpus"] != "demo"]
    if big and big[0]["corpus_bytes"] < 100 * 10**6:
        raise SystemExit(f"the large corpus is only {big[0]['corpus_bytes']:,} bytes; the benchmark needs >= 100 MB")
    results["audit_check"] = audit_check_seconds(args.work)
    (args.work / "core.json").write_text(json.dumps(results, indent=2))
    print(table(results))


if __name__ == "__main__":
    main()
