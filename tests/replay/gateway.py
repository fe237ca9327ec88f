"""A gateway on 127.0.0.1 in front of a real `audit serve`, disturbing its traffic as the public
services' front ends do:

- throttling: to a share of the requests during a window (counted from the first request it
  sees), `403 {"message": "Forbidden"}` with no `error` key (what api.infini-gram.io's gateway
  answers a client it finds too fast, lifted after about a minute), or 429 with or without
  `Retry-After` (an ingress rate limit, as allenai/infinigram-api pull request #101 sets one);
- dropped connections: to a share of the requests the upstream answer is read and then the
  connection closed without a reply (the work done, the answer lost);
- deterministic errors: a request whose `query` is listed gets HTTP 500
  `{"error": "[Flask] Internal server error: ..."}`, every time, as infini-gram's
  api/api_server.py (commit 37d2929, `query()`) answers an exception of its engine.

A `latency` added to every POST stands for the round trip to a distant service.  Every
request is logged (its canonical payload and what the gateway did), in memory and, if asked,
as JSON lines in a file another process can read.  Run it alone with
`python tests/replay/gateway.py --upstream URL [options]`: it prints `listening on URL`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

FORBIDDEN = b'{"message": "Forbidden"}'
INTERNAL_ERROR = "[Flask] Internal server error: "


@dataclass(frozen=True)
class Plan:
    """What the gateway does to the traffic (shares are of requests, in [0, 1])."""

    throttle_share: float = 0.0
    window_start: float = 0.0
    window_seconds: float = 0.0
    throttle_status: int = 403
    retry_after: str | None = None
    drop_share: float = 0.0
    failing_queries: tuple[str, ...] = ()
    failure_detail: str = "'NoneType' object is not subscriptable"
    latency: float = 0.0
    seed: int = 0
    log_path: Path | None = None

    def __post_init__(self) -> None:
        if self.latency < 0:
            raise ValueError("latency is a number of seconds, 0 or more")
        if not (0 <= self.throttle_share <= 1 and 0 <= self.drop_share <= 1):
            raise ValueError("throttle_share and drop_share are shares of requests, in [0, 1]")
        if self.throttle_status not in (403, 429):
            raise ValueError("throttle_status is 403 (the gateway's Forbidden) or 429")


@dataclass
class Gateway:
    """The running gateway: its address, counts by outcome, and the log of every request."""

    upstream: str
    plan: Plan
    url: str = ""
    counts: Counter = field(default_factory=Counter)
    log: list[dict[str, Any]] = field(default_factory=list)
    first: float | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(self.plan.seed)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self._log_file = self.plan.log_path.open("a", encoding="utf-8") if self.plan.log_path else None
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def decide(self, payload: dict[str, Any]) -> str:
        """What to do with this request: forward, throttle, drop or fail."""
        with self._lock:
            now = time.monotonic()
            self.first = now if self.first is None else self.first
            elapsed = now - self.first
            draw_throttle, draw_drop = self._rng.random(), self._rng.random()
        plan = self.plan
        if plan.window_start <= elapsed < plan.window_start + plan.window_seconds and draw_throttle < plan.throttle_share:
            return "throttled"
        if isinstance(payload, dict) and payload.get("query") in plan.failing_queries:
            return "failed"
        return "dropped" if draw_drop < plan.drop_share else "forwarded"

    def record(self, payload: Any, outcome: str, status: int) -> None:
        entry = {"t": round(time.monotonic() - (self.first or time.monotonic()), 3), "payload": json.dumps(payload, sort_keys=True, ensure_ascii=False), "outcome": outcome, "status": status}
        with self._lock:
            self.counts[outcome] += 1
            self.log.append(entry)
            if self._log_file is not None:
                self._log_file.write(json.dumps(entry, ensure_ascii=False) + "\n")
                self._log_file.flush()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._log_file is not None:
            self._log_file.close()


def _handler(gateway: Gateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            answer = requests.get(gateway.upstream.rstrip("/") + self.path, timeout=60)
            self._reply(answer.status_code, answer.content, answer.headers.get("Content-Type", "application/json"))

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                payload = json.loads(body)
            except json.JSONDecodeError:
                payload = body.decode("utf-8", errors="replace")
            outcome = gateway.decide(payload)
            time.sleep(gateway.plan.latency)
            if outcome == "throttled":
                gateway.record(payload, outcome, gateway.plan.throttle_status)
                headers = {"Retry-After": gateway.plan.retry_after} if gateway.plan.retry_after is not None else {}
                return self._reply(gateway.plan.throttle_status, FORBIDDEN if gateway.plan.throttle_status == 403 else b'{"message": "Too Many Requests"}', headers=headers)
            if outcome == "failed":
                gateway.record(payload, outcome, 500)
                return self._reply(500, json.dumps({"error": INTERNAL_ERROR + gateway.plan.failure_detail}).encode())
            answer = requests.post(gateway.upstream, data=body, headers={"Content-Type": "application/json"}, timeout=60)
            gateway.record(payload, outcome, answer.status_code)
            if outcome == "dropped":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(2)
                return None
            return self._reply(answer.status_code, answer.content, answer.headers.get("Content-Type", "application/json"))

        def _reply(self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the URL of the server behind the gateway")
    parser.add_argument("--throttle-share", type=float, default=0.0)
    parser.add_argument("--window-start", type=float, default=0.0)
    parser.add_argument("--window-seconds", type=float, default=0.0)
    parser.add_argument("--throttle-status", type=int, default=403)
    parser.add_argument("--retry-after")
    parser.add_argument("--drop-share", type=float, default=0.0)
    parser.add_argument("--fail-query", action="append", default=[])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every POST")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    plan = Plan(args.throttle_share, args.window_start, args.window_seconds, args.throttle_status, args.retry_after, args.drop_share, tuple(args.fail_query), latency=args.latency, seed=args.seed, log_path=args.log)
    gateway = Gateway(args.upstream, plan)
    print(f"listening on {gateway.url.rstrip('/')}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
    gateway.stop()


if __name__ == "__main__":
    main()
