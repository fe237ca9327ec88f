"""A stdlib HTTP server on 127.0.0.1 that answers POSTs from a script, in order (the last
answer repeats), for tests of how a client takes failures, throttling, malformed, oversize and
error answers; it records when each request arrived and how many were in flight at once."""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Script:
    """What a test server answers, in order; the last answer repeats."""

    def __init__(self, *answers: tuple[int, bytes, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.arrivals: list[float] = []
        self.in_flight = self.most_in_flight = 0
        self.gate: threading.Event | None = None  # when set up, answers wait until it is set
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Count this request as in flight while the server works on it."""
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self.lock:
                self.in_flight -= 1

    def next(self) -> tuple[int, bytes, dict[str, str]]:
        with self.lock:
            answer = self.answers[min(self.calls, len(self.answers) - 1)]
            self.calls += 1
            self.arrivals.append(time.monotonic())
            return answer


@contextlib.contextmanager
def serve_script(script: Script) -> Iterator[str]:
    """A stdlib HTTP server on 127.0.0.1 answering POSTs from `script`; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, body, headers = handler_script.next()
            with handler_script.busy():
                if handler_script.gate is not None:
                    handler_script.gate.wait(timeout=30)
                if headers.get("sleep"):
                    time.sleep(float(headers["sleep"]))
            self.send_response(status)
            for key, value in headers.items():
                if key != "sleep":
                    self.send_header(key, value)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    handler_script = script
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def use(script: Script, *answers: tuple[int, bytes, dict[str, str]]) -> None:
    script.answers = list(answers)
