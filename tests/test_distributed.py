"""Indexes served by Ray actors and audits spread over a real Ray cluster (`ray start --head`
on 127.0.0.1, the `ray_cluster` fixture): every answer and every audit record is the one a
single process gives over the same shards, and a worker killed mid-check is survived."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import ECLEKTIC_CSV, sample_subset, write_jsonl

from audit.corpora.distributed import DistributedIndex, contiguous_groups
from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError
from audit.executors import Executor, ExecutorError, ExecutorKind, parse_executor
from audit.index import plants
from audit.index.build import build_index
from audit.neardup import add_neardup
from audit.readers import load_benchmark

LANGS = ("en", "ja", "zh", "de")


@pytest.fixture(scope="module")
def items():
    return load_benchmark(ECLEKTIC_CSV).items[:8]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, items) -> Path:
    """Real text in four scripts with planted copies of eight items, in 64 KiB shards, with its
    near-duplicate index."""
    root = tmp_path_factory.mktemp("sharded")
    rows = plants.host_rows(6_000)
    hosts = defaultdict(list)
    for row in rows:
        hosts[row["lang"]].append(row["text"])
    plan = plants.planted_pairs(items, LANGS)
    rows += [p.document for p in plants.plant(items, hosts, plan)]
    write_jsonl(root / "docs.jsonl", rows)
    manifest = build_index([root / "docs.jsonl"], root / "index", memory_bytes=5 * 65_536)
    assert len(manifest.shards) >= 4
    add_neardup(LocalIndex(root / "index"))
    return root / "index"


@pytest.fixture(scope="module")
def ray_executor(ray_cluster):
    """This process as a Ray Client of the test cluster, disconnected after the module, so no
    later test forks a process holding the connection."""
    import ray

    executor = parse_executor(ray_cluster.client)
    yield executor
    ray.shutdown()


def queries(index: LocalIndex) -> list[str]:
    """Strings found once, many times, across shard boundaries, and never."""
    texts = [text.decode("utf-8", "ignore") for _, text in index.documents(0, index.info.documents)]
    picks = [texts[i][:60] for i in np.linspace(0, len(texts) - 1, 12).astype(int)]
    return [*picks, "the", "の", "der", "，", "zebra-absent-\u2603", texts[-1][-40:]]


def test_executors_are_named_plainly():
    assert parse_executor(None) == parse_executor("local") == Executor()
    assert parse_executor("ray") == Executor(ExecutorKind.RAY)
    assert parse_executor("ray://10.0.0.1:10001").address == "ray://10.0.0.1:10001"
    for bad in ("spark", "ray://nohost", "ray://host:port"):
        with pytest.raises(ExecutorError, match="--executor"):
            parse_executor(bad)


def test_an_unreachable_cluster_is_one_clear_line(sharded: Path, local_audit, tmp_path: Path):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    bench, _ = local_audit
    process = audit(bench, sharded, tmp_path / "a.audit.jsonl", "--executor", f"ray://127.0.0.1:{port}")
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode == 2
    assert f"cannot reach the Ray cluster at ray://127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}" in output
    assert not (tmp_path / "a.audit.jsonl").exists()
    failed = audit(bench, sharded, tmp_path / "a.audit.jsonl", "--actors", "2")
    assert failed.wait(timeout=120) == 2 and b"--actors applies to a Ray executor" in failed.stdout.read()


def test_a_ray_client_is_given_two_minutes_to_reconnect_unless_told_otherwise():
    """The grace period the client sends the head when it connects (set before Ray reads it,
    even for a cluster that turns out unreachable); a value the user set is kept."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    script = (
        "import os\nfrom audit.executors import Executor, ExecutorError, ExecutorKind, connect\n"
        f"try:\n    connect(Executor(ExecutorKind.RAY, 'ray://127.0.0.1:{port}'))\nexcept ExecutorError:\n    pass\n"
        "print(os.environ['RAY_CLIENT_RECONNECT_GRACE_PERIOD'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_CLIENT_RECONNECT_GRACE_PERIOD"}
    for given, expected in ((None, "120"), ("7", "7")):
        run = subprocess.run([sys.executable, "-c", script], env=env | ({"RAY_CLIENT_RECONNECT_GRACE_PERIOD": given} if given else {}), capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and run.stdout.split() == [expected], run.stderr


def test_shards_are_grouped_contiguously_by_bytes():
    assert contiguous_groups([10, 10, 10, 10], 2) == [[0, 1], [2, 3]]
    assert contiguous_groups([30, 1, 1, 1], 2) == [[0], [1, 2, 3]]
    assert contiguous_groups([5, 5, 5], 7) == [[0], [1], [2]]
    for sizes in ([1] * 9, [100, 1, 1, 1, 1, 100], [7, 3, 9, 2, 8]):
        for groups in range(1, len(sizes) + 1):
            parts = contiguous_groups(sizes, groups)
            assert len(parts) == groups and all(parts)
            assert [i for part in parts for i in part] == list(range(len(sizes)))


@pytest.mark.parametrize("groups", [None, 2, 99])
def test_actors_answer_what_one_process_answers(sharded: Path, ray_executor, groups):
    """By default one actor per node (one here); 99 asked is one per shard."""
    local = LocalIndex(sharded)
    distributed = DistributedIndex(sharded, executor=ray_executor, groups=groups)
    try:
        assert distributed.info == local.info
        assert len(distributed.groups) == {None: 1, 2: 2, 99: local.info.details["shards"]}[groups]
        for text in queries(local):
            assert distributed.count(text) == local.count(text)
            assert distributed.match_lengths(text).lengths == local.match_lengths(text).lengths
            for limit in (1, 5, 40):
                total, found = distributed.occurrences(text, limit)
                assert (total, found) == local.occurrences(text, limit)
            for occurrence in found:
                assert distributed.document_hit(occurrence, 12, 30) == local.document_hit(occurrence, 12, 30)
            assert distributed.surroundings(found, 50, 70) == [local.surrounding(o, 50, 70) for o in found]
        assert list(distributed.documents()) == list(local.documents())
        last = local.info.documents - 1
        assert distributed.metadata(last) == local.metadata(last) and distributed.metadata(0) == local.metadata(0)
    finally:
        distributed.close()


def test_a_shipped_index_asks_the_same_actors(sharded: Path, ray_executor):
    import ray

    distributed = DistributedIndex(sharded, executor=ray_executor)
    try:
        counted = ray.get(ray.remote(lambda index, text: index.count(text)).remote(distributed, "the"))
        assert counted == LocalIndex(sharded).count("the") > 0
    finally:
        distributed.close()


def test_a_damaged_shard_is_named_when_the_actors_open(sharded: Path, ray_executor, tmp_path: Path):
    copy = Path(shutil.copytree(sharded, tmp_path / "index"))
    offsets = np.fromfile(copy / "offset.2", dtype="<u8")
    offsets[3] += 1
    offsets.tofile(copy / "offset.2")
    with pytest.raises(IndexOpenError, match=r"offset\.2: document 3 starts at byte"):
        DistributedIndex(copy, executor=ray_executor)


def audit(bench: Path, index: Path, out: Path, *extra: str, cache: Path | None = None) -> subprocess.Popen:
    """`audit check` in a process of its own, run outside the checkout so that it imports the
    installed package, with Ray Client's reconnection grace period as `audit` sets it."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_CLIENT_RECONNECT_GRACE_PERIOD"} | {"COLUMNS": "200"} | ({"AUDIT_CACHE_DIR": str(cache)} if cache else {})
    return subprocess.Popen(
        [sys.executable, "-m", "audit.cli", "check", str(bench), "--corpus", str(index), "--out", str(out), "--no-report", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tempfile.gettempdir(),
    )


def finished(process: subprocess.Popen) -> str:
    output = process.communicate(timeout=600)[0].decode()
    assert process.returncode == 0, output
    return output


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def local_audit(sharded: Path, items, tmp_path_factory) -> tuple[Path, Path]:
    """The benchmark (eight items in four languages) and its audit by one machine."""
    root = tmp_path_factory.mktemp("local-audit")
    bench = sample_subset(root / "bench.csv", [item.item_id for item in items], LANGS)
    finished(audit(bench, sharded, root / "local.audit.jsonl"))
    return bench, root / "local.audit.jsonl"


def record_lines(path: Path) -> list[bytes]:
    """An audit file's record lines, as bytes."""
    return path.read_bytes().split(b"\n")[1:]


def test_an_audit_on_ray_equals_the_local_one(sharded: Path, local_audit, ray_cluster, tmp_path: Path):
    bench, local_path = local_audit
    out = tmp_path / "ray.audit.jsonl"
    finished(audit(bench, sharded, out, "--executor", ray_cluster.client))
    spread, local = lines(out), lines(local_path)
    assert record_lines(out) == record_lines(local_path)
    seen = [r for r in local[1:] if r["exposure"] == "seen"]
    assert seen and any(e["signal"] == "minhash" and e.get("provenance") for r in seen for e in r["evidence"])
    differing = {key for key in {*spread[0], *local[0]} if spread[0].get(key) != local[0].get(key)}
    assert differing == {"created", "command", "executor"}
    assert spread[0]["executor"] == ray_cluster.client and "executor" not in local[0]


def _kill_when_running(name: str, ray_cluster, stop: threading.Event, killed: list[int]) -> None:
    while not stop.is_set():
        running = ray_cluster.worker_pids(name)
        if running:
            os.kill(running[0], signal.SIGKILL)
            killed.append(running[0])
            return
        time.sleep(0.01)


@pytest.mark.parametrize("victim", ["_shipped_evidence", "ShardActor"])
def test_a_worker_killed_mid_check_is_survived(sharded: Path, local_audit, ray_cluster, tmp_path: Path, victim: str):
    """Ray re-runs a lost task and restarts a lost actor; nothing the local audit found seen or
    unknown comes back unseen, and whatever Ray could not redo is `failed` evidence."""
    bench, local_path = local_audit
    local = lines(local_path)
    out = tmp_path / "ray.audit.jsonl"
    stop, killed = threading.Event(), []
    process = audit(bench, sharded, out, "--executor", ray_cluster.client)
    killer = threading.Thread(target=_kill_when_running, args=(victim, ray_cluster, stop, killed))
    killer.start()
    try:
        finished(process)
    finally:
        stop.set()
        killer.join()
    assert killed, f"no ray::{victim} process was seen running"
    spread = lines(out)
    assert len(spread) == len(local)
    for mine, theirs in zip(spread[1:], local[1:], strict=True):
        if mine != theirs:
            assert mine["exposure"] == "unknown", (mine["item_id"], mine["lang"])
            assert any(e["status"] == "failed" for e in mine["evidence"])


def test_a_sharded_build_and_check_on_ray_equal_one_machines(local_audit, items, ray_cluster, tmp_path: Path):
    """The whole path on the cluster (`index build --shards` and `check` on Ray) writes the
    audit one machine writes with the same commands, byte for byte but for the manifest's
    time, command line and executor."""
    bench, _ = local_audit
    rows = plants.host_rows(4_000)
    hosts = defaultdict(list)
    for row in rows:
        hosts[row["lang"]].append(row["text"])
    rows += [p.document for p in plants.plant(items, hosts, plants.planted_pairs(items, LANGS))]
    write_jsonl(tmp_path / "docs.jsonl", rows)
    outputs = {}
    for where, executor in (("local", []), ("ray", ["--executor", ray_cluster.client])):
        index = tmp_path / where / "index"
        built = subprocess.run(
            [sys.executable, "-m", "audit.cli", "index", "build", str(tmp_path / "docs.jsonl"), "--out", str(index), "--shards", "3", *executor],
            capture_output=True, text=True, check=False, cwd=tempfile.gettempdir(),
        )
        assert built.returncode == 0, built.stdout + built.stderr
        outputs[where] = tmp_path / f"{where}.audit.jsonl"
        finished(audit(bench, index, outputs[where], *executor))
    assert record_lines(outputs["ray"]) == record_lines(outputs["local"])
    spread, local = lines(outputs["ray"])[0], lines(outputs["local"])[0]
    # The two indexes sit in two directories (same name): only their location differs.
    assert [{**c, "location": ""} for c in spread["corpora"]] == [{**c, "location": ""} for c in local["corpora"]]
    spread["corpora"] = local["corpora"]
    assert {key for key in {*spread, *local} if spread.get(key) != local.get(key)} == {"created", "command", "executor"}
    assert local["corpora"][0]["details"]["shards"] == 3
    assert any(r["exposure"] == "seen" for r in lines(outputs["local"])[1:])


def test_sources_that_stay_home_are_merged_in_runner_order(sharded: Path, items, ray_cluster, tmp_path: Path):
    """A probe model is asked from the command's own process while the index's signals run on
    the cluster; each variant's evidence comes out in the local run's order, byte for byte.
    Each run has a cache of its own, so both ask the model (an answer from the cache says so)."""
    bench = sample_subset(tmp_path / "bench.csv", [item.item_id for item in items[:2]], ("en", "ja"))
    model = Path(__file__).resolve().parent / "fixtures" / "models" / "llama-2-tiny-random.gguf"
    outputs = {}
    for where, executor in (("local", []), ("ray", ["--executor", ray_cluster.client])):
        outputs[where] = tmp_path / f"{where}.audit.jsonl"
        finished(audit(bench, sharded, outputs[where], "--probe-model", str(model), *executor, cache=tmp_path / f"{where}-cache"))
    assert record_lines(outputs["ray"]) == record_lines(outputs["local"])
    signals = [e["signal"] for e in lines(outputs["ray"])[1]["evidence"]]
    assert "probe" in signals and "ngram" in signals and "minhash" in signals
