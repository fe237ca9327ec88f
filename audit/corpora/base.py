"""What a signal may ask of a corpus, whatever serves it (a local index, an HTTP API, ...).

Queries are text and answers are in characters of that text, so a signal never knows whether
the corpus is byte-level or tokenized; each backend converts at its own boundary.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


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


@dataclass
class MatchLengths:
    """The longest match at each character position, and where those lengths are only lower
    bounds (a backend that ran out of requests, or whose queries are capped in length): the
    signals turn such positions into bounded figures, which the policy never reads as absent."""

    lengths: list[int]
    lower_bounds: list[tuple[int, int]] = field(default_factory=list)


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


class Corpus(Protocol):
    info: CorpusInfo

    def count(self, text: str) -> int:
        """Occurrences of the exact string (an upper bound where `count_range` is not exact)."""

    def count_range(self, text: str) -> tuple[int, int]:
        """(fewest, most) occurrences of the exact string: equal when the backend can count it
        exactly."""

    def match_lengths(self, text: str) -> MatchLengths:
        """For each character position i, the length in characters of the longest prefix of
        text[i:] that occurs in the corpus."""

    def occurrences(self, text: str, limit: int) -> tuple[int, list[Occurrence]]:
        """The total count and up to `limit` occurrences of the exact string."""

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        """The document's text from `before` bytes ahead of the occurrence to `after` bytes past
        its start, clipped to the document."""

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        """Provenance for an occurrence of `length_bytes` bytes, with `context_chars` around it."""
