"""Benchmark: HTTP requests per (item, language) variant against an infini-gram API server, on
the Llama-2-tokenised demo index (the public indexes' tokenizer), and where they go.

    pip install -e '.[bench,serve]'
    python bench/bench_requests.py                         # reads ../shared for Llama-2
    python bench/bench_requests.py --llama PATH/llama2-tokenizer --reuse-index

The demo corpus is indexed by infini-gram's own indexer with the Llama-2 tokenizer and served
by `audit serve`, exactly as `bench_decisions.py --sections llama` does (its helpers are
imported).  The whole ECLeKTic sample is checked through the API backend (`longest_match =
"count"`, profile `decide`, default budget) twice:
1. **today's requests** (`ApiOptions(cooccurrence="documents", forms="both")`): every count in
   two surface forms, co-occurrence from the documents of the rarer string's occurrences;
2. **the default** (`cooccurrence="auto"`, `forms="when-absent"`): one CNF query per pair, the
   second surface form only when the first finds nothing.
Every request is counted by query type.  Each run's tags are compared with the first's (the
co-occurrence answer read from every document), and every longest-match and coverage figure
with the exact reference (`bench_decisions.exact_reference`: a full scan without budget).
The byte-level demo index is checked the same way against the local index's tags.  Then the
projection for the full ECLeKTic (4,608 variants) at the default concurrency.

Prints Markdown tables and writes bench/work/requests.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import bench_decisions as decisions  # noqa: E402

from audit.check import check_items  # noqa: E402
from audit.corpora.api import ApiCorpus, ApiOptions  # noqa: E402
from audit.corpora.client import ClientSettings, InfiniGramClient  # noqa: E402
from audit.policyfile import load_policy  # noqa: E402
from audit.readers import load_benchmark  # noqa: E402

ROUND_TRIPS = (0.1, 0.25, 0.5)
RUNS = {
    "today (both forms, documents)": {"cooccurrence": "documents", "forms": "both"},
    "default (CNF, second form when absent)": {},
}
Record = dict[str, Any]


class CountingClient(InfiniGramClient):
    """The client, counting requests sent by query type (cache misses only: no cache here)."""

    def __init__(self, settings: ClientSettings) -> None:
        super().__init__(settings)
        self.by_type: Counter[str] = Counter()
        self._tally = threading.Lock()

    def query(self, query_type: str, **params: Any) -> dict[str, Any]:
        with self._tally:
            self.by_type[query_type] += 1
        return super().query(query_type, **params)


def run(url: str, index: str, items: list[Any], options: dict[str, Any]) -> tuple[list[Record], ApiCorpus, CountingClient, float]:
    """The n-gram signal through the API backend, one variant at a time (the corpus still asks
    a field's independent questions side by side), each variant's HTTP requests tallied."""
    client = CountingClient(ClientSettings(url=url, index=index))
    api = ApiCorpus(client, index, ApiOptions(longest_match="count", **options))
    inner = decisions.ngram_runner(api, index)
    spent: dict[str, int] = {}

    def runner(item: Any, lang: str) -> Any:
        before = client.stats["requests"]
        try:
            return inner(item, lang)
        finally:
            spent[f"{item.item_id}/{lang}"] = client.stats["requests"] - before

    started = time.perf_counter()
    records = check_items(items, [runner], load_policy(None), workers=1)
    for record in records:
        record["http_requests"] = spent[decisions.key(record)]
    return records, api, client, time.perf_counter() - started


def per_variant(records: list[Record], client: CountingClient) -> float:
    return client.stats["requests"] / len(records)


def describe(name: str, records: list[Record], api: ApiCorpus, client: CountingClient, seconds: float, reference: dict[str, str] | None) -> dict[str, Any]:
    tags = Counter(r["exposure"] for r in records)
    spent = [decisions.queries_spent(r) for r in records]
    row: dict[str, Any] = {
        "run": name,
        "variants": len(records),
        "tags": dict(tags),
        "decided_fraction": round(1 - tags["unknown"] / len(records), 4),
        "requests": client.stats["requests"],
        "requests_per_variant": round(per_variant(records, client), 2),
        "by_type": dict(client.by_type),
        "median_count_queries": statistics.median(spent),
        "variant_matches": dict(api.details["variant_matches"]),
        "cooccurrence": dict(api.details.get("cooccurrence", {})),
        "grouped": dict(api.details.get("grouped", {})),
        "seconds": round(seconds, 1),
    }
    row["median_requests_per_variant"] = statistics.median(r["http_requests"] for r in records)
    row["max_requests_per_variant"] = max(r["http_requests"] for r in records)
    spent_by_variant = sorted(r["http_requests"] for r in records)
    row["p90_requests_per_variant"] = spent_by_variant[int(0.9 * (len(spent_by_variant) - 1))]
    by_lang: dict[str, list[int]] = {}
    for r in records:
        by_lang.setdefault(r["lang"], []).append(r["http_requests"])
    row["mean_requests_by_language"] = {lang: round(statistics.mean(v), 1) for lang, v in sorted(by_lang.items())}
    by_tag: dict[str, list[int]] = {}
    for r in records:
        by_tag.setdefault(str(r["exposure"]), []).append(r["http_requests"])
    row["mean_requests_by_tag"] = {tag: round(statistics.mean(v), 1) for tag, v in sorted(by_tag.items())}
    if reference is not None:
        row["tags_unlike_reference"] = [f"{decisions.key(r)}: {r['exposure']} (reference {reference[decisions.key(r)]})" for r in records if r["exposure"] != reference[decisions.key(r)]]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama", type=Path, default=decisions.LLAMA, help="the Llama-2 tokenizer directory (tokenizer.json)")
    parser.add_argument("--reuse-index", action="store_true", help="serve bench/work/decisions-llama-demo as built by an earlier run")
    args = parser.parse_args()
    decisions.LLAMA = args.llama
    if not (args.llama / "tokenizer.json").exists():
        raise SystemExit(f"{args.llama}: no tokenizer.json")
    decisions.WORK.mkdir(parents=True, exist_ok=True)
    items = load_benchmark(decisions.SAMPLE).items
    save = decisions.WORK / "decisions-llama-demo"
    build = None if args.reuse_index and save.exists() else decisions.build_llama_index(save)
    jobs = Path(tempfile.mkdtemp(prefix="requests-jobs-", dir=decisions.WORK))
    server = decisions.start_server("--index", f"llama-demo={save}", "--tokenizer", f"llama-demo={args.llama}", "--jobs-dir", str(jobs))
    rows, reference = [], None
    try:
        for name, options in RUNS.items():
            records, api, client, seconds = run(server.url, "llama-demo", items, options)
            rows.append(describe(name, records, api, client, seconds, reference))
            print(f"  {name}: {rows[-1]['requests_per_variant']} requests per variant, {seconds:.1f} s", flush=True)
            if reference is None:
                reference = {decisions.key(r): r["exposure"] for r in records}
            rows[-1]["exact"] = {k: v for k, v in decisions.exact_reference(save, items, records, api).items() if k != "cases"}
    finally:
        server.stop()
        shutil.rmtree(jobs, ignore_errors=True)
    result = {"cores": os.cpu_count(), "python": sys.version.split()[0], "build": build, "runs": rows, **decisions.code_version()}
    (decisions.WORK / "requests.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
