"""A server on 127.0.0.1 that answers index listings and unknown index names as the public
infini-gram and infini-gram mini servers do, for `audit corpora --live`.

What each flavour answers, and where that comes from:
- `INFINI_GRAM` (api/api_server.py of liujch1998/infini-gram, master, commit 37d2929):
  `GET /` is `jsonify(list(PROCESSOR_BY_INDEX.keys()))`, a JSON list of every index name.
- `INFINI_GRAM_S3` (the same file on branch s3, commit eac5260 "ask API server for demo
  indexes"): `GET /` lists `{"index": NAME, "desc": DESC}` for the indexes whose configuration
  has a `desc` only; the others are served all the same.
- `FORWARDING` (master, with `DOLMA_API_URL` set): the front server's own api_config.json is
  `[]` since commit 4a4bb10, so `GET /` lists nothing, while every `POST /` is forwarded and
  answered by the server behind it.
- `MINI` (api/api_server.py of xuhaoxh/infini-gram-mini, commit e628b09): only `POST /` is
  routed, so `GET /` is Flask's HTTP 405 page.
- `ATTRIBUTION` (allenai/infinigram-api, commit ce2072a): a FastAPI app routing `GET /indexes`
  (its index ids, a JSON list: two since commit a91cb4e), `GET /health/` and
  `POST /{index}/attribution`, so `GET /` and `POST /` are FastAPI's 404
  `{"detail": "Not Found"}`.
Every other flavour answers `POST /` for an unknown index with HTTP 400
`{"error": "[Flask] Invalid index: NAME"}`, a missing field with HTTP 400
`{"error": "[Flask] Missing required field: 'NAME'"}`, and a count with `count` (plus, on
infini-gram, `approx`, `token_ids` and `tokens`) and `latency`.  `forbidden = True` makes it
answer every request as the services' gateway answers a client it throttles: HTTP 403
`{"message": "Forbidden"}`, with no `error` key.

The index names are those of the servers' configurations: api/api_config_ai2.json of
liujch1998/infini-gram (master 37d2929; branch s3 e42ac48 for the `desc`s) and of
xuhaoxh/infini-gram-mini (e628b09).
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# api/api_config_ai2.json of liujch1998/infini-gram at 37d2929, in its order.
INFINI_GRAM_INDEXES = (
    "v4_pileval_llama", "v4_c4train_llama", "v4_piletrain_llama", "v4_rpj_llama_s4", "v4_dolma-v1_6-sample_llama",
    "v4_dolma-v1_7_llama", "v4_dclm-baseline_llama", "v4_olmo-mix-1124_llama", "v4_dolmino-mix-1124-minus-olmo-mix-1124_llama",
    "v4_olmo-2-0325-32b-instruct_llama", "v4_olmo-2-1124-13b-instruct_llama", "v4_olmoe-0125-1b-7b-instruct_llama",
)
# The same file on branch s3 at e42ac48: the indexes it gives a `desc` (listed by GET /), and
# the two it serves without one (not listed).
S3_DESCRIBED = {
    "v4_olmo-3-32b-think_olmo2": "OLMo 3 32B Think", "v4_olmo-3-7b-think_olmo2": "OLMo 3 7B Think",
    "v4_olmo-3-7b-instruct_olmo2": "OLMo 3 7B Instruct", "v4_olmo-2-0325-32b-instruct_llama": "OLMo 2 32B Instruct (4.6T tokens)",
    "v4_olmo-2-1124-13b-instruct_llama": "OLMo 2 13B Instruct (4.6T tokens)", "v4_olmoe-0125-1b-7b-instruct_llama": "OLMoE 1B 7B Instruct (4.6T tokens)",
    "v4_olmo-mix-1124_llama": "olmo-mix-1124 (4.6T tokens)", "v4_dclm-baseline_llama": "DCLM-baseline (4.3T tokens)",
    "v4_dolma-v1_7_llama": "Dolma-v1.7 (2.6T tokens)", "v4_rpj_llama_s4": "RedPajama (1.4T tokens)",
    "v4_piletrain_llama": "Pile-train (380B tokens)", "v4_c4train_llama": "C4-train (200B tokens)", "v4_pileval_llama": "Pile-val (390M tokens)",
}
S3_UNDESCRIBED = ("v4_dolmino-mix-1124-minus-olmo-mix-1124_llama", "v4_dolma-v1_6-sample_llama")
# api/api_config_ai2.json of xuhaoxh/infini-gram-mini at e628b09, in its order.
MINI_INDEXES = (
    "v2_pileval", "v2_piletrain", "v2_dolmino-mix-1124-minus-olmo-mix-1124", "v2_olmoe-mix-0924-nodclm", "v2_dclm_all",
    "v2_cc-2025-05", "v2_cc-2025-08", "v2_cc-2025-13", "v2_cc-2025-18", "v2_cc-2025-21",
)
# index_mappings.py of allenai/infinigram-api at ce2072a: what its GET /indexes lists.
ATTRIBUTION_INDEXES = ("olmo-2-0325-32b", "olmo-3-0625-32b-instruct")
# Werkzeug's page for a method a route does not take (Flask answers GET / so on the mini server).
FLASK_405 = (
    "<!doctype html>\n<html lang=en>\n<title>405 Method Not Allowed</title>\n<h1>Method Not Allowed</h1>\n"
    "<p>The method is not allowed for the requested URL.</p>\n"
)
# A stand-in for what a count of the empty string answers (the index's size); discovery reads
# only that a count came back.
EMPTY_COUNT = 1_000_000


class Flavour(StrEnum):
    INFINI_GRAM = "infini-gram"
    INFINI_GRAM_S3 = "infini-gram-s3"
    FORWARDING = "forwarding"
    MINI = "mini"
    ATTRIBUTION = "attribution"


@dataclass
class ListingServer:
    """The server: `indexes` it serves (by default its flavour's), `url` once started, and
    `log` of every (method, index or None) it was asked."""

    flavour: Flavour
    indexes: tuple[str, ...] = ()
    forbidden: bool = False
    log: list[tuple[str, str | None]] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        if not self.indexes:
            self.indexes = {
                Flavour.INFINI_GRAM: INFINI_GRAM_INDEXES, Flavour.FORWARDING: INFINI_GRAM_INDEXES,
                Flavour.INFINI_GRAM_S3: (*S3_DESCRIBED, *S3_UNDESCRIBED), Flavour.MINI: MINI_INDEXES,
                Flavour.ATTRIBUTION: ATTRIBUTION_INDEXES,
            }[self.flavour]
        self._server: ThreadingHTTPServer | None = None

    def listing(self) -> tuple[int, str, str]:
        """Status, content type and body of `GET /`."""
        if self.flavour == Flavour.MINI:
            return 405, "text/html; charset=utf-8", FLASK_405
        if self.flavour == Flavour.ATTRIBUTION:
            return 404, "application/json", json.dumps({"detail": "Not Found"})
        if self.flavour == Flavour.FORWARDING:
            names: list[Any] = []
        elif self.flavour == Flavour.INFINI_GRAM_S3:
            names = [{"index": name, "desc": S3_DESCRIBED[name]} for name in self.indexes if name in S3_DESCRIBED]
        else:
            names = list(self.indexes)
        return 200, "application/json", json.dumps(names)

    def query(self, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Status and JSON answer of `POST /`, checked in the order the servers check."""
        for key in ("query_type", "index") if self.flavour != Flavour.MINI else ("query_type", "index", "query"):
            if key not in data:
                return 400, {"error": f"[Flask] Missing required field: '{key}'"}
        if "query" not in data and self.flavour != Flavour.MINI:
            return 400, {"error": "[Flask] Exactly one of query and query_ids must be present!"}
        if data["index"] not in self.indexes:
            return 400, {"error": f"[Flask] Invalid index: {data['index']}"}
        if data["query_type"] != "count":
            return 400, {"error": f"[Flask] Invalid query_type: {data['query_type']}"}
        count = EMPTY_COUNT if data["query"] == "" else 0
        if self.flavour == Flavour.MINI:
            return 200, {"count": count, "latency": 0.5}
        return 200, {"count": count, "approx": False, "latency": 0.5, "token_ids": [], "tokens": []}

    def start(self) -> ListingServer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _handler(server: ListingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the server's `log` records what was asked."""

        def _send(self, status: int, content_type: str, body: str) -> None:
            raw = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(raw)))
            if status == 405:
                self.send_header("Allow", "OPTIONS, POST")
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            server.log.append(("GET", None if self.path == "/" else self.path))
            if server.forbidden:
                return self._send(403, "application/json", json.dumps({"message": "Forbidden"}))
            if server.flavour == Flavour.ATTRIBUTION and self.path == "/indexes":
                return self._send(200, "application/json", json.dumps(list(server.indexes)))
            if self.path != "/":
                return self._send(404, "application/json", json.dumps({"detail": "Not Found"}))
            self._send(*server.listing())

        def do_POST(self) -> None:
            data = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            server.log.append(("POST", data.get("index")))
            if server.forbidden:
                return self._send(403, "application/json", json.dumps({"message": "Forbidden"}))
            if server.flavour == Flavour.ATTRIBUTION:
                return self._send(404, "application/json", json.dumps({"detail": "Not Found"}))
            status, answer = server.query(data)
            self._send(status, "application/json", json.dumps(answer))

    return Handler
