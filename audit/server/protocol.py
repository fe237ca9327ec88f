"""A header deadline for uvicorn's h11 protocol.

uvicorn bounds the wait between requests (`timeout_keep_alive`) but not a request whose
headers arrive one byte at a time: h11 buffers them and the application is never called, so
no ASGI middleware can see the connection.  The protocol's own 400 for a malformed request is
answered as JSON with the security headers too.  This subclass arms a timer when a connection opens
and after every response; when it fires while the client has still not sent whole headers, the
client gets 408 and the connection is closed.  The body has its own deadline in the guard.
"""
from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from audit.server.guard import SECURITY_HEADERS


def _response(status: bytes, message: str) -> bytes:
    """A whole JSON error response, written before h11 has a request to answer."""
    body = json.dumps({"error": message}).encode()
    return b"".join(
        [
            b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: close\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            *(name + b": " + value + b"\r\n" for name, value in SECURITY_HEADERS),
            b"\r\n",
            body,
        ]
    )


REQUEST_TIMEOUT = _response(b"408 Request Timeout", "request headers not received in time")
BAD_REQUEST = _response(b"400 Bad Request", "invalid HTTP request (malformed or repeated headers)")


def header_deadline(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol closing connections whose headers take over `seconds`."""

    class HeaderDeadline(H11Protocol):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            """h11's refusals (malformed or repeated headers) as JSON, with the security headers."""
            self.transport.write(BAD_REQUEST)
            self.transport.close()

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(seconds, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self.conn.trailing_data[0]:
                self.transport.write(REQUEST_TIMEOUT)
            self.transport.close()

    return HeaderDeadline
