"""Any probe backend behind an OpenAI-compatible chat completions endpoint, so that the OpenAI
path (`audit.probes.remote`) can be tried, tested and benchmarked on a laptop, with no GPU server.

Only the standard library's HTTP server: `GET /v1/models` and `POST /v1/chat/completions`
(non-streaming, n = 1).  The model runs on one worker thread; requests that arrive while it is
busy, or within a short window of the first, are passed to the backend together when their
decoding settings are the same, so that concurrent clients get the backend's batching.

Parameters a request leaves out take OpenAI's defaults (temperature 1, top_p 1) or the probes'
(max_tokens 128, seed 0).  `usage` token counts are zeros: a backend does not report them.
"""
from __future__ import annotations

import json
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pydantic import JsonValue

from audit.probes.generation import Backend, Decoding, Message, Output, ProbeError, Request, Role

WINDOW = 0.010
MAX_BODY = 16 << 20
_DEFAULTS = Decoding()


class BadRequest(Exception):
    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass
class _Job:
    request: Request
    answer: Future[Output] = field(default_factory=Future)


class _Batcher:
    """The one thread that calls the backend, a batch of same-decoding requests at a time."""

    def __init__(self, backend: Backend, batch_size: int, window: float) -> None:
        self.backend = backend
        self.batch_size = batch_size
        self.window = window
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._pending: list[_Job] = []
        self._closed = False
        self._stopping = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="compat-server-model", daemon=True)
        self._thread.start()

    def submit(self, request: Request) -> Output:
        """The backend's answer; RuntimeError once the server is closing."""
        job = _Job(request)
        # Under the lock, no job is queued behind the end marker, where none would answer it.
        with self._lock:
            if self._stopping:
                raise RuntimeError("the server is closing")
            self._queue.put(job)
        return job.answer.result()

    def close(self) -> None:
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._queue.put(None)
        self._thread.join()

    def _take(self, until: float | None) -> None:
        """Moves the queued jobs to pending, and, until the time `until`, those still arriving
        while there is room in a batch."""
        while not self._closed:
            remaining = 0.0 if until is None or len(self._pending) >= self.batch_size else until - time.monotonic()
            try:
                job = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                return
            if job is None:
                self._closed = True
            else:
                self._pending.append(job)

    def _loop(self) -> None:
        while True:
            if not self._pending:
                first = self._queue.get()
                if first is None:
                    break
                self._pending.append(first)
                self._take(time.monotonic() + self.window)
            else:
                self._take(None)
            decoding = self._pending[0].request.decoding
            batch = [job for job in self._pending if job.request.decoding == decoding][: self.batch_size]
            taken = {id(job) for job in batch}
            self._pending = [job for job in self._pending if id(job) not in taken]
            self._answer(batch)
            if self._closed:
                break
        for job in self._pending:
            job.answer.set_exception(RuntimeError("the server is closing"))

    def _answer(self, batch: list[_Job]) -> None:
        try:
            outputs = list(self.backend.generate([job.request for job in batch]))
            if len(outputs) != len(batch):
                raise RuntimeError(f"the backend gave {len(outputs)} answers to {len(batch)} requests")
        except Exception as error:
            outputs = [Output(None, error=f"{type(error).__name__}: {error}")] * len(batch)
        for job, output in zip(batch, outputs, strict=True):
            job.answer.set_result(output)


def _number(body: dict[str, JsonValue], key: str, default: float, low: float, high: float, *, low_open: bool = False) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not (low < value if low_open else low <= value) or value > high:
        raise BadRequest(f"{key} must be a number in {'(' if low_open else '['}{low}, {high}], not {value!r}")
    return float(value)


def _integer(body: dict[str, JsonValue], key: str, default: int, low: int) -> int:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BadRequest(f"{key} must be an integer of at least {low}, not {value!r}")
    return value


def parse_chat_request(body: JsonValue) -> tuple[str, Request]:
    """The model name and the probe request of a chat completions body, or BadRequest."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model is required (a string)")
    if body.get("stream"):
        raise BadRequest("stream is not supported")
    if _integer(body, "n", 1, 1) != 1:
        raise BadRequest("only n = 1 is supported")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages is required (a non-empty list)")
    parsed = []
    for position, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role not in {r.value for r in Role} or not isinstance(content, str):
            raise BadRequest(f"messages[{position}] must have a role (system, user or assistant) and a string content")
        parsed.append(Message(Role(role), content))
    max_tokens = _integer(body, "max_completion_tokens", _integer(body, "max_tokens", _DEFAULTS.max_tokens, 1), 1)
    decoding = Decoding(
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        max_tokens=max_tokens,
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0, low_open=True),
        seed=_integer(body, "seed", _DEFAULTS.seed, -(1 << 63)),
    )
    return model, Request(tuple(parsed), decoding, _constrained_choices(body.get("response_format")))


def _constrained_choices(shape: JsonValue) -> tuple[str, ...]:
    """Structured outputs, for the schemas a probe sends: an object of one required string
    property whose value is one of an enum.  Its replies are few, so the model scores each
    (the choices) and answers the likeliest: decoding constrained to the schema, exactly.
    `{"type": "text"}` (or none) leaves the reply free; any other format is refused."""
    if shape is None or shape == {"type": "text"}:
        return ()
    schema = shape.get("json_schema", {}).get("schema") if isinstance(shape, dict) and shape.get("type") == "json_schema" and isinstance(shape.get("json_schema"), dict) else None
    properties = schema.get("properties") if isinstance(schema, dict) and schema.get("type") == "object" else None
    if not isinstance(properties, dict) or len(properties) != 1 or schema.get("required") != list(properties):
        raise BadRequest("response_format: this server constrains replies to a JSON schema of one required property with an enum of strings, or none")
    ((name, rule),) = properties.items()
    allowed = rule.get("enum") if isinstance(rule, dict) and rule.get("type") == "string" else None
    if not isinstance(allowed, list) or not allowed or not all(isinstance(value, str) for value in allowed) or len(set(allowed)) < len(allowed):
        raise BadRequest(f"response_format: property {name!r} must be a string with an enum of distinct strings")
    return tuple(json.dumps({name: value}, ensure_ascii=False) for value in allowed)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a benchmark's thousands of requests are not worth a line each."""

    def _send(self, status: HTTPStatus, payload: dict[str, JsonValue]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, message: str, code: str, kind: str = "invalid_request_error") -> None:
        self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: GET {self.path}", "not_found")
            return
        model = {"id": self.server.backend.model_id, "object": "model", "created": self.server.started, "owned_by": "corpus-audit"}
        self._send(HTTPStatus.OK, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {self.path}", "not_found")
            return
        try:
            model, request = parse_chat_request(self._body())
            if model not in self.server.names:
                raise BadRequest(f"the model {model!r} does not exist; this server has {self.server.backend.model_id!r}", HTTPStatus.NOT_FOUND, "model_not_found")
        except BadRequest as error:
            self._error(error.status, str(error), error.code)
            return
        try:
            output = self.server.batcher.submit(request)
        except RuntimeError as error:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, str(error), "server_closing", "server_error")
            return
        if output.text is None:
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, output.error or "the model gave no answer", "model_error", "server_error")
            return
        # A constrained reply is the likeliest of the schema's replies: `output.text` (`scored`).
        message = {"role": "assistant", "content": output.text}
        self._send(HTTPStatus.OK, {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server.backend.model_id,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop" if request.choices else output.finish_reason or "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })

    def _body(self) -> JsonValue:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            # Without a length the rest of the connection cannot be read reliably.
            self.close_connection = True
            raise BadRequest("a Content-Length header is required")
        if int(length) > MAX_BODY:
            self.close_connection = True
            raise BadRequest(f"the body is over {MAX_BODY} bytes")
        raw = self.rfile.read(int(length))
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise BadRequest(f"the body is not JSON: {error}") from None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], backend: Backend, batcher: _Batcher) -> None:
        super().__init__(address, _Handler)
        self.backend = backend
        self.batcher = batcher
        self.started = int(time.time())
        # The id with its fingerprint, or the name alone, as a user would type it.
        self.names = {backend.model_id, backend.model_id.split("@", 1)[0]}


class CompatServer:
    """A running server: `url` is the base URL for an OpenAI client (ending in /v1)."""

    def __init__(self, backend: Backend, host: str = "127.0.0.1", port: int = 0, *, batch_size: int | None = None, window: float = WINDOW) -> None:
        size = batch_size or getattr(backend, "batch_size", None) or 8
        self._batcher = _Batcher(backend, size, window)
        try:
            self._httpd = _HTTPServer((host, port), backend, self._batcher)
        except OSError:
            self._batcher.close()
            raise
        bound_host, bound_port = self._httpd.server_address[:2]
        shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        self.url = f"http://{shown}:{bound_port}/v1"
        self._thread: threading.Thread | None = None

    def start(self) -> CompatServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="compat-server-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self._httpd.serve_forever()
        finally:
            self.close()

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()
        self._batcher.close()

    def __enter__(self) -> CompatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(backend: Backend, host: str = "127.0.0.1", port: int = 0, *, batch_size: int | None = None) -> CompatServer:
    """Serves `backend` from daemon threads; port 0 picks a free port (see `.url`)."""
    return CompatServer(backend, host, port, batch_size=batch_size).start()


def check_address(host: str, port: int) -> None:
    """Refuse a host that does not resolve or an address already taken before the model is
    loaded, which takes seconds to minutes."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as error:
        raise ProbeError(f"--host {host}: not a host name or address this machine can resolve ({getattr(error, 'strerror', None) or error})") from None
    with socket.socket(family, kind) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            raise ProbeError(f"--host {host} --port {port}: cannot listen there ({error.strerror or error})") from None


def serve_forever(backend: Backend, host: str = "127.0.0.1", port: int = 8000, *, batch_size: int | None = None, ready: Callable[[str], None] | None = None) -> None:
    """Serves until interrupted; `ready` is told the base URL once the port is bound."""
    server = CompatServer(backend, host, port, batch_size=batch_size)
    if ready:
        ready(server.url)
    server.serve_forever()
