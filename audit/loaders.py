"""Benchmark loaders: every supported format becomes a `LoadReport` of `Item`s.

Each format has one small parser. Row-per-item formats parse a row into a draft item,
row-per-language formats parse a row into a piece that `_group` joins by item id, and BMLAMA
joins its per-language files by line. The shared helpers do what every format needs
(decompression, strict typing, language codes, duplicate and source-variant checks), so all
formats fail the same way and point at the same line.
"""
from __future__ import annotations

import csv
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from audit.errors import LocatedError, text_lines
from audit.items import FIELDS, Item, LoadReport, Origin, Variant
from audit.langcodes import normalise_lang

FORMATS = ("eclektic-jsonl", "eclektic-csv", "bmlama", "jsonl")

# BMLAMA facts are English Wikidata labels translated into the other languages.
BMLAMA_SOURCE_LANG = "en"

_Row = TypeVar("_Row")
_Out = TypeVar("_Out")


class BenchmarkError(LocatedError):
    """A bad benchmark input, located precisely enough to fix by hand."""


@dataclass
class _Sink:
    """Where row-level errors go: raised at once, or recorded when the caller chose to skip."""

    skip: bool
    skipped: list[str] = field(default_factory=list)

    def reject(self, error: BenchmarkError) -> None:
        if not self.skip:
            raise error
        self.skipped.append(str(error))


@dataclass
class _Draft:
    """An item under construction; `path` is where it came from, for origin and errors."""

    path: str
    item_id: str
    source_lang: str
    lines: list[int]
    variants: dict[str, Variant] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Piece:
    """One row of a row-per-language format; `item_meta` must agree across an item's rows."""

    line: int
    item_id: str
    source_lang: str
    lang: str
    variant: Variant
    item_meta: dict[str, Any] = field(default_factory=dict)


def load_benchmark(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    skip_bad_rows: bool = False,
    langs: list[str] | None = None,
) -> LoadReport:
    """Read a benchmark file (or BMLAMA directory) into items, detecting the format if unnamed.

    Bad rows raise `BenchmarkError`, or with `skip_bad_rows` are left out and listed in
    `LoadReport.skipped`; problems with the file as a whole always raise. `langs` keeps only
    those variants (and items that still have one) and must all occur in the benchmark.
    """
    source = Path(path)
    if not source.exists():
        raise BenchmarkError(source, message="no such file or directory")
    wanted = _requested_langs(source, langs) if langs else None
    fmt = fmt or detect_format(source)
    loader = _LOADERS.get(fmt)
    if loader is None:
        raise BenchmarkError(source, message=f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if (fmt == "bmlama") != source.is_dir():
        needs = "a directory of {lang}.tsv files" if fmt == "bmlama" else "a file"
        raise BenchmarkError(source, message=f"format {fmt!r} reads {needs}")
    sink = _Sink(skip_bad_rows)
    items = loader(source, sink)
    if not items:
        skipped = f" ({len(sink.skipped)} bad rows skipped)" if sink.skipped else ""
        raise BenchmarkError(source, message=f"no items found{skipped}")
    if wanted is not None:
        items = _restrict(source, items, wanted)
    return LoadReport(items=items, format=fmt, path=str(source), skipped=sink.skipped)


def detect_format(path: str | os.PathLike[str]) -> str:
    """Name the format from the directory shape, or the first JSON object's keys / CSV header."""
    source = Path(path)
    if source.is_dir():
        return "bmlama"
    line, first = next(((n, text) for n, text in enumerate(_lines(source), 1) if text.strip()), (0, ""))
    if not first:
        raise BenchmarkError(source, message="empty file: no items")
    suffix = source.name.lower().removesuffix(".gz").rpartition(".")[2]
    if first.lstrip().startswith("{"):
        return _detect_json(source, line, first)
    if suffix in ("json", "jsonl", "ndjson"):
        raise BenchmarkError(source, line, message="expected a JSON object on each line")
    header = [cell.strip() for cell in next(csv.reader([first]))]
    if {"q_id", "language"} <= set(header):
        return "eclektic-csv"
    if suffix == "tsv":
        raise BenchmarkError(source, message="BMLAMA is read from a directory of {lang}.tsv files; pass the directory")
    raise BenchmarkError(source, line, message=f"cannot detect the format; name one of {', '.join(FORMATS)}")


def _detect_json(path: Path, line: int, text: str) -> str:
    try:
        keys = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchmarkError(
            path, line, message=f"not one JSON object per line ({exc.msg}); pretty-printed JSON is not JSONL"
        ) from None
    if "item_id" in keys:
        return "jsonl"
    if "q_id" in keys:
        return "eclektic-jsonl"
    raise BenchmarkError(
        path, line, message="cannot detect the format: expected an 'item_id' (jsonl) or 'q_id' (eclektic-jsonl) key"
    )


def _requested_langs(path: Path, langs: list[str]) -> list[str]:
    try:
        return [normalise_lang(lang) for lang in langs]
    except ValueError as exc:
        raise BenchmarkError(path, None, "langs", str(exc)) from None


def _restrict(path: Path, items: list[Item], wanted: list[str]) -> list[Item]:
    present = {lang for item in items for lang in item.variants}
    missing = [lang for lang in wanted if lang not in present]
    if missing:
        have = ", ".join(sorted(present))
        raise BenchmarkError(path, None, "langs", f"not in this benchmark: {', '.join(missing)} (it has {have})")
    kept = []
    for item in items:
        variants = {lang: variant for lang, variant in item.variants.items() if lang in wanted}
        if variants:
            kept.append(replace(item, variants=variants))
    return kept


# Reading --------------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[str]:
    return text_lines(path, BenchmarkError)


def _csv_rows(path: Path, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """Records with the line each starts on, since a quoted cell may span several lines."""
    reader = csv.reader(_lines(path), delimiter=delimiter)
    start = 1
    try:
        for row in reader:
            yield start, row
            start = reader.line_num + 1
    except csv.Error as exc:
        raise BenchmarkError(path, reader.line_num, None, f"malformed CSV: {exc}") from exc


def _json_rows(path: Path, sink: _Sink) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in enumerate(_lines(path), 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            sink.reject(BenchmarkError(path, number, None, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if isinstance(value, dict):
            yield number, value
        else:
            sink.reject(BenchmarkError(path, number, None, f"expected a JSON object, got {_type_name(value)}"))


def _parsed(
    rows: Iterable[tuple[int, _Row]], parse: Callable[[int, _Row], _Out], sink: _Sink
) -> Iterator[_Out]:
    """Apply a row parser, handing each bad row to the sink instead of stopping there."""
    for line, row in rows:
        try:
            result = parse(line, row)
        except BenchmarkError as error:
            sink.reject(error)
            continue
        yield result


# Values ---------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _clean(value: str) -> str | None:
    value = value.strip()
    return value or None


def _text(path: str, line: int, name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BenchmarkError(path, line, name, f"expected a string or null, got {_type_name(value)}")
    return _clean(value)


def _required(path: str, line: int, record: dict[str, Any], key: str) -> Any:
    value = record.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise BenchmarkError(path, line, key, "required but empty" if key in record else "required but missing")
    return value


def _item_id(path: str, line: int, record: dict[str, Any], key: str) -> str:
    value = _required(path, line, record, key)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BenchmarkError(path, line, key, f"expected a string or integer, got {_type_name(value)}")
    return str(value).strip()


def _language(path: str, line: int | None, name: str | None, value: Any) -> str:
    if not isinstance(value, str):
        raise BenchmarkError(path, line, name, f"expected a language code string, got {_type_name(value)}")
    try:
        return normalise_lang(value)
    except ValueError as exc:
        raise BenchmarkError(path, line, name, str(exc)) from None


def _lang_at(path: str, line: int, record: dict[str, Any], key: str) -> str:
    return _language(path, line, key, _required(path, line, record, key))


def _extras(record: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
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


def _unique(drafts: Iterable[_Draft], id_field: str, sink: _Sink) -> Iterator[_Draft]:
    first_line: dict[str, int] = {}
    for draft in drafts:
        seen = first_line.setdefault(draft.item_id, draft.lines[0])
        if seen != draft.lines[0]:
            sink.reject(BenchmarkError(
                draft.path, draft.lines[0], id_field, f"duplicate item id '{draft.item_id}' (first on line {seen})"
            ))
            continue
        yield draft


def _group(
    path: str, pieces: Iterable[_Piece], sink: _Sink, lang_field: str, source_field: str
) -> list[_Draft]:
    """Join per-language rows into items, in order of each item's first row."""
    drafts: dict[str, _Draft] = {}
    lines: dict[tuple[str, str], int] = {}
    for piece in pieces:
        draft = drafts.get(piece.item_id)
        if draft is None:
            draft = drafts[piece.item_id] = _Draft(
                path, piece.item_id, piece.source_lang, [], meta=dict(piece.item_meta)
            )
        if piece.source_lang != draft.source_lang:
            sink.reject(BenchmarkError(path, piece.line, source_field, (
                f"item '{piece.item_id}' has source language '{draft.source_lang}' on line {draft.lines[0]}"
                f" but '{piece.source_lang}' here"
            )))
            continue
        key = (piece.item_id, piece.lang)
        if key in lines:
            sink.reject(BenchmarkError(path, piece.line, lang_field, (
                f"duplicate language '{piece.lang}' for item '{piece.item_id}' (first on line {lines[key]})"
            )))
            continue
        for name, value in piece.item_meta.items():
            if draft.meta.get(name) != value:
                piece.variant.meta[name] = value
        lines[key] = piece.line
        draft.lines.append(piece.line)
        draft.variants[piece.lang] = piece.variant
    return list(drafts.values())


def _apply_source(
    draft: _Draft, text: dict[str, tuple[str, str | None]], title: str | None, url: str | None
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


def _finish(drafts: Iterable[_Draft], source_field: str | None, sink: _Sink) -> list[Item]:
    items = []
    for draft in drafts:
        if draft.source_lang not in draft.variants:
            sink.reject(BenchmarkError(draft.path, draft.lines[0], source_field, (
                f"item '{draft.item_id}' has no variant in its source language '{draft.source_lang}'"
            )))
            continue
        origin = Origin(draft.path, tuple(dict.fromkeys(draft.lines)))
        items.append(Item(draft.item_id, draft.source_lang, draft.variants, draft.meta, origin))
    return items


# ECLeKTic main JSONL (wide) -------------------------------------------------------------

_WIDE_KEY = re.compile(r"([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*)_([cqa])")
_WIDE_FIELDS = {"q": "question", "a": "answer", "c": "context"}
_WIDE_SOURCE_TEXT = {"question": "question", "answer": "answer", "content": "context"}
_WIDE_ITEM_KEYS = ("q_id", "original_lang", "title", "url", *_WIDE_SOURCE_TEXT)


def _load_eclektic_jsonl(path: Path, sink: _Sink) -> list[Item]:
    drafts = _parsed(_json_rows(path, sink), partial(_eclektic_wide_item, str(path)), sink)
    return _finish(_unique(drafts, "q_id", sink), "original_lang", sink)


def _eclektic_wide_item(path: str, line: int, record: dict[str, Any]) -> _Draft:
    item_id = _item_id(path, line, record, "q_id")
    draft = _Draft(path, item_id, _lang_at(path, line, record, "original_lang"), [line])
    texts: dict[str, dict[str, str | None]] = {}
    for key, value in record.items():
        match = _WIDE_KEY.fullmatch(key)
        if match is None:
            if key not in _WIDE_ITEM_KEYS:
                draft.meta[key] = value
            continue
        fields = texts.setdefault(_language(path, line, key, match[1]), {})
        name = _WIDE_FIELDS[match[2]]
        if name in fields:
            raise BenchmarkError(path, line, key, f"a second {name} for the same language")
        fields[name] = _text(path, line, key, value)
    draft.variants = {lang: Variant(**fields) for lang, fields in texts.items() if any(fields.values())}
    source_text = {
        name: (key, _text(path, line, key, record.get(key))) for key, name in _WIDE_SOURCE_TEXT.items()
    }
    title, url = (_text(path, line, key, record.get(key)) for key in ("title", "url"))
    _apply_source(draft, source_text, title, url)
    return draft


# ECLeKTic long CSV ----------------------------------------------------------------------

_CSV_REQUIRED = ("q_id", "original_lang", "language")
_CSV_FIELDS = {"question": "question", "answer": "answer", "content": "context"}
_CSV_ITEM_COLUMNS = ("original_content", "original_question", "original_answer", "title", "url")
_CSV_KNOWN = (*_CSV_REQUIRED, *_CSV_FIELDS, *_CSV_ITEM_COLUMNS)


def _load_eclektic_csv(path: Path, sink: _Sink) -> list[Item]:
    rows = _csv_rows(path, ",")
    header_line, raw_header = next(rows, (1, []))
    if not raw_header:
        return []
    header = [name.strip() for name in raw_header]
    for column in _CSV_REQUIRED:
        if column not in header:
            raise BenchmarkError(path, header_line, column, "missing from the header")
    twice = next((name for name in header if header.count(name) > 1), None)
    if twice is not None:
        raise BenchmarkError(path, header_line, twice, "appears twice in the header")
    records = ((line, row) for line, row in rows if row)
    pieces = _parsed(records, partial(_eclektic_csv_piece, str(path), header), sink)
    drafts = _group(str(path), pieces, sink, "language", "original_lang")
    for draft in drafts:
        text = {name: (f"original_{column}", draft.meta.pop(f"original_{column}", None))
                for column, name in _CSV_FIELDS.items()}
        _apply_source(draft, text, draft.meta.get("title"), draft.meta.get("url"))
    return _finish(drafts, "original_lang", sink)


def _eclektic_csv_piece(path: str, header: list[str], line: int, row: list[str]) -> _Piece:
    if len(row) != len(header):
        raise BenchmarkError(path, line, None, f"expected {len(header)} columns, found {len(row)}")
    cells = {name: _clean(value) for name, value in zip(header, row, strict=True)}
    variant = Variant(
        **{name: cells.get(column) for column, name in _CSV_FIELDS.items()},
        meta={name: value for name, value in cells.items() if name not in _CSV_KNOWN},
    )
    return _Piece(
        line=line,
        item_id=_item_id(path, line, cells, "q_id"),
        source_lang=_lang_at(path, line, cells, "original_lang"),
        lang=_lang_at(path, line, cells, "language"),
        variant=variant,
        item_meta={name: cells[name] for name in _CSV_ITEM_COLUMNS if cells.get(name) is not None},
    )


# BMLAMA directory -----------------------------------------------------------------------

# zh.tsv spells the header `Prompt\tAns\tCandidate\tAns\tSubject`, so headers are compared
# word by word, ignoring whether tabs or spaces separate the words.
_BMLAMA_HEADER = ["prompt", "ans", "candidate", "ans", "subject"]
_BMLAMA_COLUMNS = 4


@dataclass
class _Table:
    """One language's TSV, read whole because alignment is checked before any row is used."""

    path: Path
    lang: str
    rows: list[tuple[int, list[str]]]


def _load_bmlama(path: Path, sink: _Sink) -> list[Item]:
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".tsv", ".tsv.gz")))
    if not files:
        raise BenchmarkError(path, message="no *.tsv files: a BMLAMA directory holds one {lang}.tsv per language")
    tables = [_bmlama_table(file) for file in files]
    by_lang: dict[str, _Table] = {}
    for table in tables:
        other = by_lang.setdefault(table.lang, table)
        if other is not table:
            raise BenchmarkError(table.path, message=f"language '{table.lang}' is also in {other.path.name}")
    source = by_lang.get(BMLAMA_SOURCE_LANG)
    if source is None:
        raise BenchmarkError(path, message=f"no {BMLAMA_SOURCE_LANG}.tsv: BMLAMA items take it as their source")
    for table in tables:
        if len(table.rows) != len(source.rows):
            raise BenchmarkError(table.path, message=(
                f"misaligned: {table.path.name} has {len(table.rows)} data rows"
                f" but {source.path.name} has {len(source.rows)}"
            ))
    drafts = [
        _Draft(str(path), f"bmlama-{index:05d}", BMLAMA_SOURCE_LANG, [line])
        for index, (line, _) in enumerate(source.rows, 1)
    ]
    for table in [source, *(table for table in tables if table is not source)]:
        for draft, (line, cells) in zip(drafts, table.rows, strict=True):
            try:
                variant = _bmlama_variant(table.path, line, cells)
            except BenchmarkError as error:
                sink.reject(error)
                continue
            draft.lines.append(line)
            draft.variants[table.lang] = variant
    return _finish(drafts, None, sink)


def _bmlama_table(path: Path) -> _Table:
    try:
        lang = normalise_lang(path.name.split(".")[0])
    except ValueError as exc:
        raise BenchmarkError(path, message=f"file name must be a language code: {exc}") from None
    rows = list(_csv_rows(path, "\t"))
    if not rows:
        raise BenchmarkError(path, message="empty file: no header")
    (header_line, header), data = rows[0], rows[1:]
    if [word.lower() for cell in header for word in cell.split()] != _BMLAMA_HEADER:
        expected = "Prompt, Ans, Candidate Ans, Subject"
        raise BenchmarkError(path, header_line, None, f"header {header} does not read {expected}")
    while data and not data[-1][1]:
        data.pop()
    return _Table(path, lang, data)


def _bmlama_variant(path: Path, line: int, cells: list[str]) -> Variant:
    if len(cells) != _BMLAMA_COLUMNS:
        raise BenchmarkError(path, line, None, f"expected {_BMLAMA_COLUMNS} tab-separated cells, found {len(cells)}")
    prompt, answer, candidates, subject = [cell.strip() or None for cell in cells]
    meta: dict[str, Any] = {}
    if candidates is not None:
        meta["candidates"] = list(filter(None, map(str.strip, candidates.split(", "))))
    if subject is not None:
        meta["subject"] = subject
    return Variant(question=prompt, answer=answer, meta=meta)


# Generic JSONL --------------------------------------------------------------------------

_GENERIC_ITEM_KEYS = ("item_id", "source_lang", "variants")
_GENERIC_ROW_KEYS = ("item_id", "lang", "source_lang", *FIELDS)


def _load_generic_jsonl(path: Path, sink: _Sink) -> list[Item]:
    rows = _json_rows(path, sink)
    first = next(rows, None)
    if first is None:
        return []
    rows = itertools.chain([first], rows)
    line, record = first
    if "variants" in record:
        drafts = _parsed(rows, partial(_generic_item, str(path)), sink)
        return _finish(_unique(drafts, "item_id", sink), "source_lang", sink)
    if "lang" in record:
        pieces = _parsed(rows, partial(_generic_piece, str(path)), sink)
        return _finish(_group(str(path), pieces, sink, "lang", "source_lang"), "source_lang", sink)
    raise BenchmarkError(path, line, "variants", (
        "required but missing: give 'variants' (one item per line) or 'lang' (one language per line)"
    ))


def _generic_variant(
    path: str, line: int, prefix: str, record: dict[str, Any], known: Iterable[str]
) -> Variant:
    fields = {name: _text(path, line, prefix + name, record.get(name)) for name in FIELDS}
    return Variant(**fields, meta=_extras(record, known))


def _generic_item(path: str, line: int, record: dict[str, Any]) -> _Draft:
    draft = _Draft(
        path,
        _item_id(path, line, record, "item_id"),
        _lang_at(path, line, record, "source_lang"),
        [line],
        meta=_extras(record, _GENERIC_ITEM_KEYS),
    )
    variants = _required(path, line, record, "variants")
    if not isinstance(variants, dict):
        got = _type_name(variants)
        raise BenchmarkError(path, line, "variants", f"expected an object keyed by language, got {got}")
    for key, body in variants.items():
        name = f"variants.{key}"
        lang = _language(path, line, name, key)
        if not isinstance(body, dict):
            raise BenchmarkError(path, line, name, f"expected an object, got {_type_name(body)}")
        if lang in draft.variants:
            raise BenchmarkError(path, line, name, f"a second variant for language '{lang}'")
        draft.variants[lang] = _generic_variant(path, line, f"{name}.", body, FIELDS)
    return draft


def _generic_piece(path: str, line: int, record: dict[str, Any]) -> _Piece:
    return _Piece(
        line=line,
        item_id=_item_id(path, line, record, "item_id"),
        source_lang=_lang_at(path, line, record, "source_lang"),
        lang=_lang_at(path, line, record, "lang"),
        variant=_generic_variant(path, line, "", record, _GENERIC_ROW_KEYS),
    )


_LOADERS: dict[str, Callable[[Path, _Sink], list[Item]]] = {
    "eclektic-jsonl": _load_eclektic_jsonl,
    "eclektic-csv": _load_eclektic_csv,
    "bmlama": _load_bmlama,
    "jsonl": _load_generic_jsonl,
}
