"""The count and find requests of one API corpus, each asked once.

A field's questions repeat across a variant's figures (the whole field is counted to see
whether it matches whole, then again for its exact count) and across variants (a passage shared
by several languages), so every plain answer is kept for the run, and every query string known
to occur nowhere, from a plain answer or from an OR query answered 0, is answered 0 without a
request.  Presence questions go through `audit.corpora.grouped`: several pieces, each in every
surface form, in one OR query where the server takes CNF queries (the first refusal turns that
off for the corpus and is recorded in `details["grouped"]["cnf_refused"]`).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from audit.corpora.client import ApiQueryError, InfiniGramClient
from audit.corpora.grouped import QueryLimits, pack, resolve
from audit.corpora.surface import disjunction

MEMO_ENTRIES = 1_000_000
KEYS = {"count": "count", "find": "cnt"}


class Requests:
    """Plain `count`/`find` answers, memoised, and presence questions answered by groups."""

    def __init__(self, client: InfiniGramClient, limits: QueryLimits, run_all: Callable[[Callable[[Any], Any], list[Any]], list[Any]], details: dict[str, Any]) -> None:
        self.client, self.limits, self.run_all = client, limits, run_all
        self.details = details
        self.cnf: bool | None = None
        self._memo: dict[tuple[str, str], dict[str, Any]] = {}
        self._absent: set[str] = set()
        self._lock = threading.Lock()

    def absent(self, form: str) -> bool:
        return form in self._absent

    def _forget_if_full(self) -> None:
        if len(self._memo) + len(self._absent) > MEMO_ENTRIES:
            self._memo.clear()
            self._absent.clear()

    def ask(self, query_type: str, form: str) -> dict[str, Any]:
        """The answer to a plain `count` or `find` of `form`, asked at most once.  Where the
        server has CNF queries (the infini-gram protocol) a count is asked as a `find`, which
        answers the same count (the engine's `count` is its `find`) and serves a later search
        for the same string's occurrences."""
        key = KEYS[query_type]
        if query_type == "count" and self.cnf is not False:
            found = self.ask("find", form)
            return {"count": int(found.get("cnt", 0)), **{k: found[k] for k in ("token_ids", "tokens") if k in found}}
        if form in self._absent:
            return {key: 0, "segment_by_shard": []} if query_type == "find" else {key: 0}
        found = self._memo.get((query_type, form))
        if found is None:
            found = self.client.query(query_type, query=form)
            with self._lock:
                self._forget_if_full()
                self._memo[query_type, form] = found
                if not int(found.get(key, 0)):
                    self._absent.add(form)
        return found

    def any_occurs(self, terms: Sequence[str]) -> bool:
        """Whether any of `terms` occurs: one OR query when they fit one and the server takes
        it, else each in turn until one does; terms known absent are not asked again."""
        terms = [t for t in dict.fromkeys(terms) if t not in self._absent]
        if len(terms) > 1 and self.cnf is not False and self.limits.holds(terms):
            query = disjunction(terms)
            try:
                response = self.client.query("count", query=query)
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
                        self._forget_if_full()
                        self._absent.update(terms)
                return found
        return any(int(self.ask("count", term).get("count", 0)) > 0 for term in terms)

    def answer_all(self, questions: list[tuple[str, ...]], tally: list[int] | None = None) -> list[bool]:
        """Whether each question (a piece's surface forms) occurs in any form; `tally` counts
        the questions asked and found about one text, whose share found sets the group size."""
        if not questions:
            return []
        tally = tally if tally is not None else [0, 0]
        groups = pack([tuple(t for t in q if t not in self._absent) for q in questions], self._group_limits(tally))
        answers = self.run_all(lambda group: resolve([questions[i] for i in group], self.any_occurs), groups)
        found = [False] * len(questions)
        for group, answer in zip(groups, answers, strict=True):
            for i, value in zip(group, answer, strict=True):
                found[i] = value
        with self._lock:
            self.details["questions"] += len(questions)
            self.details["found"] += sum(found)
            tally[0] += len(questions)
            tally[1] += sum(found)
        return found

    def _group_limits(self, tally: list[int]) -> QueryLimits:
        """Groups pay while most pieces are absent: a positive group costs more requests than
        asking its pieces one by one.  So a group holds up to the limit's terms while under
        15% of the pieces occur, two up to 30%, and one above: the share found among this
        text's questions so far, weighed with the share over every text (as two questions)."""
        overall = (self.details["found"] + 1) / (self.details["questions"] + 2)
        share = (tally[1] + 2 * overall) / (tally[0] + 2)
        terms = self.limits.terms if share < 0.15 else min(2, self.limits.terms) if share < 0.3 else 1
        return QueryLimits(terms, self.limits.chars, self.limits.tokens)
