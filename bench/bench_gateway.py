"""`audit check` through a gateway that behaves like the public services' front end, with the
client's default settings: the audit must equal the undisturbed one, every retry counted.

A real `audit serve` of the demo index stands behind tests/replay/gateway.py, which adds a
round trip (`--latency`, 0.25 s by default, as the public API answers) to every request.  The
ECLeKTic sample's first `--questions` questions (12 languages each) are checked with the ngram
signal, each run in a fresh process with a fresh response cache, in these scenarios:

- undisturbed: the gateway adds its latency only;
- 403 to half the requests for 60 s: `403 {"message": "Forbidden"}` (no `error` key) to each
  request with probability 0.5, from `--window-start` seconds after the first request for 60 s;
- 429 with `Retry-After: 5` to half the requests for 60 s;
- dropped connections: 10% of the requests answered by the server, then the connection closed
  without the answer.

For each: wall time, the corpus's `requests` details from the manifest (requests, retries,
throttled answers, dropped connections, the concurrency reached), variants `unknown`, and
whether every record equals the undisturbed run's.

    python bench/bench_gateway.py                      # about 20 minutes on 2 cores
    python bench/bench_gateway.py --questions 5 --window 20
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from conftest import sample_ids, sample_subset  # noqa: E402
from replay.gateway import Gateway, Plan  # noqa: E402
from test_client_gateway import comparable, registry, requests_of, run_check  # noqa: E402
from test_server import start_server  # noqa: E402

from audit import __version__  # noqa: E402
from audit.corpora.client import ClientSettings  # noqa: E402
from audit.corpora.demo import demo_index  # noqa: E402
from audit.corpora.registry import cache_dir  # noqa: E402


def scenarios(latency: float, start: float, window: float) -> dict[str, Plan]:
    return {
        "undisturbed": Plan(latency=latency),
        f"403 to half the requests for {window:g} s": Plan(throttle_share=0.5, window_start=start, window_seconds=window, latency=latency, seed=1),
        f"429 (Retry-After: 5) to half the requests for {window:g} s": Plan(throttle_share=0.5, window_start=start, window_seconds=window, throttle_status=429, retry_after="5", latency=latency, seed=2),
        "10% of the connections dropped": Plan(drop_share=0.1, latency=latency, seed=3),
    }


def run(upstream: str, bench: Path, plan: Plan) -> dict:
    """One audit through a gateway with this plan, in a fresh process and cache."""
    root = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    gateway = Gateway(upstream, plan)
    try:
        registry(root, gateway.url)
        started = time.perf_counter()
        manifest, records, _ = run_check(bench, root)
        seconds = time.perf_counter() - started
    finally:
        gateway.stop()
    counts = requests_of(manifest)
    return {"seconds": round(seconds, 1), "counts": counts, "gateway": dict(gateway.counts), "records": records, "unknown": sum(r["exposure"] == "unknown" for r in records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=20, help="questions of the ECLeKTic sample (12 languages each)")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds the gateway adds to every request")
    parser.add_argument("--window-start", type=float, default=10.0, help="seconds after the first request when throttling starts")
    parser.add_argument("--window", type=float, default=60.0, help="seconds throttling lasts")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    bench = sample_subset(work / "sample.csv", sample_ids()[: args.questions])
    server = start_server("--index", f"demo={demo_index(cache_dir())}", "--jobs-dir", str(work / "jobs"))
    try:
        results = {name: run(server.url, bench, plan) for name, plan in scenarios(args.latency, args.window_start, args.window).items()}
    finally:
        server.stop()
    baseline = comparable(results["undisturbed"]["records"])
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    defaults = ClientSettings(index="x")
    print(f"### Results ({time.strftime('%Y-%m-%d')}, {platform.python_version()}, corpus-audit {__version__} at {commit}, requests {requests.__version__})\n")
    print(f"{args.questions} questions x 12 languages = {len(baseline)} variants, ngram signal, demo index behind the gateway, {args.latency:g} s added to every request; "
          f"client defaults: concurrency {defaults.min_concurrency}-{defaults.concurrency} starting at {defaults.start_concurrency}, throttle wait {defaults.throttle_wait:g} s (+0-50% jitter) unless Retry-After says, {defaults.attempts} attempts for transient failures.\n")
    print("| scenario | wall time | requests | retries | throttled | dropped | concurrency at the end (raised / halved) | unknown variants | records equal to undisturbed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, result in results.items():
        c = result["counts"]
        equal = comparable(result["records"]) == baseline
        print(f"| {name} | {result['seconds']:g} s | {c['requests']:,} | {c['retries']:,} | {c['throttled']:,} | {c['dropped']:,} | {c['concurrency']} ({c['concurrency_raised']} / {c['concurrency_halved']}) | {result['unknown']} | {'yes' if equal else 'NO'} |")
    print("\n" + json.dumps({name: {"gateway": r["gateway"], "counts": r["counts"]} for name, r in results.items()}))


if __name__ == "__main__":
    main()
