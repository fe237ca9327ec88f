"""Near-duplicate benchmark: the MinHash LSH index (`audit.neardup`) side by side with what a user
would otherwise write with datasketch, and with the rensa sketcher; its build against the
suffix-array build; query latency in memory and through Redis; and recall and false positives
on near-duplicates planted in real text, next to the exact n-gram signal.

    pip install -e '.[bench]'                # rensa and the redis client; and apt-get install redis-server
    python bench/bench_minhash.py            # about 14 minutes on 2 cores; --skip-big for the demo only

Prints Markdown tables (paste into bench/README.md) and writes bench/work/minhash.json.
Every comparison checks that both sides give the same answer before their speed is compared:
the same signature for every window compared, the same LSH candidates, the same query results.
Sketching, the builds and datasketch's LSH each run in a fresh process; peak memory is the
summed PSS of that process tree, sampled every 50 ms (as in bench_core.py).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import assemble_big_corpus, demo_corpus, run_measured

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
# The default thresholds (the policy's [rules.minhash.question] and [rules.minhash.context]).
THRESHOLDS = {"question": {"containment": 0.5}, "context": {"containment": 0.35}}
# Planted corpora: demo text per file (bytes; None for all of it), and whether the shared corpus is added.
PLANTED = {"planted-250KB": (250_000, False), "planted-demo": (None, False), "planted-demo+shared": (None, True)}
FIELDS = ("question", "context")
SCRIPT = Path(__file__).resolve()
PLANTED_ID = re.compile(r"^planted-.+-(?:question|context)$")


def pss() -> int:
    return psutil.Process().memory_full_info().pss


def digest(values: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(values, dtype=np.int64).tobytes(), digest_size=8).hexdigest()


def child(mode: str, work: Path, *options: str) -> dict:
    """Run this script in `mode` in a fresh process; its JSON answer with wall time and peak PSS."""
    out = work / f"child-{mode}.json"
    measured = run_measured([sys.executable, str(SCRIPT), "--child", mode, "--work", str(work), *options])
    return {**json.loads(out.read_text()), "process": measured}


# 1. Signatures per second: the same windows of the same text, each way.


def load_documents(index: Path) -> list[tuple[int, bytes]]:
    from audit.corpora.local import LocalIndex

    return [(number, bytes(raw)) for number, raw in LocalIndex(index).documents()]


def window_sets(raw: bytes, params) -> list[np.ndarray]:
    """The shingle hashes of each window of one document, as `audit index minhash` cuts it: `window`
    tokens every `stride` tokens, windows without a shingle left out."""
    from audit.neardup import shingle_text

    shingled = shingle_text(raw.decode("utf-8", "surrogateescape"), params.shingle)
    count, stride, span = shingled.positions, params.stride, params.window // params.stride
    blocks = -(-count // stride)
    sets = []
    for start in range(0, stride * max(1, blocks - span + 1) if count else 0, stride):
        end = min(start + params.window, count)
        chosen = shingled.hashes[start:end][shingled.valid[start:end]]
        if len(chosen):
            sets.append(chosen)
    return sets


def subset(docs: list[tuple[int, bytes]], table: np.ndarray, target: int) -> tuple[list[int], list[np.ndarray], np.ndarray, int]:
    """Every k-th document, k chosen for about `target` windows: their window sets, the rows of
    the reference table they must equal, and their bytes of text."""
    from audit.neardup import NearDupParams

    params = NearDupParams()
    step = max(1, round(len(table) / target))
    numbers, sets, rows, size = [], [], [], 0
    for number, raw in docs[::step]:
        lo, hi = np.searchsorted(table["document"], number, "left"), np.searchsorted(table["document"], number, "right")
        mine = window_sets(raw, params)
        if len(mine) != hi - lo or [len(s) for s in mine] != table["shingles"][lo:hi].tolist():
            raise SystemExit(f"document {number}: {len(mine)} windows here, {hi - lo} in sketch_documents' table")
        numbers.append(number)
        sets += mine
        rows += range(lo, hi)
        size += len(raw)
    return numbers, sets, np.array(rows, dtype=np.int64), size


def sketch_child(mode: str, work: Path, index: Path, target: int) -> dict:
    """One way of sketching, in its own process; the reference signatures come from `ours`."""
    from audit.neardup import NearDupParams, shingle_text, sketch_documents

    docs = load_documents(index)
    text_bytes = sum(len(raw) for _, raw in docs)
    result: dict = {"mode": mode}
    if mode in ("ours", "rensa", "shingling"):
        params = NearDupParams(sketcher="rensa" if mode == "rensa" else "datasketch")
        baseline, times = pss(), []
        for _ in range(2):
            started = time.perf_counter()
            if mode == "shingling":
                batch, size = [], 0
                for _, raw in docs:
                    batch.append(raw.decode("utf-8", "surrogateescape"))
                    size += len(raw)
                    if size >= 1 << 20:
                        shingle_text("\n".join(batch), params.shingle)
                        batch, size = [], 0
                shingle_text("\n".join(batch), params.shingle)
            else:
                table, signatures = sketch_documents(docs, params)
            times.append(time.perf_counter() - started)
        result.update(seconds=min(times), runs=times, bytes=text_bytes, baseline_pss=baseline)
        if mode == "shingling":
            return result
        result["windows"] = len(table)
        np.save(work / f"sketch-{mode}-signatures.npy", signatures)
        if mode == "ours":
            np.save(work / "sketch-table.npy", table)
        else:
            result["same_windows_as_ours"] = bool(np.array_equal(table, np.load(work / "sketch-table.npy")))
        return result
    from datasketch import MinHash

    table = np.load(work / "sketch-table.npy")
    numbers, sets, rows, size = subset(docs, table, target)
    as_lists = [s.tolist() for s in sets]
    baseline = pss()
    started = time.perf_counter()
    if mode == "datasketch":
        values = []
        for window in as_lists:
            sketch = MinHash(num_perm=32, seed=1, hashfunc=int, scheme="affine32")
            sketch.update_batch(window)
            values.append(sketch.hashvalues)
        signatures = np.array(values)
    elif mode == "datasketch-bulk":
        signatures = np.array([m.hashvalues for m in MinHash.bulk(as_lists, num_perm=32, seed=1, hashfunc=int, scheme="affine32")])
    elif mode == "rensa-sets":
        import rensa

        matrix = rensa.RMinHash.digest_matrix_from_token_hash_sets(as_lists, 32, 1)
        signatures = np.array(matrix.to_rows(), dtype=np.uint32).reshape(len(as_lists), 32)
    else:
        raise SystemExit(f"unknown sketch mode {mode}")
    seconds = time.perf_counter() - started
    reference = np.load(work / f"sketch-{'rensa' if mode == 'rensa-sets' else 'ours'}-signatures.npy")[rows]
    mismatches = int((signatures.astype(np.uint32) != reference).any(axis=1).sum())
    return {**result, "seconds": seconds, "windows": len(sets), "documents": len(numbers), "bytes": size, "baseline_pss": baseline, "compared": len(sets), "mismatches": mismatches}


def signatures_per_second(work: Path, index: Path, target: int) -> dict:
    runs = {}
    for mode in ("ours", "rensa", "shingling", "datasketch", "datasketch-bulk", "rensa-sets"):
        print(f"  sketching: {mode} ...", file=sys.stderr)
        runs[mode] = child(mode, work, "--index", str(index), "--subset-windows", str(target))
    for run in runs.values():
        run["windows_per_s"] = run.get("windows", runs["ours"]["windows"]) / run["seconds"]
        run["mb_per_s"] = run["bytes"] / 1e6 / run["seconds"]
        run["peak_pss_bytes"] = run["process"]["peak_pss_bytes"]
    return runs


# 2. Builds: the suffix array, our MinHash index (datasketch family and rensa), datasketch's LSH.


def best_build(repeat: int, command: list[str], clear: Path | None = None) -> dict:
    runs = []
    for _ in range(repeat):
        if clear is not None:
            shutil.rmtree(clear, ignore_errors=True)
        runs.append(run_measured(command))
    return {"seconds": min(r["seconds"] for r in runs), "peak_pss_bytes": max(r["peak_pss_bytes"] for r in runs), "runs": runs}


def disk(index: Path) -> dict:
    from audit.index.format import read_manifest

    manifest = read_manifest(index)
    ngram = {info.name: info.bytes for info in manifest.files}
    minhash = {info.name: info.bytes for info in manifest.minhash}
    return {
        "ngram_index_bytes": sum(ngram.values()),
        "suffix_array_bytes": sum(size for name, size in ngram.items() if name.startswith("table.")),
        "minhash_bytes": sum(minhash.values()),
        "files": {**ngram, **minhash},
    }


def build(name: str, source: Path, index: Path, repeat: int) -> dict:
    cli = [sys.executable, "-m", "audit.cli", "index"]
    result = {"corpus": name}
    result["suffix_array"] = best_build(repeat, [*cli, "build", str(source), "--out", str(index), "--no-minhash"], clear=index)
    result["minhash_rensa"] = best_build(repeat, [*cli, "minhash", str(index), "--force", "--sketcher", "rensa"])
    result["minhash"] = best_build(repeat, [*cli, "minhash", str(index), "--force"])
    manifest = json.loads((index / "minhash" / "manifest.json").read_text())
    result.update(windows=manifest["windows"], documents=json.loads((index / "audit-index.json").read_text())["documents"], corpus_bytes=manifest["source"]["bytes"])
    result["disk"] = disk(index)
    return result


def lsh_child(work: Path, index: Path, chunks: Path | None) -> dict:
    """datasketch's MinHashLSH with our bands (32 x 1), every window inserted in memory; then, if
    given, the chunk signatures of every field queried."""
    from datasketch import MinHash, MinHashLSH

    signatures = np.load(index / "minhash" / "signatures.npy")
    permutations = MinHash(num_perm=32, seed=1, scheme="affine32").permutations
    baseline = pss()
    started = time.perf_counter()
    lsh = MinHashLSH(num_perm=32, params=(32, 1))
    with lsh.insertion_session(buffer_size=10000) as session:
        for window, row in enumerate(signatures):
            session.insert(window, MinHash(hashvalues=row, permutations=permutations, scheme="affine32"), check_duplication=False)
    result = {"windows": len(signatures), "build_seconds": time.perf_counter() - started, "baseline_pss": baseline, "after_build_pss": pss()}
    if chunks is None:
        return result
    queries = {}
    with np.load(chunks) as stored:
        for key in stored.files:
            rows = stored[key]
            started = time.perf_counter()
            found = set()
            for row in rows:
                found.update(lsh.query(MinHash(hashvalues=row, permutations=permutations, scheme="affine32")))
            seconds = time.perf_counter() - started
            found_array = np.array(sorted(found), dtype=np.int64)
            queries[key] = {"seconds": seconds, "candidates": len(found_array), "digest": digest(found_array)}
    result["queries"] = queries
    return result


# 3. Query latency, in memory and through Redis.


def query_fields() -> list[dict]:
    """The ECLeKTic sample's questions and contexts in all 12 languages, as the signal queries them."""
    from audit.forms import source_texts
    from audit.readers import load_benchmark
    from audit.text import normalize

    fields = []
    for item in load_benchmark(SAMPLE).items:
        for lang, variant in item.variants.items():
            shared = source_texts(item, lang)
            for name in FIELDS:
                raw = variant.text(name)
                if raw and normalize(raw):
                    fields.append({"key": f"{item.item_id}/{lang}/{name}", "field": name, "text": normalize(raw), "exclude": shared})
    return fields


def timed_queries(index, fields: list[dict]) -> tuple[dict[str, list[float]], list]:
    """Each field queried as the signal queries it: the source variant's shingles computed once per
    variant (untimed), the policy's default `candidates` and `provenance_docs`."""
    from audit.signals.minhash import MinhashConfig

    config = MinhashConfig()
    latencies, results, shared = defaultdict(list), [], {}
    for field in fields:
        exclude = tuple(field["exclude"])
        if exclude not in shared:
            shared[exclude] = index.distinct_shingles(list(exclude))
        started = time.perf_counter()
        results.append(index.query(field["text"], exclude=shared[exclude], candidates=config.candidates, limit=config.provenance_docs))
        latencies[field["field"]].append(time.perf_counter() - started)
    return latencies, results


def summary(seconds: list[float]) -> dict:
    ms = 1000 * np.array(seconds)
    return {"n": len(ms), "median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95)), "mean_ms": float(ms.mean())}


def counts(values: list[int]) -> dict:
    return {"median": float(np.median(values)), "p95": float(np.percentile(values, 95)), "max": int(max(values))} if values else {}


def in_memory_latency(index_dir: Path, fields: list[dict], work: Path) -> tuple[dict, list, Path]:
    """Per-field latency of NearDuplicateIndex.query (after one untimed pass that warms the page
    cache), the candidate step alone, and every field's chunk signatures saved for datasketch."""
    from audit.corpora.local import LocalIndex
    from audit.neardup import NearDuplicateIndex

    index = NearDuplicateIndex.open(index_dir, corpus=LocalIndex(index_dir))
    timed_queries(index, fields)
    latencies, results = timed_queries(index, fields)
    chunks, candidate_step = {}, defaultdict(list)
    ours = {}
    for n, field in enumerate(fields):
        shingled = index.shingle(field["text"])
        if not shingled.valid.any():
            continue
        rows, _ = index.family.chunks(shingled.hashes, shingled.valid)
        started = time.perf_counter()
        found = index.lsh_candidates(rows)
        candidate_step[field["field"]].append(time.perf_counter() - started)
        chunks[f"f{n}"] = rows
        ours[f"f{n}"] = {"candidates": len(found), "digest": digest(found)}
    path = work / "query-chunks.npz"
    np.savez(path, **chunks)
    return (
        {
            "query": {name: summary(values) for name, values in latencies.items()},
            "candidate_step": {name: summary(values) for name, values in candidate_step.items()},
            "ours_candidates": ours,
            "chunks_per_field": {name: counts([len(chunks[f"f{n}"]) for n, f in enumerate(fields) if f["field"] == name and f"f{n}" in chunks]) for name in FIELDS},
            "candidates_per_field": {name: counts([ours[f"f{n}"]["candidates"] for n, f in enumerate(fields) if f["field"] == name and f"f{n}" in ours]) for name in FIELDS},
        },
        results,
        path,
    )


@contextlib.contextmanager
def redis_server(directory: Path):
    """A redis-server of our own on a free port of 127.0.0.1, nothing persisted, stopped after."""
    import redis

    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("redis-server is not installed: apt-get install redis-server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise SystemExit(f"redis-server did not start on port {port}") from None
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0", client, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def redis_latency(name: str, index_dir: Path, fields: list[dict], work: Path) -> dict:
    """Load the index into Redis, then the same queries in memory and through Redis: identical
    results required, and each one's per-field latency."""
    from audit.corpora.local import LocalIndex
    from audit.neardup import NearDuplicateIndex, load_redis

    memory = NearDuplicateIndex.open(index_dir, corpus=LocalIndex(index_dir))
    timed_queries(memory, fields)
    memory_latency, memory_results = timed_queries(memory, fields)
    with tempfile.TemporaryDirectory(dir=work) as scratch, redis_server(Path(scratch)) as (url, client, pid):
        started = time.perf_counter()
        windows = load_redis(index_dir, url)
        load_seconds = time.perf_counter() - started
        used = client.info("memory")["used_memory"]
        server_pss = psutil.Process(pid).memory_full_info().pss
        shared = NearDuplicateIndex.open(index_dir, corpus=LocalIndex(index_dir), redis=url)
        timed_queries(shared, fields)
        redis_latency_, redis_results = timed_queries(shared, fields)
    differing = [field["key"] for field, a, b in zip(fields, memory_results, redis_results, strict=True) if a != b]
    return {
        "index": name,
        "windows": windows,
        "load_seconds": load_seconds,
        "load_windows_per_s": windows / load_seconds,
        "redis_used_memory_bytes": used,
        "redis_server_pss_bytes": server_pss,
        "minhash_disk_bytes": disk(index_dir)["minhash_bytes"],
        "memory": {n: summary(v) for n, v in memory_latency.items()},
        "redis": {n: summary(v) for n, v in redis_latency_.items()},
        "fields": len(fields),
        "differing": differing,
        "identical": not differing,
    }


# 4. Planted near-duplicates: recall and false positives, next to exact n-gram matching.


def planted_index(name: str, cap: int | None, work: Path, extra: list[Path]) -> tuple[Path, dict, dict]:
    """The demo text (up to `cap` bytes per file) with half of the items planted, edited four ways,
    in every ECLeKTic language, and the `extra` document files; both indexes built."""
    from audit.corpora.local import LocalIndex
    from audit.index import plants
    from audit.index.build import build_index
    from audit.neardup import add_neardup
    from audit.readers import load_benchmark

    items = load_benchmark(SAMPLE).items
    langs = list(items[0].variants)
    rows = plants.host_rows(cap)
    hosts = defaultdict(list)
    for row in rows:
        hosts[row["lang"]].append(row["text"])
    plan = plants.planted_pairs(items, langs)
    rows += [p.document for p in plants.plant(items, hosts, plan)]
    source = work / f"{name}.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    index = work / name
    started = time.perf_counter()
    manifest = build_index([source, *extra], index, force=True)
    built = add_neardup(LocalIndex(index), force=True)
    facts = {"documents": manifest.documents, "bytes": manifest.bytes, "windows": built.windows, "build_seconds": time.perf_counter() - started}
    return index, plan, facts


def planted_recall(name: str, cap: int | None, work: Path, extra: list[Path]) -> tuple[dict, Path]:
    """Both signals on every (item, language), as tests/test_minhash.py's `planted` fixture runs them;
    a planted field the near-duplicate signal misses is queried again with every LSH candidate
    verified, to tell a miss of the candidate ranking from one of the threshold."""
    from audit.corpora.local import LocalIndex
    from audit.evidence import OK
    from audit.exposure import SEEN, decide
    from audit.index import plants
    from audit.neardup import NearDuplicateIndex
    from audit.policyfile import compile_policy, load_policy
    from audit.readers import load_benchmark
    from audit.signals import minhash, ngram

    index_dir, plan, facts = planted_index(name, cap, work, extra)
    items = load_benchmark(SAMPLE).items
    langs = list(items[0].variants)
    corpus = LocalIndex(index_dir)
    index = NearDuplicateIndex.open(index_dir, corpus=corpus)
    minhash_policy = compile_policy({"name": "minhash-default", "rules": {"minhash": THRESHOLDS}}, "bench")
    ngram_policy, ngram_config = load_policy(), ngram.NgramConfig()
    config = minhash.MinhashConfig.model_validate(ngram_policy.section("minhash"))
    found = {}
    seconds = {"minhash": 0.0, "ngram": 0.0}
    for item in items:
        for lang in langs:
            started = time.perf_counter()
            # A field below its floor does not decide (`figures.below_floor`).
            near = [e for e in minhash.run(index, item, lang, config) if "below_floor" not in e.figures]
            seconds["minhash"] += time.perf_counter() - started
            started = time.perf_counter()
            exact = ngram.run(corpus, item, lang, ngram_config)
            seconds["ngram"] += time.perf_counter() - started
            containment = {e.field: e.figures["containment"] for e in near if e.status == OK}
            fields = {f for f in plants.FIELDS if containment.get(f, 0) >= THRESHOLDS[f]["containment"]}
            near_decision, exact_decision = decide(minhash_policy, near), decide(ngram_policy, exact)
            found[(item.item_id, lang)] = {
                "minhash": near_decision.exposure == SEEN,
                "ngram": exact_decision.exposure == SEEN,
                "minhash_fields": fields,
                "minhash_all_fields": fields | ({f for f in plants.FIELDS if f not in fields and verified_all(index, item, lang, f)} if (item.item_id, lang) in plan else set()),
                "ngram_fields": {f for f in plants.FIELDS if decide(ngram_policy, [e for e in exact if e.field == f]).exposure == SEEN},
                "minhash_documents": firing_documents(near, near_decision, SEEN, THRESHOLDS),
                "ngram_documents": firing_documents(exact, exact_decision, SEEN),
            }
    return tally(name, plan, found, langs, facts, seconds), index_dir


def verified_all(index, item, lang: str, field: str) -> bool:
    """Whether a field reaches its threshold when every LSH candidate the query ranks is verified."""
    from audit.forms import source_texts
    from audit.text import normalize

    raw = item.variants[lang].text(field)
    if not raw or not normalize(raw):
        return False
    best = index.query(normalize(raw), exclude=index.distinct_shingles(source_texts(item, lang)), candidates=10**9, limit=1).best
    return best is not None and best.containment >= THRESHOLDS[field]["containment"]


def firing_documents(evidence: list, decision, seen: str, thresholds: dict | None = None) -> list[str]:
    """The documents (their id, else their title) in the provenance of the evidence whose rules
    fired; with `thresholds`, only the matches that reach their field's containment."""
    fired = {check.get("field") for check in decision.decided_by} if decision.exposure == seen else set()
    names = set()
    for e in evidence:
        if e.field not in fired:
            continue
        for entry in e.provenance:
            if thresholds and entry.get("containment", 0) < thresholds[e.field]["containment"]:
                continue
            meta = entry.get("metadata") or {}
            inner = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else meta
            names.add(str(inner.get("id") or inner.get("title") or entry.get("document")))
    return sorted(names)


def same_item_copies(item_id: str, documents: list[str]) -> bool:
    return bool(documents) and all(PLANTED_ID.match(d) and d.startswith(f"planted-{item_id}-") for d in documents)


def tally(name: str, plan: dict, found: dict, langs: list[str], facts: dict, seconds: dict) -> dict:
    from audit.index import plants

    def rate(hits: list[bool]) -> dict:
        return {"rate": sum(hits) / len(hits) if hits else None, "hits": sum(hits), "of": len(hits)}

    def signals(keys: list) -> dict:
        return {
            "ngram": rate([found[k]["ngram"] for k in keys]),
            "minhash": rate([found[k]["minhash"] for k in keys]),
            "either": rate([found[k]["ngram"] or found[k]["minhash"] for k in keys]),
        }

    planted, unplanted = list(plan), [k for k in found if k not in plan]
    fields = [(k, f) for k in planted for f in plants.FIELDS]
    by_field_edit = {
        f"{field}/{edit}": {
            signal: rate([field in found[k][f"{signal}_fields"] for k, f in fields if f == field and plan[k] == edit]) for signal in ("ngram", "minhash", "minhash_all")
        }
        for field in plants.FIELDS
        for edit in plants.EDITS
    }
    return {
        "corpus": name,
        **facts,
        "signal_seconds": seconds,
        "pairs": len(found),
        "planted": signals(planted),
        "by_edit": {edit: signals([k for k in planted if plan[k] == edit]) for edit in plants.EDITS},
        "by_language": {lang: signals([k for k in planted if k[1] == lang]) for lang in langs},
        "by_field_and_edit": by_field_edit,
        "false_positives": signals(unplanted),
        "false_positive_pairs": {s: {"/".join(k): found[k][f"{s}_documents"] for k in sorted(unplanted) if found[k][s]} for s in ("ngram", "minhash")},
        # Unplanted pairs found in anything but copies of the same item planted in other languages.
        "false_positives_elsewhere": {s: sum(1 for k in unplanted if found[k][s] and not same_item_copies(k[0], found[k][f"{s}_documents"])) for s in ("ngram", "minhash")},
    }


# Tables.


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def pct(r: dict) -> str:
    return f"{100 * r['rate']:.1f}% ({r['hits']}/{r['of']})"


def tables(results: dict) -> str:
    out = []
    sketch = results.get("sketch")
    if sketch:
        ours = sketch["ours"]
        out += [
            f"Signatures of the {results['sketch_corpus']} corpus's windows ({ours['windows']:,} windows, {ours['bytes'] / 1e6:.1f} MB of text), one process:",
            "",
            "| sketcher | windows | windows/s | MB/s | vs ours | peak PSS | signatures equal |",
            "|---|---|---|---|---|---|---|",
        ]
        labels = {
            "ours": "`sketch_documents`, default (datasketch affine32, vectorised)",
            "rensa": '`sketch_documents`, `sketcher="rensa"`',
            "shingling": "of which shingling alone (tokens and shingle hashes)",
            "datasketch": "`datasketch.MinHash(32, seed=1, hashfunc=int)` + `update_batch`, one per window",
            "datasketch-bulk": "`datasketch.MinHash.bulk` (shared permutations)",
            "rensa-sets": "`rensa.RMinHash.digest_matrix_from_token_hash_sets`, one set per window",
        }
        for mode, run in sketch.items():
            windows = f"{run.get('windows', ours['windows']):,}"
            if mode == "shingling":
                equal = "–"
            elif mode == "ours":
                equal = "reference"
            elif mode == "rensa":
                equal = f"other family; same windows: {run['same_windows_as_ours']}"
            else:
                against = "rensa's" if mode == "rensa-sets" else "ours"
                equal = f"{run['compared'] - run['mismatches']:,} of {run['compared']:,} equal {against}"
            ratio = run["windows_per_s"] / ours["windows_per_s"]
            out.append(f"| {labels[mode]} | {windows} | {run['windows_per_s']:,.0f} | {run['mb_per_s']:.2f} | {ratio:.2f}x | {mib(run['peak_pss_bytes'])} | {equal} |")
        out.append("")
    builds = results.get("builds")
    if builds:
        out += [
            "| corpus | text | suffix array build | peak PSS | `audit index minhash` | peak PSS | windows | rensa sketcher | datasketch `MinHashLSH` insert (in memory) | its PSS growth | n-gram index on disk | minhash/ on disk |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for b in builds:
            lsh = b.get("datasketch_lsh")
            lsh_cells = f"{lsh['build_seconds']:.1f} s | {mib(lsh['after_build_pss'] - lsh['baseline_pss'])}" if lsh else "– | –"
            out.append(
                f"| {b['corpus']} | {mib(b['corpus_bytes'])}, {b['documents']:,} docs | {b['suffix_array']['seconds']:.1f} s | {mib(b['suffix_array']['peak_pss_bytes'])} "
                f"| {b['minhash']['seconds']:.1f} s | {mib(b['minhash']['peak_pss_bytes'])} | {b['windows']:,} | {b['minhash_rensa']['seconds']:.1f} s | {lsh_cells} "
                f"| {mib(b['disk']['ngram_index_bytes'])} (suffix array {mib(b['disk']['suffix_array_bytes'])}) | {mib(b['disk']['minhash_bytes'])} |"
            )
        out.append("")
    query = results.get("query")
    if query:
        out += [
            f"Query latency per field, {query['index']} ({query['fields']} fields: questions and contexts, 12 languages):",
            "",
            "| where | field | n | median | p95 | mean |",
            "|---|---|---|---|---|---|",
        ]
        for name in FIELDS:
            s = query["memory"]["query"][name]
            out.append(f"| {query['index']}, `query` in memory | {name} | {s['n']} | {s['median_ms']:.1f} ms | {s['p95_ms']:.1f} ms | {s['mean_ms']:.1f} ms |")
        for name in FIELDS:
            s = query["memory"]["candidate_step"][name]
            out.append(f"| {query['index']}, candidate step (`lsh_candidates`) | {name} | {s['n']} | {s['median_ms']:.2f} ms | {s['p95_ms']:.2f} ms | {s['mean_ms']:.2f} ms |")
        lsh = query.get("datasketch")
        if lsh:
            for name in FIELDS:
                s = lsh["latency"][name]
                out.append(
                    f"| {query['index']}, datasketch `MinHashLSH.query`, every chunk (union) | {name} | {s['n']} | {s['median_ms']:.2f} ms | {s['p95_ms']:.2f} ms | {s['mean_ms']:.2f} ms |"
                )
        redis = query.get("redis")
        if redis:
            for where in ("memory", "redis"):
                for name in FIELDS:
                    s = redis[where][name]
                    out.append(
                        f"| {redis['index']}, `query` {'in memory' if where == 'memory' else 'through Redis'} | {name} | {s['n']} | {s['median_ms']:.1f} ms | {s['p95_ms']:.1f} ms | {s['mean_ms']:.1f} ms |"
                    )
        out.append("")
        if lsh:
            out.append(f"Candidates equal to datasketch `MinHashLSH.query` (union over chunks): {lsh['equal']} of {lsh['compared']} fields.")
        if redis:
            out.append(
                f"Redis ({redis['index']}): {redis['windows']:,} windows loaded in {redis['load_seconds']:.1f} s ({redis['load_windows_per_s']:,.0f} windows/s), "
                f"Redis `used_memory` {mib(redis['redis_used_memory_bytes'])} (minhash/ on disk: {mib(redis['minhash_disk_bytes'])}); "
                f"results identical to in memory: {redis['identical']} ({redis['fields'] - len(redis['differing'])} of {redis['fields']} fields)."
            )
        out.append("")
    planted = results.get("planted")
    if planted:
        out += [
            "| corpus | text | pairs | recall n-gram | recall minhash | recall either | false positives n-gram | false positives minhash | false positives either |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for p in planted:
            r, f = p["planted"], p["false_positives"]
            out.append(
                f"| {p['corpus']} | {mib(p['bytes'])}, {p['documents']:,} docs | {p['pairs']} | {pct(r['ngram'])} | {pct(r['minhash'])} | {pct(r['either'])} "
                f"| {pct(f['ngram'])} | {pct(f['minhash'])} | {pct(f['either'])} |"
            )
        for p in planted:
            for signal in ("ngram", "minhash"):
                pairs = p["false_positive_pairs"][signal]
                if pairs:
                    listed = "; ".join(f"{pair} ({', '.join(docs)})" for pair, docs in pairs.items())
                    out.append(f"\n{p['corpus']}, unplanted pairs {signal} found: {listed}")
        out += [
            "",
            "| corpus | edit | pairs: n-gram | minhash | either | questions: n-gram | minhash | minhash, all candidates verified | contexts: n-gram | minhash | minhash, all candidates verified |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in planted:
            for edit, r in p["by_edit"].items():
                q, c = p["by_field_and_edit"][f"question/{edit}"], p["by_field_and_edit"][f"context/{edit}"]
                out.append(
                    f"| {p['corpus']} | {edit} | {pct(r['ngram'])} | {pct(r['minhash'])} | {pct(r['either'])} | {pct(q['ngram'])} | {pct(q['minhash'])} | {pct(q['minhash_all'])} "
                    f"| {pct(c['ngram'])} | {pct(c['minhash'])} | {pct(c['minhash_all'])} |"
                )
        langs = list(planted[0]["by_language"])
        out += ["", "| corpus | signal | " + " | ".join(langs) + " |", "|---|---|" + "---|" * len(langs)]
        for p in planted:
            for signal in ("ngram", "minhash", "either"):
                out.append(f"| {p['corpus']} | {signal} | " + " | ".join(f"{100 * p['by_language'][lang][signal]['rate']:.0f}%" for lang in langs) + " |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    parser.add_argument("--skip-big", action="store_true", help="only the demo corpus (query latency on the demo index)")
    parser.add_argument("--repeat", type=int, default=2, help="builds per kind and corpus; the fastest is reported")
    parser.add_argument("--subset-windows", type=int, default=40_000, help="windows given to datasketch and rensa's per-window API")
    parser.add_argument(
        "--redis-index",
        choices=["planted-250KB", "demo", "shared-100MB", "none"],
        default="planted-250KB",
        help="the index loaded into Redis (loading runs at 600 to 900 windows/s)",
    )
    parser.add_argument("--sections", default="sketch,build,query,planted", help="comma-separated: sketch, build, query, planted")
    parser.add_argument("--json", type=Path, help="where to write the results [default: WORK/minhash.json]")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--chunks", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        answer = lsh_child(args.work, args.index, args.chunks) if args.child == "lsh" else sketch_child(args.child, args.work, args.index, args.subset_windows)
        (args.work / f"child-{args.child}.json").write_text(json.dumps(answer))
        return
    sections = set(args.sections.split(","))
    work = args.work / "minhash"
    work.mkdir(parents=True, exist_ok=True)
    corpora = {"demo": demo_corpus(args.work / "src-demo")}
    if not args.skip_big:
        corpora["shared-100MB"] = assemble_big_corpus(args.work / "src-big")
    indexes = {name: work / f"{name}-index" for name in corpora}
    results: dict = {"machine": {"cpus": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total, "python": sys.version.split()[0]}, "versions": versions()}
    started = time.perf_counter()
    if "build" in sections:
        results["builds"] = []
        for name, source in corpora.items():
            print(f"building {name} ...", file=sys.stderr)
            results["builds"].append(build(name, source, indexes[name], args.repeat))
    for name, source in corpora.items():
        if not (indexes[name] / "minhash" / "manifest.json").is_file():
            print(f"building {name} (untimed) ...", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "audit.cli", "index", "build", str(source), "--out", str(indexes[name]), "--force"], check=True, capture_output=True)
    if "sketch" in sections:
        print("signatures per second (demo) ...", file=sys.stderr)
        results["sketch_corpus"] = "demo"
        results["sketch"] = signatures_per_second(work, indexes["demo"], args.subset_windows)
    query_name = "demo" if args.skip_big else "shared-100MB"
    chunks = None
    if "query" in sections:
        print(f"query latency ({query_name}) ...", file=sys.stderr)
        fields = query_fields()
        memory, _, chunks = in_memory_latency(indexes[query_name], fields, work)
        results["query"] = {"index": query_name, "fields": len(fields), "memory": memory}
    if "build" in sections:
        for entry in results["builds"]:
            print(f"datasketch MinHashLSH ({entry['corpus']}) ...", file=sys.stderr)
            options = ["--index", str(indexes[entry["corpus"]])]
            if chunks is not None and entry["corpus"] == query_name:
                options += ["--chunks", str(chunks)]
            lsh = child("lsh", work, *options)
            lsh["peak_pss_bytes"] = lsh["process"]["peak_pss_bytes"]
            queries = lsh.pop("queries", None)
            entry["datasketch_lsh"] = lsh
            if queries is not None:
                ours = results["query"]["memory"]["ours_candidates"]
                fields_by_key = {f"f{n}": f["field"] for n, f in enumerate(fields)}
                equal = [key for key, theirs in queries.items() if (theirs["candidates"], theirs["digest"]) == (ours[key]["candidates"], ours[key]["digest"])]
                results["query"]["datasketch"] = {
                    "compared": len(queries),
                    "equal": len(equal),
                    "latency": {name: summary([q["seconds"] for key, q in queries.items() if fields_by_key[key] == name]) for name in FIELDS},
                }
    if "planted" in sections or ("query" in sections and args.redis_index.startswith("planted")):
        results["planted"] = []
        planted_dirs = {}
        for name, (cap, with_shared) in PLANTED.items():
            if with_shared and args.skip_big:
                continue
            print(f"planted near-duplicates ({name}) ...", file=sys.stderr)
            extra = sorted(corpora["shared-100MB"].glob("*.jsonl")) if with_shared else []
            tally_, planted_dirs[name] = planted_recall(name, cap, work, extra)
            results["planted"].append(tally_)
    if "query" in sections and args.redis_index != "none":
        target = planted_dirs[args.redis_index] if args.redis_index.startswith("planted") else indexes[args.redis_index]
        print(f"Redis ({args.redis_index}) ...", file=sys.stderr)
        results["query"]["redis"] = redis_latency(args.redis_index, target, fields, work)
    results["total_seconds"] = time.perf_counter() - started
    results.get("query", {}).get("memory", {}).pop("ours_candidates", None)
    out = args.json or args.work / "minhash.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(tables(results))
    print(f"\ntotal {results['total_seconds']:.0f} s", file=sys.stderr)


def versions() -> dict:
    import importlib.metadata

    found = {}
    for package in ("numpy", "datasketch", "rensa", "redis", "pydivsufsort"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[package] = importlib.metadata.version(package)
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "audit"], capture_output=True, text=True, check=True).stdout
        found["audit_changed_since_commit"] = bool(changed.strip())
    server = shutil.which("redis-server")
    if server:
        found["redis-server"] = subprocess.run([server, "--version"], capture_output=True, text=True).stdout.split()[2].removeprefix("v=")
    return found


if __name__ == "__main__":
    main()
