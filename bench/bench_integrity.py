"""What the integrity checks cost: index builds that hash every file as they write it, the
checks on every open, `audit index verify`, and audit files read with their digest, each next to
what a user would otherwise run: `b2sum` over the index files, infini-gram's engine opening the
same index, and pandas reading the audit file with no check at all.

    pip install -e '.[bench]' pandas
    python bench/bench_integrity.py            # about 2 minutes on 2 cores; --skip-big for the demo only

Prints a Markdown table (paste into bench/README.md) and writes bench/work/integrity.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import assemble_big_corpus, demo_corpus

from audit.auditfile import read_audit
from audit.corpora.local import LocalIndex
from audit.corpora.verify import verify_index
from audit.index.build import build_index
from audit.index.format import read_manifest

ROOT = Path(__file__).resolve().parents[1]
AUDIT_FILE = ROOT / "reports" / "demo" / "eclektic_sample.demo.audit.jsonl"


def best(repeat: int, run: Callable[[], object]) -> float:
    """Fastest of `repeat` runs, in seconds (the least disturbed by the rest of the machine)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def hashing_share(index: Path) -> float:
    """Seconds of blake2b over the index's files: what hashing adds to a build that writes them."""
    import hashlib

    def digest_all() -> None:
        for info in read_manifest(index).files:
            hashlib.blake2b((index / info.name).read_bytes(), digest_size=16).hexdigest()

    return best(3, digest_all)


def b2sum(index: Path) -> float:
    files = [str(index / info.name) for info in read_manifest(index).files]
    return best(3, lambda: subprocess.run(["b2sum", "-l", "128", *files], check=True, capture_output=True))


def engine_open(index: Path) -> float:
    from infini_gram.engine import InfiniGramEngine

    return best(5, lambda: InfiniGramEngine(index_dir=str(index), eos_token_id=0, vocab_size=255, token_dtype="u8"))


def sampled_order(index: Path) -> float:
    """The open's sampled suffix-array order check alone, over every shard, in seconds."""
    import mmap

    from audit.corpora.soundness import suffix_order_problem

    def check_all() -> None:
        for data_path in sorted(index.glob("tokenized.*")):
            shard = data_path.suffix
            with open(data_path, "rb") as data_file, open(index / f"table{shard}", "rb") as table_file:
                data = mmap.mmap(data_file.fileno(), 0, access=mmap.ACCESS_READ)
                table = mmap.mmap(table_file.fileno(), 0, access=mmap.ACCESS_READ)
                assert suffix_order_problem(data, table, len(table) // len(data), 1) is None

    return best(20, check_all)


def measure(name: str, source: Path, work: Path, repeat: int) -> dict:
    index = work / f"{name}-index"
    build_seconds = best(repeat, lambda: build_index([source], index, force=True))
    size = sum(info.bytes for info in read_manifest(index).files)
    verify = verify_index(index)
    assert verify.ok and verify.hashed, "a fresh index must verify"
    return {
        "corpus": name,
        "index_bytes": size,
        "build_s": round(build_seconds, 3),
        "hashing_s": round(hashing_share(index), 3),
        "open_checked_ms": round(1000 * best(5, lambda: LocalIndex(index)), 2),
        "sampled_order_ms": round(1000 * sampled_order(index), 3),
        "engine_open_ms": round(1000 * engine_open(index), 2),
        "verify_s": round(best(3, lambda: verify_index(index)), 3),
        "b2sum_s": round(b2sum(index), 3),
    }


def audit_file_read() -> dict:
    import pandas as pd

    return {
        "audit_file": str(AUDIT_FILE.relative_to(ROOT)),
        "bytes": AUDIT_FILE.stat().st_size,
        "records": len(read_audit(AUDIT_FILE).records),
        "read_audit_ms": round(1000 * best(5, lambda: read_audit(AUDIT_FILE)), 1),
        "pandas_ms": round(1000 * best(5, lambda: pd.read_json(AUDIT_FILE, lines=True)), 1),
    }


def table(results: dict) -> str:
    mib = 1 << 20
    lines = [
        "| corpus | index size | build (hashes included) | of which hashing | open with checks | of which sampled order check | infini-gram engine open | `audit index verify` | `b2sum -l 128` |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["indexes"]:
        lines.append(
            f"| {row['corpus']} | {row['index_bytes'] / mib:,.0f} MiB | {row['build_s']:.2f} s | {row['hashing_s']:.2f} s "
            f"({100 * row['hashing_s'] / row['build_s']:.0f}%) | {row['open_checked_ms']:.1f} ms | {row['sampled_order_ms']:.2f} ms | {row['engine_open_ms']:.1f} ms "
            f"| {row['verify_s']:.2f} s | {row['b2sum_s']:.2f} s |"
        )
    read = results["audit_file"]
    lines += [
        "",
        "| audit file | records | `read_audit` (count and sha256 checked) | `pandas.read_json` (nothing checked) |",
        "|---|---|---|---|",
        f"| {read['audit_file']} ({read['bytes'] / mib:.1f} MiB) | {read['records']} | {read['read_audit_ms']:.0f} ms | {read['pandas_ms']:.0f} ms |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as scratch:
        work = Path(scratch)
        corpora = {"demo": demo_corpus(work / "src-demo")}
        if not args.skip_big:
            corpora["shared-100MB"] = assemble_big_corpus(work / "src-big")
        results = {"indexes": [measure(name, source, work, args.repeat) for name, source in corpora.items()], "audit_file": audit_file_read()}
        shutil.rmtree(work, ignore_errors=True)
    (args.work / "integrity.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(table(results))


if __name__ == "__main__":
    main()
