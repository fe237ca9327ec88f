"""The infini-gram mini protocol (docs/source/api.rst of xuhaoxh/infini-gram-mini) over the
byte-level indexes `audit serve` holds, at `POST /mini/`: `count`, `find` and
`get_doc_by_rank` with character-level queries, so the mini backend can be run against a
corpus whose answers are known.  A byte-level index holds the UTF-8 bytes of the text, so a
string's count is the count of its bytes; the one difference from the public servers is the
empty query, counted in bytes here and in characters there.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from audit.corpora.base import Occurrence
from audit.corpora.protocol import MAX_CTX_LEN, MAX_QUERY_CHARS
from audit.server.engine import QueryError, ServedIndex

MINI_QUERY_TYPES = ("count", "find", "get_doc_by_rank")
DEFAULT_CTX_LEN = 1000


class MiniRequest(BaseModel):
    """One request to `POST /mini/`, as the infini-gram mini API documents it."""

    model_config = ConfigDict(extra="forbid")

    index: str
    query_type: str
    query: str
    s: int | None = None
    rank: int | None = None
    max_ctx_len: int | None = None


def answer_mini(served: ServedIndex, request: MiniRequest) -> dict[str, Any]:
    """The response to one request; raises QueryError for anything the protocol rejects."""
    if served.local is None:
        raise QueryError(f"Invalid index: {served.name} is tokenized; the mini protocol serves byte-level indexes only", status=400)
    if request.query_type not in MINI_QUERY_TYPES:
        raise QueryError(f"Invalid query_type: {request.query_type}", status=400)
    if len(request.query) > MAX_QUERY_CHARS:
        raise QueryError(f"Please limit your input to <= {MAX_QUERY_CHARS} characters!")
    ids = list(request.query.encode("utf-8"))
    with served.reaching():
        return _answer(served, request, ids)


def _answer(served: ServedIndex, request: MiniRequest, ids: list[int]) -> dict[str, Any]:
    if request.query_type == "count":
        return {"count": int(ServedIndex._engine(served.engine.count(input_ids=ids))["count"])}
    if request.query_type == "find":
        result = ServedIndex._engine(served.engine.find(input_ids=ids))
        return {"cnt": int(result["cnt"]), "segment_by_shard": [list(segment) for segment in result["segment_by_shard"]]}
    return _document(served, request, len(ids))


def _document(served: ServedIndex, request: MiniRequest, needle_bytes: int) -> dict[str, Any]:
    shards = served.shard_count
    if request.s is None or request.rank is None:
        raise QueryError("get_doc_by_rank needs s and rank", status=400)
    if not 0 <= request.s < shards:
        raise QueryError(f"s must be an integer in range [0, {shards})")
    context = request.max_ctx_len if request.max_ctx_len is not None else DEFAULT_CTX_LEN
    if not 1 <= context <= MAX_CTX_LEN:
        raise QueryError(f"max_ctx_len must be an integer in [1, {MAX_CTX_LEN}]")
    reach = 4 * context
    shown = ServedIndex._engine(served.engine.get_doc_by_rank(s=request.s, rank=request.rank, max_disp_len=needle_bytes + 2 * reach))
    data, at = bytes(shown["token_ids"]), int(shown["needle_offset"])
    before = data[:at].decode("utf-8", errors="ignore")[-context:]
    needle = data[at : at + needle_bytes].decode("utf-8", errors="ignore")
    after = data[at + needle_bytes :].decode("utf-8", errors="ignore")[:context]
    document = int(shown["doc_ix"])
    # The engine numbers documents in its own shard order; the index reads them by its own numbers.
    whole = served.local.surrounding(Occurrence(served.order.own_document(document), 0), 0, int(shown["doc_len"])).decode("utf-8", errors="ignore")
    text = before + needle + after
    spans = [[part, label] for part, label in ((before, None), (needle, "0"), (after, None)) if part]
    return {"doc_ix": document, "doc_len": len(whole), "disp_len": len(text), "needle_offset": len(before), "metadata": shown.get("metadata", ""), "text": text, "spans": spans}
