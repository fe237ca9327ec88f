"""The benchmark item model every loader produces and every signal consumes.

One `Item` is one question in all its languages; readers for each benchmark format live in
`audit.readers` and only ever build these records, so signals never see a file format.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

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


@dataclass
class LoadReport:
    """What a loader read: the items, plus every row it skipped and why (never silent)."""

    items: list[Item]
    format: str
    path: str
    skipped: list[str] = field(default_factory=list)
    excluded: int = 0
    language_codes: dict[str, str] = field(default_factory=dict)
    unused_fields: list[str] = field(default_factory=list)
    mapping: dict[str, object] = field(default_factory=dict)
    source_lang: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def languages(self) -> list[str]:
        seen: dict[str, None] = {}
        for item in self.items:
            for lang in item.variants:
                seen.setdefault(lang, None)
        return list(seen)
