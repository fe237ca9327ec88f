"""What every request to `audit serve` passes before it reaches a route.

A server on 127.0.0.1 is still reachable from any web page the user opens: a page can send
simple cross-site requests (form posts as `text/plain`, `application/x-www-form-urlencoded`
or `multipart/form-data`, with no preflight) and, through DNS rebinding, read the answers under
its own host name.  So, in this order:

- every response, errors and downloads included, carries a Content-Security-Policy that lets
  nothing load or run and `X-Content-Type-Options: nosniff`, and no CORS header is ever sent;
- the `Host` header must be one of the server's own addresses (421 otherwise), and an
  `Origin`, when a browser sends one, too (403);
- with a token, `Authorization: Bearer TOKEN` is required on every route (401);
- query routes take `application/json` only and upload routes refuse the form content types
  (415), so no form on another site can reach a route;
- the body is read whole before a route runs, within the size limit (413) and the body
  deadline (408), and before the request takes one of the `max_concurrent` places, so slow
  clients cost a connection each, never a place; a client that leaves mid-body is one log line.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from audit.errors import AuditError

LOG = logging.getLogger("uvicorn.error")
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
JSON_ROUTES = ("/", "/mini", "/mini/")
UPLOAD_ROUTES = {"/jobs": "the benchmark file", "/policies": "the policy TOML"}
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
WILDCARD = ("0.0.0.0", "::", "")
BODY_BUDGET = 4  # request bodies held at once: at most this many largest uploads' worth


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 1 << 20
    max_job_bytes: int = 64 << 20
    max_concurrent: int = 16
    queue_seconds: float = 2.0
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    max_inflated_bytes: int = 256 << 20


@dataclass(frozen=True)
class Access:
    """Who may talk to the server: the `Host` values it answers to (empty: any, for an app
    used in-process) and the bearer token, if one is required."""

    hosts: frozenset[str] = field(default_factory=frozenset)
    token: str | None = None

    @classmethod
    def bound(cls, host: str, port: int, extra: tuple[str, ...] = (), token: str | None = None) -> Access:
        """The server's loopback names and the bound address (on a wildcard bind, this
        machine's names and addresses) with the port (and without it on port 80, which a
        browser leaves out), plus `extra` names (`--allowed-host`, e.g. `proxy.example` or
        `proxy.example:8443`)."""
        own = _machine_names() if host in WILDCARD else {host}
        names = {name.lower() for name in (*LOOPBACK, *(f"[{name}]" if ":" in name else name for name in own))}
        hosts = {f"{name}:{port}" for name in names} | (names if port == 80 else set())
        # An extra name is taken as given, and with this port: a proxy in front names its own.
        hosts |= {form.lower() for name in extra for form in (name, f"{name}:{port}")}
        return cls(frozenset(hosts), token)

    def host_allowed(self, value: str) -> bool:
        return not self.hosts or value.lower() in self.hosts

    def origin_allowed(self, origin: str) -> bool:
        scheme, _, rest = origin.partition("://")
        return scheme in ("http", "https") and "/" not in rest and self.host_allowed(rest)

    def token_matches(self, header: str) -> bool:
        if self.token is None:
            return True
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())


class Refused(AuditError):
    """A request answered before it reaches a route: `status`, message and extra headers."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers


async def send_json(send: Send, status: int, body: dict[str, str], headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    payload = json.dumps(body).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": payload})


def _header(scope: Scope, name: bytes) -> str | None:
    values = [value for key, value in scope["headers"] if key == name]
    if len(values) > 1:
        raise Refused(400, f"the {name.decode()} header is given {len(values)} times")
    return values[0].decode("latin-1") if values else None


def check_request(scope: Scope, access: Access) -> None:
    """Host, Origin, token and content type, or Refused saying which is wrong."""
    host = _header(scope, b"host") or ""
    if not access.host_allowed(host):
        raise Refused(421, f"Host {host!r} is not an address of this server (it answers to its own address and localhost; `audit serve --allowed-host NAME` adds one)")
    origin = _header(scope, b"origin")
    if origin is not None and not access.origin_allowed(origin):
        raise Refused(403, f"cross-origin request from {origin!r} refused: this server answers its own origin only")
    if not access.token_matches(_header(scope, b"authorization") or ""):
        raise Refused(401, "this server needs Authorization: Bearer TOKEN (the token it was started with)", ((b"www-authenticate", b"Bearer"),))
    if scope["method"] not in ("POST", "PUT", "PATCH"):
        return
    media = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
    path = scope["path"]
    if path in JSON_ROUTES and media != "application/json":
        raise Refused(415, f"send the query as a JSON body with Content-Type: application/json (got {media or 'none'!r})")
    what = UPLOAD_ROUTES.get(path)
    if what is not None and media in FORM_TYPES:
        raise Refused(
            415,
            f"send {what} as the raw request body, not as a form ({media}): Content-Type: application/octet-stream, "
            "e.g. curl --data-binary @FILE -H 'Content-Type: application/octet-stream'",
        )


class GuardMiddleware:
    """The checks above, then the size limit, the body deadline and the concurrency limit,
    applied before a request reaches its route.  `/health` takes no place."""

    def __init__(self, app: ASGIApp, limits: ServerLimits, access: Access) -> None:
        self.app = app
        self.limits = limits
        self.access = access
        self._slots: asyncio.Semaphore | None = None
        self._buffered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _secured(send)
        try:
            check_request(scope, self.access)
            body = await self._body(scope, receive)
        except Refused as refused:
            await send_json(send, refused.status, {"error": str(refused)}, refused.headers)
            return
        if body is None:
            return
        try:
            await self._dispatch(scope, _replay(body, receive), send)
        finally:
            self._buffered -= len(body)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route, once the request has a place (`/health` needs none)."""
        if scope["path"] == "/health":
            await self._run(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.max_concurrent)
        try:
            # A free place is taken at once (wait_for with no time left would refuse it).
            await (self._slots.acquire() if not self._slots.locked() else asyncio.wait_for(self._slots.acquire(), timeout=self.limits.queue_seconds))
        except TimeoutError:
            busy = {"error": f"server busy: {self.limits.max_concurrent} requests in progress; retry shortly"}
            await send_json(send, 503, busy, ((b"retry-after", b"1"),))
            return
        try:
            await self._run(scope, receive, send)
        finally:
            self._slots.release()

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None when the client left (logged); Refused past the limits.
        Bodies held at once share a budget of four uploads, so memory stays bounded however
        many clients send at once; a body past it gets 503."""
        limit = self.limits.max_job_bytes if scope["path"].startswith(tuple(UPLOAD_ROUTES)) else self.limits.max_body_bytes
        close = ((b"connection", b"close"),)
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise Refused(413, f"request body of {int(declared)} bytes is over the limit of {limit} bytes", close)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.body_timeout
        parts: list[bytes] = []
        received = 0
        try:
            while True:
                try:
                    message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
                except TimeoutError:
                    raise Refused(408, f"request body not received within {self.limits.body_timeout:g} s ({received} bytes came)", close) from None
                if message["type"] == "http.disconnect":
                    LOG.warning("client %s left during the body of %s %s, after %d bytes", _client(scope), scope["method"], scope["path"], received)
                    self._buffered -= received
                    return None
                chunk = message.get("body", b"")
                if received + len(chunk) > limit:
                    raise Refused(413, f"request body is over the limit of {limit} bytes", close)
                if self._buffered + len(chunk) > BODY_BUDGET * self.limits.max_job_bytes:
                    raise Refused(503, "server busy: too many request bodies in memory; retry shortly", (*close, (b"retry-after", b"1")))
                parts.append(chunk)
                received += len(chunk)
                self._buffered += len(chunk)
                if not message.get("more_body", False):
                    return b"".join(parts)
        except BaseException:
            self._buffered -= received
            raise

    async def _run(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route; an error it did not handle is one log line and a 500 naming no detail
        (its message may hold a server path)."""
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as error:  # the log gets one line, the client a JSON error
            LOG.warning("internal error on %s %s: %s: %s", scope["method"], scope["path"], type(error).__name__, error)
            if not started:
                await send_json(send, 500, {"error": "internal server error; the server's log has the detail"})


def _secured(send: Send) -> Send:
    """`send` with the security headers on every response start, and no CORS grant."""

    async def secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name for name, _ in SECURITY_HEADERS}
            kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names and not k.lower().startswith(b"access-control-")]
            message = {**message, "headers": [*kept, *SECURITY_HEADERS]}
        await send(message)

    return secured


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read already, as one message; then the connection's own messages (disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _machine_names() -> set[str]:
    """This machine's host name and the addresses it resolves to, as clients may name it."""
    names = {socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    return {name for name in names if name}


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "unknown"
