"""What every benchmark reader shares: the located error, the sink that raises or records a bad
row, line / CSV / JSON row readers, strict value helpers, and the steps that join rows into items.

Readers build `Draft`s (an item under construction) or `Piece`s (one language of one item) and
end with `finish_items`, so every format fails the same way and points at the same line.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import orjson
from pydantic import JsonValue

from audit.errors import LocatedError, json_problem, text_lines
from audit.items import Item, ItemKind, Origin, Variant
from audit.langcodes import normalise_lang
from audit.readers.columns import ColumnMap

Raw = TypeVar("Raw")
Out = TypeVar("Out")
# One cell of a benchmark row as read: a JSON value, a CSV string, or what a Parquet or Arrow
# row adds (bytes, dates and times, decimals).  The functions under "Values" check which it is.
Cell = JsonValue | bytes | date | time | timedelta | Decimal
Record = dict[str, Cell]


class BenchmarkError(LocatedError):
    """A bad benchmark input, located precisely enough to fix by hand."""


@dataclass(frozen=True)
class ReadOptions:
    """What the user said about a benchmark beyond its path: a column mapping, and the source
    language where the files do not say it."""

    mapping: ColumnMap | None = None
    source_lang: str | None = None
    # Options an audit recorded are read back as they were, even where a format ignores them.
    recorded: bool = False


@dataclass
class Sink:
    """Where row-level errors go: raised at once, or recorded when the caller chose to skip."""

    skip: bool
    skipped: list[str] = field(default_factory=list)
    excluded: int = 0
    # What a reader decided that the user must hear about, one line each (a source language
    # taken from what the benchmark is, not from its files).
    notes: list[str] = field(default_factory=list)

    def reject(self, error: BenchmarkError) -> None:
        if not self.skip:
            raise error
        self.skipped.append(str(error))


@dataclass
class Draft:
    """An item under construction; `path` is where it came from, for origin and errors."""

    path: str
    item_id: str
    source_lang: str
    lines: list[int]
    variants: dict[str, Variant] = field(default_factory=dict)
    meta: Record = field(default_factory=dict)
    kind: ItemKind = ItemKind.OPEN
    mask: str | None = None
    rows: list[tuple[str, int]] = field(default_factory=list)
    source_required: bool = True


@dataclass
class Piece:
    """One row of a row-per-language format; `item_meta` must agree across an item's rows."""

    line: int
    item_id: str
    source_lang: str
    lang: str
    variant: Variant
    item_meta: Record = field(default_factory=dict)
    # The file the row is in, where a benchmark's rows come from several (the item's `rows`).
    file: str | None = None


# Reading --------------------------------------------------------------------------------


def read_lines(path: Path) -> Iterator[str]:
    return text_lines(path, BenchmarkError)


def csv_rows(path: Path, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """Records with the line each starts on, since a quoted cell may span several lines."""
    reader = csv.reader(read_lines(path), delimiter=delimiter)
    start = 1
    try:
        for row in reader:
            yield start, row
            start = reader.line_num + 1
    except csv.Error as exc:
        raise BenchmarkError(path, reader.line_num, None, f"malformed CSV: {exc}") from exc


def json_rows(path: Path, sink: Sink) -> Iterator[tuple[int, Record]]:
    for number, text in enumerate(read_lines(path), 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            sink.reject(BenchmarkError(path, number, None, json_problem(exc)))
            continue
        if isinstance(value, dict):
            yield number, value
        else:
            sink.reject(BenchmarkError(path, number, None, f"expected a JSON object, got {type_name(value)}"))


def parsed_rows(
    rows: Iterable[tuple[int, Raw]], parse: Callable[[int, Raw], Out], sink: Sink
) -> Iterator[Out]:
    """Apply a row parser, handing each bad row to the sink instead of stopping there."""
    for line, row in rows:
        try:
            result = parse(line, row)
        except BenchmarkError as error:
            sink.reject(error)
            continue
        yield result


# Values ---------------------------------------------------------------------------------


def type_name(value: Cell) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def clean(value: str) -> str | None:
    value = value.strip()
    return value or None


def text_field(path: str, line: int | None, name: str, value: Cell) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BenchmarkError(path, line, name, f"expected a string or null, got {type_name(value)}")
    return clean(value)


def required(path: str, line: int, record: Record, key: str) -> Cell:
    value = record.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise BenchmarkError(path, line, key, "required but empty" if key in record else "required but missing")
    return value


def item_id_at(path: str, line: int, record: Record, key: str) -> str:
    value = required(path, line, record, key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BenchmarkError(path, line, key, f"expected a string or integer, got {type_name(value)}")
    return str(value).strip()


# Codes are normalised deep inside row parsers; the spellings a benchmark used are collected
# here for the load report (and the audit manifest) without threading a record through them all.
GIVEN_CODES: ContextVar[dict[str, str] | None] = ContextVar("given_codes", default=None)


def language_code(path: str, line: int | None, name: str | None, value: Cell) -> str:
    if not isinstance(value, str):
        raise BenchmarkError(path, line, name, f"expected a language code string, got {type_name(value)}")
    try:
        code = normalise_lang(value)
    except ValueError as exc:
        raise BenchmarkError(path, line, name, str(exc)) from None
    given = GIVEN_CODES.get()
    if given is not None:
        given.setdefault(value, code)
    return code


def lang_at(path: str, line: int, record: Record, key: str) -> str:
    return language_code(path, line, key, required(path, line, record, key))


def extras(record: Record, known: Iterable[str]) -> Record:
    """Keys a format does not interpret are kept, not lost; a nested `meta` object is merged."""
    known = set(known)
    extras = {key: value for key, value in record.items() if key not in known and key != "meta"}
    nested = record.get("meta")
    if isinstance(nested, dict):
        return {**nested, **extras}
    if nested is not None:
        extras["meta"] = nested
    return extras


# Assembling -----------------------------------------------------------------------------


def unique_items(drafts: Iterable[Draft], id_field: str, sink: Sink) -> Iterator[Draft]:
    first_line: dict[str, int] = {}
    for draft in drafts:
        seen = first_line.setdefault(draft.item_id, draft.lines[0])
        if seen != draft.lines[0]:
            sink.reject(BenchmarkError(
                draft.path, draft.lines[0], id_field, f"duplicate item id '{draft.item_id}' (first on line {seen})"
            ))
            continue
        yield draft


def apply_source(
    draft: Draft, text: dict[str, tuple[str, str | None]], title: str | None, url: str | None
) -> None:
    """Merge ECLeKTic's item-level source text and article link into the source variant.

    `text` maps a variant field to (the key it came from, value): it fills a missing field,
    and a value that disagrees with the variant's own text is kept in item meta, not lost.
    """
    variant = draft.variants.get(draft.source_lang)
    for name, (key, value) in text.items():
        if value is None:
            continue
        if variant is None:
            variant = draft.variants[draft.source_lang] = Variant()
        current = getattr(variant, name)
        if current is None:
            setattr(variant, name, value)
        elif current != value:
            draft.meta[key] = value
    for name, value in (("title", title), ("url", url)):
        if value is not None:
            draft.meta[name] = value
            if variant is not None:
                setattr(variant, name, value)


_SURROGATE = re.compile("[\ud800-\udfff]")
_VARIANT_FIELDS = tuple(f.name for f in dataclasses.fields(Variant))


def _holds_surrogate(value: Cell) -> bool:
    """Whether a lone surrogate is anywhere in a value: the check every item takes, so it names
    nothing (`_surrogate_in` names the field of the rare one that holds one).  orjson refuses a
    lone surrogate in any string, keys too, so a value it encodes holds none: one call in C
    answers for nearly every item, and the walk runs only for what it cannot encode."""
    try:
        orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
        return False
    except TypeError:
        return _walked_surrogate(value)


def _walked_surrogate(value: Cell) -> bool:
    """`_holds_surrogate` by walking the value."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_SURROGATE.search(str(key)) is not None or _walked_surrogate(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_walked_surrogate(item) for item in value)
    return False


def _surrogate_in(value: Cell, name: str) -> str | None:
    """The field (dotted) of the first lone surrogate in a value, or None."""
    if isinstance(value, str):
        return name if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        pairs = [(str(key), item) for key, item in value.items()]
    elif isinstance(value, list | tuple):
        pairs = [(f"[{n}]", item) for n, item in enumerate(value)]
    else:
        return None
    for key, item in pairs:
        found = _surrogate_in(key, f"{name}.{key}") or _surrogate_in(item, f"{name}{key}" if key.startswith("[") else f"{name}.{key}")
        if found:
            return found
    return None


def _surrogate(draft: Draft) -> BenchmarkError | None:
    """A lone UTF-16 surrogate (JSON's `"\\ud800"`) decodes but cannot be encoded again, so no
    corpus could be asked for it and no audit file written: named here, by item and field,
    rather than by a codec."""
    fields = [(None, "item_id", draft.item_id), (None, "meta", draft.meta)]
    fields += [(lang, f"variants.{lang}", {name: getattr(variant, name) for name in _VARIANT_FIELDS}) for lang, variant in draft.variants.items()]
    for lang, name, value in fields:
        found = _surrogate_in(value, name) if _holds_surrogate(value) else None
        if found is None:
            continue
        index = list(draft.variants).index(lang) if lang is not None else 0
        path, line = draft.rows[index] if len(draft.rows) == len(draft.variants) else (draft.path, None)
        if line is None and draft.lines:
            line = draft.lines[index] if len(draft.lines) == len(draft.variants) else draft.lines[0]
        shown, found = (text.encode("utf-8", "backslashreplace").decode() for text in (draft.item_id, found))
        return BenchmarkError(path, line, found, f"item '{shown}': a lone surrogate (an unpaired \\ud800-\\udfff escape), not text")
    return None


def with_kind(kind: ItemKind, mask: str | None = None, source_required: bool = True) -> Callable[[Draft], Draft]:
    """What a format says of all its items, set on each draft as it is made (map it over them)."""

    def typed(draft: Draft) -> Draft:
        draft.kind, draft.mask, draft.source_required = kind, mask, source_required
        return draft

    return typed


def finish_items(drafts: Iterable[Draft], source_field: str | None, sink: Sink) -> Iterator[Item]:
    """The drafts made items as they come, so a reader whose drafts come one at a time
    streams: no list of every item exists while a benchmark is read."""
    for draft in drafts:
        if (item := finish_item(draft, source_field, sink)) is not None:
            yield item


def finish_item(draft: Draft, source_field: str | None, sink: Sink) -> Item | None:
    if (bad := _surrogate(draft)) is not None:
        sink.reject(bad)
        return None
    if draft.source_required and draft.source_lang not in draft.variants:
        sink.reject(BenchmarkError(draft.path, draft.lines[0], source_field, (
            f"item '{draft.item_id}' has no variant in its source language '{draft.source_lang}'"
        )))
        return None
    origin = Origin(draft.path, tuple(dict.fromkeys(draft.lines)), tuple(draft.rows))
    return Item(draft.item_id, draft.source_lang, draft.variants, draft.meta, origin, draft.kind, draft.mask)


