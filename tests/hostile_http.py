"""What the hostile HTTP cases of `audit serve` share: a real server process on 127.0.0.1 with
its log in a file, raw-socket and counted requests, and decompression bombs.  Every hostile
request counts in the hostile suite's tally (tests/hostile.py); a traceback in the server's
log counts as one."""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

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
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.sendall(data)  # the server may answer and close before it has read everything
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


def wait_for(server: Server, job: dict, seconds: float = 90, headers: dict[str, str] | None = None) -> dict:
    deadline = time.monotonic() + seconds
    while job["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
        job = requests.get(server.url + f"jobs/{job['id']}", headers=headers, timeout=10).json()
    return job


def hold_connections(listener: socket.socket) -> None:
    """Accept every connection and keep it open, unanswered, until the listener closes."""
    held = []
    try:
        while True:
            held.append(listener.accept()[0])
    except OSError:
        for conn in held:
            conn.close()


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
