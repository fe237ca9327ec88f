"""`audit serve`'s limits against hostile clients, as a real uvicorn process on 127.0.0.1:
decompression bombs, oversize bodies, slow and vanishing clients, the bodies held at once, and
job retention and DELETE."""
from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from hostile import TALLY
from hostile_http import BENCH, SAMPLE, Server, counted, gzip_bomb, hold_connections, peak_memory, query, raw, start, wait_for, zstd_bomb


@pytest.fixture(scope="module")
def server(wiki_index: Path, tmp_path_factory) -> Iterator[Server]:
    served = start(
        tmp_path_factory.mktemp("limits"), "--index", f"wiki={wiki_index}", "--body-timeout", "3", "--header-timeout", "3",
        "--max-inflated-bytes", str(64 << 20),
    )
    yield served
    served.stop()
    log = served.log.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log, log


# Decompression and size ---------------------------------------------------------------------

def test_a_gzip_bomb_is_refused_by_its_inflated_size(server: Server):
    bomb = gzip_bomb(1 << 30)
    assert len(bomb) < 2 << 20
    response = requests.post(server.url + "jobs", params={"index": "wiki", "filename": "b.jsonl.gz"}, data=bomb, timeout=120)
    counted(response, 413, f"inflates to over {64 << 20} bytes, the limit", server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]
    assert peak_memory(server.process) < 768 << 20


def test_a_zstd_bomb_is_refused_by_its_inflated_size(server: Server):
    response = requests.post(server.url + "jobs", params={"index": "wiki", "filename": "b.jsonl.zst"}, data=zstd_bomb(1 << 30), timeout=120)
    counted(response, 413, "Zstandard upload inflates to over", server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]
    assert peak_memory(server.process) < 768 << 20


COMPRESSED = [
    ("gzip-cut-short", lambda: gzip.compress(BENCH * 50)[:-30], 400, "not a whole gzip stream"),
    ("gzip-garbage", lambda: b"\x1f\x8b" + bytes(range(256)), 400, "not a whole gzip stream"),
    ("zstd-garbage", lambda: b"\x28\xb5\x2f\xfd" + bytes(range(256)), 400, "not a whole Zstandard stream"),
]


@pytest.mark.parametrize(("name", "body", "status", "fragment"), COMPRESSED, ids=[case[0] for case in COMPRESSED])
def test_a_broken_compressed_upload_is_refused(server: Server, name: str, body, status: int, fragment: str):
    response = requests.post(server.url + "jobs", params={"index": "wiki", "filename": "b.jsonl.gz"}, data=body(), timeout=30)
    counted(response, status, fragment, server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]


def test_a_compressed_benchmark_is_audited_inflated(server: Server):
    response = requests.post(server.url + "jobs", params={"index": "wiki", "filename": SAMPLE.name, "langs": "en"}, data=SAMPLE.read_bytes(), timeout=30)
    counted(response, 202, '"benchmark":"eclektic_sample.csv"', server)
    job = wait_for(server, response.json())
    assert job["status"] == "done" and job["benchmark"] == "eclektic_sample.csv", job
    assert requests.delete(server.url + f"jobs/{job['id']}", timeout=30).ok


def test_oversize_bodies_are_refused(server: Server):
    declared = f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\nContent-Length: {10 << 20}\r\n\r\n".encode()
    status, answer = raw(server, declared)
    TALLY["cases"] += 1
    assert status == 413 and b"over the limit of 1048576 bytes" in answer
    TALLY["clear_errors"] += 1
    chunks = (b"x" * 65536 for _ in range(40))
    counted(requests.post(server.url, data=chunks, headers={"Content-Type": "application/json"}, timeout=30), 413, "over the limit", server)


# Slow and vanishing clients -------------------------------------------------------------------

def test_slow_clients_cannot_hold_the_server(wiki_index: Path, tmp_path: Path):
    """Twenty clients sending a body a byte a second and twenty sending headers a byte a second,
    against four places: a real query is answered, the slow ones get 408 or are closed."""
    served = start(tmp_path, "--index", f"wiki={wiki_index}", "--max-concurrent", "4", "--queue-seconds", "0.5", "--body-timeout", "3", "--header-timeout", "3")
    head = f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n".encode()
    outcomes: list[bytes] = []

    def dribble(prefix: bytes, payload: bytes) -> None:
        with socket.create_connection((served.host, served.port), timeout=30) as conn:
            conn.sendall(prefix)
            try:
                for byte in payload:
                    conn.sendall(bytes([byte]))
                    time.sleep(1)
                    conn.settimeout(0.001)
                    try:
                        if answer := conn.recv(4096):
                            outcomes.append(answer)
                            return
                    except (TimeoutError, BlockingIOError):
                        pass
                    conn.settimeout(30)
            except (BrokenPipeError, ConnectionResetError):
                outcomes.append(b"closed")
                return
            outcomes.append(b"never refused")

    slow = [threading.Thread(target=dribble, args=(head, b"x" * 200)) for _ in range(20)]
    slow += [threading.Thread(target=dribble, args=(b"", head)) for _ in range(20)]
    try:
        for thread in slow:
            thread.start()
        time.sleep(1.5)
        assert query(served).status_code == 200
        for thread in slow:
            thread.join(timeout=60)
        assert len(outcomes) == 40 and all(o == b"closed" or o.startswith(b"HTTP/1.1 408") for o in outcomes), outcomes
        assert query(served).status_code == 200
    finally:
        served.stop()
    log = served.log.read_text()
    TALLY["cases"] += 2
    TALLY["tracebacks"] += "Traceback" in log
    assert "Traceback" not in log, log
    TALLY["clear_errors"] += 2


@pytest.mark.parametrize("path", ["", "jobs?index=wiki"], ids=["query", "upload"])
def test_a_client_leaving_mid_body_is_one_log_line(server: Server, path: str):
    with socket.create_connection((server.host, server.port), timeout=10) as conn:
        kind = "application/json" if not path else "application/octet-stream"
        conn.sendall(f"POST /{path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: {kind}\r\nContent-Length: 100000\r\n\r\n".encode() + b"x" * 1000)
    target = f"of POST /{path.split('?')[0]},"
    deadline = time.monotonic() + 20
    while not (lines := [line for line in server.log.read_text().splitlines() if "left during the body" in line and target in line]):
        assert time.monotonic() < deadline, server.log.read_text()
        time.sleep(0.1)
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in server.log.read_text()
    assert len(lines) == 1 and "after 1000 bytes" in lines[0] and "Traceback" not in server.log.read_text()
    TALLY["handled"] += 1


# Retention and DELETE -------------------------------------------------------------------------

def seed_job(jobs: Path, job_id: str, finished: datetime, size: int) -> None:
    folder = jobs / job_id
    folder.mkdir(parents=True)
    status = {"id": job_id, "index": "wiki", "format": None, "langs": None, "status": "done", "finished": finished.strftime("%Y-%m-%dT%H:%M:%SZ")}
    (folder / "job.json").write_text(json.dumps(status), encoding="utf-8")
    (folder / "audit.jsonl").write_bytes(b"x" * size)


def test_finished_jobs_are_pruned_by_age_and_size_and_running_ones_kept(wiki_index: Path, tmp_path: Path):
    now = datetime.now(UTC)
    seed_job(tmp_path / "jobs", "0000000000000001", now - timedelta(days=30), 100)
    seed_job(tmp_path / "jobs", "0000000000000002", now - timedelta(hours=2), 60_000)
    seed_job(tmp_path / "jobs", "0000000000000003", now - timedelta(hours=1), 60_000)
    with socket.socket() as silent:
        # A model endpoint that takes every connection and never answers: a job probing it runs on.
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        threading.Thread(target=hold_connections, args=(silent,), daemon=True).start()
        model = {"OPENAI_BASE_URL": f"http://127.0.0.1:{silent.getsockname()[1]}/v1", "OPENAI_API_KEY": "x"}
        served = start(tmp_path, "--index", f"wiki={wiki_index}", "--jobs-max-bytes", "100000", "--probe-model", "openai:stuck", env=model)
        try:
            kept = sorted(p.name for p in served.jobs.iterdir())
            assert kept == ["0000000000000003", "policies"], kept
            params = {"index": "wiki", "filename": SAMPLE.name, "langs": "en", "probe_model": "openai:stuck"}
            stuck = requests.post(served.url + "jobs", params=params, data=SAMPLE.read_bytes(), timeout=30).json()
            deadline = time.monotonic() + 60
            while (prepare := requests.get(served.url + f"jobs/{stuck['id']}", timeout=30).json().get("prepare")) is None or not prepare["total"]:
                assert time.monotonic() < deadline, prepare
                time.sleep(0.1)
            counted(requests.delete(served.url + f"jobs/{stuck['id']}", timeout=30), 409, "delete it once it is done or failed", served)
            assert (served.jobs / stuck["id"]).is_dir()
            now_job = requests.get(served.url + f"jobs/{stuck['id']}", timeout=30).json()
            assert now_job["status"] in ("queued", "running"), now_job
            assert now_job["models"]["probe"]["model_id"] and "/tmp/" not in json.dumps(now_job), now_job  # no server path in a status
            done = requests.delete(served.url + "jobs/0000000000000003", timeout=30)
            counted(done, 200, '"deleted":"0000000000000003"', served)
            assert not (served.jobs / "0000000000000003").exists()
            counted(requests.get(served.url + "jobs/0000000000000003", timeout=30), 404, "no job", served)
            counted(requests.delete(served.url + "jobs/0000000000000003", timeout=30), 404, "no job", served)
        finally:
            served.stop()


def test_bodies_held_at_once_are_bounded(wiki_index: Path, tmp_path: Path):
    """Five uploads of 95% of --max-job-bytes that stall: four fit the budget of four uploads
    and wait out the body deadline (408), the one that passes it gets 503, and queries still run."""
    served = start(tmp_path, "--index", f"wiki={wiki_index}", "--max-job-bytes", "1000000", "--body-timeout", "5")
    head = f"POST /jobs?index=wiki HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n".encode()
    statuses: list[int] = []

    def stall() -> None:
        with socket.create_connection((served.host, served.port), timeout=30) as conn:
            conn.sendall(head + b"x" * 950_000)
            answer = conn.recv(4096)
            statuses.append(int(answer.split(b" ", 2)[1]) if answer else 0)

    clients = [threading.Thread(target=stall) for _ in range(5)]
    try:
        for client in clients:
            client.start()
        assert query(served).status_code == 200
        for client in clients:
            client.join(timeout=60)
        assert sorted(statuses) == [408, 408, 408, 408, 503], statuses
        assert query(served).status_code == 200
    finally:
        served.stop()
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in served.log.read_text()
    assert "Traceback" not in served.log.read_text()
    TALLY["clear_errors"] += 1
