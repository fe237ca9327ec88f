"""The count and find requests of one API corpus, each asked once.

A field's questions repeat across a variant's figures (the whole field is counted to see
whether it matches whole, then again for its exact count) and across variants, so every plain
answer is kept for the run.  Presence questions go through `audit.corpora.grouped`: several pieces, each in every
surface form, in one OR query where the server takes CNF queries (the first refusal turns that
off for the corpus and is recorded in `details["grouped"]["cnf_refused"]`).

Which requests a field sends depends on that field's own answers only (`FieldState`), never on
what other fields, asked side by side, happened to learn first: a run repeated from the response
cache then sends the same requests and finds every answer there.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from audit.corpora.cache import JsonObject
from audit.corpora.client import ApiQueryError, InfiniGramClient
from audit.corpora.grouped import QueryLimits, pack, resolve
from audit.corpora.surface import disjunction

MEMO_ENTRIES = 1_000_000
KEYS = ("count", "find")


@dataclass
class FieldState:
    """What one text's presence questions have learned: how many were asked and found (their
    share sets the group size), and the query strings an OR answer found absent."""

    asked: int = 0
    found: int = 0
    absent: set[str] = field(default_factory=set)


Question = TypeVar("Question")
Answer = TypeVar("Answer")


class RunAll(Protocol):
    """Maps a function over questions, side by side as the corpus's thread pool allows."""

    def __call__(self, ask: Callable[[Question], Answer], questions: list[Question], /) -> list[Answer]: ...


class Requests:
    """Plain `count`/`find` answers, memoised, and presence questions answered by groups."""

    def __init__(self, client: InfiniGramClient, limits: QueryLimits, run_all: RunAll, details: JsonObject) -> None:
        self.client, self.limits, self.run_all = client, limits, run_all
        self.details = details
        self.cnf: bool | None = None
        self.find_for_count = True
        self._memo: dict[tuple[str, str], JsonObject] = {}
        self._lock = threading.Lock()

    def ask(self, query_type: str, form: str) -> JsonObject:
        """The answer to a plain `count` or `find` of `form`, asked at most once.  On the
        infini-gram protocol (`find_for_count`) a count is asked as a `find`, which answers the
        same count (the engine's `count` is its `find`) and serves a later search for the same
        string's occurrences."""
        if query_type == "count" and self.find_for_count:
            found = self.ask("find", form)
            return {"count": int(found.get("cnt", 0)), **{k: found[k] for k in ("token_ids", "tokens") if k in found}}
        answer = self._memo.get((query_type, form))
        if answer is None:
            answer = self.client.query(query_type, query=form)
            with self._lock:
                if len(self._memo) >= MEMO_ENTRIES:
                    self._memo.clear()
                self._memo[query_type, form] = answer
        return answer

    def any_occurs(self, terms: Sequence[str], known: frozenset[str], learned: set[str]) -> bool:
        """Whether any of `terms` occurs: one OR query when they fit one and the server takes
        it, else each in turn until one does; terms in `known` (this text's earlier answers
        found them absent) are left out, and the terms an OR query finds absent are added to
        `learned`."""
        terms = [t for t in dict.fromkeys(terms) if t not in known]
        if not terms:
            return False
        if len(terms) > 1 and self.cnf is not False and self.limits.holds(terms):
            try:
                response = self.client.query("count", query=disjunction(terms))
            except ApiQueryError as error:
                with self._lock:
                    self.cnf = False
                    self.details["cnf_refused"] = str(error)
            else:
                found = int(response.get("count", 0)) > 0
                with self._lock:
                    self.cnf = True
                    self.details["requests"] += 1
                if not found:
                    with self._lock:
                        learned.update(terms)
                return found
        return any(int(self.ask("count", term).get("count", 0)) > 0 for term in terms)

    def answer_all(self, questions: list[tuple[str, ...]], state: FieldState) -> list[bool]:
        """Whether each question (a piece's surface forms) occurs in any form."""
        if not questions:
            return []
        # Groups are answered side by side: each leaves out only what was known before any of
        # them was asked, so the queries sent never depend on which answered first.
        known, learned = frozenset(state.absent), set()
        groups = pack([tuple(t for t in q if t not in known) for q in questions], self._group_limits(state))
        answers = self.run_all(lambda group: resolve([questions[i] for i in group], lambda terms: self.any_occurs(terms, known, learned)), groups)
        found = [False] * len(questions)
        for group, answer in zip(groups, answers, strict=True):
            for i, value in zip(group, answer, strict=True):
                found[i] = value
        with self._lock:
            self.details["questions"] += len(questions)
            self.details["found"] += sum(found)
            state.asked += len(questions)
            state.found += sum(found)
            state.absent |= learned
        return found

    def _group_limits(self, state: FieldState) -> QueryLimits:
        """Groups pay while most pieces are absent: a positive group costs more requests than
        asking its pieces one by one.  So a group holds up to the limit's terms while under
        15% of this text's pieces asked so far occur (a prior of 10% weighing as two
        questions), two up to 30%, and one above."""
        share = (state.found + 0.2) / (state.asked + 2)
        terms = self.limits.terms if share < 0.15 else min(2, self.limits.terms) if share < 0.3 else 1
        return QueryLimits(terms, self.limits.chars, self.limits.tokens)
