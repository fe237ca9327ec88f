"""What a signal may ask of a corpus, whatever serves it (a local index, an HTTP API, ...).

Queries are text and answers are in characters of that text, so a signal never knows whether
the corpus is byte-level or tokenized; each backend converts at its own boundary.

A signal asks "in language L" through `in_language`: a corpus that knows each document's
language (a local index with its table) returns a view answering this same protocol over
those documents only; any other is asked as it is, and the evidence says so.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, overload

import numpy as np

from audit.errors import AuditError
from audit.index.doclangs import document_language

# A JSON value as a server answers it or a document's metadata holds it.
JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]


@dataclass(frozen=True)
class CorpusInfo:
    """Identifies exactly which corpus answered, for the audit file's manifest."""

    name: str
    backend: str
    location: str
    fingerprint: str
    documents: int | None = None
    bytes: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Occurrence:
    """One place a string occurs: a document and the byte offset of the match within its text."""

    document: int
    offset: int


@dataclass(frozen=True, eq=False)
class Sampled(Sequence[Occurrence]):
    """Places a string occurs, as arrays ordered by (document, offset), read as a sequence of
    `Occurrence`s made only when read: a sample of hundreds asked only which documents it is
    in, or only for its count (a pair check reads the rarest string's places alone), is not
    worth an object per place."""

    documents: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.documents)

    @overload
    def __getitem__(self, index: int) -> Occurrence: ...
    @overload
    def __getitem__(self, index: slice) -> list[Occurrence]: ...
    def __getitem__(self, index: int | slice) -> Occurrence | list[Occurrence]:
        if isinstance(index, slice):
            return list(map(Occurrence, self.documents[index].tolist(), self.offsets[index].tolist()))
        return Occurrence(int(self.documents[index]), int(self.offsets[index]))

    def __iter__(self) -> Iterator[Occurrence]:
        return map(Occurrence, self.documents.tolist(), self.offsets.tolist())

    def __eq__(self, other: object) -> bool:
        """Equal to another sample or a list of the same places, in the same order."""
        if isinstance(other, Sampled):
            return np.array_equal(self.documents, other.documents) and np.array_equal(self.offsets, other.offsets)
        return isinstance(other, list | tuple) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def picked(self, at: Sequence[int]) -> Sampled:
        """The places at positions `at`, in that order."""
        return Sampled.kept(self.documents[list(at)], self.offsets[list(at)])

    @classmethod
    def none(cls) -> Sampled:
        return cls.kept(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    @classmethod
    def kept(cls, documents: np.ndarray, offsets: np.ndarray) -> Sampled:
        """A sample made read-only, since a kept one is handed to every caller that asks."""
        documents.setflags(write=False)
        offsets.setflags(write=False)
        return cls(documents, offsets)

    def first_in(self, document: int) -> Occurrence:
        """The first place in `document` (which must hold one)."""
        at = int(np.flatnonzero(self.documents == document)[0])
        return Occurrence(document, int(self.offsets[at]))


class Profile(StrEnum):
    """How much a count-only backend works out: `decide`, what the policy's rules ask (and
    the matches found on the way); `full`, the longest match at every position."""

    DECIDE = "decide"
    FULL = "full"


class LanguageBy(StrEnum):
    """How a corpus put documents in languages for a language-restricted figure: `table`, the
    index's per-document table; `metadata`, only the documents' own metadata (API corpora, an
    index without a table: pair checks read each matched document's `lang`); `unavailable`,
    nothing known, every document counted (and the figure flagged as such)."""

    TABLE = "table"
    METADATA = "metadata"
    UNAVAILABLE = "unavailable"


class UnknownLanguage(StrEnum):
    """Whether documents of unknown language count for every language (`count`, flagged in the
    evidence) or for none (`ignore`)."""

    COUNT = "count"
    IGNORE = "ignore"


class OutOfBudget(AuditError):
    """A variant has asked all the count queries its budget allows of one corpus."""


class Budget:
    """The count queries one language variant has asked of one corpus; the corpus sets the
    limit (its registry's `budget`).  Cache hits count too, so an audit decides the same from
    a cold cache and a warm one."""

    def __init__(self) -> None:
        self.asked = 0
        self._lock = threading.Lock()

    def take(self, limit: int) -> None:
        """One more query, or OutOfBudget once `limit` have been asked."""
        with self._lock:
            if self.asked >= limit:
                raise OutOfBudget
            self.asked += 1


@dataclass(frozen=True)
class MatchQuestions:
    """What a policy asks of one field's matches, so a backend that must derive them from
    counts asks only that: whether the longest match reaches each length in `longest`
    (characters), and whether the share of `windows` (character spans) found reaches each
    of `coverage`."""

    longest: tuple[int, ...] = ()
    windows: tuple[tuple[int, int], ...] = ()
    coverage: tuple[float, ...] = ()
    budget: Budget = field(default_factory=Budget)
    profile: Profile = Profile.DECIDE


@dataclass(frozen=True)
class CoverageSample:
    """Window coverage estimated from a random sample of the windows whose presence nothing
    else settled: `interval` holds the share of all windows found, with `confidence`."""

    seed: int
    windows: int
    settled_found: int
    settled_absent: int
    sampled: int
    sampled_found: int
    confidence: float
    interval: tuple[float, float]


@dataclass
class MatchLengths:
    """The longest match at each character position, at its lowest, and where a backend could
    only bound it (out of requests, capped queries, positions it never asked about) the
    highest it could be: the signals turn such positions into bounded figures, which the
    policy never reads as absent.  `coverage` is a sampled estimate of window coverage."""

    lengths: list[int]
    highest: list[int] | None = None
    coverage: CoverageSample | None = None

    def upper(self) -> list[int]:
        return self.lengths if self.highest is None else self.highest


@dataclass
class DocumentHit:
    """A matched document as provenance: its metadata and the match in context."""

    document: int
    metadata: dict[str, Any]
    offset: int
    length: int
    snippet: str
    snippet_match_start: int
    snippet_match_end: int

    @property
    def language(self) -> str | None:
        """The document's language where its metadata records one (`lang` or `language`, at the
        top or in a nested `metadata`, as Dolma and Wikipedia dumps write it), normalised."""
        return document_language(self.metadata)


def cut_snippet(data: bytes, match_at: int, length_bytes: int, context_chars: int) -> tuple[str, int, int]:
    """(snippet, start and end of the match in it): up to `context_chars` characters either
    side of the match at byte `match_at` of `data`, cut on whole characters."""
    end = match_at + length_bytes
    before = data[:match_at].decode("utf-8", errors="ignore")[-context_chars:]
    match = data[match_at:end].decode("utf-8", errors="ignore")
    after = data[end:].decode("utf-8", errors="ignore")[:context_chars]
    return before + match + after, len(before), len(before) + len(match)


class Corpus(Protocol):
    info: CorpusInfo

    def count(self, text: str) -> int:
        """Occurrences of the exact string (an upper bound where `count_range` is not exact)."""

    def count_range(self, text: str) -> tuple[int, int]:
        """(fewest, most) occurrences of the exact string: equal when the backend can count it
        exactly."""

    def match_lengths(self, text: str, questions: MatchQuestions | None = None) -> MatchLengths:
        """For each character position i, the length in characters of the longest prefix of
        text[i:] that occurs in the corpus.  A backend that knows them exactly ignores
        `questions`; one that derives them from counts works out what they ask."""

    def occurrences(self, text: str, limit: int) -> tuple[int, Sequence[Occurrence]]:
        """The total count and up to `limit` occurrences of the exact string."""

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        """The document's text from `before` bytes ahead of the occurrence to `after` bytes past
        its start, clipped to the document."""

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        """Provenance for an occurrence of `length_bytes` bytes, with `context_chars` around it."""


def in_language(corpus: Corpus, languages: frozenset[str], unknown: UnknownLanguage) -> tuple[Corpus, LanguageBy]:
    """The corpus counting only documents of `languages`, and how it knows them: a corpus
    that can restrict itself (`in_language`, a local index with a language table) answers
    through a view; any other answers over every document, flagged `unavailable`."""
    restrict = getattr(corpus, "in_language", None)
    view = restrict(languages, unknown is UnknownLanguage.COUNT) if restrict is not None else None
    return (view, LanguageBy.TABLE) if view is not None else (corpus, LanguageBy.UNAVAILABLE)
