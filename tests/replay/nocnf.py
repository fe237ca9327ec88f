"""A server with no AND/OR queries in front of a real `audit serve`: it forwards every request,
except that a query holding " AND " or " OR " gets HTTP 400 with the error `audit serve` gives
for a CNF query to an index held by Ray shard actors (audit/server/engine.py `_cnf_served`).
The client must then ask each term on its own and decide exactly as with CNF queries."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


@contextmanager
def no_cnf(upstream: str) -> Iterator[tuple[str, list[str]]]:
    """(url, refused queries) of a server forwarding to `upstream`, refusing CNF queries."""
    refused: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            query = json.loads(body).get("query") or ""
            if " AND " in query or " OR " in query:
                refused.append(query)
                status, answer = 400, json.dumps({"error": "count with a CNF (AND/OR) query is not served from a distributed index"}).encode()
            else:
                reply = requests.post(upstream, data=body, headers={"Content-Type": "application/json"}, timeout=30)
                status, answer = reply.status_code, reply.content
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", refused
    finally:
        server.shutdown()
        server.server_close()
