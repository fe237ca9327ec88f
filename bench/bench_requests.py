"""Benchmark: HTTP requests per (item, language) variant against an infini-gram API server, on
the Llama-2-tokenised demo index (the public indexes' tokenizer), and where they go.

    pip install -e '.[bench,serve]'
    python bench/bench_requests.py                         # reads ../shared for Llama-2
    python bench/bench_requests.py --llama PATH/llama2-tokenizer --reuse-index

The demo corpus is indexed by infini-gram's own indexer with the Llama-2 tokenizer and served
by `audit serve`, exactly as `bench_decisions.py --sections llama` does (its helpers are
imported).  The whole ECLeKTic sample is checked through the API backend (`longest_match =
"count"`, profile `decide`, default budget), one variant at a time so each variant's HTTP
requests are tallied (and by query type), twice:
1. **reference**: `ApiOptions(cooccurrence="documents")`, co-occurrence read from the documents
   of the rarer string's occurrences, as before;
2. **default**: co-occurrence from one CNF query where the rarer string occurs more than 10
   times, the other savings of `audit.corpora.asking`;
3. **CNF for every pair** (`cnf_above=0`): the CNF query wherever it can answer.
The later runs' tags are compared with the reference's, and each run's longest-match and
coverage figures with the exact reference (`bench_decisions.exact_reference`: a full scan
without budget, in process).  Then the byte-level demo index, default options, against the
local index's tags and exact figures.  The projection for the full ECLeKTic (4,608 variants)
takes each run's mean requests per variant at the client's default concurrency.
`--baseline` runs the library's default options once: with PYTHONPATH pointing at an earlier
checkout it measures that commit through the same harness.

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
from dataclasses import fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import bench_decisions as decisions  # noqa: E402

from audit.corpora.api import ApiCorpus, ApiOptions  # noqa: E402
from audit.corpora.client import ClientSettings, InfiniGramClient  # noqa: E402
from audit.policyfile import load_policy  # noqa: E402
from audit.readers import load_benchmark  # noqa: E402
from audit.run.executors import check_items  # noqa: E402

ROUND_TRIPS = (0.1, 0.25, 0.5)
ECLEKTIC_VARIANTS = 384 * 12
CONCURRENCY = next(f.default for f in fields(ClientSettings) if f.name == "concurrency")
RUNS = {
    "co-occurrence from documents (reference)": {"cooccurrence": "documents"},
    "default": {},
    "CNF for every pair (cnf_above = 0)": {"cnf_above": 0},
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
    records = [record.to_dict() for record in check_items(items, [runner], load_policy(None), workers=1)]
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


def byte_level(items: list[Any]) -> dict[str, Any]:
    """The byte-level demo index through `audit serve` with the default options: tags against
    the local index's, and every question and passage figure's bounds against the local
    index's exact figure over every document."""
    from audit.corpora.demo import demo_index
    from audit.corpora.local import LocalIndex
    from audit.paths import cache_dir

    index = demo_index(cache_dir())
    local = [record.to_dict() for record in check_items(items, [decisions.ngram_runner(LocalIndex(index, name="demo"), None)], load_policy(None))]
    exact = {decisions.key(r): r for r in local}
    jobs = Path(tempfile.mkdtemp(prefix="requests-jobs-", dir=decisions.WORK))
    server = decisions.start_server("--index", f"demo={index}", "--jobs-dir", str(jobs))
    try:
        records, api, client, seconds = run(server.url, "demo", items, {})
    finally:
        server.stop()
        shutil.rmtree(jobs, ignore_errors=True)
    row = describe("byte-level, default", records, api, client, seconds, {k: r["exposure"] for k, r in exact.items()})
    outside, checked = [], 0
    for record in records:
        theirs = {e["field"]: e for e in exact[decisions.key(record)]["evidence"]}
        for evidence in record["evidence"]:
            if evidence["field"] not in ("question", "context") or evidence["status"] != "ok":
                continue
            checked += 1
            for name in ("longest_match_chars", "coverage"):
                low, high = evidence["figures"].get("bounds", {}).get(name, (evidence["figures"][name],) * 2)
                local_figures = theirs[evidence["field"]]["figures"]
                # The local index counts in the field's language; the API over every document.
                if not low <= local_figures.get("any_language", local_figures)[name] <= high:
                    outside.append(f"{decisions.key(record)} {evidence['field']} {name}")
    row["exact"] = {"fields_checked": checked, "figures_outside_bounds": outside}
    return row


def projection(row: dict[str, Any]) -> dict[str, Any]:
    """Requests and hours for the full ECLeKTic at the client's default concurrency."""
    per_variant = row["requests"] / row["variants"]
    requests = per_variant * ECLEKTIC_VARIANTS
    return {"requests": round(requests), "hours": {str(rt): round(requests * rt / CONCURRENCY / 3600, 2) for rt in ROUND_TRIPS}}


def print_tables(result: dict[str, Any]) -> None:
    print("\n| index | run | variants | decided | seen / unseen / unknown | tags unlike the reference run | figures outside their bounds (fields checked) | HTTP requests | per variant: mean / median / p90 / max | count / find / get_doc_by_rank / find_cnf / get_doc_by_ptr | wall time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in result["runs"]:
        tags, by = row["tags"], row["by_type"]
        exact = row.get("exact", {})
        outside = exact.get("variants_with_a_figure_outside_bounds", len(exact.get("figures_outside_bounds", [])))
        unlike = len(row.get("tags_unlike_reference", [])) if "tags_unlike_reference" in row else "(reference)"
        types = " / ".join(f"{by.get(t, 0):,}" for t in ("count", "find", "get_doc_by_rank", "find_cnf", "get_doc_by_ptr"))
        print(
            f"| {row['index']} | {row['run']} | {row['variants']} | {row['decided_fraction']:.1%} | {tags.get('seen', 0)} / {tags.get('unseen', 0)} / {tags.get('unknown', 0)} | {unlike} | "
            f"{outside} ({exact.get('fields_checked', 0)}) | {row['requests']:,} | {row['requests_per_variant']:.2f} / {row['median_requests_per_variant']:g} / {row['p90_requests_per_variant']} / {row['max_requests_per_variant']} | {types} | {row['seconds']:.1f} s |"
        )
    print(f"\nProjection for ECLeKTic ({ECLEKTIC_VARIANTS:,} variants) at {CONCURRENCY} requests in flight (the client's default), from each run's mean:\n")
    print("| index | run | requests | " + " | ".join(f"at {rt:g} s per request" for rt in ROUND_TRIPS) + " |")
    print("|---|---|---|" + "---|" * len(ROUND_TRIPS))
    for row in result["runs"]:
        p = row["projection"]
        print(f"| {row['index']} | {row['run']} | {p['requests']:,} | " + " | ".join(f"{p['hours'][str(rt)]:.2f} h" for rt in ROUND_TRIPS) + " |")
    for row in result["runs"]:
        print(f"\n{row['index']} / {row['run']}: mean by language {row['mean_requests_by_language']}; by tag {row['mean_requests_by_tag']}; grouped {row['grouped']}; co-occurrence {row['cooccurrence']}; surface forms found {row['variant_matches']}")
        if row.get("tags_unlike_reference"):
            print(f"  tags unlike the reference: {row['tags_unlike_reference']}")
        if row.get("exact", {}).get("contradicting_variants"):
            print(f"  figures outside bounds: {row['exact']['contradicting_variants']} (a rule's outcome differs in {row['exact'].get('rule_outcomes_differ')})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama", type=Path, default=decisions.LLAMA, help="the Llama-2 tokenizer directory (tokenizer.json)")
    parser.add_argument("--reuse-index", action="store_true", help="serve bench/work/decisions-llama-demo as built by an earlier run")
    parser.add_argument("--skip-byte", action="store_true", help="only the Llama-2 index")
    parser.add_argument("--baseline", action="store_true", help="one run with the library's default options only (to measure an earlier commit: PYTHONPATH=its checkout)")
    args = parser.parse_args()
    runs = {"default options (baseline)": {}} if args.baseline else RUNS
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
        for name, options in runs.items():
            records, api, client, seconds = run(server.url, "llama-demo", items, options)
            rows.append({"index": "Llama-2 demo", **describe(name, records, api, client, seconds, reference)})
            print(f"  {name}: {rows[-1]['requests_per_variant']} requests per variant, {seconds:.1f} s", flush=True)
            if reference is None:
                reference = {decisions.key(r): r["exposure"] for r in records}
            rows[-1]["exact"] = {k: v for k, v in decisions.exact_reference(save, items, records, api).items() if k != "cases"}
    finally:
        server.stop()
        shutil.rmtree(jobs, ignore_errors=True)
    if not args.skip_byte:
        rows.append({"index": "byte-level demo", **byte_level(items)})
    for row in rows:
        row["projection"] = projection(row)
    result = {"cores": os.cpu_count(), "python": sys.version.split()[0], "concurrency": CONCURRENCY, "build": build, "runs": rows, **decisions.code_version()}
    (decisions.WORK / "requests.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print_tables(result)
    print(f"\ncommit {result.get('commit')}, library changed since: {result.get('library_changed_since_commit')}")


if __name__ == "__main__":
    main()
