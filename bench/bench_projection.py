"""How long the full ECLeKTic takes against a public-like API, measured rather than multiplied out.

A real `audit serve` of the demo index (byte-level) stands behind tests/replay/gateway.py, which
adds a round trip (`--latency`, 0.25 s by default) to every request, as a distant public
service would.  The registry entry asks for longest matches from counts (`longest_match =
"count"`), as against the public indexes, which have no longest-match query.  The ECLeKTic
sample's first `--questions` questions (12 languages each) are checked by `audit check` in a
fresh process and a fresh response cache, twice, side by side:

- **defaults**: no `--workers` and no pacing settings, as a user runs it (8 variants at once
  against remote corpora; requests in flight adapt from 4 up to 8);
- **2 in flight**: `concurrency = 2` and `--workers 2`, what the built-in public entries set
  before they paced themselves.

For each: wall time, HTTP requests (from the manifest), requests per variant, the mean number
in flight (requests x latency / wall time), and the projection for the full benchmark (384
questions x 12 languages = 4,608 variants) from the measured variants per second.  The two
audits' records must be equal.

    python bench/bench_projection.py                  # about 10 minutes on 2 cores
    python bench/bench_projection.py --questions 5
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from conftest import sample_ids, sample_subset  # noqa: E402
from replay.gateway import Gateway, Plan  # noqa: E402
from test_client_gateway import comparable, registry, requests_of  # noqa: E402
from test_server import start_server  # noqa: E402

from audit import __version__  # noqa: E402
from audit.corpora.demo import demo_index  # noqa: E402
from audit.corpora.registry import cache_dir  # noqa: E402

ECLEKTIC_VARIANTS = 384 * 12
RUNS = {"defaults": ({}, ()), "2 in flight": ({"concurrency": 2}, ("--workers", "2"))}


def run(upstream: str, bench: Path, latency: float, settings: dict, extra: tuple[str, ...]) -> dict:
    """One audit through the gateway, in a fresh process and response cache."""
    root = Path(tempfile.mkdtemp(prefix="bench-projection-"))
    gateway = Gateway(upstream, Plan(latency=latency))
    try:
        registry(root, gateway.url, longest_match="count", **settings)
        command = [sys.executable, "-m", "audit.cli", "check", str(bench), "--corpus", "demo-api", "--registry", str(root / "corpora.toml"),
                   "--out", str(root / "out.audit.jsonl"), "--no-report", *extra]
        env = dict(os.environ, AUDIT_CACHE_DIR=str(root / "audit-cache"))
        started = time.perf_counter()
        subprocess.run(command, check=True, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
    finally:
        gateway.stop()
    lines = [json.loads(line) for line in (root / "out.audit.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"seconds": seconds, "counts": requests_of(lines[0]), "records": lines[1:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=20, help="questions of the ECLeKTic sample (12 languages each)")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds the gateway adds to every request")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-projection-"))
    bench = sample_subset(work / "sample.csv", sample_ids()[: args.questions])
    server = start_server("--index", f"demo={demo_index(cache_dir())}", "--jobs-dir", str(work / "jobs"))
    try:
        results = {name: run(server.url, bench, args.latency, settings, extra) for name, (settings, extra) in RUNS.items()}
    finally:
        server.stop()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    variants = len(results["defaults"]["records"])
    print(f"### Results ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, Python {platform.python_version()}, corpus-audit {__version__} at {commit})\n")
    print(f"{args.questions} questions x 12 languages = {variants} variants, every signal that runs on an API corpus, {args.latency:g} s added to every request.\n")
    print("| run | wall time | HTTP requests | per variant | mean in flight | full ECLeKTic (4,608 variants), projected | records equal |")
    print("|---|---|---|---|---|---|---|")
    base = comparable(results["defaults"]["records"])
    for name, result in results.items():
        requests, seconds = result["counts"]["requests"], result["seconds"]
        hours = seconds * ECLEKTIC_VARIANTS / variants / 3600
        equal = "yes" if comparable(result["records"]) == base else "NO"
        print(f"| {name} | {seconds:.1f} s | {requests:,} | {requests / variants:.2f} | {requests * args.latency / seconds:.2f} | {hours:.2f} h | {equal} |")


if __name__ == "__main__":
    main()
