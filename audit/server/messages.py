"""The messages of the infini-gram query protocol, as the public API (api.infini-gram.io)
documents them field for field: the request, the per-request limits, a document shown, the
response every query type fills part of, and the error the protocol answers with."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from audit.corpora.base import JsonObject
from audit.corpora.protocol import MAX_DISP_LEN, MAX_QUERY_CHARS, MAX_QUERY_TOKENS
from audit.errors import AuditError

# A plain query's token ids, or a CNF query's: clauses of terms of ids.
TokenIds = list[int]
CnfIds = list[list[list[int]]]
QueryIds = TokenIds | CnfIds

QUERY_TYPES = (
    "count",
    "prob",
    "ntd",
    "infgram_prob",
    "infgram_ntd",
    "find",
    "find_cnf",
    "get_doc_by_rank",
    "get_doc_by_ptr",
    "search_docs",
    "creativity",
)


class QueryRequest(BaseModel):
    """One request to `POST /`, as the infini-gram API documents it (`corpus` is its old name
    for `index`)."""

    model_config = ConfigDict(extra="forbid")

    index: str | None = None
    corpus: str | None = None
    query_type: str
    query: str | None = None
    query_ids: QueryIds | None = None
    maxnum: int | None = None
    max_disp_len: int | None = None
    max_clause_freq: int | None = None
    max_diff_tokens: int | None = None
    max_support: int | None = None
    s: int | None = None
    rank: int | None = None
    ptr: int | None = None


class Limits(BaseModel):
    """The per-request limits, defaulting to the public API's."""

    max_query_chars: int = MAX_QUERY_CHARS
    max_query_tokens: int = MAX_QUERY_TOKENS
    max_clauses_per_cnf: int = 4
    max_terms_per_clause: int = 4
    max_support: int = 1000
    max_clause_freq: int = 500000
    max_diff_tokens: int = 1000
    maxnum: int = 10
    max_disp_len: int = MAX_DISP_LEN


class QueryError(AuditError):
    """A request the protocol answers with `{"error": ...}`; `status` is its HTTP status (the
    public API answers input problems found while processing with 200, malformed requests with
    400)."""

    def __init__(self, message: str, status: int = 200) -> None:
        super().__init__(message)
        self.status = status


class Document(BaseModel):
    doc_ix: int
    doc_len: int
    disp_len: int
    needle_offset: int
    metadata: str
    token_ids: list[int]
    spans: list[tuple[str, str | None]]
    blocked: bool = False


class QueryResponse(BaseModel):
    """Every field any query type returns; each response carries the ones its type defines."""

    model_config = ConfigDict(extra="forbid")

    count: int | None = None
    approx: bool | None = None
    cnt: int | None = None
    segment_by_shard: list[tuple[int, int]] | None = None
    ptrs_by_shard: list[list[int]] | None = None
    prob: float | None = None
    prompt_cnt: int | None = None
    cont_cnt: int | None = None
    suffix_len: int | None = None
    longest_suffix: str | None = None
    result_by_token_id: dict[int, dict[str, Any]] | None = None
    idxs: list[int] | None = None
    documents: list[Document] | None = None
    message: str | None = None
    rs: list[int] | None = None
    doc_ix: int | None = None
    doc_len: int | None = None
    disp_len: int | None = None
    needle_offset: int | None = None
    metadata: str | None = None
    spans: list[tuple[str, str | None]] | None = None
    blocked: bool | None = None
    latency: float = 0.0
    token_ids: QueryIds = Field(default_factory=list)
    tokens: list[str] | list[list[list[str]]] = Field(default_factory=list)

    def to_json(self) -> JsonObject:
        return self.model_dump(exclude_none=True)
