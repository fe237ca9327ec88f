"""Rows of a row-per-language format joined into items through a temporary file.

ECLeKTic's long CSV, per-language tables, JSONL with a line per language, X-CSR, mLAMA and
SQuAD-style files put an item's languages anywhere, so no item is whole until the last row.
Holding every row's variant until then made reading grow with the benchmark (a 150 MB CSV took
215 MiB), so each kept row is pickled into an unnamed temporary file as it comes, and what
stays in memory is a few numbers per row (its item, language, line and where its pickle ends)
and per item (its id, source language, languages so far, a digest of its item-level fields).
The items are then made one at a time, in order of each item's first row, from their rows
read back.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from audit.labels import grouped
from audit.readers.common import BenchmarkError, Draft, Piece, Record, Sink


@dataclass(slots=True)
class _Held:
    """What one item's later rows are checked against."""

    item_id: str
    source_lang: str
    first_row: int  # the position of its first row among the kept rows
    meta_digest: bytes
    languages: int  # a bit per language number already given


def _digest(meta: Record) -> bytes:
    """Equal item-level fields pickle to equal bytes; unequal ones are compared on their values."""
    return hashlib.blake2b(pickle.dumps(meta, protocol=pickle.HIGHEST_PROTOCOL), digest_size=16).digest()


class Grouping:
    """Pieces (one language of one item each) checked as `add` receives them, the way
    `group_pieces` says, and kept pickled; `drafts` gives the items made of them."""

    def __init__(self, path: str, sink: Sink, lang_field: str, source_field: str, duplicate: Callable[[Piece, Piece], BenchmarkError] | None = None) -> None:
        self.path, self.sink, self.lang_field, self.source_field = path, sink, lang_field, source_field
        # The error for a language given twice, from the row and the kept row first giving it.
        self.duplicate = duplicate or self._duplicate
        self._file = tempfile.TemporaryFile(prefix="audit-rows-")  # noqa: SIM115 (closed when the drafts are made, or by close())
        self._numbers: dict[str, int] = {}
        self._held: list[_Held] = []
        self._languages: dict[str, int] = {}
        # Per kept row: its item's number, its language's number, its line, where its pickle ends.
        self._items, self._langs, self._lines, self._ends = array("i"), array("i"), array("q"), array("q")
        self._size = 0
        self._firsts: dict[tuple[int, int], int] | None = None

    def add(self, piece: Piece) -> None:
        """Keep the piece, or reject it (a second source language, a language given twice)."""
        number = self._numbers.get(piece.item_id)
        if number is None:
            number = self._numbers[piece.item_id] = len(self._held)
            self._held.append(_Held(piece.item_id, piece.source_lang, len(self._items), _digest(piece.item_meta), 0))
        held = self._held[number]
        if piece.source_lang != held.source_lang:
            self.sink.reject(BenchmarkError(self.path, piece.line, self.source_field, (
                f"item '{piece.item_id}' has source language '{held.source_lang}' on line {self._lines[held.first_row]}"
                f" but '{piece.source_lang}' here"
            )))
            return
        lang = self._languages.setdefault(piece.lang, len(self._languages))
        if held.languages >> lang & 1:
            self.sink.reject(self.duplicate(piece, self._read(self._first_row(number, lang))))
            return
        held.languages |= 1 << lang
        if len(self._items) > held.first_row:
            self._differing_meta(piece, held)
            piece.item_meta = {}
        self._keep(piece, number, lang)

    def _duplicate(self, piece: Piece, first: Piece) -> BenchmarkError:
        return BenchmarkError(self.path, piece.line, self.lang_field, f"duplicate language '{piece.lang}' for item '{piece.item_id}' (first on line {first.line})")

    def _keep(self, piece: Piece, number: int, lang: int) -> None:
        self._size += self._file.write(pickle.dumps(piece, protocol=pickle.HIGHEST_PROTOCOL))
        self._items.append(number)
        self._langs.append(lang)
        self._lines.append(piece.line)
        self._ends.append(self._size)
        if self._firsts is not None:
            self._firsts[(number, lang)] = len(self._items) - 1

    def _differing_meta(self, piece: Piece, held: _Held) -> None:
        """A later row's item-level fields that differ from the first row's go into its
        variant's meta, so no value is lost."""
        if _digest(piece.item_meta) == held.meta_digest:
            return
        first = self._read(held.first_row).item_meta
        for name, value in piece.item_meta.items():
            if first.get(name) != value:
                piece.variant.meta[name] = value

    def _first_row(self, number: int, lang: int) -> int:
        """The kept row that first gave this item this language: found from the kept rows when
        the first duplicate turns up, and kept up to date from then on (a file with no
        duplicates never builds it)."""
        if self._firsts is None:
            self._firsts = {(item, language): row for row, (item, language) in enumerate(zip(self._items, self._langs, strict=True))}
        return self._firsts[(number, lang)]

    def languages(self) -> Iterator[tuple[str, list[str]]]:
        """Each item's id and languages so far, in order of its first row (a reader that picks
        an item's source by its languages checks them all before any item is made)."""
        names = list(self._languages)
        for held in self._held:
            yield held.item_id, [name for number, name in enumerate(names) if held.languages >> number & 1]

    def _read(self, row: int) -> Piece:
        self._file.flush()
        start = self._ends[row - 1] if row else 0
        return pickle.loads(os.pread(self._file.fileno(), self._ends[row] - start, start))

    def close(self) -> None:
        self._file.close()

    def drafts(self) -> Iterator[Draft]:
        """Each item made from its kept rows, in order of its first row; the file goes at the end."""
        try:
            items = np.frombuffer(self._items, dtype=np.int32) if len(self._items) else np.zeros(0, dtype=np.int32)
            order, starts = grouped(items, len(self._held))
            for number, held in enumerate(self._held):
                yield _draft(self.path, held, [self._read(row) for row in order[starts[number] : starts[number + 1]].tolist()])
        finally:
            self.close()


def _draft(path: str, held: _Held, pieces: list[Piece]) -> Draft:
    draft = Draft(path, held.item_id, held.source_lang, [piece.line for piece in pieces], meta=dict(pieces[0].item_meta))
    draft.variants = {piece.lang: piece.variant for piece in pieces}
    draft.rows = [(piece.file, piece.line) for piece in pieces if piece.file is not None]
    return draft


def group_pieces(path: str, pieces: Iterable[Piece], sink: Sink, lang_field: str, source_field: str) -> Iterator[Draft]:
    """Join per-language rows into items, in order of each item's first row.  Every row is
    read and checked before this returns (so its errors come first, as the rows' order has
    them); the items are made as they are asked for."""
    grouping = Grouping(path, sink, lang_field, source_field)
    try:
        for piece in pieces:
            grouping.add(piece)
    except BaseException:
        grouping.close()
        raise
    return grouping.drafts()
