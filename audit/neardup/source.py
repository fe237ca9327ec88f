"""What the near-duplicate index reads from the corpus it is built from and verifies against.

The index sits below the query side: it never opens a corpus itself.  Whoever builds or opens
one hands it the corpus (a local index), which reads documents, stretches of their text and
counts; so the same code serves a local index and one whose shards live in other processes.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol


class Facts(Protocol):
    """The figures of a corpus the index records and checks."""

    fingerprint: str
    documents: int | None
    bytes: int | None


class Texts(Protocol):
    """A corpus as the near-duplicate index reads it: by document number and byte offset."""

    path: Path

    @property
    def info(self) -> Facts: ...

    def documents(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(document number, stored text) of documents `start` to `stop` - 1, in order."""
        ...

    def text_spans(self, spans: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """Bytes `start` to `end` of each (document, start, end)'s text (cut at the document's end)."""
        ...

    def count(self, text: str) -> int:
        """Occurrences of `text` in the corpus."""
        ...

    def casing_counts(self, texts: Sequence[str]) -> list[int]:
        """Occurrences of each text as written, lower-cased and capitalised (the first
        character upper-cased, the rest lower-cased) together, each distinct spelling once."""
        ...
