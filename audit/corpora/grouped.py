"""Many "does this string occur?" questions in few requests, by group testing over infini-gram's
OR queries.

An infini-gram `count` of one disjunctive clause (`A OR B OR ...`, at most four terms on the
public server, 500 tokens and 1,000 characters in all) answers the sum of the terms' counts
(engine `find_disj`; with one clause `count_cnf` returns early with 0, exactly, when every term
is absent, and otherwise counts each match kept, so a positive answer is never 0; above
`max_clause_freq` matches it is sampled, `approx: true`, still positive).  So one request says
whether any of a piece's surface forms occurs, and whether any of several pieces does.  Most
pieces asked while deriving longest matches are absent, so pieces are packed into such groups:
a group answered 0 settles every piece in it; a positive group is split in halves and each half
asked in turn, and when the first half has nothing the second, alone, is known present
without asking.  The answers are exactly those of asking every form of every piece.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from audit.corpora.surface import disjunction


@dataclass(frozen=True)
class QueryLimits:
    """What one request may hold: the server's per-request limits."""

    terms: int = 4
    chars: int = 1000
    tokens: int = 500

    def holds(self, terms: Sequence[str]) -> bool:
        """Within the limits whatever the tokenizer: a term is at most one token per UTF-8 byte,
        plus one for a word-start marker."""
        query = disjunction(terms)
        return query is not None and len(terms) <= self.terms and len(query) <= self.chars and sum(len(t.encode("utf-8")) + 1 for t in terms) <= self.tokens


def pack(questions: Sequence[tuple[str, ...]], limits: QueryLimits) -> list[list[int]]:
    """Consecutive questions (each a piece's surface forms) packed into groups one request can
    ask; a question too large to share a request stays alone."""
    groups: list[list[int]] = []
    current: list[int] = []
    for number, forms in enumerate(questions):
        terms = [t for i in current for t in questions[i]] + list(forms)
        if current and limits.holds(terms):
            current.append(number)
            continue
        if current:
            groups.append(current)
        current = [number]
    if current:
        groups.append(current)
    return groups


def resolve(questions: Sequence[tuple[str, ...]], any_occurs: Callable[[tuple[str, ...]], bool], known_positive: bool = False) -> list[bool]:
    """Whether each question's piece occurs, asking `any_occurs` of unions of their forms."""
    if len(questions) == 1:
        return [True] if known_positive else [any_occurs(questions[0])]
    if not known_positive and not any_occurs(tuple(t for forms in questions for t in forms)):
        return [False] * len(questions)
    half = len(questions) // 2
    left = resolve(questions[:half], any_occurs)
    return left + resolve(questions[half:], any_occurs, known_positive=not any(left))
