"""Benchmark: `audit check` through `audit serve` against the same check on the local index.

    python bench/bench_api.py            # about a minute on 2 cores

Runs, each in a fresh process as a user would:
1. `audit check` of the ECLeKTic sample against the local `demo` index;
2. the same through `audit serve --index demo` with an empty response cache (the API backend,
   `longest_match = "auto"`, so the server's creativity query);
3. again with the cache filled (a re-run: no request sent);
4. again `--offline`-equivalent: the cache alone, the server stopped;
then requests per second against `audit serve` at 1, 2, 4 and 8 concurrent clients (count
queries of distinct strings, so the server's work is real and no cache is involved).  The tags
of every run must equal the local run's.

Last, the price of the public API's missing longest-match query: the first BUDGET_ITEMS items
checked through `audit serve` with longest matches derived from counts (`longest_match =
"count"`, as against the public indexes) at several request budgets per field, in this
process: wall time, requests, fields left bounded, variants `unknown`, and variants whose tag
contradicts the local one (which must be none: a bound may leave a rule undecided, never
decide it wrongly).  A byte-level index makes every character a place a match can start, so
this is the expensive case; on a tokenized index only word starts are.

Prints Markdown tables and writes bench/work/api.json.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
WORK = ROOT / "bench" / "work"
RPS_SECONDS = 4.0
BUDGET_ITEMS = 4
BUDGETS = (64, 256, 1024)


def start_server(index: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "audit.server", "--index", f"demo={index}", "--port", "0", "--jobs-dir", str(WORK / "api-jobs")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise SystemExit(f"audit serve did not start: {line}")
    url = line.split("listening on ", 1)[1].strip() + "/"
    for _ in range(200):
        try:
            if requests.get(url + "health", timeout=1).ok:
                break
        except requests.ConnectionError:
            time.sleep(0.05)
    return process, url


def run_check(corpus: str, out: Path, env: dict[str, str], registry: Path | None = None) -> float:
    command = [sys.executable, "-m", "audit.cli", "check", str(SAMPLE), "--corpus", corpus, "--out", str(out), "--no-report"]
    if registry is not None:
        command += ["--registry", str(registry)]
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def tags(path: Path) -> list[tuple[str, str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [(r["item_id"], r["lang"], r["exposure"]) for r in map(json.loads, lines)]


def details(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])["corpora"][0]["details"]


def requests_per_second(url: str, clients: int) -> float:
    """Count queries of distinct strings from `clients` threads for RPS_SECONDS."""
    done = [0] * clients
    stop = time.perf_counter() + RPS_SECONDS

    def work(k: int) -> None:
        session = requests.Session()
        n = 0
        while time.perf_counter() < stop:
            response = session.post(url, json={"index": "demo", "query_type": "count", "query": f"the {k}-{n} of"}, timeout=30)
            response.raise_for_status()
            n += 1
        done[k] = n

    threads = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.perf_counter() - started)


def budget_runs(url: str, index: Path) -> list[dict]:
    """Count-derived longest matches at each budget, against the local index's tags."""
    from collections import Counter
    from functools import partial

    from audit.corpora.api import ApiCorpus, ApiOptions
    from audit.corpora.client import ClientSettings, InfiniGramClient
    from audit.corpora.local import LocalIndex
    from audit.policyfile import build_config, load_policy
    from audit.readers import load_benchmark
    from audit.run.executors import check_items
    from audit.signals import ngram

    items = load_benchmark(SAMPLE).items[:BUDGET_ITEMS]
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    local = [record.to_dict() for record in check_items(items, [partial(ngram.run, LocalIndex(index, name="demo"), config=config)], policy)]
    runs = []
    for budget in BUDGETS:
        api = ApiCorpus(InfiniGramClient(ClientSettings(url=url, index="demo")), "demo", ApiOptions(longest_match="count", budget=budget))
        started = time.perf_counter()
        remote = [record.to_dict() for record in check_items(items, [partial(ngram.run, api, config=config)], policy)]
        tags = Counter(r["exposure"] for r in remote)
        runs.append(
            {
                "budget": budget,
                "seconds": round(time.perf_counter() - started, 2),
                "requests": api.client.stats["requests"],
                "fields": sum(1 for r in remote for e in r["evidence"] if e["status"] == "ok" and e["field"] != "question+answer"),
                "fields_bounded": api.details["fields_bounded"],
                "variants": len(remote),
                "unknown": tags["unknown"],
                "local_unknown": sum(1 for r in local if r["exposure"] == "unknown"),
                "contradictions": sum(1 for a, b in zip(remote, local, strict=True) if a["exposure"] != "unknown" and a["exposure"] != b["exposure"]),
            }
        )
    return runs


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="bench-api-", dir=WORK))
    env = {**os.environ, "AUDIT_CACHE_DIR": str(cache / "audit-cache")}
    from audit.corpora.demo import demo_index

    os.environ["AUDIT_CACHE_DIR"] = env["AUDIT_CACHE_DIR"]
    index = demo_index(cache / "audit-cache")
    results: dict[str, object] = {"cores": os.cpu_count()}
    local_out = cache / "local.jsonl"
    results["local_seconds"] = min(run_check("demo", local_out, env) for _ in range(2))
    process, url = start_server(index, env)
    try:
        registry = cache / "corpora.toml"
        registry.write_text(f'[corpora.served]\nbackend = "infini-gram-api"\nurl = "{url}"\nindex = "demo"\ncache = "responses.sqlite"\n', encoding="utf-8")
        cold, warm = cache / "cold.jsonl", cache / "warm.jsonl"
        results["api_cold_seconds"] = run_check("served", cold, env, registry)
        results["api_cold_requests"] = details(cold)["requests"]
        results["api_warm_seconds"] = run_check("served", warm, env, registry)
        results["api_warm_requests"] = details(warm)["requests"]
        results["fields_capped"] = details(cold)["fields_capped"]
        results["rps"] = {clients: round(requests_per_second(url, clients), 1) for clients in (1, 2, 4, 8)}
        results["budgets"] = budget_runs(url, index)
    finally:
        process.terminate()
        process.wait(timeout=10)
    offline = cache / "offline.jsonl"
    results["api_offline_seconds"] = run_check("served", offline, env, registry)
    results["api_offline_requests"] = details(offline)["requests"]
    reference = tags(local_out)
    results["tags_equal"] = {name: tags(path) == reference for name, path in (("cold", cold), ("warm", warm), ("offline", offline))}
    (WORK / "api.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print("| run | wall time | requests sent | cache hits | tags equal to local |")
    print("|---|---|---|---|---|")
    print(f"| local index (`--corpus demo`) | {results['local_seconds']:.2f} s | | | |")
    for name in ("cold", "warm", "offline"):
        sent = results[f"api_{name}_requests"]
        print(f"| through `audit serve`, {name} cache | {results[f'api_{name}_seconds']:.2f} s | {sent['requests']:,} | {sent['cache_hits']:,} | {results['tags_equal'][name]} |")
    print()
    print("| concurrent clients | requests/s |")
    print("|---|---|")
    for clients, rate in results["rps"].items():
        print(f"| {clients} | {rate:,.0f} |")
    print(f"\nfields with a longest match capped at the query limit: {results['fields_capped']}; cores: {results['cores']}")
    print(f"\nCount-derived longest matches, first {BUDGET_ITEMS} items ({results['budgets'][0]['variants']} variants, {results['budgets'][0]['fields']} fields):\n")
    print("| budget per field | wall time | requests | fields bounded | variants unknown (local: unknown) | tags contradicting local |")
    print("|---|---|---|---|---|---|")
    for run in results["budgets"]:
        print(f"| {run['budget']} | {run['seconds']:.1f} s | {run['requests']:,} | {run['fields_bounded']} | {run['unknown']} ({run['local_unknown']}) | {run['contradictions']} |")


if __name__ == "__main__":
    main()
