"""`audit serve` as a real process on 127.0.0.1: the infini-gram protocol over real indexes
(byte-level, OLMo-2-tokenized u32 and OLMo-1-tokenized u16), limits, structured errors, audit jobs.  The public API's
documented examples need the Llama-2 tokenizer, which may not be committed: they are checked
by bench/bench_llama_protocol.py against ../shared."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pydivsufsort
import pytest
import requests
from conftest import checked_records

from audit.auditfile import read_audit
from audit.corpora.local import LocalIndex
from audit.index.format import pointer_width
from audit.server.messages import Limits
from audit.server.run import ServeError, load_indexes
from audit.timestamps import utc_timestamp

if TYPE_CHECKING:
    from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
# OLMo-1's and OLMo-2's tokenizers (Apache-2.0, committed: see tests/fixtures/SOURCES.md).
# OLMo-1's 50,280 ids fit a u16 index; OLMo-2's 100,278 need u32, as the public API's `_olmo2`
# indexes have them.
OLMO = ROOT / "tests" / "fixtures" / "tokenizers" / "olmo1" / "tokenizer.json"
OLMO2 = ROOT / "tests" / "fixtures" / "tokenizers" / "olmo2" / "tokenizer.json"


class Served:
    """A running `python -m audit.server` and its base URL."""

    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process, self.url = process, url

    def post(self, payload: object, **kwargs) -> requests.Response:
        return requests.post(self.url, json=payload, timeout=30, **kwargs)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(*args: str, env: dict[str, str] | None = None) -> Served:
    """Start the server on a free port of 127.0.0.1 and wait for its announced address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "audit.server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=tempfile.gettempdir(),
    )
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"server did not start: {line}{process.stderr.read()}")
    url = line.split("listening on ", 1)[1].strip() + "/"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "health", timeout=1).ok:
                return Served(process, url)
        except requests.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("server did not answer /health")


@cache
def load_tokenizer(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path / "tokenizer.json" if path.is_dir() else path))


def token_ids(text: str, tokenizer: Path = OLMO2) -> list[int]:
    """The ids the server's tokenizer gives `text` (no special tokens)."""
    return load_tokenizer(tokenizer).encode(text, add_special_tokens=False).ids


def build_token_index(docs: list[str], tokenizer: Path, out: Path, width: int = 2) -> Path:
    """An index in infini-gram's v4 format with `width`-byte token ids (2: u16, 4: u32),
    tokenized with a Hugging Face tokenizer, as `python -m infini_gram.indexing --token_dtype`
    writes it (which needs the model hub to load one): little-endian ids, each document after
    a separator of `width` 0xff bytes, the suffix array over token starts only."""
    out.mkdir(parents=True)
    dtype = {2: "<u2", 4: "<u4"}[width]
    data, offsets, metadata, metaoff = bytearray(), [], bytearray(), []
    for number, text in enumerate(docs):
        ids = token_ids(text, tokenizer)
        assert max(ids) < 256 ** width - 1, f"{tokenizer} ids do not fit {width} bytes"
        offsets.append(len(data))
        data += b"\xff" * width + np.asarray(ids, dtype=dtype).tobytes()
        metaoff.append(len(metadata))
        metadata += (json.dumps({"path": "docs.jsonl", "linenum": number, "metadata": {"id": f"doc-{number}"}}) + "\n").encode()
    # The engine compares raw bytes, so a byte-level suffix array cut to token starts is its order.
    suffixes = pydivsufsort.divsufsort(np.array(data, dtype=np.uint8))
    suffixes = suffixes[suffixes % width == 0].astype(np.uint64)
    ratio = pointer_width(len(data))
    table = np.zeros((len(suffixes), ratio), dtype=np.uint8)
    for byte in range(ratio):
        table[:, byte] = (suffixes >> np.uint64(8 * byte)) & np.uint64(0xFF)
    (out / "tokenized.0").write_bytes(bytes(data))
    (out / "table.0").write_bytes(table.tobytes())
    (out / "offset.0").write_bytes(np.asarray(offsets, dtype="<u8").tobytes())
    (out / "metadata.0").write_bytes(bytes(metadata))
    (out / "metaoff.0").write_bytes(np.asarray(metaoff, dtype="<u8").tobytes())
    return out


TOKEN_DOCS = [
    "The University of Washington is a public research university in Seattle.",
    "Research in natural language processing and deep learning at the University of Washington.",
    "Most natural language processing uses deep learning; machine learning and artificial intelligence too.",
    "Washington\nis also a state. The University of Washington was founded in 1861.",
    # Ids past u16: " Pike" 69829, " courtyard" 66385, " brisk" 75491 (OLMo-2).
    "Visitors to Pike Place Market, opened in 1907, wander its courtyard on brisk mornings.",
]
# The tokenizers' <|endoftext|>: the id the engine reports a document's end as.
OLMO2_EOS, OLMO1_EOS = 100257, 50279


# OLMo's byte-level BPE marks a word start with a leading space ("Ġ"), and the server prepends one
# to every query (as the public server does for its byte-level BPE tokenizers), so a word inside a
# sentence is queried without it.
NLP, DEEP, AI, ML = "natural language processing", "deep learning", "artificial intelligence", "machine learning"


@pytest.fixture(scope="module")
def olmo_index(tmp_path_factory) -> Path:
    """u32, OLMo-2-tokenized."""
    return build_token_index(TOKEN_DOCS, OLMO2, tmp_path_factory.mktemp("olmo") / "index", width=4)


@pytest.fixture(scope="module")
def olmo1_index(tmp_path_factory) -> Path:
    """u16, OLMo-1-tokenized."""
    return build_token_index(TOKEN_DOCS, OLMO, tmp_path_factory.mktemp("olmo1") / "index", width=2)


@pytest.fixture(scope="module")
def served(wiki_index: Path, olmo_index: Path, olmo1_index: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server(
        "--index", f"wiki={wiki_index}",
        "--index", f"olmo={olmo_index}",
        "--tokenizer", f"olmo={OLMO2}",
        "--index", f"olmo1={olmo1_index}",
        "--tokenizer", f"olmo1={OLMO}",
        "--jobs-dir", str(tmp_path_factory.mktemp("jobs")),
        "--max-body-bytes", "20000",
    )
    yield server
    server.stop()


def test_count_example_round_trips_on_the_token_index(served: Served):
    # The API documentation's Getting Started example, on the OLMo-2 (u32) index.
    response = served.post({"index": "olmo", "query_type": "count", "query": "University of Washington"})
    body = response.json()
    assert response.status_code == 200 and set(body) == {"count", "approx", "latency", "token_ids", "tokens"}
    assert body["token_ids"] == [3907, 315, 6652]
    assert body["tokens"] == ["\u0120University", "\u0120of", "\u0120Washington"]
    assert body["count"] == 3 and body["approx"] is False and body["latency"] >= 0
    # Ids past u16 are stored and matched whole, not cut to their low 16 bits.
    pike = served.post({"index": "olmo", "query_type": "count", "query": "Pike Place Market"}).json()
    assert pike["token_ids"][0] == 69829 and pike["count"] == 1


def test_a_u16_index_with_the_olmo1_tokenizer(served: Served):
    body = served.post({"index": "olmo1", "query_type": "count", "query": "University of Washington"}).json()
    assert body["token_ids"] == [2499, 273, 5041] and body["count"] == 3
    assert body["tokens"] == ["\u0120University", "\u0120of", "\u0120Washington"]
    ntd = served.post({"index": "olmo1", "query_type": "ntd", "query": "University of"}).json()
    assert ntd["prompt_cnt"] == 3 and {r["token"] for r in ntd["result_by_token_id"].values()} == {"\u0120Washington"}
    end = served.post({"index": "olmo1", "query_type": "ntd", "query": "in Seattle."}).json()
    assert end["prompt_cnt"] == 1 and {int(k): r["token"] for k, r in end["result_by_token_id"].items()} == {OLMO1_EOS: "<|endoftext|>"}
    search = served.post({"index": "olmo1", "query_type": "search_docs", "query": "deep learning", "maxnum": 2, "max_disp_len": 40}).json()
    assert search["cnt"] == 2 and all(any(label == "0" for _, label in d["spans"]) for d in search["documents"])


def test_a_documents_end_is_the_tokenizers_end_of_text(served: Served):
    """The engine reports a continuation at a document's end (or the index's) as the eos id:
    OLMo-2's <|endoftext|>, never a real token such as id 2."""
    end = served.post({"index": "olmo", "query_type": "ntd", "query": "in Seattle."}).json()
    assert end["prompt_cnt"] == 1 and {int(k): r["token"] for k, r in end["result_by_token_id"].items()} == {OLMO2_EOS: "<|endoftext|>"}
    last = served.post({"index": "olmo", "query_type": "ntd", "query": "brisk mornings."}).json()
    assert {int(k) for k in last["result_by_token_id"]} == {OLMO2_EOS}


def test_a_token_index_of_the_wrong_width_is_refused(olmo_index: Path, olmo1_index: Path):
    """A u16 index served with OLMo-2's tokenizer (u32), and the reverse: a clear message naming
    the index and both widths, exit status 2, no traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "audit.server", "--index", f"old={olmo1_index}", "--tokenizer", f"old={OLMO2}", "--port", "0"],
        check=False, capture_output=True, text=True, cwd=tempfile.gettempdir(), timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--index old: cannot open {olmo1_index}: {olmo1_index} holds u16 tokens (2 bytes each), not u32" in result.stderr
    assert "100,278 ids" in result.stderr
    with pytest.raises(ServeError, match=r"--index new: .* holds u32 tokens \(4 bytes each\), not u16 \(read as u16: its tokenizer .* has 50,280 ids\)"):
        load_indexes([f"new={olmo_index}"], {"new": OLMO}, None, Limits())


def test_query_and_query_ids_are_equivalent(served: Served):
    nlp, deep, ai, ml = (token_ids(" " + phrase) for phrase in (NLP, DEEP, AI, ML))
    by_ids = served.post({"index": "olmo", "query_type": "count", "query_ids": nlp}).json()
    by_text = served.post({"index": "olmo", "query_type": "count", "query": NLP}).json()
    assert by_text["token_ids"] == nlp and by_ids["count"] == by_text["count"] == 2
    cnf_text = served.post({"index": "olmo", "query_type": "count", "query": " AND ".join([NLP, DEEP])}).json()
    cnf_ids = served.post({"index": "olmo", "query_type": "count", "query_ids": [[nlp], [deep]]}).json()
    assert cnf_text["token_ids"] == [[nlp], [deep]]
    assert cnf_text["count"] == cnf_ids["count"] >= 1
    either = served.post({"index": "olmo", "query_type": "count", "query": " AND ".join([" OR ".join([NLP, AI]), " OR ".join([DEEP, ML])])}).json()
    assert either["token_ids"] == [[nlp, ai], [deep, ml]]


def test_counts_equal_the_local_backend(served: Served, wiki_index: Path, wiki_docs):
    local = LocalIndex(wiki_index)
    texts = ["the", "University", "東京", "नई दिल्ली", "이 문서는", "zzqxj", wiki_docs["ja"][3]["text"][:40], wiki_docs["he"][0]["text"][:30]]
    for text in texts:
        body = served.post({"index": "wiki", "query_type": "count", "query": text}).json()
        assert body["count"] == local.count(text), text
        assert body["token_ids"] == list(text.encode("utf-8"))


def test_find_then_get_doc_by_rank_shows_the_match(served: Served, wiki_index: Path):
    local = LocalIndex(wiki_index)
    found = served.post({"index": "wiki", "query_type": "find", "query": "University"}).json()
    assert found["cnt"] == local.count("University") and len(found["segment_by_shard"]) == local.info.details["shards"]
    lo, hi = found["segment_by_shard"][0]
    assert hi - lo == found["cnt"]
    doc = served.post({"index": "wiki", "query_type": "get_doc_by_rank", "query": "University", "s": 0, "rank": lo, "max_disp_len": 200}).json()
    assert {"doc_ix", "doc_len", "disp_len", "needle_offset", "metadata", "spans"} <= set(doc)
    matched = [text for text, label in doc["spans"] if label == "0"]
    assert matched and all(text == "University" for text in matched)
    assert json.loads(doc["metadata"])["path"].endswith(".jsonl")
    assert doc["disp_len"] <= 200


def test_cnf_find_then_get_doc_by_ptr(served: Served):
    query = " AND ".join(["University", "Washington"])
    found = served.post({"index": "olmo", "query_type": "find_cnf", "query": query}).json()
    assert found["cnt"] >= 1 and found["approx"] is False
    shard = next(s for s, ptrs in enumerate(found["ptrs_by_shard"]) if ptrs)
    ptr = found["ptrs_by_shard"][shard][0]
    doc = served.post({"index": "olmo", "query_type": "get_doc_by_ptr", "query": query, "s": shard, "ptr": ptr, "max_disp_len": 50}).json()
    labels = {label for _, label in doc["spans"] if label is not None}
    assert labels == {"0", "1"}
    text = "".join(t for t, _ in doc["spans"])
    assert "University" in text and "Washington" in text


def test_search_docs_prob_and_ntd(served: Served):
    search = served.post({"index": "olmo", "query_type": "search_docs", "query": DEEP, "maxnum": 2, "max_disp_len": 40}).json()
    assert search["cnt"] == 2 and len(search["documents"]) == 2 and search["message"].startswith("2 occurrences found")
    assert all(any(label == "0" for _, label in d["spans"]) for d in search["documents"])
    prob = served.post({"index": "olmo", "query_type": "prob", "query": NLP}).json()
    assert prob["prompt_cnt"] == 2 and prob["cont_cnt"] == 2 and prob["prob"] == 1.0
    ntd = served.post({"index": "olmo", "query_type": "ntd", "query": "University of"}).json()
    assert ntd["prompt_cnt"] == 3 and {r["token"] for r in ntd["result_by_token_id"].values()} == {"\u0120Washington"}
    infgram = served.post({"index": "olmo", "query_type": "infgram_prob", "query": "I love natural language processing"}).json()
    assert infgram["suffix_len"] == 2 and infgram["longest_suffix"].strip() == "natural language"


def test_creativity_gives_the_longest_match_at_every_position(served: Served, wiki_index: Path, wiki_docs):
    local = LocalIndex(wiki_index)
    text = "zz " + wiki_docs["en"][5]["text"][:120]
    body = served.post({"index": "wiki", "query_type": "creativity", "query": text}).json()
    encoded = text.encode("utf-8")
    assert [r - i for i, r in enumerate(body["rs"])] == local.longest_match_bytes(encoded).tolist()


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        ({"index": "wiki", "query_type": "count", "query": "x" * 1001}, 200, "Please limit your input to <= 1000 characters!"),
        ({"index": "wiki", "query_type": "count", "query": "é" * 300}, 200, "Please limit your input to <= 500 tokens!"),
        ({"index": "nope", "query_type": "count", "query": "x"}, 400, "Invalid index: nope"),
        ({"index": "wiki", "query_type": "telepathy", "query": "x"}, 400, "Invalid query_type: telepathy"),
        ({"index": "wiki", "query_type": "count"}, 400, "Exactly one of query and query_ids must be present!"),
        ({"index": "wiki", "query_type": "count", "query": "x", "query_ids": [1]}, 400, "Exactly one of query and query_ids must be present!"),
        ({"query_type": "count", "query": "x"}, 400, "Missing required field: 'index'"),
        ({"index": "wiki", "query_type": "count", "query": "x", "colour": "blue"}, 400, "colour: Extra inputs are not permitted"),
        ({"index": "wiki", "query_type": "count", "query_ids": [300]}, 200, "Some item(s) in your query_ids are out-of-range!"),
        ({"index": "wiki", "query_type": "search_docs", "query": "the", "maxnum": 11}, 200, "maxnum must be an integer in [1, 10]!"),
        ({"index": "wiki", "query_type": "prob", "query": ""}, 200, "Please provide a non-empty query!"),
        ({"index": "olmo", "query_type": "creativity", "query": "x"}, 200, "creativity is served for byte-level indexes only"),
        ([1, 2], 400, "request body must be a JSON object"),
    ],
)
def test_errors_are_structured_as_the_public_api_answers_them(served: Served, payload, status, message):
    response = served.post(payload)
    assert response.status_code == status and response.json() == {"error": message}


def test_malformed_oversize_and_unknown_requests_get_json_errors(served: Served):
    response = requests.post(served.url, data=b"{not json", headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code == 400 and response.json()["error"].startswith("request body is not valid JSON")
    response = requests.post(served.url, json={"index": "wiki", "query_type": "count", "query": "x" * 30000}, timeout=10)
    assert response.status_code == 413 and "over the limit of 20000 bytes" in response.json()["error"]
    response = requests.get(served.url + "nowhere", timeout=10)
    assert response.status_code == 404 and response.json() == {"error": "Not Found"}
    response = requests.get(served.url + "mini/", timeout=10)
    assert response.status_code == 405 and "error" in response.json()


def test_health_and_index_listing(served: Served, wiki_index: Path):
    health = requests.get(served.url + "health", timeout=10).json()
    assert health["status"] == "ok" and health["indexes"] == ["olmo", "olmo1", "wiki"] and health["jobs"] is True
    listing = {i["name"]: i for i in requests.get(served.url + "indexes", timeout=10).json()}
    assert listing["wiki"]["documents"] == LocalIndex(wiki_index).info.documents
    assert listing["wiki"]["tokenizer"] == "bytes (UTF-8)" and listing["olmo"]["documents"] == len(TOKEN_DOCS)
    assert {name: i["token_dtype"] for name, i in listing.items()} == {"wiki": "u8", "olmo": "u32", "olmo1": "u16"}


def test_requests_over_the_concurrency_limit_get_503(wiki_index: Path, tmp_path: Path):
    """A download its client does not read holds the only place (a body that never comes does
    not: bodies are read before a request takes a place)."""
    held = tmp_path / "feedfacefeedface"
    held.mkdir()
    status = {"id": held.name, "index": "wiki", "format": None, "langs": None, "status": "done", "finished": utc_timestamp()}
    (held / "job.json").write_text(json.dumps(status), encoding="utf-8")
    with (held / "audit.jsonl").open("wb") as sparse:
        sparse.truncate(256 << 20)
    server = start_server("--index", f"wiki={wiki_index}", "--max-concurrent", "1", "--queue-seconds", "0.2", "--jobs-dir", str(tmp_path))
    try:
        host, port = server.url.split("//")[1].rstrip("/").split(":")
        with socket.socket() as stalled:
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect((host, int(port)))
            stalled.sendall(f"GET /jobs/{held.name}/result HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            deadline = time.monotonic() + 30
            while (busy := server.post({"index": "wiki", "query_type": "count", "query": "the"})).status_code == 200:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert busy.status_code == 503 and busy.headers["Retry-After"] == "1"
            assert busy.json()["error"].startswith("server busy")
            assert requests.get(server.url + "health", timeout=10).ok
        deadline = time.monotonic() + 10
        while server.post({"index": "wiki", "query_type": "count", "query": "the"}).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        server.stop()


def wait_for(url: str, job: dict, seconds: float = 90) -> dict:
    deadline = time.monotonic() + seconds
    while job["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
        job = requests.get(url + f"jobs/{job['id']}", timeout=10).json()
    return job


def test_audit_job_runs_off_the_request_path(served: Served, wiki_index: Path, tmp_path: Path):
    from functools import partial

    from audit.policyfile import build_config, load_policy
    from audit.readers import load_benchmark
    from audit.signals import ngram

    submitted = requests.post(served.url + "jobs", params={"index": "wiki", "langs": "en,ja", "filename": SAMPLE.name}, data=SAMPLE.read_bytes(), timeout=30)
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()
    assert job["status"] in ("queued", "running") and submitted.headers["Location"] == f"/jobs/{job['id']}"
    job = wait_for(served.url, job, seconds=60)
    assert job["status"] == "done" and job["done"] == job["total"] == 39 * 2
    result = requests.get(served.url + f"jobs/{job['id']}/result", timeout=30)
    assert result.status_code == 200
    audit_path = tmp_path / f"{job['id']}.audit.jsonl"
    audit_path.write_bytes(result.content)
    audit = read_audit(audit_path)
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    direct = checked_records(load_benchmark(SAMPLE).items, [partial(ngram.run, LocalIndex(wiki_index, name="wiki"), config=config)], policy, langs=["en", "ja"])
    assert [(r["item_id"], r["lang"], r["exposure"]) for r in audit.records] == [(r["item_id"], r["lang"], r["exposure"]) for r in direct]
    assert audit.manifest["corpora"][0]["name"] == "wiki" and audit.manifest["summary"]["languages"]["en"]["total"] == 39


def test_bad_jobs_are_refused_or_fail_readably(served: Served):
    unknown = requests.post(served.url + "jobs", params={"index": "nope"}, data=b"x", timeout=10)
    assert unknown.status_code == 404 and "unknown index 'nope'" in unknown.json()["error"]
    empty = requests.post(served.url + "jobs", params={"index": "wiki"}, data=b"", timeout=10)
    assert empty.status_code == 400 and "empty" in empty.json()["error"]
    bad_lang = requests.post(served.url + "jobs", params={"index": "wiki", "langs": "jp"}, data=b"x", timeout=10)
    assert bad_lang.status_code == 400 and "did you mean 'ja'" in bad_lang.json()["error"]
    garbage = requests.post(served.url + "jobs", params={"index": "wiki", "filename": "b.jsonl"}, data=b"not a benchmark\n", timeout=10).json()
    garbage = wait_for(served.url, garbage, seconds=20)
    assert garbage["status"] == "failed" and garbage["error"]
    early = requests.get(served.url + f"jobs/{garbage['id']}/result", timeout=10)
    assert early.status_code == 409 and "failed" in early.json()["error"]
    assert requests.get(served.url + "jobs/0000", timeout=10).status_code == 400
    assert requests.get(served.url + "jobs/0000000000000000", timeout=10).status_code == 404


def test_a_job_reads_a_benchmark_through_a_column_mapping(served: Served, tmp_path: Path):
    from conftest import FIXTURES

    rows = [json.loads(line) for line in (FIXTURES / "xcopa" / "data" / "it" / "test.it.jsonl").read_text(encoding="utf-8").splitlines()]
    renamed = [{"n": row["idx"], "frase": row["premise"], "scelta1": row["choice1"], "scelta2": row["choice2"], "giusta": row["label"]} for row in rows]
    body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in renamed).encode()
    mapping = "id=n,question=frase,options=scelta1|scelta2,answer_index=giusta"
    params = {"index": "wiki", "filename": "copa.jsonl", "map": mapping, "source_lang": "ita"}
    job = wait_for(served.url, requests.post(served.url + "jobs", params=params, data=body, timeout=30).json())
    assert job["status"] == "done" and job["total"] == len(rows) and job["source_lang"] == "it", job
    audit_path = tmp_path / "copa.audit.jsonl"
    audit_path.write_bytes(requests.get(served.url + f"jobs/{job['id']}/result", timeout=30).content)
    benchmark = read_audit(audit_path).manifest["benchmark"]
    assert benchmark["kinds"] == {"multiple-choice": len(rows)} and benchmark["source_lang"] == "it"
    assert benchmark["mapping"]["options"] == ["scelta1", "scelta2"]

    bad = requests.post(served.url + "jobs", params={**params, "map": "question"}, data=body, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"] == "map: 'question' is not key=column"
    path = requests.post(served.url + "jobs", params={**params, "map": str(tmp_path / "m.toml")}, data=body, timeout=10)
    assert path.status_code == 400 and "is not key=column" in path.json()["error"]
    lang = requests.post(served.url + "jobs", params={**params, "source_lang": "jp"}, data=body, timeout=10)
    assert lang.status_code == 400 and "did you mean 'ja'" in lang.json()["error"]


def test_a_job_runs_under_an_uploaded_policy(served: Served, wiki_index: Path, tmp_path: Path):
    from functools import partial

    from audit.policyfile import build_config, load_policy
    from audit.readers import load_benchmark
    from audit.signals import ngram

    text = 'name = "lenient"\n[rules.ngram.context]\ncoverage = 0.05\nlongest_match_chars = false\n'
    uploaded = requests.post(served.url + "policies", data=text.encode(), timeout=10)
    assert uploaded.status_code == 201, uploaded.text
    digest = uploaded.json()["policy"]
    assert uploaded.json()["settings"]["rules"]["ngram"]["context"] == {"coverage": 0.05, "longest_match_chars": False}
    job = requests.post(served.url + "jobs", params={"index": "wiki", "langs": "en", "policy": digest}, data=SAMPLE.read_bytes(), timeout=30).json()
    assert job["policy"] == digest
    job = wait_for(served.url, job)
    assert job["status"] == "done", job
    path = tmp_path / "lenient.audit.jsonl"
    path.write_bytes(requests.get(served.url + f"jobs/{job['id']}/result", timeout=30).content)
    audit = read_audit(path)
    assert audit.manifest["policy"]["name"] == "lenient"
    (tmp_path / "lenient.toml").write_text(text, encoding="utf-8")
    policy = load_policy(tmp_path / "lenient.toml")
    assert policy.digest == digest
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "lenient")
    direct = checked_records(load_benchmark(SAMPLE).items, [partial(ngram.run, LocalIndex(wiki_index, name="wiki"), config=config)], policy, langs=["en"])
    assert [(r["item_id"], r["exposure"], r["decided_by"]) for r in audit.records] == [(r["item_id"], r["exposure"], r["decided_by"]) for r in direct]

    bad = requests.post(served.url + "policies", data=b"[rules.ngram.context]\ncoverage = 'high'\n", timeout=10)
    assert bad.status_code == 400 and "rules.ngram.context.coverage" in bad.json()["error"]
    unknown = requests.post(served.url + "jobs", params={"index": "wiki", "policy": "0" * 16}, data=b"x", timeout=10)
    assert unknown.status_code == 404 and "POST /policies" in unknown.json()["error"]


def test_a_job_on_a_tokenized_index_runs_through_the_protocol(served: Served, tmp_path: Path):
    """An OLMo-tokenized index has no byte-level view, so its jobs query the server's own
    protocol, as the API backend queries the public indexes: a question copied from the index
    is seen at token boundaries, one it lacks is not, and the figures equal the client's."""
    from functools import partial

    from audit.corpora.api import ApiCorpus, ApiOptions
    from audit.corpora.client import ClientSettings, InfiniGramClient
    from audit.policyfile import build_config, load_policy
    from audit.readers import load_benchmark
    from audit.signals import ngram

    rows = [
        {"item_id": "uw", "source_lang": "en", "variants": {"en": {"question": "The University of Washington is a public research university in Seattle.", "answer": "Seattle"}}},
        {"item_id": "none", "source_lang": "en", "variants": {"en": {"question": "Which river flows through the old town of Regensburg in Bavaria?", "answer": "Danube"}}},
    ]
    benchmark = tmp_path / "tiny.jsonl"
    benchmark.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    job = requests.post(served.url + "jobs", params={"index": "olmo", "filename": benchmark.name}, data=benchmark.read_bytes(), timeout=30).json()
    job = wait_for(served.url, job)
    assert job["status"] == "done", job
    path = tmp_path / "olmo.audit.jsonl"
    path.write_bytes(requests.get(served.url + f"jobs/{job['id']}/result", timeout=30).content)
    audit = read_audit(path)
    assert [(r["item_id"], r["exposure"]) for r in audit.records] == [("uw", "seen"), ("none", "unseen")]
    assert audit.manifest["corpora"][0]["backend"] == "infini-gram-api" and audit.manifest["corpora"][0]["details"]["tokenization"] == "tokens"
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    client = ApiCorpus(InfiniGramClient(ClientSettings(url=served.url, index="olmo")), "olmo", ApiOptions(longest_match="count"))
    rules = {name: table.for_source("olmo") for name, table in policy.rules["ngram"].items()}
    direct = checked_records(load_benchmark(benchmark).items, [partial(ngram.run, client, config=config, rules=rules)], policy)
    assert [r["evidence"] for r in audit.records] == [r["evidence"] for r in direct]


def test_jobs_survive_a_server_restart(wiki_index: Path, tmp_path: Path):
    """A finished job is still answered by the next server on the same jobs directory, and a
    job the last server left running (as a killed server leaves it) is run again to the end."""
    jobs_dir = tmp_path / "jobs"
    first = start_server("--index", f"wiki={wiki_index}", "--jobs-dir", str(jobs_dir))
    try:
        done = wait_for(first.url, requests.post(first.url + "jobs", params={"index": "wiki", "langs": "ja"}, data=SAMPLE.read_bytes(), timeout=30).json())
        assert done["status"] == "done"
        result = requests.get(first.url + f"jobs/{done['id']}/result", timeout=30).content
    finally:
        first.process.kill()
        first.process.wait()
    for job_id, index in (("feedfacefeedface", "wiki"), ("deadbeefdeadbeef", "gone")):
        directory = jobs_dir / job_id
        directory.mkdir()
        (directory / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
        status = {"id": job_id, "index": index, "format": None, "langs": ["ja"], "benchmark": SAMPLE.name, "status": "running", "done": 5, "total": 39}
        (directory / "job.json").write_text(json.dumps(status), encoding="utf-8")
    second = start_server("--index", f"wiki={wiki_index}", "--jobs-dir", str(jobs_dir))
    try:
        again = requests.get(second.url + f"jobs/{done['id']}", timeout=10).json()
        assert again == done
        assert requests.get(second.url + f"jobs/{done['id']}/result", timeout=30).content == result
        resumed = wait_for(second.url, requests.get(second.url + "jobs/feedfacefeedface", timeout=10).json())
        assert resumed["status"] == "done" and resumed["restarts"] == 1 and resumed["done"] == resumed["total"] == 39
        rerun = requests.get(second.url + "jobs/feedfacefeedface/result", timeout=30).content
        assert [r["exposure"] for r in map(json.loads, rerun.splitlines()[1:])] == [r["exposure"] for r in map(json.loads, result.splitlines()[1:])]
        orphan = requests.get(second.url + "jobs/deadbeefdeadbeef", timeout=10).json()
        assert orphan["status"] == "failed" and "without index 'gone'" in orphan["error"]
    finally:
        second.stop()


def test_refuses_to_start_on_a_bad_index(tmp_path: Path):
    result = subprocess.run([sys.executable, "-m", "audit.server", "--index", f"x={tmp_path}", "--port", "0"], check=False, capture_output=True, text=True, cwd=tempfile.gettempdir(), timeout=60)
    assert result.returncode == 2 and "cannot open" in result.stderr


def test_hostile_upload_names_are_refused_and_leave_no_job_behind(wiki_index: Path, tmp_path: Path):
    jobs_dir = tmp_path / "jobs"
    server = start_server("--index", f"wiki={wiki_index}", "--jobs-dir", str(jobs_dir))
    try:
        for name in ("..", ".", "../escape.jsonl", "/etc/passwd", "a/b.jsonl", ".hidden", "x" * 300):
            response = requests.post(server.url + "jobs", params={"index": "wiki", "filename": name}, data=b'{"item_id": "1"}\n', timeout=10)
            assert response.status_code == 400, (name, response.text)
            assert "plain file name" in response.json()["error"]
        assert [p.name for p in jobs_dir.iterdir()] == ["policies"]
        assert not (tmp_path / "escape.jsonl").exists()
    finally:
        server.stop()
