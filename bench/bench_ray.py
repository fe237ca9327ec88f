"""Scale-out benchmark: the sharded build and the audit on a real local Ray cluster, against
the local executor doing the same work, with 1 and 2 workers; and the per-shard figures the
manual's capacity plan (docs/ray.md) is computed from.

    pip install '.[bench,ray]'
    python bench/bench_ray.py            # about 10 minutes on 2 cores

The corpus is every JSONL file in ../shared/data/corpus (about 110 MB of multilingual text),
cut into 4 shards.  A Ray cluster is started for each worker count (`ray start --head
--num-cpus=N` on 127.0.0.1) and stopped after.  Peak memory is the summed PSS of the command's
process tree plus, for Ray, every process of the cluster (raylet, GCS, workers, actors).
Prints Markdown tables (paste into bench/README.md) and writes bench/work/ray.json.
"""
from __future__ import annotations

import argparse
import contextlib
import filecmp
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from bench_core import SAMPLE, assemble_big_corpus, query_texts, tree_memory

ROOT = Path(__file__).resolve().parents[1]
SHARDS = 4
INDEX_KINDS = ("tokenized", "table", "offset", "metadata", "metaoff")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """`ray start --head --block` on 127.0.0.1 with `cpus` CPUs, in its own temporary directory."""

    def __init__(self, cpus: int) -> None:
        self.cpus = cpus
        self.client_port = free_port()
        self.address = f"ray://127.0.0.1:{self.client_port}"
        self.temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        ray = Path(sys.executable).with_name("ray")
        command = [
            str(ray), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={free_port()}",
            f"--ray-client-server-port={self.client_port}", f"--num-cpus={cpus}", "--include-dashboard=false",
            "--disable-usage-stats", f"--temp-dir={self.temp}",
        ]
        os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token")
        self.process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True, cwd=self.temp)
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.client_port)) == 0:
                    break
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("the Ray head did not start")
            time.sleep(0.2)
        time.sleep(2)
        self.idle_pss = self.memory()

    def memory(self) -> int:
        return tree_memory(self.process)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(psutil.TimeoutExpired):
            self.process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)


def measured(command: list[str], cluster: Cluster | None = None) -> dict:
    """Wall time and peak PSS of a command's process tree (plus the cluster's, above idle)."""
    env = dict(os.environ, RAY_AUTH_MODE="token", COLUMNS="200")
    started = time.perf_counter()
    process = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    peak = cluster_peak = 0
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, tree_memory(process))
            if cluster:
                cluster_peak = max(cluster_peak, cluster.memory())
        time.sleep(0.05)
    output = process.stdout.read().decode("utf-8", errors="replace")
    if process.returncode != 0:
        raise SystemExit(f"command failed ({process.returncode}): {' '.join(command)}\n{output[-3000:]}")
    result = {"seconds": round(time.perf_counter() - started, 2), "peak_pss_bytes": peak}
    if cluster:
        result["cluster_peak_pss_bytes"] = cluster_peak
        result["cluster_idle_pss_bytes"] = cluster.idle_pss
    return result


def audit_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "audit.cli", *arguments]


def same_files(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir() if p.name.split(".")[0] in INDEX_KINDS)
    return names == sorted(p.name for p in b.iterdir() if p.name.split(".")[0] in INDEX_KINDS) and all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def build(corpus: Path, out: Path, *options: str, cluster: Cluster | None = None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out.with_name(f".{out.name}.sharded-build"), ignore_errors=True)
    executor = ["--executor", cluster.address] if cluster else []
    return measured(audit_command("index", "build", str(corpus), "--out", str(out), "--no-minhash", *options, *executor), cluster)


def check(index: Path, out: Path, *options: str, cluster: Cluster | None = None) -> dict:
    executor = ["--executor", cluster.address] if cluster else []
    result = measured(audit_command("check", str(SAMPLE), "--corpus", str(index), "--out", str(out), "--no-report", *options, *executor), cluster)
    records = out.read_text(encoding="utf-8").splitlines()[1:]
    result["variants"] = len(records)
    return result


def records_equal(a: Path, b: Path) -> bool:
    return a.read_text(encoding="utf-8").splitlines()[1:] == b.read_text(encoding="utf-8").splitlines()[1:]


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def query_latency(index: Path, cluster: Cluster | None) -> dict:
    """Per query, over the ECLeKTic sample's texts: count and longest match (every position)
    against the whole 4-shard index in one process, against one shard alone, and through Ray
    actors from a client process (one actor, the default on one node)."""
    from audit.corpora.local import LocalIndex
    from audit.corpora.shardgroup import ShardGroup
    from audit.corpora.shards import index_layout

    texts = query_texts()[:400]
    local = LocalIndex(index)
    layout = index_layout(index)
    one = ShardGroup(index, layout.numbers[:1], layout.first_documents[:1])

    def timed(function) -> float:
        started = time.perf_counter()
        for text in texts:
            function(text)
        return 1000 * (time.perf_counter() - started) / len(texts)

    result = {
        "texts": len(texts),
        "mean_text_bytes": round(statistics.mean(map(len, texts))),
        "shard_bytes": layout.shard_bytes[0],
        "count_ms_all_shards": timed(local.count_bytes),
        "count_ms_one_shard": timed(one.count_bytes),
        "longest_ms_all_shards": timed(local.longest_match_bytes),
        "longest_ms_one_shard": timed(one.longest_match_bytes),
    }
    if cluster:
        script = (
            "import sys, time, json\n"
            "from pathlib import Path\n"
            "from audit.corpora.distributed import DistributedIndex\n"
            "from audit.executors import parse_executor\n"
            "sys.path.insert(0, sys.argv[3])\n"
            "from bench_core import query_texts\n"
            "texts = query_texts()[:400]\n"
            "index = DistributedIndex(Path(sys.argv[1]), executor=parse_executor(sys.argv[2]))\n"
            "out = {}\n"
            "for name, call in (('count', index.count_bytes), ('longest', index.longest_match_bytes)):\n"
            "    started = time.perf_counter()\n"
            "    for text in texts: call(text)\n"
            "    out[name] = 1000 * (time.perf_counter() - started) / len(texts)\n"
            "print(json.dumps(out))\n"
        )
        env = dict(os.environ, RAY_AUTH_MODE="token")
        done = subprocess.run([sys.executable, "-c", script, str(index), cluster.address, str(Path(__file__).parent)], capture_output=True, text=True, env=env, check=True)
        remote = json.loads(done.stdout.strip().splitlines()[-1])
        result["count_ms_ray"] = remote["count"]
        result["longest_ms_ray"] = remote["longest"]
    return {key: round(value, 3) if isinstance(value, float) else value for key, value in result.items()}


def cold_latency(index: Path, texts: int = 60) -> dict:
    """Per query on one shard whose five files were evicted from the page cache just before
    (`posix_fadvise(POSIX_FADV_DONTNEED)`; the shard is mapped afresh for each query, since
    mapped pages are not evicted): every page it reads comes from the disk."""
    from audit.corpora.shardgroup import ShardGroup
    from audit.corpora.shards import index_layout

    layout = index_layout(index)
    number, first = layout.numbers[0], layout.first_documents[0]

    def evict() -> None:
        for kind in INDEX_KINDS:
            handle = os.open(index / f"{kind}.{number}", os.O_RDONLY)
            os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(handle)

    found: dict[str, list[float]] = {"count": [], "longest": []}
    for text in query_texts()[:texts]:
        for name in found:
            evict()
            group = ShardGroup(index, [number], [first])
            evict()
            started = time.perf_counter()
            (group.count_bytes if name == "count" else group.longest_match_bytes)(text)
            found[name].append(1000 * (time.perf_counter() - started))
            for shard in group.shards:
                for mapped in (shard.data, shard.table, shard.metadata):
                    if mapped is not None:
                        mapped.close()
    return {f"cold_{name}_ms_one_shard": round(statistics.mean(times), 3) for name, times in found.items()}


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def tables(results: dict) -> str:
    corpus = results["corpus_bytes"]
    rows = [
        "| build, 4 shards | workers | seconds | MB/s | peak PSS (command + cluster above idle) | files identical to local |",
        "|---|---|---|---|---|---|",
    ]
    plain = results["build"]["plain"]
    rows.append(f"| plain build (no --shards) | 2 | {plain['seconds']} | {corpus / 1e6 / plain['seconds']:.1f} | {mib(plain['peak_pss_bytes'])} | - |")
    for name, run in results["build"].items():
        if name == "plain":
            continue
        executor, workers = name.split("-")
        extra = run.get("cluster_peak_pss_bytes", 0) - run.get("cluster_idle_pss_bytes", 0)
        same = "-" if executor == "local" else ("yes" if run["identical"] else "NO")
        rows.append(f"| {executor} | {workers} | {run['seconds']} | {corpus / 1e6 / run['seconds']:.1f} | {mib(run['peak_pss_bytes'] + max(extra, 0))} | {same} |")
    rows += ["", "| check, ECLeKTic sample | workers | seconds | variants/s | peak PSS (command + cluster above idle) | records identical to local |", "|---|---|---|---|---|---|"]
    for name, run in results["check"].items():
        executor, workers = name.split("-", 1)
        extra = run.get("cluster_peak_pss_bytes", 0) - run.get("cluster_idle_pss_bytes", 0)
        same = "yes" if run["identical"] else "NO"
        rows.append(f"| {executor} | {workers} | {run['seconds']} | {run['variants'] / run['seconds']:.1f} | {mib(run['peak_pss_bytes'] + max(extra, 0))} | {same} |")
    q = results["queries"]
    rows += [
        "",
        f"Per query ({q['texts']} texts, mean {q['mean_text_bytes']} bytes; one shard is {mib(q['shard_bytes'])}):",
        "",
        "| query | one shard | all 4 shards, one process | all 4 shards, one Ray actor, from a Ray Client |",
        "|---|---|---|---|",
        f"| count | {q['count_ms_one_shard']} ms | {q['count_ms_all_shards']} ms | {q.get('count_ms_ray', '-')} ms |",
        f"| longest match at every position | {q['longest_ms_one_shard']} ms | {q['longest_ms_all_shards']} ms | {q.get('longest_ms_ray', '-')} ms |",
        "",
        f"From disk (the shard evicted from the page cache before each query): count {q['cold_count_ms_one_shard']} ms, longest match {q['cold_longest_ms_one_shard']} ms.",
        "",
        f"Disk: the index is {results['disk_ratio']:.2f} bytes per byte of JSONL input ({mib(results['index_bytes'])} for {mib(corpus)}).",
    ]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    arguments = parser.parse_args()
    work = arguments.work
    corpus = assemble_big_corpus(work / "big-corpus")
    corpus_bytes = sum(p.stat().st_size for p in corpus.iterdir())
    results: dict = {"corpus_bytes": corpus_bytes, "shards": SHARDS, "build": {}, "check": {}}
    results["build"]["plain"] = build(corpus, work / "ray-plain")
    for workers in (1, 2):
        results["build"][f"local-{workers}"] = build(corpus, work / f"ray-local-{workers}", "--shards", str(SHARDS), "--workers", str(workers))
    index = work / "ray-local-2"
    results["index_bytes"] = directory_bytes(index)
    results["disk_ratio"] = results["index_bytes"] / corpus_bytes
    for workers in (1, 2):
        out = work / f"ray-check-local-{workers}.audit.jsonl"
        results["check"][f"local-{workers}"] = check(index, out, "--workers", str(workers))
    reference = work / "ray-check-local-2.audit.jsonl"
    for name in ("local-1", "local-2"):
        results["check"][name]["identical"] = records_equal(work / f"ray-check-{name}.audit.jsonl", reference)
    for cpus in (1, 2):
        cluster = Cluster(cpus)
        try:
            run = build(corpus, work / f"ray-ray-{cpus}", "--shards", str(SHARDS), cluster=cluster)
            run["identical"] = same_files(work / f"ray-ray-{cpus}", index)
            results["build"][f"ray-{cpus}"] = run
            out = work / f"ray-check-ray-{cpus}.audit.jsonl"
            run = check(index, out, "--workers", str(cpus), cluster=cluster)
            run["identical"] = records_equal(out, reference)
            results["check"][f"ray-{cpus}"] = run
            if cpus == 2:
                out = work / "ray-check-ray-2-per-shard.audit.jsonl"
                run = check(index, out, "--workers", "2", "--actors", str(SHARDS), cluster=cluster)
                run["identical"] = records_equal(out, reference)
                results["check"]["ray (one actor per shard)-2"] = run
                results["queries"] = query_latency(index, cluster)
        finally:
            cluster.stop()
    results["queries"].update(cold_latency(index))
    (work / "ray.json").write_text(json.dumps(results, indent=2))
    print(tables(results))


if __name__ == "__main__":
    main()
