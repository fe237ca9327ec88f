"""An infini-gram mini server on 127.0.0.1 over a list of documents, written from the public
server's code (xuhaoxh/infini-gram-mini at e628b09: api/api_server.py, engine/src/engine.py,
engine/src/cpp_engine.h), independently of `audit serve`'s `/mini/` route, so the two can be
held against each other and the client against the quirks:

- one shard: every document's UTF-8 bytes after a separator byte, and a suffix array over it
  (suffixes ordered by their first `KEY_BYTES` bytes, enough for the short queries of tests);
- `get_doc_by_rank` cuts `max_ctx_len` bytes before the match and `len(query)` (characters)
  plus `max_ctx_len` bytes from its start, within the document; `needle_offset`, `doc_len`
  and `disp_len` are bytes; a window cutting a character is HTTP 200 `{"error": DECODE_ERROR,
  "latency": ...}`; `spans` split the text at each occurrence of the query;
- a missing field is 400 `[Flask] Missing required field: 'NAME'`, an unknown index 400
  `[Flask] Invalid index: NAME`, an unknown query type 400 `[Flask] Invalid query_type: NAME`,
  and `get_doc_by_rank` without `max_ctx_len` 500 `[Flask] Internal server error: ...` (the
  server's Python raises a TypeError);
- `undecodable=True` makes it refuse every window with the decode error, as a server would
  whose every cut landed inside a character.
Every request body is kept in `requests`.
"""
from __future__ import annotations

import bisect
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DECODE_ERROR = (
    "Failed to decode document text with UTF-8. This is likely because the context was cut off in the middle of a multi-byte char. "
    "Please try with a different max context length."
)
SEPARATOR = b"\xff"
KEY_BYTES = 256


class MiniReplay:
    """The server, started on a free port; `url` ends with a slash, as the public endpoint."""

    def __init__(self, documents: list[str], index: str = "replay", undecodable: bool = False) -> None:
        self.index, self.undecodable = index, undecodable
        self.data = b"".join(SEPARATOR + document.encode("utf-8") for document in documents)
        self.starts = [i for i, byte in enumerate(self.data) if byte == SEPARATOR[0]]
        self.suffixes = sorted(range(len(self.data)), key=lambda i: self.data[i : i + KEY_BYTES])
        self.keys = [self.data[i : i + KEY_BYTES] for i in self.suffixes]
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one request body."""
        self.requests.append(dict(data))
        try:
            query_type, index, query = data.pop("query_type"), data.pop("index"), data.pop("query")
        except KeyError as missing:
            return 400, {"error": f"[Flask] Missing required field: {missing}"}
        if index != self.index:
            return 400, {"error": f"[Flask] Invalid index: {index}"}
        if query_type not in ("count", "find", "get_doc_by_rank"):
            return 400, {"error": f"[Flask] Invalid query_type: {query_type}"}
        started = time.perf_counter()
        try:
            result = getattr(self, query_type)(query, **data)
        except TypeError as error:
            return 500, {"error": f"[Flask] Internal server error: {error}"}
        result["latency"] = (time.perf_counter() - started) * 1000
        return 200, result

    def find(self, query: str) -> dict[str, Any]:
        needle = query.encode("utf-8")
        lo = bisect.bisect_left(self.keys, needle)
        hi = lo
        while hi < len(self.keys) and self.keys[hi].startswith(needle):
            hi += 1
        return {"cnt": hi - lo, "segment_by_shard": [[lo, hi]]}

    def count(self, query: str) -> dict[str, Any]:
        return {"count": self.find(query)["cnt"]}

    def get_doc_by_rank(self, query: str, s: int, rank: int, max_ctx_len: int) -> dict[str, Any]:
        ptr = self.suffixes[rank]
        doc = bisect.bisect_right(self.starts, ptr) - 1
        doc_start = self.starts[doc] + 1
        doc_end = self.starts[doc + 1] if doc + 1 < len(self.starts) else len(self.data)
        start = max(doc_start, 0 if ptr < max_ctx_len else ptr - max_ctx_len)
        end = min(doc_end, ptr + len(query) + max_ctx_len)
        try:
            if self.undecodable:
                raise UnicodeDecodeError("utf-8", b"", 0, 1, "refused")
            text = self.data[start:end].decode("utf-8") if start < end else ""
        except UnicodeDecodeError:
            return {"error": DECODE_ERROR}
        spans = [[text, None]] if not query else _highlight(text, query)
        return {"doc_ix": doc, "doc_len": doc_end - doc_start, "disp_len": end - start, "needle_offset": ptr - start, "metadata": "", "text": text, "spans": spans}


def _highlight(haystack: str, needle: str) -> list[list[str | None]]:
    """The public server's spans: its first occurrence of the needle, then again on the rest."""
    spans: list[list[str | None]] = []
    while needle in haystack:
        at = haystack.index(needle)
        if at > 0:
            spans.append([haystack[:at], None])
        spans.append([haystack[at : at + len(needle)], "0"])
        haystack = haystack[at + len(needle) :]
    if haystack:
        spans.append([haystack, None])
    return spans


def _handler(replay: MiniReplay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            status, answer = replay.answer(body)
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read `requests`."""

    return Handler
