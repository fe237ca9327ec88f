"""Benchmark: exposure decided from count queries alone (servers with no longest-match query,
like the public infini-gram API), the full left-to-right scan against asking only what the
policy's rules need.

    pip install -e '.[bench,serve]'    # infini-gram and transformers (its indexer), fastapi/uvicorn
    python bench/bench_decisions.py    # about 12 minutes on 2 cores; reads ../shared for Llama-2
    python bench/bench_decisions.py --sections byte,cli     # the byte-level parts only

Runs, side by side in one process:
1. **Byte-level.** The demo index served by `python -m audit.server`, checked through the API
   backend with `longest_match = "count"`: profile `full` (the scan of every position) and
   profile `decide` (the rules' questions only), each at budgets of 64, 256 and 1,024 count
   queries per (item, language) variant, on the first SCAN_ITEMS items; then `decide` at the
   default budget on the whole sample.  Every decided tag is compared with the local index's.
2. **CLI, cold and warm.** `python -m audit.cli check SAMPLE --corpus team --registry REG` against
   the same server, in a fresh `AUDIT_CACHE_DIR`: empty response cache, then filled.
3. **Llama-2 tokens.** The demo corpus indexed by infini-gram's own indexer
   (`python -m infini_gram.indexing --tokenizer llama --token_dtype u16`), the tokenizer loaded
   offline from ../shared/data/tokenizers/llama2-tokenizer through a Hugging Face hub cache laid
   out in a temporary HF_HOME (nothing is copied into the repository).  Served with that
   tokenizer, the whole sample is checked with profile `decide` at the default budget, and
   every longest-match and coverage figure of the question and passage is compared with the
   reference: the full profile from the same index's counts in this process (`counting.scan`
   with no budget, at the same word boundaries); where they disagree, the longer match is
   counted directly to tell which side is wrong.
4. **Projection** for the full ECLeKTic benchmark (384 questions x 12 languages) against the
   public API: the tokenized run's HTTP requests per variant, at 4 requests in flight and an
   assumed round trip (the public API documents no rate limit).

Prints Markdown tables and writes bench/work/decisions.json.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
CORPUS = ROOT / "audit" / "data" / "demo" / "corpus"
LLAMA = ROOT.parent / "shared" / "data" / "tokenizers" / "llama2-tokenizer"
WORK = ROOT / "bench" / "work"
SCAN_ITEMS = 10
BUDGETS = (64, 256, 1024)
DEFAULT_BUDGET = 256
WORKERS = 4
ECLEKTIC_VARIANTS = 384 * 12
IN_FLIGHT = 4
ASSUMED_ROUND_TRIPS = (0.1, 0.25, 0.5)
LLAMA_REPO = "meta-llama/Llama-2-7b-hf"
SECTIONS = ("byte", "cli", "llama")

sys.path.insert(0, str(ROOT / "tests"))
from test_server import start_server  # noqa: E402

from audit.corpora.api import ApiCorpus, ApiOptions  # noqa: E402
from audit.corpora.client import ClientSettings, InfiniGramClient  # noqa: E402
from audit.items import Item  # noqa: E402
from audit.policyfile import build_config, load_policy  # noqa: E402
from audit.readers import load_benchmark  # noqa: E402
from audit.run.executors import check_items  # noqa: E402
from audit.signals import ngram  # noqa: E402

Record = dict[str, Any]


def ngram_runner(corpus: Any, source: str | None) -> Any:
    """The n-gram signal over `corpus`, with the built-in policy's rules for `source` when the
    corpus derives matches from counts (so it asks only what they need)."""
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    if source is None:
        return partial(ngram.run, corpus, config=config)
    rules = {name: table.for_source(source) for name, table in policy.rules["ngram"].items()}
    return partial(ngram.run, corpus, config=config, rules=rules)


def key(record: Record) -> str:
    return f"{record['item_id']}/{record['lang']}"


def queries_spent(record: Record) -> int:
    return sum(e.get("figures", {}).get("count_queries", 0) for e in record["evidence"])


def count_run(url: str, index: str, items: list[Item], profile: str, budget: int) -> tuple[list[Record], ApiCorpus, float]:
    """The n-gram signal through the API backend, counts only, no response cache."""
    api = ApiCorpus(InfiniGramClient(ClientSettings(url=url, index=index)), index, ApiOptions(longest_match="count", budget=budget, profile=profile))
    started = time.perf_counter()
    records = [record.to_dict() for record in check_items(items, [ngram_runner(api, index)], load_policy(None), workers=WORKERS)]
    return records, api, time.perf_counter() - started


def describe(records: list[Record], api: ApiCorpus, seconds: float, reference: dict[str, str] | None = None) -> dict[str, Any]:
    tags = Counter(r["exposure"] for r in records)
    spent = [queries_spent(r) for r in records]
    row: dict[str, Any] = {
        "variants": len(records),
        "seen": tags["seen"],
        "unseen": tags["unseen"],
        "unknown": tags["unknown"],
        "decided_fraction": round(1 - tags["unknown"] / len(records), 4),
        "unknown_variants": [key(r) for r in records if r["exposure"] == "unknown"],
        "median_queries": statistics.median(spent),
        "max_queries": max(spent),
        "count_queries": sum(spent),
        "requests": api.client.stats["requests"],
        "cache_hits": api.client.stats["cache_hits"],
        "fields_bounded": api.details["fields_bounded"],
        "tokenization": api.details["tokenization"],
        "variant_matches": dict(api.details["variant_matches"]),
        "seconds": round(seconds, 2),
    }
    if reference is not None:
        wrong = [key(r) for r in records if r["exposure"] != "unknown" and r["exposure"] != reference[key(r)]]
        row["contradictions"] = len(wrong)
        row["contradicting_variants"] = wrong
        row["reference_unknown"] = sum(1 for r in records if reference[key(r)] == "unknown")
    return row


def byte_level(index: Path, url: str, items: list[Item], scan_items: int) -> dict[str, Any]:
    """Profiles `full` and `decide` at each budget on the first `scan_items` items, then
    `decide` at the default budget on all, against the local index's tags."""
    from audit.corpora.local import LocalIndex

    started = time.perf_counter()
    local = [record.to_dict() for record in check_items(items, [ngram_runner(LocalIndex(index, name="demo"), None)], load_policy(None))]
    reference = {key(r): r["exposure"] for r in local}
    result: dict[str, Any] = {"local_seconds": round(time.perf_counter() - started, 2), "local_tags": {str(tag): n for tag, n in Counter(reference.values()).items()}, "runs": []}
    for profile in ("full", "decide"):
        for budget in BUDGETS:
            records, api, seconds = count_run(url, "demo", items[:scan_items], profile, budget)
            row = {"profile": profile, "budget": budget, "items": scan_items, **describe(records, api, seconds, reference)}
            result["runs"].append(row)
            print(f"  byte-level {profile} @ {budget}: {row['seconds']} s, {row['requests']:,} requests, {row['unknown']} unknown, {row['contradictions']} contradictions", flush=True)
    records, api, seconds = count_run(url, "demo", items, "decide", DEFAULT_BUDGET)
    row = {"profile": "decide", "budget": DEFAULT_BUDGET, "items": len(items), **describe(records, api, seconds, reference)}
    result["runs"].append(row)
    result["whole_sample_tags"] = {key(r): r["exposure"] for r in records}
    result["local_reference"] = reference
    print(f"  byte-level decide @ {DEFAULT_BUDGET}, whole sample: {row['seconds']} s, {row['requests']:,} requests, {row['unknown']} unknown", flush=True)
    return result


def audit_lines(path: Path) -> tuple[dict[str, Any], list[Record]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def cli_runs(url: str, in_process: dict[str, str] | None) -> dict[str, Any]:
    """`audit check` through `audit serve` with a fresh cache directory: cold, then warm."""
    home = WORK / "decisions-cli"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir()
    registry = home / "corpora.toml"
    registry.write_text(f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{url}"\nindex = "demo"\ncache = "team.sqlite"\nlongest_match = "count"\n', encoding="utf-8")
    env = {**os.environ, "AUDIT_CACHE_DIR": str(home / "audit-cache")}
    result: dict[str, Any] = {}
    tags: dict[str, list[str]] = {}
    for run in ("cold", "warm"):
        out = home / f"{run}.audit.jsonl"
        command = [sys.executable, "-m", "audit.cli", "check", str(SAMPLE), "--corpus", "team", "--registry", str(registry), "--no-report", "--out", str(out)]
        started = time.perf_counter()
        with open(home / f"{run}.log", "w", encoding="utf-8") as log:
            subprocess.run(command, check=True, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - started
        manifest, records = audit_lines(out)
        queries = manifest["summary"].get("count_queries", {}).get("team", {})
        exposure = Counter(r["exposure"] for r in records)
        result[run] = {
            "seconds": round(seconds, 2),
            "requests": manifest["corpora"][0]["details"]["requests"],
            "count_queries": queries,
            "variants": len(records),
            "unknown": exposure["unknown"],
            "signals": sorted({e["signal"] for r in records for e in r["evidence"]}),
        }
        tags[run] = [f"{key(r)}={r['exposure']}" for r in records]
        print(f"  CLI {run}: {result[run]['seconds']} s, {result[run]['requests']['requests']:,} requests", flush=True)
    result["warm_tags_equal_cold"] = tags["warm"] == tags["cold"]
    if in_process is not None:
        result["tags_equal_in_process"] = sorted(tags["cold"]) == sorted(f"{k}={v}" for k, v in in_process.items())
    return result


def hub_cache(home: Path) -> None:
    """A Hugging Face hub cache holding `meta-llama/Llama-2-7b-hf`'s tokenizer files, linked from
    ../shared, so `AutoTokenizer.from_pretrained` (as infini-gram's indexer calls it) loads it
    with HF_HUB_OFFLINE=1.  AutoTokenizer reads the model's config.json first (for its model
    type), which ../shared does not carry: a minimal one saying `llama` is written."""
    revision = "0" * 40
    repo = home / "hub" / f"models--{LLAMA_REPO.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"):
        (snapshot / name).symlink_to(LLAMA / name)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "bos_token_id": 1, "eos_token_id": 2, "vocab_size": 32000}
    (snapshot / "config.json").write_text(json.dumps(config), encoding="utf-8")


def build_llama_index(save: Path) -> dict[str, Any]:
    """The demo corpus through `python -m infini_gram.indexing --tokenizer llama`, timed, and
    its token ids checked against the tokenizer the server encodes queries with."""
    if save.exists():
        shutil.rmtree(save)
    home = Path(tempfile.mkdtemp(prefix="hf-home-", dir=WORK))
    hub_cache(home)
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    hard_files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    command = [
        sys.executable, "-m", "infini_gram.indexing", "--data_dir", str(CORPUS), "--save_dir", str(save),
        "--tokenizer", "llama", "--token_dtype", "u16", "--cpus", str(os.cpu_count() or 2), "--mem", "4", "--add_metadata",
        "--ulimit", str(hard_files if hard_files != resource.RLIM_INFINITY else 1 << 20),
    ]  # fmt: skip
    started = time.perf_counter()
    with open(WORK / "decisions-indexer.log", "w", encoding="utf-8") as log:
        subprocess.run(command, check=True, env=env, cwd=WORK, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    shutil.rmtree(home)
    return {"seconds": round(seconds, 2), "command": " ".join(command[1:]), **check_llama_index(save)}


def check_llama_index(save: Path) -> dict[str, Any]:
    """Documents, tokens, documents whose ids differ from `tokenizers` encoding them without
    special tokens (what the server's tokenizer does, before it drops a lone word start), and
    whether the suffix array is pydivsufsort's over the same bytes cut to token starts (the
    engine compares raw bytes, so that is its order)."""
    import pydivsufsort
    from tokenizers import Tokenizer

    data = np.frombuffer((save / "tokenized.0").read_bytes(), dtype="<u2")
    offsets = np.frombuffer((save / "offset.0").read_bytes(), dtype="<u8") // 2
    texts = []
    for path in sorted(CORPUS.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            texts += [json.loads(line)["text"] for line in lines]
    tokenizer = Tokenizer.from_file(str(LLAMA / "tokenizer.json"))
    bounds = [*offsets.tolist(), len(data)]
    differ = 0
    for number, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
        stored = data[bounds[number] + 1 : bounds[number + 1]]
        differ += stored.tolist() != encoding.ids
    ratio = int(np.ceil(np.log2(len(data) * 2) / 8))
    table = np.frombuffer((save / "table.0").read_bytes(), dtype=np.uint8).reshape(-1, ratio).astype(np.uint64)
    suffixes = np.zeros(len(table), dtype=np.uint64)
    for byte in range(ratio):
        suffixes |= table[:, byte] << np.uint64(8 * byte)
    expected = pydivsufsort.divsufsort(data.view(np.uint8).copy())
    expected = expected[expected % 2 == 0].astype(np.uint64)
    return {
        "documents": len(offsets),
        "corpus_documents": len(texts),
        "tokens": int(len(data) - len(offsets)),
        "index_bytes": sum(p.stat().st_size for p in save.iterdir() if p.is_file()),
        "documents_differing_from_tokenizer": differ,
        "suffix_array_entries": len(suffixes),
        "suffix_array_equals_divsufsort": bool(np.array_equal(suffixes, expected)),
        "token_positions": len(data),
    }


def exact_reference(index: Path, items: list[Item], records: list[Record], api: ApiCorpus) -> dict[str, Any]:
    """Every question and passage's longest match and coverage from a full scan without budget
    (at word boundaries) of the same index in this process, and the variants whose figures'
    bounds exclude them.  Each such case is then settled by a direct count: does the string
    behind the larger of the two longest matches occur?"""
    from audit.corpora import counting
    from audit.corpora.base import Budget
    from audit.rules import judge
    from audit.server.engine import ServedIndex
    from audit.server.messages import QueryRequest
    from audit.server.tokenizer import Tokenizer
    from audit.text import normalize, windows

    served = ServedIndex("llama-demo", index, Tokenizer(LLAMA))
    policy = load_policy(None)
    rules = {name: table.for_source("llama-demo") for name, table in policy.rules["ngram"].items()}
    answers: dict[str, bool] = {}

    def occurs(piece: str) -> bool:
        if piece not in answers:
            answers[piece] = any(served.answer(QueryRequest(index="llama-demo", query_type="count", query=form))["count"] for _, form in api._variants(piece))
        return answers[piece]

    by_key = {(r["item_id"], r["lang"]): r for r in records}
    started = time.perf_counter()
    checked, outside, outside_decided, cases = 0, set(), set(), []
    for item in items:
        for lang, variant in item.variants.items():
            record = by_key[item.item_id, lang]
            for evidence in record["evidence"]:
                field = evidence["field"]
                if field not in ("question", "context") or evidence["status"] != "ok":
                    continue
                text = normalize(variant.text(field))
                geometry = counting.Geometry.of(len(text), lambda i, t=text: api._boundary(t, i), api._reaches(text))
                ask = counting.Asker(text, occurs, counting.Known(geometry), Budget(), 10**9, lambda f, xs: [f(x) for x in xs])
                counting.scan(ask)
                lengths = ask.known.lengths().lengths
                spans = windows(text, evidence["figures"]["window_size"])
                longest = max(lengths)
                exact = {
                    "longest_match_chars": longest,
                    "longest_match_fraction": round(longest / len(text), 4),
                    "coverage": round(sum(lengths[a] >= b - a for a, b in spans) / len(spans), 4),
                }
                figures = evidence["figures"]
                for name, value in exact.items():
                    low, high = figures.get("bounds", {}).get(name, (figures[name], figures[name]))
                    if low <= value <= high:
                        continue
                    outside.add(key(record))
                    if record["exposure"] != "unknown":
                        outside_decided.add(key(record))
                    case: dict[str, Any] = {"variant": key(record), "field": field, "figure": name, "bounds": [low, high], "reference": value, "tag": str(record["exposure"])}
                    if name == "longest_match_chars":
                        # The larger longest match, asked directly: a string that occurs settles which side is wrong.
                        if value > high:
                            start = lengths.index(longest)
                            case["reference_match_occurs"] = occurs(text[start : start + longest])
                        else:
                            start = figures["longest_match_start"]
                            case["reported_match_occurs"] = occurs(text[start : start + low])
                    outcomes = [(str(judge(rule, low, (low, high))), str(judge(rule, value))) for rule in rules.get(field, ()) if rule.figure == name]
                    case["rule_outcomes_differ"] = any(a != b for a, b in outcomes)
                    cases.append(case)
                checked += 1
    return {
        "fields_checked": checked,
        "contradictions": len(outside_decided),
        "contradicting_variants": sorted(outside_decided),
        "variants_with_a_figure_outside_bounds": len(outside),
        "rule_outcomes_differ": sum(c["rule_outcomes_differ"] for c in cases),
        "cases": cases,
        "distinct_counts": len(answers),
        "seconds": round(time.perf_counter() - started, 2),
    }


def llama(items: list[Item], byte_local: dict[str, str] | None) -> dict[str, Any]:
    save = WORK / "decisions-llama-demo"
    build = build_llama_index(save)
    print(f"  Llama-2 index built by infini-gram in {build['seconds']} s: {build['tokens']:,} tokens", flush=True)
    jobs = Path(tempfile.mkdtemp(prefix="decisions-jobs-", dir=WORK))
    server = start_server("--index", f"llama-demo={save}", "--tokenizer", f"llama-demo={LLAMA}", "--jobs-dir", str(jobs))
    try:
        records, api, seconds = count_run(server.url, "llama-demo", items, "decide", DEFAULT_BUDGET)
    finally:
        server.stop()
        shutil.rmtree(jobs, ignore_errors=True)
    run = describe(records, api, seconds)
    if byte_local is not None:
        # Not a contradiction: a byte-level match may start or end inside a word, a token-level one may not.
        run["tags_unlike_byte_level_local"] = [f"{key(r)}: {r['exposure']} (byte-level {byte_local[key(r)]})" for r in records if r["exposure"] != byte_local[key(r)]]
    print(f"  Llama-2 decide @ {DEFAULT_BUDGET}: {run['seconds']} s, {run['requests']:,} requests, {run['unknown']} unknown", flush=True)
    exact = exact_reference(save, items, records, api)
    print(f"  exact reference: {exact['fields_checked']} fields in {exact['seconds']} s, {exact['contradictions']} contradictions", flush=True)
    return {"build": build, "run": run, "exact": exact}


def projection(results: dict[str, Any]) -> dict[str, Any]:
    """Requests and time for 4,608 variants against the public API, from measured rates."""
    out: dict[str, Any] = {"variants": ECLEKTIC_VARIANTS, "in_flight": IN_FLIGHT, "assumed_round_trips": list(ASSUMED_ROUND_TRIPS), "rows": []}
    sources = []
    if "llama" in results:
        sources.append(("Llama-2 tokens (like the public indexes)", results["llama"]["run"]))
    if "byte" in results:
        sources.append(("byte-level, for comparison", results["byte"]["runs"][-1]))
    for name, run in sources:
        per_variant = run["requests"] / run["variants"]
        requests = per_variant * ECLEKTIC_VARIANTS
        out["rows"].append({"index": name, "requests_per_variant": round(per_variant, 1), "requests": round(requests), "hours": {str(rt): round(requests * rt / IN_FLIGHT / 3600, 2) for rt in ASSUMED_ROUND_TRIPS}})
    if "cli" in results:
        warm = results["cli"]["warm"]
        out["cached_seconds"] = round(warm["seconds"] * ECLEKTIC_VARIANTS / warm["variants"], 1)
    return out


def seconds_text(value: float) -> str:
    return f"{value:.1f} s" if value < 600 else f"{value / 60:.1f} min"


def print_tables(results: dict[str, Any]) -> None:
    if "byte" in results:
        byte = results["byte"]
        print(f"\nByte-level demo index through `audit serve`, counts only (local index: {byte['local_tags']}):\n")
        print("| profile | budget per variant | items (variants) | decided | unknown | contradicting local | median queries per variant | max | HTTP requests | fields bounded | wall time |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for run in byte["runs"]:
            name = "full (scan)" if run["profile"] == "full" else "decide"
            print(
                f"| {name} | {run['budget']:,} | {run['items']} ({run['variants']}) | {run['decided_fraction']:.1%} | {run['unknown']} | {run['contradictions']} | "
                f"{run['median_queries']:g} | {run['max_queries']:,} | {run['requests']:,} | {run['fields_bounded']} | {seconds_text(run['seconds'])} |"
            )
    if "cli" in results:
        cli = results["cli"]
        print("\n`python -m audit.cli check` of the sample through `audit serve` (byte-level, counts only, decide, budget 256):\n")
        print("| cache | wall time | HTTP requests | cache hits | count queries (total / median / max per variant) | unknown |")
        print("|---|---|---|---|---|---|")
        for run in ("cold", "warm"):
            r = cli[run]
            q = r["count_queries"]
            print(f"| {run} | {r['seconds']:.1f} s | {r['requests']['requests']:,} | {r['requests']['cache_hits']:,} | {q.get('total', 0):,} / {q.get('median_per_variant', 0):g} / {q.get('max_per_variant', 0):,} | {r['unknown']} |")
        print(f"\nwarm tags equal cold: {cli['warm_tags_equal_cold']}; equal to the in-process run: {cli.get('tags_equal_in_process')}")
    if "llama" in results:
        build, run, exact = results["llama"]["build"], results["llama"]["run"], results["llama"]["exact"]
        print("\nLlama-2-tokenized demo index (infini-gram's indexer), through `audit serve`, counts only, decide, budget 256:\n")
        print("| index build | documents | tokens | ids differing from tokenizer | variants | decided | unknown | median queries per variant | max | HTTP requests | wall time | contradicting exact | fields checked |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        print(
            f"| {build['seconds']:.1f} s | {build['documents']:,} | {build['tokens']:,} | {build['documents_differing_from_tokenizer']} | {run['variants']} | {run['decided_fraction']:.1%} | "
            f"{run['unknown']} | {run['median_queries']:g} | {run['max_queries']:,} | {run['requests']:,} | {run['seconds']:.1f} s | {exact['contradictions']} | {exact['fields_checked']} |"
        )
        print(
            f"\nindex: {build['index_bytes'] / 2**20:.1f} MiB, suffix array equal to pydivsufsort's: {build['suffix_array_equals_divsufsort']}; "
            f"count requests won by each surface form: {run['variant_matches']}; reference: {exact['distinct_counts']:,} distinct counts in {exact['seconds']:.1f} s"
        )
        if run.get("tags_unlike_byte_level_local"):
            print(f"\ntags unlike the byte-level local index's: {', '.join(run['tags_unlike_byte_level_local'])}")
        if run["unknown_variants"]:
            print(f"\nunknown: {', '.join(run['unknown_variants'])}")
        if exact["cases"]:
            print(f"\nFigures whose bounds exclude the reference's ({exact['variants_with_a_figure_outside_bounds']} variants; a rule's outcome differs in {exact['rule_outcomes_differ']}):\n")
            print("| variant | field | figure | bounds (decide) | reference (full scan) | tag | the longer match, counted directly | rule outcome differs |")
            print("|---|---|---|---|---|---|---|---|")
            for case in exact["cases"]:
                if "reference_match_occurs" in case:
                    settled = f"reference's occurs: {case['reference_match_occurs']}"
                elif "reported_match_occurs" in case:
                    settled = f"decide's occurs: {case['reported_match_occurs']}"
                else:
                    settled = ""
                low, high = case["bounds"]
                print(f"| {case['variant']} | {case['field']} | {case['figure']} | [{low:g}, {high:g}] | {case['reference']:g} | {case['tag']} | {settled} | {case['rule_outcomes_differ']} |")
    if results.get("projection", {}).get("rows"):
        p = results["projection"]
        trips = p["assumed_round_trips"]
        print(f"\nProjection for ECLeKTic ({p['variants']:,} variants) against the public API, {p['in_flight']} requests in flight:\n")
        print("| measured on | requests per variant | requests | " + " | ".join(f"time at {rt:g} s per request" for rt in trips) + " |")
        print("|---|---|---|" + "---|" * len(trips))
        for row in p["rows"]:
            print(f"| {row['index']} | {row['requests_per_variant']:g} | {row['requests']:,} | " + " | ".join(f"{row['hours'][str(rt)]:.2f} h" for rt in trips) + " |")
        if "cached_seconds" in p:
            print(f"| from cache (warm run scaled) | 0 | 0 | {seconds_text(p['cached_seconds'])} |" + " |" * (len(trips) - 1))


def code_version() -> dict[str, Any]:
    """The commit measured, and whether the library differed from it (read-only git)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--", "audit"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {"commit": commit, "library_changed_since_commit": bool(changed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument("--scan-items", type=int, default=SCAN_ITEMS, help="items for the side-by-side byte-level runs")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    WORK.mkdir(parents=True, exist_ok=True)
    from audit.corpora.demo import demo_index
    from audit.paths import cache_dir

    items = load_benchmark(SAMPLE).items
    results: dict[str, Any] = {"cores": os.cpu_count(), "python": sys.version.split()[0], "items": len(items), "variants": sum(len(i.variants) for i in items), **code_version()}
    started = time.perf_counter()
    if sections & {"byte", "cli"}:
        index = demo_index(cache_dir())
        jobs = Path(tempfile.mkdtemp(prefix="decisions-jobs-", dir=WORK))
        server = start_server("--index", f"demo={index}", "--jobs-dir", str(jobs))
        try:
            if "byte" in sections:
                results["byte"] = byte_level(index, server.url, items, args.scan_items)
            if "cli" in sections:
                results["cli"] = cli_runs(server.url, results.get("byte", {}).get("whole_sample_tags"))
        finally:
            server.stop()
            shutil.rmtree(jobs, ignore_errors=True)
    if "llama" in sections:
        if not (LLAMA / "tokenizer.json").exists():
            raise SystemExit(f"{LLAMA}: no tokenizer.json (this section needs ../shared beside the repository)")
        results["llama"] = llama(items, results.get("byte", {}).get("local_reference"))
    results["projection"] = projection(results)
    results["seconds"] = round(time.perf_counter() - started, 1)
    if "byte" in results:
        results["byte"].pop("whole_sample_tags", None)
        results["byte"].pop("local_reference", None)
    (WORK / "decisions.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print_tables(results)
    print(f"\nwhole run: {seconds_text(results['seconds'])} on {results['cores']} cores; commit {results.get('commit')}, library changed since: {results.get('library_changed_since_commit')}")


if __name__ == "__main__":
    main()
