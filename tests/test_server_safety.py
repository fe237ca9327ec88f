"""`audit serve` against hostile clients, as a real uvicorn process on 127.0.0.1: parameters
that try to be paths, DNS rebinding and cross-site requests, decompression bombs, slow and
vanishing clients, job retention and DELETE, and the bearer token.  Each hostile request counts
in the hostile suite's tally (tests/hostile.py); a traceback in the server's log counts as one."""
from __future__ import annotations

import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
import zstandard
from hostile import TALLY

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
SECRET = "sk-live-never-in-any-response-7f3a9c"
TOKEN = "correct-horse-battery-staple-42"
BENCH = b'{"item_id": "1", "source_lang": "en", "variants": {"en": {"question": "Where is the University of Washington?", "answer": "Seattle"}}}\n'
SECURITY = {"content-security-policy": "default-src 'none'", "x-content-type-options": "nosniff"}


@dataclass
class Server:
    process: subprocess.Popen
    url: str
    host: str
    port: int
    log: Path
    jobs: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(tmp: Path, *args: str, env: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Server:
    """`python -m audit.server` on a free port of 127.0.0.1, its log in a file."""
    log, jobs = tmp / "server.log", tmp / "jobs"
    process = subprocess.Popen(
        [sys.executable, "-m", "audit.server", "--port", "0", "--jobs-dir", str(jobs), *args],
        stdout=subprocess.PIPE, stderr=log.open("wb"), text=True, env={**os.environ, **(env or {})}, cwd=tempfile.gettempdir(),
    )
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"server did not start (exit {process.wait()}): {line}{log.read_text()}")
    url = line.split("listening on ", 1)[1].strip().replace("//0.0.0.0:", "//127.0.0.1:") + "/"
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "health", headers=headers, timeout=1).ok:
                return Server(process, url, host, int(port), log, jobs)
        except requests.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("server did not answer /health")


@pytest.fixture(scope="module")
def secrets(tmp_path_factory) -> Path:
    """A folder beside the server's holding TOML files it must never read for a client: a
    registry and settings with a token, and a valid policy outside the policies folder."""
    root = tmp_path_factory.mktemp("secrets")
    (root / "registry.toml").write_text(f'api_token = "{SECRET}"\n[corpora.x]\nbackend = "local"\npath = "x"\n', encoding="utf-8")
    (root / "settings.toml").write_text(f'[auth]\napi_token = "{SECRET}"\n', encoding="utf-8")
    (root / "outside.toml").write_text("[rules.ngram.question]\ncoverage = 1\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def server(wiki_index: Path, secrets: Path, tmp_path_factory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("safety")
    served = start(tmp, "--index", f"wiki={wiki_index}", "--registry", str(secrets / "registry.toml"), "--body-timeout", "3", "--header-timeout", "3",
        "--max-inflated-bytes", str(64 << 20),
    )
    (served.jobs / "policies" / "linked.toml").symlink_to(secrets / "outside.toml")
    yield served
    served.stop()
    log = served.log.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log, log


def counted(response: requests.Response, status: int, fragment: str, server: Server) -> None:
    """One hostile request: the status expected, a JSON answer naming `fragment`, the security
    headers, no CORS grant, no secret and no server path, and no traceback in the log."""
    TALLY["cases"] += 1
    log = server.log.read_text(encoding="utf-8", errors="replace")
    TALLY["tracebacks"] += "Traceback" in log
    assert "Traceback" not in log, log
    assert response.status_code == status, response.text
    for name, value in SECURITY.items():
        assert value in response.headers.get(name, ""), (name, response.headers)
    assert "access-control-allow-origin" not in {k.lower() for k in response.headers}
    text = response.text
    assert SECRET not in text, text
    if status >= 400:
        assert str(server.jobs) not in text and "/tmp/" not in text, text
        assert fragment in response.json()["error"], response.text
    else:
        assert fragment in text, text
    TALLY["clear_errors" if status >= 400 else "handled"] += 1


def raw(server: Server, data: bytes, timeout: float = 20) -> tuple[int, bytes]:
    """Send `data` as is; the status and whole answer (the server closes or answers once)."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as conn:
        conn.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    return (int(answer.split(b" ", 2)[1]) if answer else 0), answer


def _length(answer: bytes) -> int:
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 1 << 30


def query(server: Server, **kwargs) -> requests.Response:
    return requests.post(server.url, json={"index": "wiki", "query_type": "count", "query": "the"}, timeout=30, **kwargs)


# Parameters that try to be paths --------------------------------------------------------------

POLICY_NAMES = [
    ("dotdot-registry", "../../registry", 400, "a policy is named, never a path"),
    ("dotdot-one", "../registry", 400, "a policy is named, never a path"),
    ("through-policies", "policies/../../registry", 400, "a policy is named, never a path"),
    ("absolute", "{secrets}/settings", 400, "a policy is named, never a path"),
    ("absolute-toml", "{secrets}/settings.toml", 400, "a policy is named, never a path"),
    ("absolute-valid-outside", "{secrets}/outside", 400, "a policy is named, never a path"),
    ("dots-only", "..", 400, "a policy is named, never a path"),
    ("one-dot", ".", 400, "a policy is named, never a path"),
    ("three-dots", "...", 400, "a policy is named, never a path"),
    ("separator", "a/b", 400, "a policy is named, never a path"),
    ("backslash", "..\\..\\registry", 400, "a policy is named, never a path"),
    ("nul", "registry\x00", 400, "a policy is named, never a path"),
    ("over-long", "a" * 300, 400, "a policy is named, never a path"),
    ("home", "~/registry", 400, "a policy is named, never a path"),
    ("with-extension", "registry.toml", 400, "a policy is named, never a path"),
    ("drive", "C:\\registry", 400, "a policy is named, never a path"),
    ("double-encoded", "%2e%2e%2fregistry", 400, "a policy is named, never a path"),
    ("link-out-of-the-folder", "linked", 400, "not a file of the server's policies folder"),
    ("unregistered-name", "outside", 404, "no policy 'outside'"),
]


@pytest.mark.parametrize(("name", "policy", "status", "fragment"), POLICY_NAMES, ids=[case[0] for case in POLICY_NAMES])
def test_a_policy_is_named_never_a_path(server: Server, secrets: Path, name: str, policy: str, status: int, fragment: str):
    params = {"index": "wiki", "policy": policy.format(secrets=secrets), "filename": "b.jsonl"}
    response = requests.post(server.url + "jobs", params=params, data=BENCH, timeout=30)
    counted(response, status, fragment, server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]


def test_an_uploaded_policy_never_echoes_a_value(server: Server):
    response = requests.post(server.url + "policies", data=f'api_token = "{SECRET}"\n'.encode(), timeout=30)
    counted(response, 400, "api_token", server)


PARAMETERS = [
    ("upload-dotdot", {"filename": "../../x.jsonl"}, 400, "give a plain file name"),
    ("upload-absolute", {"filename": "/etc/passwd"}, 400, "give a plain file name"),
    ("upload-nul", {"filename": "b\x00.jsonl"}, 400, "give a plain file name"),
    ("upload-dots", {"filename": ".."}, 400, "give a plain file name"),
    ("upload-hidden", {"filename": ".bashrc"}, 400, "give a plain file name"),
    ("upload-long", {"filename": "b" * 300 + ".jsonl"}, 400, "give a plain file name"),
    ("index-path", {"index": "../wiki"}, 404, "unknown index '../wiki'"),
    ("index-absolute", {"index": "/etc"}, 404, "unknown index '/etc'"),
    ("model-path", {"probe_model": "/etc/passwd"}, 400, "a path: a job names one of the server's probe models"),
    ("links-path", {"links": "../links"}, 400, "is not a link source of this server"),
    ("format-path", {"format": "../jsonl"}, 400, "is not one of"),
    ("map-file", {"map": "/etc/passwd"}, 400, "map"),
]


@pytest.mark.parametrize(("name", "params", "status", "fragment"), PARAMETERS, ids=[case[0] for case in PARAMETERS])
def test_every_parameter_names_a_thing(server: Server, name: str, params: dict, status: int, fragment: str):
    response = requests.post(server.url + "jobs", params={"index": "wiki", "filename": "b.jsonl", **params}, data=BENCH, timeout=30)
    counted(response, status, fragment, server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]


JOB_IDS = [
    ("short", "GET", "jobs/0000", 400, "is not a job id"),
    ("upper-case", "GET", "jobs/FEEDFACEFEEDFACE", 400, "is not a job id"),
    ("dots", "GET", "jobs/%2e%2e", 400, "is not a job id"),
    ("encoded-traversal", "GET", "jobs/..%2F..%2Fregistry", 404, "Not Found"),
    ("result-of-a-name", "GET", "jobs/policies/result", 400, "is not a job id"),
    ("delete-a-name", "DELETE", "jobs/policies", 400, "is not a job id"),
    ("delete-unknown", "DELETE", "jobs/0123456789abcdef", 404, "no job '0123456789abcdef'"),
]


@pytest.mark.parametrize(("name", "method", "path", "status", "fragment"), JOB_IDS, ids=[case[0] for case in JOB_IDS])
def test_job_ids_are_ids(server: Server, name: str, method: str, path: str, status: int, fragment: str):
    counted(requests.request(method, server.url + path, timeout=30), status, fragment, server)
    assert (server.jobs / "policies" / "linked.toml").is_symlink()


# Host, Origin, content type, CORS ----------------------------------------------------------

HOSTS = [
    ("rebinding", "evil.example", 421),
    ("rebinding-with-port", "evil.example:{port}", 421),
    ("another-port", "127.0.0.1:1", 421),
    ("no-port", "127.0.0.1", 421),
    ("lookalike", "localhost.evil.example:{port}", 421),
    ("empty", "", 421),
    ("loopback-v6", "[::1]:{port}", 200),
    ("localhost", "localhost:{port}", 200),
    ("upper-case", "LOCALHOST:{port}", 200),
]


@pytest.mark.parametrize(("name", "host", "status"), HOSTS, ids=[case[0] for case in HOSTS])
def test_the_host_header_must_be_the_servers(server: Server, name: str, host: str, status: int):
    response = query(server, headers={"Host": host.format(port=server.port)})
    counted(response, status, "is not an address of this server" if status == 421 else "count", server)


def test_a_repeated_host_header_is_refused(server: Server):
    request = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nHost: evil.example\r\nConnection: close\r\n\r\n".encode()
    status, answer = raw(server, request)
    TALLY["cases"] += 1
    assert status == 400 and b"invalid HTTP request" in answer and b"nosniff" in answer
    TALLY["clear_errors"] += 1


ORIGINS = [
    ("foreign-site", "POST", "https://evil.example", 403),
    ("null-origin", "POST", "null", 403),
    ("same-host-other-port", "POST", "http://127.0.0.1:1", 403),
    ("foreign-read", "GET", "https://evil.example", 403),
    ("own-origin", "POST", "http://127.0.0.1:{port}", 200),
]


@pytest.mark.parametrize(("name", "method", "origin", "status"), ORIGINS, ids=[case[0] for case in ORIGINS])
def test_cross_origin_requests_are_refused(server: Server, name: str, method: str, origin: str, status: int):
    headers = {"Origin": origin.format(port=server.port)}
    response = query(server, headers=headers) if method == "POST" else requests.get(server.url + "health", headers=headers, timeout=30)
    counted(response, status, "cross-origin request" if status == 403 else "count", server)


def test_a_preflight_is_never_granted(server: Server):
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    counted(requests.options(server.url, headers=preflight, timeout=30), 403, "cross-origin request", server)
    counted(requests.options(server.url, timeout=30), 405, "Method Not Allowed", server)


CONTENT_TYPES = [
    ("query-text-plain", "", "text/plain", 415, "Content-Type: application/json"),
    ("query-form", "", "application/x-www-form-urlencoded", 415, "Content-Type: application/json"),
    ("query-multipart", "", "multipart/form-data; boundary=x", 415, "Content-Type: application/json"),
    ("query-none", "", None, 415, "Content-Type: application/json"),
    ("query-lookalike", "", "application/jsonx", 415, "Content-Type: application/json"),
    ("mini-text-plain", "mini/", "text/plain", 415, "Content-Type: application/json"),
    ("query-json-charset", "", "application/json; charset=utf-8", 200, "count"),
    ("job-text-plain", "jobs?index=wiki", "text/plain", 415, "as the raw request body"),
    ("job-form", "jobs?index=wiki", "application/x-www-form-urlencoded", 415, "as the raw request body"),
    ("policy-text-plain", "policies", "text/plain", 415, "as the raw request body"),
]


@pytest.mark.parametrize(("name", "path", "content_type", "status", "fragment"), CONTENT_TYPES, ids=[case[0] for case in CONTENT_TYPES])
def test_a_cross_site_form_cannot_reach_a_route(server: Server, name: str, path: str, content_type: str | None, status: int, fragment: str):
    body = json.dumps({"index": "wiki", "query_type": "count", "query": "the"}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    counted(requests.post(server.url + path, data=body, headers=headers, timeout=30), status, fragment, server)


def test_a_multipart_upload_is_told_what_to_send(server: Server):
    response = requests.post(server.url + "jobs", params={"index": "wiki"}, files={"file": ("b.jsonl", BENCH)}, timeout=30)
    counted(response, 415, "send the benchmark file as the raw request body, not as a form (multipart/form-data): Content-Type: application/octet-stream", server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]


def test_downloads_and_errors_carry_the_security_headers(server: Server):
    counted(requests.get(server.url + "nowhere", timeout=30), 404, "Not Found", server)
    counted(requests.get(server.url, timeout=30), 405, "Method Not Allowed", server)
    counted(requests.get(server.url + "docs", timeout=30), 404, "Not Found", server)
    job = requests.post(server.url + "jobs", params={"index": "wiki", "filename": "b.jsonl"}, data=BENCH, timeout=30).json()
    job = wait_for(server, job)
    assert job["status"] == "done", job
    counted(requests.get(server.url + f"jobs/{job['id']}/result", timeout=30), 200, '"item_id"', server)
    assert requests.delete(server.url + f"jobs/{job['id']}", timeout=30).ok


# Decompression and size ---------------------------------------------------------------------

def gzip_bomb(inflated: int) -> bytes:
    """`inflated` zero bytes gzipped, made a MiB at a time (about 1 MB per GiB)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0) as packed:
        zeros = bytes(1 << 20)
        for _ in range(inflated >> 20):
            packed.write(zeros)
    return out.getvalue()


def zstd_bomb(inflated: int) -> bytes:
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=19).stream_writer(out, closefd=False) as packed:
        zeros = bytes(1 << 20)
        for _ in range(inflated >> 20):
            packed.write(zeros)
    return out.getvalue()


def peak_memory(process: subprocess.Popen) -> int:
    """The server's peak resident memory in bytes."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


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

def wait_for(server: Server, job: dict, seconds: float = 90, headers: dict[str, str] | None = None) -> dict:
    deadline = time.monotonic() + seconds
    while job["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
        job = requests.get(server.url + f"jobs/{job['id']}", headers=headers, timeout=10).json()
    return job


def seed_job(jobs: Path, job_id: str, finished: datetime, size: int) -> None:
    folder = jobs / job_id
    folder.mkdir(parents=True)
    status = {"id": job_id, "index": "wiki", "format": None, "langs": None, "status": "done", "finished": finished.strftime("%Y-%m-%dT%H:%M:%SZ")}
    (folder / "job.json").write_text(json.dumps(status), encoding="utf-8")
    (folder / "audit.jsonl").write_bytes(b"x" * size)


def hold_connections(listener: socket.socket) -> None:
    """Accept every connection and keep it open, unanswered, until the listener closes."""
    held = []
    try:
        while True:
            held.append(listener.accept()[0])
    except OSError:
        for conn in held:
            conn.close()


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
            while (prepare := requests.get(served.url + f"jobs/{stuck['id']}", timeout=30).json()["prepare"]) is None or not prepare["total"]:
                assert time.monotonic() < deadline, prepare
                time.sleep(0.1)
            counted(requests.delete(served.url + f"jobs/{stuck['id']}", timeout=30), 409, "delete it once it is done or failed", served)
            assert (served.jobs / stuck["id"]).is_dir()
            now_job = requests.get(served.url + f"jobs/{stuck['id']}", timeout=30).json()
            assert now_job["status"] in ("queued", "running"), now_job
            done = requests.delete(served.url + "jobs/0000000000000003", timeout=30)
            counted(done, 200, '"deleted":"0000000000000003"', served)
            assert not (served.jobs / "0000000000000003").exists()
            counted(requests.get(served.url + "jobs/0000000000000003", timeout=30), 404, "no job", served)
            counted(requests.delete(served.url + "jobs/0000000000000003", timeout=30), 404, "no job", served)
        finally:
            served.stop()


# The token ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def guarded(wiki_index: Path, tmp_path_factory) -> Iterator[Server]:
    served = start(
        tmp_path_factory.mktemp("token"), "--index", f"wiki={wiki_index}", "--allowed-host", "audit.example",
        env={"AUDIT_SERVE_TOKEN": TOKEN}, headers={"Authorization": f"Bearer {TOKEN}"},
    )
    yield served
    served.stop()


AUTHORIZATIONS = [
    ("none", None, 401),
    ("wrong", f"Bearer {TOKEN[:-1]}x", 401),
    ("prefix", f"Bearer {TOKEN[:8]}", 401),
    ("longer", f"Bearer {TOKEN}x", 401),
    ("basic-scheme", f"Basic {TOKEN}", 401),
    ("bare-token", TOKEN, 401),
    ("scheme-only", "Bearer", 401),
    ("right", f"Bearer {TOKEN}", 200),
    ("right-lower-scheme", f"bearer {TOKEN}", 200),
]


@pytest.mark.parametrize(("name", "authorization", "status"), AUTHORIZATIONS, ids=[case[0] for case in AUTHORIZATIONS])
def test_the_token_is_required_on_every_route(guarded: Server, name: str, authorization: str | None, status: int):
    headers = {"Authorization": authorization} if authorization else {}
    response = query(guarded, headers=headers)
    counted(response, status, "Authorization: Bearer TOKEN" if status == 401 else "count", guarded)
    if status == 401:
        assert response.headers["WWW-Authenticate"] == "Bearer"
        counted(requests.get(guarded.url + "health", headers=headers, timeout=30), 401, "Authorization: Bearer TOKEN", guarded)


def test_an_allowed_host_is_answered(guarded: Server):
    headers = {"Host": f"audit.example:{guarded.port}", "Authorization": f"Bearer {TOKEN}"}
    counted(query(guarded, headers=headers), 200, "count", guarded)
    counted(query(guarded, headers={**headers, "Host": f"other.example:{guarded.port}"}), 421, "not an address of this server", guarded)


def test_a_tokenless_job_never_runs(guarded: Server):
    response = requests.post(guarded.url + "jobs", params={"index": "wiki", "filename": "b.jsonl"}, data=BENCH, timeout=30)
    counted(response, 401, "Authorization: Bearer TOKEN", guarded)
    assert sorted(p.name for p in guarded.jobs.iterdir()) == ["policies"]


REFUSED_STARTS = [
    ("wildcard-without-token", ["--host", "0.0.0.0"], {}, "--host 0.0.0.0 opens the server to other machines: give a token"),
    ("v6-wildcard-without-token", ["--host", "::"], {}, "--host :: opens the server to other machines"),
    ("short-token", ["--token", "short"], {}, "must be at least 16 printable characters"),
    ("short-token-from-env", [], {"AUDIT_SERVE_TOKEN": "short"}, "must be at least 16 printable characters"),
    ("zero-body-timeout", ["--body-timeout", "0"], {}, "--body-timeout must be more than 0"),
    ("zero-inflated-limit", ["--max-inflated-bytes", "0"], {}, "--max-inflated-bytes must be at least 1"),
    ("zero-retention", ["--job-retention-days", "0"], {}, "--job-retention-days must be more than 0"),
]


@pytest.mark.parametrize(("name", "args", "env", "message"), REFUSED_STARTS, ids=[case[0] for case in REFUSED_STARTS])
def test_a_server_open_to_others_needs_a_token(tmp_path: Path, name: str, args: list[str], env: dict[str, str], message: str):
    done = subprocess.run(
        [sys.executable, "-m", "audit.server", "--port", "0", "--jobs-dir", str(tmp_path / "jobs"), *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **env}, cwd=tempfile.gettempdir(),
    )
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in done.stderr
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "listening" not in done.stdout
    TALLY["clear_errors"] += 1


def test_a_job_on_a_tokenized_index_carries_the_servers_token(tmp_path_factory):
    """A tokenized index's job queries the server's own protocol, which asks for the token too:
    a question copied from the index is seen, so the job's queries were answered, not refused."""
    from test_server import OLMO2, TOKEN_DOCS, build_token_index

    from audit.auditfile import read_audit

    tmp_path = tmp_path_factory.mktemp("tok")  # a short path: infini-gram's engine crashes on long index paths
    index = build_token_index(TOKEN_DOCS, OLMO2, tmp_path / "olmo", width=4)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    served = start(tmp_path, "--index", f"olmo={index}", "--tokenizer", f"olmo={OLMO2}", env={"AUDIT_SERVE_TOKEN": TOKEN}, headers=auth)
    try:
        question = {"item_id": "uw", "source_lang": "en", "variants": {"en": {"question": TOKEN_DOCS[0], "answer": "Seattle"}}}
        job = requests.post(served.url + "jobs", params={"index": "olmo", "filename": "b.jsonl"}, data=json.dumps(question).encode(), headers=auth, timeout=30).json()
        job = wait_for(served, job, headers=auth)
        assert job["status"] == "done", job
        (tmp_path / "b.audit.jsonl").write_bytes(requests.get(served.url + f"jobs/{job['id']}/result", headers=auth, timeout=30).content)
        assert [r["exposure"] for r in read_audit(tmp_path / "b.audit.jsonl").records] == ["seen"]
    finally:
        served.stop()
    assert "Traceback" not in served.log.read_text()


def test_an_index_path_the_engine_would_crash_on_is_refused(wiki_index: Path, tmp_path_factory):
    """infini-gram's engine takes any path holding 'tokenized' for a shard file's and crashes."""
    link = tmp_path_factory.mktemp("tokenized_indexes") / "wiki"
    link.symlink_to(wiki_index)
    done = subprocess.run(
        [sys.executable, "-m", "audit.server", "--port", "0", "--index", f"wiki={link}", "--jobs-dir", str(link.parent / "jobs")],
        capture_output=True, text=True, timeout=60, cwd=tempfile.gettempdir(),
    )
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in done.stderr or done.returncode < 0
    assert done.returncode == 2 and "holds the word 'tokenized'" in done.stderr and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    TALLY["clear_errors"] += 1


def test_a_wildcard_bind_answers_this_machines_names_with_the_token(wiki_index: Path, tmp_path: Path):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    served = start(tmp_path, "--host", "0.0.0.0", "--index", f"wiki={wiki_index}", "--token", TOKEN, headers=auth)
    try:
        named = {**auth, "Host": f"{socket.gethostname()}:{served.port}"}
        counted(query(served, headers=named), 200, "count", served)
        counted(query(served, headers={**named, "Authorization": "Bearer wrong"}), 401, "Authorization: Bearer TOKEN", served)
        counted(query(served, headers={**auth, "Host": f"evil.example:{served.port}"}), 421, "not an address of this server", served)
        counted(query(served, headers={**auth, "Host": f"0.0.0.0:{served.port}"}), 421, "not an address of this server", served)
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
