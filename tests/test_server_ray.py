"""`audit serve --executor ray://...` as a real process on 127.0.0.1 over a real Ray cluster (the
`ray_cluster` fixture): a byte-level index of real multilingual text in eleven shards is held by
shard actors, and every answer equals the one a local server (infini-gram's engine over the same
files) gives, field for field but `latency`; jobs give the same audit records; a killed actor
is survived; what is not served from actors is refused clearly."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import requests
from conftest import sample_ids, sample_subset
from test_server import OLMO2, TOKEN_DOCS, Served, build_token_index, start_server, wait_for

from audit.corpora.api import ApiCorpus, ApiOptions
from audit.corpora.client import ClientSettings, InfiniGramClient
from audit.corpora.local import LocalIndex
from audit.index.build import build_index
from audit.server.engine import ServedIndex
from audit.server.sharded import ShardedEngine
from audit.server.tokenizer import Tokenizer

# Every query type answered from actors, with the options that change their answers.
SIMPLE = [
    ("count", {}),
    ("find", {}),
    ("prob", {}),
    ("ntd", {}),
    ("ntd", {"max_support": 3}),
    ("infgram_prob", {}),
    ("infgram_ntd", {}),
    ("infgram_ntd", {"max_support": 2}),
    ("creativity", {}),
]
ABSENT = "zebra-absent-\u2603"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, wiki_dir: Path) -> Path:
    """Real text in six scripts in 64 KiB shards: eleven of them, so infini-gram's engine,
    which orders shard files as text, puts `tokenized.10` third."""
    out = tmp_path_factory.mktemp("sharded") / "index"
    manifest = build_index([wiki_dir], out, memory_bytes=5 * 65_536)
    assert len(manifest.shards) >= 11
    return out


@pytest.fixture(scope="module")
def local_server(sharded: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server("--index", f"wiki={sharded}", "--jobs-dir", str(tmp_path_factory.mktemp("local-jobs")))
    yield server
    server.stop()


def start_ray_server(sharded: Path, ray_cluster, jobs: Path, *extra: str) -> Served:
    return start_server("--index", f"wiki={sharded}", "--executor", ray_cluster.client, "--jobs-dir", str(jobs), *extra)


@pytest.fixture(scope="module")
def ray_server(sharded: Path, ray_cluster, tmp_path_factory) -> Iterator[Served]:
    """The index in four actors (the default on one node is one), so answers merge across actors
    whose shards the engine numbers out of order."""
    server = start_ray_server(sharded, ray_cluster, tmp_path_factory.mktemp("ray-jobs"), "--actors", "4")
    yield server
    server.stop()


def answer(server: Served, payload: dict, route: str = "") -> tuple[int, dict]:
    response = requests.post(server.url + route, json=payload, timeout=60)
    body = response.json()
    body.pop("latency", None)
    return response.status_code, body


def queries(index: LocalIndex) -> list[str]:
    """Absent, rare (a document's own words), frequent, in every script, and the empty query."""
    texts = [text.decode("utf-8", "ignore") for _, text in index.documents()]
    rare = [texts[i][40:80] for i in np.linspace(0, len(texts) - 1, 6).astype(int)]
    return ["", ABSENT, "the", " ", "e", "の", "東京", "नई", "이", "של", "\u05d4", *rare, texts[-1][-30:]]


def test_the_sharded_engine_answers_as_infini_grams_engine(sharded: Path):
    """In one process, without Ray: the engine's answers computed from shard groups equal the
    engine's own over many queries (raw bytes included) and document look-ups, sampled `ntd`
    and the engine's edge cases (a pointer at a separator, the last byte of a shard) too."""
    served = ServedIndex("wiki", sharded, Tokenizer())
    engine, sharded_engine = served.engine, ShardedEngine(served.local, served.tokenizer.eos_id)
    rng = random.Random(5)
    data = b"".join(text for _, text in served.local.documents())
    prompts = [list(text.encode()) for text in queries(served.local)]
    for _ in range(60):
        at = rng.randrange(len(data))
        prompts.append([byte for byte in data[at : at + rng.randrange(1, 12)] if byte != 0xFF])
        prompts.append([rng.randrange(255) for _ in range(rng.randrange(4))])
    for ids in prompts:
        assert sharded_engine.find(input_ids=ids) == engine.find(input_ids=ids)
        assert sharded_engine.count(input_ids=ids) == engine.count(input_ids=ids)
        if ids:
            assert sharded_engine.prob(prompt_ids=ids[:-1], cont_id=ids[-1]) == engine.prob(prompt_ids=ids[:-1], cont_id=ids[-1])
            assert sharded_engine.infgram_prob(prompt_ids=ids[:-1], cont_id=ids[-1]) == engine.infgram_prob(prompt_ids=ids[:-1], cont_id=ids[-1])
        for support in (1, 3, 1000):
            assert sharded_engine.ntd(prompt_ids=ids, max_support=support) == engine.ntd(prompt_ids=ids, max_support=support), (ids, support)
            assert sharded_engine.infgram_ntd(prompt_ids=ids, max_support=support) == engine.infgram_ntd(prompt_ids=ids, max_support=support)
    for s in range(served.shard_count):
        size = engine.engine.get_ds_size(s=s)
        for at in {0, 2, size - 1, size - 2, size, -2, *(rng.randrange(size) for _ in range(20))}:
            for width in (1, 2, 9, 1000):
                assert sharded_engine.get_doc_by_rank(s=s, rank=at, max_disp_len=width) == engine.get_doc_by_rank(s=s, rank=at, max_disp_len=width)
                assert sharded_engine.get_doc_by_ptr(s=s, ptr=at, max_disp_len=width) == engine.get_doc_by_ptr(s=s, ptr=at, max_disp_len=width)


def test_every_answer_equals_the_local_servers(sharded: Path, local_server: Served, ray_server: Served):
    index = LocalIndex(sharded)
    compared = 0
    for text in queries(index):
        for query_type, options in SIMPLE:
            payload = {"index": "wiki", "query_type": query_type, "query": text, **options}
            assert answer(ray_server, payload) == answer(local_server, payload), (query_type, text, options)
            compared += 1
        for mini in ("count", "find"):
            payload = {"index": "wiki", "query_type": mini, "query": text}
            assert answer(ray_server, payload, "mini/") == answer(local_server, payload, "mini/"), (mini, text)
    raw = [0, 254, 10, 0xC3, 0xA9, 0x80]
    for query_type, options in SIMPLE:
        payload = {"index": "wiki", "query_type": query_type, "query_ids": raw, **options}
        assert answer(ray_server, payload) == answer(local_server, payload)
    assert compared >= 150


def test_documents_equal_the_local_servers_in_every_shard(sharded: Path, local_server: Served, ray_server: Served):
    """By rank and by pointer, in every shard in the engine's order, at the edges of shards and
    documents, with windows of every width; and the mini protocol's documents."""
    sizes = [hi for _, hi in answer(local_server, {"index": "wiki", "query_type": "find", "query": ""})[1]["segment_by_shard"]]
    layout = LocalIndex(sharded).layout
    assert sizes == [layout.shard_bytes[layout.numbers.index(n)] for n in sorted(layout.numbers, key=str)]
    for text in ("the", "の", "नई"):
        segments = answer(local_server, {"index": "wiki", "query_type": "find", "query": text})[1]["segment_by_shard"]
        for s, (lo, hi) in enumerate(segments):
            for rank in {lo, (lo + hi) // 2, max(lo, hi - 1)}:
                for width in (1, 40, 1000):
                    payload = {"index": "wiki", "query_type": "get_doc_by_rank", "query": text, "s": s, "rank": rank, "max_disp_len": width}
                    assert answer(ray_server, payload) == answer(local_server, payload), payload
            mini = {"index": "wiki", "query_type": "get_doc_by_rank", "query": text, "s": s, "rank": lo, "max_ctx_len": 30}
            assert answer(ray_server, mini, "mini/") == answer(local_server, mini, "mini/"), mini
    for s, size in enumerate(sizes):
        for ptr in {0, 2, size // 2 & ~1, (size - 1) & ~1, size, size + 2, 3}:
            payload = {"index": "wiki", "query_type": "get_doc_by_ptr", "query": "the", "s": s, "ptr": ptr, "max_disp_len": 64}
            assert answer(ray_server, payload) == answer(local_server, payload), payload
        beyond = {"index": "wiki", "query_type": "get_doc_by_rank", "query": "x", "s": s, "rank": size}
        assert answer(ray_server, beyond) == answer(local_server, beyond)
    wrong_shard = {"index": "wiki", "query_type": "get_doc_by_rank", "query": "x", "s": len(sizes), "rank": 0}
    assert answer(ray_server, wrong_shard) == answer(local_server, wrong_shard) == (200, {"error": f"s must be an integer in range [0, {len(sizes)})"})


def test_mini_documents_are_whole_in_every_shard(sharded: Path, ray_server: Served, local_server: Served):
    """The engine numbers documents in its shard order (`tokenized.10` third); the mini
    protocol's document length is still the document's own, found here by its metadata."""
    index = LocalIndex(sharded)
    lengths = {}
    for number, text in index.documents():
        meta = index.metadata(number)
        lengths[(meta["path"], meta["linenum"])] = len(text)
    segments = answer(local_server, {"index": "wiki", "query_type": "find", "query": "the"})[1]["segment_by_shard"]
    for s, (lo, hi) in enumerate(segments):
        if hi > lo:
            for server in (ray_server, local_server):
                # Windows count bytes: the first of these that cuts no character (see audit.corpora.mini).
                asks = ({"index": "wiki", "query_type": "get_doc_by_rank", "query": "the" + " " * pad, "s": s, "rank": lo, "max_ctx_len": 1000 - c} for pad in range(4) for c in range(4))
                shown = next(body for ask in asks if "error" not in (body := answer(server, ask, "mini/")[1]))
                meta = json.loads(shown["metadata"])
                assert shown["doc_len"] == lengths[(meta["path"], meta["linenum"])], s
                assert "the" in shown["text"]


def test_search_docs_picks_as_the_engine_does(local_server: Served, ray_server: Served):
    """The engine picks `maxnum` occurrences at random, with replacement; so do the actors.
    Either way: every pick is a real occurrence, numbered as its rank in shard order, and
    shown exactly as get_doc_by_rank shows that rank."""
    for text in ("the", "の", "नई दिल्ली", ABSENT):
        find = answer(local_server, {"index": "wiki", "query_type": "find", "query": text})[1]
        counts = [hi - lo for lo, hi in find["segment_by_shard"]]
        for maxnum in (1, 4, 10):
            for server in (local_server, ray_server):
                payload = {"index": "wiki", "query_type": "search_docs", "query": text, "maxnum": maxnum, "max_disp_len": 80}
                status, body = answer(server, payload)
                assert status == 200 and body["cnt"] == find["cnt"] and body["approx"] is False
                if not find["cnt"]:
                    assert body["idxs"] == body["documents"] == [] and body["message"] == "0 occurrences found"
                    continue
                assert len(body["idxs"]) == len(body["documents"]) == maxnum
                assert body["message"] == f"{find['cnt']} occurrences found. Displaying the documents of occurrences #{body['idxs']}"
                for idx, document in zip(body["idxs"], body["documents"], strict=True):
                    assert 0 <= idx < find["cnt"]
                    s = next(s for s in range(len(counts)) if idx < sum(counts[: s + 1]))
                    rank = find["segment_by_shard"][s][0] + idx - sum(counts[:s])
                    shown = answer(local_server, {"index": "wiki", "query_type": "get_doc_by_rank", "query": text, "s": s, "rank": rank, "max_disp_len": 80})[1]
                    # A get_doc_by_rank answer's token_ids are the query's; its spans hold the document's.
                    assert {key: value for key, value in document.items() if key != "token_ids"} == {key: shown[key] for key in document if key != "token_ids"}, (text, idx)
                    assert any(label == "0" for _, label in document["spans"])


def test_cnf_queries_get_a_clear_400(local_server: Served, ray_server: Served):
    cnf = "the AND of"
    for query_type in ("count", "find", "search_docs"):
        status, body = answer(ray_server, {"index": "wiki", "query_type": query_type, "query": cnf})
        assert status == 400 and body["error"].startswith(f"{query_type} with a CNF (AND/OR) query is not served from a distributed index")
        assert answer(local_server, {"index": "wiki", "query_type": query_type, "query": cnf})[0] == 200
    status, body = answer(ray_server, {"index": "wiki", "query_type": "find_cnf", "query": "the"})
    assert status == 400 and "find_cnf with a CNF (AND/OR) query is not served from a distributed index" in body["error"]
    # Types that refuse CNF anyway, and documents a CNF query only labels, answer as locally.
    for payload in (
        {"index": "wiki", "query_type": "prob", "query": cnf},
        {"index": "wiki", "query_type": "get_doc_by_rank", "query": cnf, "s": 0, "rank": 5, "max_disp_len": 300},
        {"index": "wiki", "query_type": "get_doc_by_ptr", "query": "the OR a AND of", "s": 2, "ptr": 100, "max_disp_len": 300},
    ):
        assert answer(ray_server, payload) == answer(local_server, payload), payload


def test_health_and_listing_name_the_actors(sharded: Path, local_server: Served, ray_server: Served, ray_cluster):
    health = requests.get(ray_server.url + "health", timeout=10).json()
    assert health["served_by"] == {"wiki": f"4 Ray actors at {ray_cluster.client}"}
    assert requests.get(local_server.url + "health", timeout=10).json()["served_by"] == {"wiki": "infini-gram's engine in the server process"}
    (mine,) = requests.get(ray_server.url + "indexes", timeout=10).json()
    (theirs,) = requests.get(local_server.url + "indexes", timeout=10).json()
    assert mine.pop("served_by") != theirs.pop("served_by") and mine == theirs


def test_the_api_client_sees_the_same_corpus(sharded: Path, local_server: Served, ray_server: Served):
    """The tool's own API backend against either server: the same counts, longest matches,
    occurrences and provenance."""

    def corpus(server: Served) -> ApiCorpus:
        return ApiCorpus(InfiniGramClient(ClientSettings(url=server.url, index="wiki")), "wiki", ApiOptions())

    texts = [text.decode("utf-8", "ignore") for _, text in LocalIndex(sharded).documents()]
    local, spread = corpus(local_server), corpus(ray_server)
    for text in ["the", "の", ABSENT, texts[3][10:70], "zz " + texts[500][:200], texts[-2][:30]]:
        assert spread.count(text) == local.count(text)
        assert spread.match_lengths(text).lengths == local.match_lengths(text).lengths
        total, found = spread.occurrences(text, 5)
        expected_total, expected = local.occurrences(text, 5)
        assert total == expected_total and [(o.document, o.offset) for o in found] == [(o.document, o.offset) for o in expected]
        assert [spread.document_hit(o, 8, 30) for o in found] == [local.document_hit(o, 8, 30) for o in expected]


def run_job(server: Served, bench: Path, tmp_path: Path, name: str) -> list[dict]:
    submitted = requests.post(server.url + "jobs", params={"index": "wiki", "filename": bench.name}, data=bench.read_bytes(), timeout=30)
    assert submitted.status_code == 202, submitted.text
    job = wait_for(server.url, submitted.json(), seconds=300)
    assert job["status"] == "done", job
    out = tmp_path / f"{name}.audit.jsonl"
    out.write_bytes(requests.get(server.url + f"jobs/{job['id']}/result", timeout=30).content)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_a_job_on_ray_equals_the_local_one(local_server: Served, ray_server: Served, ray_cluster, tmp_path: Path):
    bench = sample_subset(tmp_path / "bench.csv", sample_ids()[:10], ("en", "ja", "zh", "hi"))
    local = run_job(local_server, bench, tmp_path, "local")
    spread = run_job(ray_server, bench, tmp_path, "ray")
    assert len(spread) == len(local) > 10 and spread[1:] == local[1:]
    assert {key for key in {*spread[0], *local[0]} if spread[0].get(key) != local[0].get(key)} == {"created", "command", "executor", "benchmark"}
    assert spread[0]["executor"] == ray_cluster.client and "executor" not in local[0]
    # Each server keeps the uploaded benchmark in its own jobs directory.
    assert {key for key in spread[0]["benchmark"] if spread[0]["benchmark"][key] != local[0]["benchmark"][key]} == {"path", "absolute_path"}


def shard_actors(ray_cluster) -> list[int]:
    """This cluster's shard actor processes (other Ray clusters may run on the machine)."""
    return ray_cluster.worker_pids("ShardActor")


def test_a_killed_actor_is_survived(sharded: Path, local_server: Served, ray_server: Served, ray_cluster):
    """Every shard actor killed at once: Ray restarts them and retries the calls, and the
    answers are still the local server's."""
    killed = shard_actors(ray_cluster)
    assert killed
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    texts = queries(LocalIndex(sharded))
    for text in texts[:8]:
        for query_type, options in (("count", {}), ("find", {}), ("ntd", {}), ("creativity", {})):
            payload = {"index": "wiki", "query_type": query_type, "query": text or "a", **options}
            assert answer(ray_server, payload) == answer(local_server, payload), payload
    document = {"index": "wiki", "query_type": "get_doc_by_rank", "query": "the", "s": 2, "rank": 3, "max_disp_len": 50}
    assert answer(ray_server, document) == answer(local_server, document)
    assert not set(killed) & set(shard_actors(ray_cluster))


def _restarted(ray_cluster, seen: set[int], count: int, seconds: float = 60) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fresh = [pid for pid in shard_actors(ray_cluster) if pid not in seen]
        if len(fresh) >= count:
            return fresh
        time.sleep(0.1)
    raise AssertionError("no restarted ShardActor appeared")


def test_an_actor_lost_for_good_answers_503(sharded: Path, ray_cluster, tmp_path: Path):
    """An actor killed more often than Ray restarts it: its queries get a 503 saying so (which
    the client retries), never a count from the other shards; /health still answers."""
    before = set(shard_actors(ray_cluster))
    server = start_ray_server(sharded, ray_cluster, tmp_path / "jobs", "--actors", "1")
    try:
        assert requests.get(server.url + "health", timeout=10).json()["served_by"]["wiki"].startswith("1 Ray actors at ")
        (actor,) = _restarted(ray_cluster, before, 1)
        seen = before | {actor}
        for restart in range(4):
            os.kill(actor, signal.SIGKILL)
            if restart < 3:
                (actor,) = _restarted(ray_cluster, seen, 1)
                seen.add(actor)
        response = requests.post(server.url, json={"index": "wiki", "query_type": "count", "query": "the"}, timeout=60)
        assert response.status_code == 503 and response.headers["Retry-After"] == "1"
        body = response.json()
        assert set(body) == {"error"} and body["error"].startswith("index wiki: a shard actor did not answer after Ray's restarts and retries")
        assert requests.get(server.url + "health", timeout=10).ok
    finally:
        server.stop()


class Failed(NamedTuple):
    """How the server failed: its last line of stderr (the one-line error) and the whole of it,
    shown when the line is not the one expected."""

    line: str
    stderr: str


def serve_fails(*args: str, env: dict[str, str] | None = None) -> Failed:
    """The server's one-line error; it must exit 2 without a traceback."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "audit.server", "--port", "0", *args],
            capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir(), env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as error:
        told = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else error.stderr
        pytest.fail(f"audit.server {' '.join(args)} did not exit within 120 s; its stderr:\n{told}")
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stderr.strip(), result.stderr
    return Failed(result.stderr.strip().splitlines()[-1], result.stderr)


def test_startup_errors_are_one_clear_line(sharded: Path, ray_cluster, tmp_path: Path):
    import socket

    # The port stays bound (and not listening) while the server tries it, so no process started
    # meanwhile (the Ray cluster's own) can take it and answer.
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        unreachable = serve_fails("--index", f"wiki={sharded}", "--executor", f"ray://127.0.0.1:{port}")
    assert unreachable.line.startswith(
        f"audit serve: --executor ray://127.0.0.1:{port}: cannot reach the Ray cluster at ray://127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}"
    ), unreachable.stderr
    spark = serve_fails("--index", f"wiki={sharded}", "--executor", "spark")
    assert spark.line == "audit serve: --executor spark: expected local, ray, or ray://HOST:PORT", spark.stderr
    actors = serve_fails("--index", f"wiki={sharded}", "--actors", "2")
    assert actors.line == "audit serve: --actors applies to a Ray executor (--executor ray or ray://HOST:PORT)", actors.stderr
    # Ray missing from the environment: a package named ray that cannot be imported.
    (tmp_path / "noray" / "ray").mkdir(parents=True)
    (tmp_path / "noray" / "ray" / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    missing = serve_fails("--index", f"wiki={sharded}", "--executor", "ray", env={"PYTHONPATH": str(tmp_path / "noray")})
    assert missing.line == 'audit serve: --executor ray: the Ray executor needs Ray: pip install "corpus-audit[ray]"', missing.stderr
    tokens = build_token_index(TOKEN_DOCS, OLMO2, tmp_path / "olmo", width=4)
    refused = serve_fails("--index", f"olmo={tokens}", "--tokenizer", f"olmo={OLMO2}", "--executor", ray_cluster.client)
    assert refused.line == (
        f"audit serve: --index olmo: cannot open {tokens}: a tokenized index is not served by shard actors (--executor {ray_cluster.client}), "
        "only a byte-level one; serve olmo with --executor local"
    ), refused.stderr
