"""The infini-gram query protocol over local indexes: one `ServedIndex` per index name.

Requests and responses follow the public infini-gram API (api.infini-gram.io) field for field,
so its documented curl examples and any infini-gram client work against `audit serve`.  The
searches themselves are infini-gram's own engine (`infini_gram.engine.InfiniGramEngine`), so
the semantics of `find`, `prob`, `ntd`, CNF queries and document retrieval are exactly the
engine's.  `creativity` (the longest match at every position, as infini-gram's creativity
service answers it) runs on this project's suffix search for byte-level indexes.

A byte-level (u8) index has no tokenizer: a string query is "tokenized" as its UTF-8 bytes, so
token ids are byte values.  A token-level index built by infini-gram's own indexer is served
with the tokenizer it was built with (a `tokenizer.json`), the way the public API serves its
Llama-2 (u16) and OLMo-2 (u32) indexes.  The tokenizer sets the token width, as it does for the
indexer: u16 when its ids fit below u16's document separator 0xffff (at most 65,535 ids), else
u32; an index on disk of another width is refused, never misread.  The engine reports a
document's end as the tokenizer's end-of-text id (see `Tokenizer.eos_id`).

With a Ray executor a byte-level index is held by shard actors (`DistributedIndex`) and the
engine's answers are computed from theirs (`audit.server.sharded`), equal field for field; CNF
queries are refused there with 400, and a shard that fails even after Ray's restarts and
retries answers 503, never a wrong count.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from audit.corpora.base import JsonObject
from audit.corpora.distributed import DistributedIndex
from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError, check_index
from audit.executors import LOCAL, Executor, connect
from audit.server.messages import QUERY_TYPES, CnfIds, Document, Limits, QueryError, QueryIds, QueryRequest, QueryResponse
from audit.server.sharded import EngineOrder, ShardedEngine
from audit.server.tokenizer import Tokenizer


def actors_refusal(name: str, tokenizer: Tokenizer, executor: Executor) -> str | None:
    """Why `executor`'s shard actors cannot serve an index read with `tokenizer` (None: they
    can): they hold byte-level indexes only.  Known without the cluster, so a server refuses
    before it joins one."""
    if executor.distributed and tokenizer.kind != "bytes":
        return f"a tokenized index is not served by shard actors (--executor {executor}), only a byte-level one; serve {name} with --executor local"
    return None


@dataclass
class ServedIndex:
    """One index `audit serve` answers for: the engine over its files and its tokenizer, or,
    with a Ray `executor`, the engine's answers from `actors` shard actors (one per node of the
    cluster by default)."""

    name: str
    path: Path
    tokenizer: Tokenizer
    limits: Limits = field(default_factory=Limits)
    description: str = ""
    executor: Executor = LOCAL
    actors: int | None = None

    def __post_init__(self) -> None:
        if "tokenized" in str(self.path):
            # The engine tells its shard files by that word anywhere in their path, and crashes.
            raise ValueError("infini-gram's engine crashes on an index whose path holds the word 'tokenized'; serve it from another path (a link will do)")
        if self.executor.distributed:
            self._open_actors()
        else:
            self._open_engine()

    def _open_actors(self) -> None:
        refusal = actors_refusal(self.name, self.tokenizer, self.executor)
        if refusal is not None:
            raise ValueError(refusal)
        ray = connect(self.executor)
        self.local = DistributedIndex(self.path, name=self.name, executor=self.executor, groups=self.actors)
        self.engine = ShardedEngine(self.local, self.tokenizer.eos_id)
        self.order = self.engine.order
        self.shard_count, self.token_count = self.engine.get_num_shards(), self.engine.get_total_tok_cnt()
        address = self.executor.address or ray.get_runtime_context().gcs_address
        self.served_by = f"{len(self.local.groups)} Ray actors at {address}"
        # What a call to an actor raises once Ray has restarted it and retried the call in vain.
        self.unavailable: tuple[type[Exception], ...] = (ray.exceptions.RayError, ConnectionError)

    def _open_engine(self) -> None:
        from infini_gram.engine import InfiniGramEngine

        # No prefetching, as the public API's servers run it: a lookup then takes microseconds.
        # The files are checked first (LocalIndex checks a byte-level index): the engine asserts
        # on inconsistent sizes, which would abort the server, reads a cut table silently, and
        # reads an index of another width as garbage.
        tokenizer = self.tokenizer
        byte_level = tokenizer.kind == "bytes"
        self.local = LocalIndex(self.path, name=self.name) if byte_level else None
        if not byte_level:
            try:
                check_index(self.path, token_width=tokenizer.token_width)
            except IndexOpenError as error:
                raise IndexOpenError(f"{error} (read as {tokenizer.token_dtype}: its tokenizer {tokenizer.path} has {tokenizer.vocab_size:,} ids)", detail=error.detail) from None
        self.engine = InfiniGramEngine(
            index_dir=str(self.path),
            eos_token_id=tokenizer.eos_id,
            vocab_size=tokenizer.engine_vocab_size,
            token_dtype=tokenizer.token_dtype,
            ds_prefetch_depth=0,
            sa_prefetch_depth=0,
            od_prefetch_depth=0,
        )
        self.shard_count = self.engine.engine.get_num_shards()
        self.token_count = int(sum(self.engine.engine.get_tok_cnt(s) for s in range(self.shard_count)))
        self.order = EngineOrder.of(self.local.layout, self.local.info.documents) if self.local else None
        self.served_by = "infini-gram's engine in the server process"
        self.unavailable = ()

    @property
    def distributed(self) -> bool:
        return isinstance(self.engine, ShardedEngine)

    def close(self) -> None:
        """Stop the shard actors, if any."""
        if isinstance(self.local, DistributedIndex):
            self.local.close()

    @contextmanager
    def reaching(self) -> Iterator[None]:
        """A shard actor that fails even after Ray's restarts and retries is a 503, which
        clients retry, never an answer from the shards that did reply."""
        try:
            yield
        except self.unavailable as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise QueryError(f"index {self.name}: a shard actor did not answer after Ray's restarts and retries ({type(error).__name__}: {reason}); retry shortly, and restart the server if this persists", status=503) from None

    def describe(self) -> JsonObject:
        return {
            "name": self.name,
            "documents": self.engine.get_total_doc_cnt(),
            "tokens": self.token_count,
            "tokenizer": "bytes (UTF-8)" if self.local else str(self.tokenizer.path),
            "token_dtype": self.tokenizer.token_dtype,
            "fingerprint": self.local.info.fingerprint if self.local else None,
            "served_by": self.served_by,
            "description": self.description,
            "limits": self.limits.model_dump(),
        }

    def answer(self, request: QueryRequest) -> JsonObject:
        """The response to one request; raises QueryError for anything the protocol rejects."""
        if request.query_type not in QUERY_TYPES:
            raise QueryError(f"Invalid query_type: {request.query_type}", status=400)
        if (request.query is None) == (request.query_ids is None):
            raise QueryError("Exactly one of query and query_ids must be present!", status=400)
        query_ids, tokens, cnf = self._parse(request)
        started = time.perf_counter()
        with self.reaching():
            result = getattr(self, f"_{request.query_type}")(query_ids, cnf, request)
        result.latency = (time.perf_counter() - started) * 1000
        result.token_ids = query_ids
        result.tokens = tokens
        return result.to_json()

    def _parse(self, request: QueryRequest) -> tuple[QueryIds, list[str] | list[list[list[str]]], bool]:
        limits = self.limits
        if request.query is not None:
            if len(request.query) > limits.max_query_chars:
                raise QueryError(f"Please limit your input to <= {limits.max_query_chars} characters!")
            if " AND " in request.query or " OR " in request.query:
                ids: QueryIds | None = [[self.tokenizer.encode(t) for t in clause.split(" OR ")] for clause in request.query.split(" AND ")]
            else:
                ids = self.tokenizer.encode(request.query)
        else:
            ids = request.query_ids
        top = self.tokenizer.vocab_size
        if all(isinstance(i, int) for i in ids):
            if len(ids) > limits.max_query_tokens:
                raise QueryError(f"Please limit your input to <= {limits.max_query_tokens} tokens!")
            if any(i < 0 or i >= top for i in ids):
                raise QueryError("Some item(s) in your query_ids are out-of-range!")
            return ids, self.tokenizer.tokens(ids), False
        if sum(len(term) for clause in ids for term in clause) > limits.max_query_tokens:
            raise QueryError(f"Please limit your input to <= {limits.max_query_tokens} tokens!")
        if len(ids) > limits.max_clauses_per_cnf:
            raise QueryError(f"Please enter at most {limits.max_clauses_per_cnf} disjunctive clauses!")
        for clause in ids:
            if len(clause) > limits.max_terms_per_clause:
                raise QueryError(f"Please enter at most {limits.max_terms_per_clause} terms in each disjunctive clause!")
            if any(i < 0 or i >= top for term in clause for i in term):
                raise QueryError("Some item(s) in your query_ids are out-of-range!")
        return ids, [[self.tokenizer.tokens(term) for term in clause] for clause in ids], True

    @staticmethod
    def _bounded(name: str, value: int | None, top: int) -> int | None:
        if value is not None and not 0 < value <= top:
            raise QueryError(f"{name} must be an integer in [1, {top}]!")
        return value

    @staticmethod
    def _engine(result: JsonObject) -> JsonObject:
        if "error" in result:
            raise QueryError(result["error"])
        return result

    @staticmethod
    def _simple(query_type: str, cnf: bool) -> None:
        if cnf:
            raise QueryError(f"{query_type} does not take a CNF query")

    def _cnf_served(self, query_type: str) -> None:
        if self.distributed:
            raise QueryError(
                f"{query_type} with a CNF (AND/OR) query is not served from a distributed index: {self.name} is held by Ray shard actors, "
                "and the engine samples CNF clauses over all shards at once; serve it with --executor local for CNF queries",
                status=400,
            )

    def _count(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        if not cnf:
            return QueryResponse(**self._engine(self.engine.count(input_ids=ids)))
        self._cnf_served("count")
        result = self.engine.count_cnf(
            cnf=ids,
            max_clause_freq=self._bounded("max_clause_freq", request.max_clause_freq, self.limits.max_clause_freq),
            max_diff_tokens=self._bounded("max_diff_tokens", request.max_diff_tokens, self.limits.max_diff_tokens),
        )
        return QueryResponse(**self._engine(result))

    def _prob(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        self._simple("prob", cnf)
        if not ids:
            raise QueryError("Please provide a non-empty query!")
        return QueryResponse(**self._engine(self.engine.prob(prompt_ids=ids[:-1], cont_id=ids[-1])))

    def _distribution(self, result: JsonObject) -> JsonObject:
        result = self._engine(result)
        result["result_by_token_id"] = {
            token: {**value, "token": self.tokenizer.tokens([token])[0]} for token, value in result["result_by_token_id"].items()
        }
        return result

    def _ntd(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        self._simple("ntd", cnf)
        support = self._bounded("max_support", request.max_support, self.limits.max_support)
        return QueryResponse(**self._distribution(self.engine.ntd(prompt_ids=ids, max_support=support)))

    def _infgram_prob(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        self._simple("infgram_prob", cnf)
        if not ids:
            raise QueryError("Please provide a non-empty query!")
        result = self._engine(self.engine.infgram_prob(prompt_ids=ids[:-1], cont_id=ids[-1]))
        suffix = ids[len(ids) - 1 - result["suffix_len"] : -1]
        return QueryResponse(**result, longest_suffix=self.tokenizer.decode(suffix))

    def _infgram_ntd(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        self._simple("infgram_ntd", cnf)
        support = self._bounded("max_support", request.max_support, self.limits.max_support)
        result = self._distribution(self.engine.infgram_ntd(prompt_ids=ids, max_support=support))
        suffix = ids[len(ids) - result["suffix_len"] :] if result["suffix_len"] else []
        return QueryResponse(**result, longest_suffix=self.tokenizer.decode(suffix))

    def _find(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        if cnf:
            return self._find_cnf(ids, cnf, request)
        return QueryResponse(**self._engine(self.engine.find(input_ids=ids)))

    def _find_cnf(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        self._cnf_served(request.query_type)
        cnf_ids = ids if cnf else [[ids]]
        result = self.engine.find_cnf(
            cnf=cnf_ids,
            max_clause_freq=self._bounded("max_clause_freq", request.max_clause_freq, self.limits.max_clause_freq),
            max_diff_tokens=self._bounded("max_diff_tokens", request.max_diff_tokens, self.limits.max_diff_tokens),
        )
        return QueryResponse(**self._engine(result))

    def _spans(self, token_ids: list[int], needles: list[list[list[int]]]) -> list[tuple[str, str | None]]:
        """The displayed tokens cut into text spans, each occurrence of a query term labelled
        with its clause number, as the public API labels them ("0", "1", ...)."""
        owner: list[int | None] = [None] * len(token_ids)
        labels: list[str] = []
        for clause_number, clause in enumerate(needles):
            for term in clause:
                width, at = len(term), 0
                while width and at + width <= len(token_ids):
                    if token_ids[at : at + width] == term and all(o is None for o in owner[at : at + width]):
                        owner[at : at + width] = [len(labels)] * width
                        labels.append(str(clause_number))
                        at += width
                    else:
                        at += 1
        spans: list[tuple[str, str | None]] = []
        start = 0
        for i in range(1, len(token_ids) + 1):
            if i == len(token_ids) or owner[i] != owner[start]:
                label = None if owner[start] is None else labels[owner[start]]
                spans.append((self.tokenizer.decode(token_ids[start:i]), label))
                start = i
        return spans

    def _document(self, result: JsonObject, needles: CnfIds) -> Document:
        result = self._engine(result)
        return Document(**result, spans=self._spans(list(result["token_ids"]), needles))

    @staticmethod
    def _needles(ids: QueryIds, cnf: bool) -> CnfIds:
        return ids if cnf else ([[ids]] if ids else [])

    def _get_doc_by_rank(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        shards = self.shard_count
        if request.s is None or request.rank is None:
            raise QueryError("get_doc_by_rank needs s and rank", status=400)
        if not 0 <= request.s < shards:
            raise QueryError(f"s must be an integer in range [0, {shards})")
        disp = self._bounded("max_disp_len", request.max_disp_len, self.limits.max_disp_len) or 1000
        document = self._document(self.engine.get_doc_by_rank(s=request.s, rank=request.rank, max_disp_len=disp), self._needles(ids, cnf))
        return QueryResponse(**document.model_dump(exclude={"token_ids"}), token_ids=document.token_ids)

    def _get_doc_by_ptr(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        shards = self.shard_count
        if request.s is None or request.ptr is None:
            raise QueryError("get_doc_by_ptr needs s and ptr", status=400)
        if not 0 <= request.s < shards:
            raise QueryError(f"s must be an integer in range [0, {shards})")
        disp = self._bounded("max_disp_len", request.max_disp_len, self.limits.max_disp_len) or 1000
        document = self._document(self.engine.get_doc_by_ptr(s=request.s, ptr=request.ptr, max_disp_len=disp), self._needles(ids, cnf))
        return QueryResponse(**document.model_dump(exclude={"token_ids"}), token_ids=document.token_ids)

    def _search_docs(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        maxnum = self._bounded("maxnum", request.maxnum, self.limits.maxnum) or 1
        disp = self._bounded("max_disp_len", request.max_disp_len, self.limits.max_disp_len) or 1000
        if cnf:
            self._cnf_served("search_docs")
            result = self.engine.search_docs_cnf(
                cnf=ids,
                maxnum=maxnum,
                max_disp_len=disp,
                max_clause_freq=self._bounded("max_clause_freq", request.max_clause_freq, self.limits.max_clause_freq),
                max_diff_tokens=self._bounded("max_diff_tokens", request.max_diff_tokens, self.limits.max_diff_tokens),
            )
        else:
            result = self.engine.search_docs(input_ids=ids, maxnum=maxnum, max_disp_len=disp)
        result = self._engine(result)
        needles = self._needles(ids, cnf)
        documents = [Document(**d, spans=self._spans(list(d["token_ids"]), needles)) for d in result.pop("documents")]
        found = result["cnt"]
        about = "Approximately " if result["approx"] else ""
        message = f"{about}{found} occurrences found. Displaying the documents of occurrences #{result['idxs']}" if found else "0 occurrences found"
        return QueryResponse(**result, documents=documents, message=message)

    def _creativity(self, ids: QueryIds, cnf: bool, request: QueryRequest) -> QueryResponse:
        """For each position l, l plus the length of the longest prefix of ids[l:] in the
        index: infini-gram's `creativity` output, computed by the project's suffix search."""
        self._simple("creativity", cnf)
        if not ids:
            raise QueryError("Please provide a non-empty query!")
        if self.local is None:
            raise QueryError("creativity is served for byte-level indexes only")
        lengths = self.local.longest_match_bytes(bytes(ids))
        return QueryResponse(rs=(lengths + np.arange(len(ids))).tolist())
