"""The benchmark item model every loader produces and every signal consumes.

One `Item` is one question in all its languages; readers for each benchmark format live in
`audit.readers` and only ever build these records, so signals never see a file format.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, overload

from audit.packed import Packed

FIELDS = ("question", "answer", "context", "title", "url")


class ItemKind(StrEnum):
    """What a model is asked: an open question, a cloze prompt with a mask to fill, or a choice
    among options.  The kind decides which texts of a variant are checked against a corpus."""

    OPEN = "open"
    CLOZE = "cloze"
    MULTIPLE_CHOICE = "multiple-choice"


@dataclass(frozen=True)
class Origin:
    """Where a record came from, so errors and filters can point back at the input: `lines` of
    `path`, and for benchmarks spread over several files, `rows` as (file, line) pairs."""

    path: str
    lines: tuple[int, ...] = ()
    rows: tuple[tuple[str, int], ...] = ()


@dataclass(slots=True)
class Variant:
    """One language's text of an item; any field may be absent (None).  `aliases` are other
    names of the answer, `options` a multiple-choice item's choices (the answer among them),
    `subject` what a fact item is about (with its other names), for co-occurrence checks.
    Slotted: a large benchmark holds a hundred thousand of them."""

    question: str | None = None
    answer: str | None = None
    context: str | None = None
    title: str | None = None
    url: str | None = None
    aliases: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    subject: str | None = None
    subject_aliases: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    # A field written in another language than the variant's (MLQA's cross-lingual files: the
    # context in the context's language, the question in the question's).
    field_languages: dict[str, str] = field(default_factory=dict)

    def text(self, name: str) -> str | None:
        value = getattr(self, name)
        return value if value else None

    def language_of(self, name: str, default: str) -> str:
        """The language field `name` is written in: `default` (the variant's) unless the
        benchmark says otherwise."""
        return self.field_languages.get(name, default)


@dataclass(slots=True)
class Item:
    item_id: str
    source_lang: str
    variants: dict[str, Variant]
    meta: dict[str, Any] = field(default_factory=dict)
    origin: Origin | None = None
    kind: ItemKind = ItemKind.OPEN
    mask: str | None = None

    @property
    def languages(self) -> list[str]:
        return list(self.variants)


class PackedItems(Sequence[Item]):
    """A benchmark's items pickled into one temporary file (`audit.packed.Packed`), each
    unpickled when it is read, with their ids noted while packing.
    The objects take seven times the pickles' size (160 MiB against 23 MiB for BMLAMA-17), so
    a run that held them grew with the benchmark; packed as a reader hands them over, no more
    than one exists at a time.  A forked pool's workers read their items from the file
    without touching the parent's objects."""

    def __init__(self, items: Iterable[Item]) -> None:
        self.ids: list[str] = []
        self.packed: Packed[Item] = Packed.of(self._noted(items))

    def _noted(self, items: Iterable[Item]) -> Iterator[Item]:
        for item in items:
            self.ids.append(item.item_id)
            yield item

    @classmethod
    def of(cls, items: Sequence[Item]) -> PackedItems:
        return items if isinstance(items, PackedItems) else cls(items)

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, position: int) -> Item: ...
    @overload
    def __getitem__(self, position: slice) -> list[Item]: ...
    def __getitem__(self, position: int | slice) -> Item | list[Item]:
        if isinstance(position, slice):
            return [self.packed[k] for k in range(*position.indices(len(self)))]
        if not -len(self) <= position < len(self):
            raise IndexError(position)
        return self.packed[position % len(self)]

    def __iter__(self) -> Iterator[Item]:
        return (self.packed[k] for k in range(len(self)))


@dataclass
class LoadReport:
    """What a loader read: the items, plus every row it skipped and why (never silent).  A run
    holds the items packed (`PackedItems`: `load_benchmark(..., packed=True)`), so what is
    asked of all of them at once was counted as they were read: their kinds, and variants per
    language (in the order languages first occur)."""

    items: Sequence[Item]
    format: str
    path: str
    kinds: Counter[str] = field(default_factory=Counter)
    variant_counts: Counter[str] = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)
    excluded: int = 0
    language_codes: dict[str, str] = field(default_factory=dict)
    unused_fields: list[str] = field(default_factory=list)
    mapping: dict[str, object] = field(default_factory=dict)
    source_lang: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def languages(self) -> list[str]:
        return list(self.variant_counts)
