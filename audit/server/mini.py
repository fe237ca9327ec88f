"""The infini-gram mini protocol (docs/source/api.rst of xuhaoxh/infini-gram-mini) over the
byte-level indexes `audit serve` holds, at `POST /mini/`: `count`, `find` and
`get_doc_by_rank`, answered as the public server answers them, so the mini backend can be run
against a corpus whose answers are known.  A byte-level index holds the UTF-8 bytes of the
text, as the mini FM-index does, so a string's count is the count of its bytes.

`get_doc_by_rank` follows the public server's code (xuhaoxh/infini-gram-mini at e628b09:
api/api_server.py, engine/src/engine.py, engine/src/cpp_engine.h `get_doc_by_rank`), not its
documentation, which speaks of characters:
- `needle_offset`, `doc_len`, `disp_len` and `max_ctx_len` are byte counts;
- the needle's length is `len(query)` in characters, so a multi-byte query reaches fewer
  bytes past the match than it holds (the window may even end inside the match);
- a window that cuts a multi-byte character is answered with HTTP 200 and `DECODE_ERROR`;
- `spans` split the text on every occurrence of the query string, labelled "0";
- `metadata` is the document's JSON line without its newline;
- every answer, that error included, carries the engine's `latency` in milliseconds.
"""
from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict

from audit.corpora.base import JsonObject
from audit.corpora.protocol import MAX_CTX_LEN, MAX_QUERY_CHARS
from audit.server.engine import ServedIndex
from audit.server.messages import QueryError

MINI_QUERY_TYPES = ("count", "find", "get_doc_by_rank")
DEFAULT_CTX_LEN = 1000
DECODE_ERROR = (
    "Failed to decode document text with UTF-8. This is likely because the context was cut off in the middle of a multi-byte char. "
    "Please try with a different max context length."
)


class MiniRequest(BaseModel):
    """One request to `POST /mini/`, as the infini-gram mini API documents it."""

    model_config = ConfigDict(extra="forbid")

    index: str
    query_type: str
    query: str
    s: int | None = None
    rank: int | None = None
    max_ctx_len: int | None = None


def answer_mini(served: ServedIndex, request: MiniRequest) -> JsonObject:
    """The response to one request; raises QueryError for anything the protocol rejects."""
    if served.local is None:
        raise QueryError(f"Invalid index: {served.name} is tokenized; the mini protocol serves byte-level indexes only", status=400)
    if request.query_type not in MINI_QUERY_TYPES:
        raise QueryError(f"Invalid query_type: {request.query_type}", status=400)
    if len(request.query) > MAX_QUERY_CHARS:
        raise QueryError(f"Please limit your input to <= {MAX_QUERY_CHARS} characters!")
    started = time.perf_counter()
    with served.reaching():
        result = _answer(served, request)
    result["latency"] = (time.perf_counter() - started) * 1000
    return result


def _answer(served: ServedIndex, request: MiniRequest) -> JsonObject:
    ids = list(request.query.encode("utf-8"))
    if request.query_type == "count":
        return {"count": int(ServedIndex._engine(served.engine.count(input_ids=ids))["count"])}
    if request.query_type == "find":
        result = ServedIndex._engine(served.engine.find(input_ids=ids))
        return {"cnt": int(result["cnt"]), "segment_by_shard": [list(segment) for segment in result["segment_by_shard"]]}
    return _document(served, request)


def _document(served: ServedIndex, request: MiniRequest) -> JsonObject:
    """`max_ctx_len` bytes before the match and `len(query)` + `max_ctx_len` bytes from its
    start, within its document, or the decode error when either end cuts a character."""
    shards = served.shard_count
    if request.s is None or request.rank is None:
        raise QueryError("get_doc_by_rank needs s and rank", status=400)
    if not 0 <= request.s < shards:
        raise QueryError(f"s must be an integer in range [0, {shards})")
    context = request.max_ctx_len if request.max_ctx_len is not None else DEFAULT_CTX_LEN
    if not 1 <= context <= MAX_CTX_LEN:
        raise QueryError(f"max_ctx_len must be an integer in [1, {MAX_CTX_LEN}]")
    needle_len = len(request.query)
    # infini-gram's engine centres its window on the match: half of it covers the bytes before
    # the match, the other half the needle and the bytes after it.
    shown = ServedIndex._engine(served.engine.get_doc_by_rank(s=request.s, rank=request.rank, max_disp_len=2 * (context + needle_len)))
    data, at = bytes(shown["token_ids"]), int(shown["needle_offset"])
    start, end = max(0, at - context), min(len(data), at + needle_len + context)
    try:
        text = data[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return {"error": DECODE_ERROR}
    return {
        "doc_ix": int(shown["doc_ix"]),
        "doc_len": int(shown["doc_len"]),
        "disp_len": end - start,
        "needle_offset": at - start,
        "metadata": str(shown.get("metadata", "")).removesuffix("\n"),
        "text": text,
        "spans": mini_spans(text, request.query),
    }


def mini_spans(text: str, needle: str) -> list[list[str | None]]:
    """The text cut at every occurrence of the needle, left to right without overlaps, each
    occurrence labelled "0" (the public server's highlighting); the whole text when the
    needle is empty."""
    if not needle:
        return [[text, None]]
    spans: list[list[str | None]] = []
    rest = text
    while (at := rest.find(needle)) >= 0:
        if at:
            spans.append([rest[:at], None])
        spans.append([needle, "0"])
        rest = rest[at + len(needle) :]
    if rest:
        spans.append([rest, None])
    return spans
