"""ECLeKTic in its two published shapes: the main JSONL (one item per line, `{L}_q/_a/_c` keys per
language) and the long CSV (one row per language of an item)."""
from __future__ import annotations

import re
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from audit.items import Item, Variant
from audit.readers.common import (
    BenchmarkError,
    Draft,
    Piece,
    Record,
    Sink,
    apply_source,
    clean,
    csv_rows,
    finish_items,
    item_id_at,
    json_rows,
    lang_at,
    language_code,
    parsed_rows,
    text_field,
    unique_items,
)
from audit.readers.grouping import group_pieces

_WIDE_KEY = re.compile(r"([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*)_([cqa])")
_WIDE_FIELDS = {"q": "question", "a": "answer", "c": "context"}
_WIDE_SOURCE_TEXT = {"question": "question", "answer": "answer", "content": "context"}
_WIDE_ITEM_KEYS = ("q_id", "original_lang", "title", "url", *_WIDE_SOURCE_TEXT)


def read_eclektic_jsonl(path: Path, sink: Sink) -> Iterable[Item]:
    drafts = parsed_rows(json_rows(path, sink), partial(_eclektic_wide_item, str(path)), sink)
    return finish_items(unique_items(drafts, "q_id", sink), "original_lang", sink)


def _eclektic_wide_item(path: str, line: int, record: Record) -> Draft:
    item_id = item_id_at(path, line, record, "q_id")
    draft = Draft(path, item_id, lang_at(path, line, record, "original_lang"), [line])
    texts: dict[str, dict[str, str | None]] = {}
    for key, value in record.items():
        match = _WIDE_KEY.fullmatch(key)
        if match is None:
            if key not in _WIDE_ITEM_KEYS:
                draft.meta[key] = value
            continue
        fields = texts.setdefault(language_code(path, line, key, match[1]), {})
        name = _WIDE_FIELDS[match[2]]
        if name in fields:
            raise BenchmarkError(path, line, key, f"a second {name} for the same language")
        fields[name] = text_field(path, line, key, value)
    draft.variants = {lang: Variant(**fields) for lang, fields in texts.items() if any(fields.values())}
    source_text = {
        name: (key, text_field(path, line, key, record.get(key))) for key, name in _WIDE_SOURCE_TEXT.items()
    }
    title, url = (text_field(path, line, key, record.get(key)) for key in ("title", "url"))
    apply_source(draft, source_text, title, url)
    return draft


# ECLeKTic long CSV ----------------------------------------------------------------------

_CSV_REQUIRED = ("q_id", "original_lang", "language")
_CSV_FIELDS = {"question": "question", "answer": "answer", "content": "context"}
_CSV_ITEM_COLUMNS = ("original_content", "original_question", "original_answer", "title", "url")
_CSV_KNOWN = (*_CSV_REQUIRED, *_CSV_FIELDS, *_CSV_ITEM_COLUMNS)


def read_eclektic_csv(path: Path, sink: Sink) -> Iterable[Item]:
    rows = csv_rows(path, ",")
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
    pieces = parsed_rows(records, partial(_eclektic_csv_piece, str(path), header), sink)
    drafts = group_pieces(str(path), pieces, sink, "language", "original_lang")
    return finish_items(map(_with_source, drafts), "original_lang", sink)


def _with_source(draft: Draft) -> Draft:
    """The item-level columns (the source text, title and link) merged into the draft."""
    text = {name: (f"original_{column}", draft.meta.pop(f"original_{column}", None)) for column, name in _CSV_FIELDS.items()}
    apply_source(draft, text, draft.meta.get("title"), draft.meta.get("url"))
    return draft


def _eclektic_csv_piece(path: str, header: list[str], line: int, row: list[str]) -> Piece:
    if len(row) != len(header):
        raise BenchmarkError(path, line, None, f"expected {len(header)} columns, found {len(row)}")
    cells = {name: clean(value) for name, value in zip(header, row, strict=True)}
    variant = Variant(
        **{name: cells.get(column) for column, name in _CSV_FIELDS.items()},
        meta={name: value for name, value in cells.items() if name not in _CSV_KNOWN},
    )
    return Piece(
        line=line,
        item_id=item_id_at(path, line, cells, "q_id"),
        source_lang=lang_at(path, line, cells, "original_lang"),
        lang=lang_at(path, line, cells, "language"),
        variant=variant,
        item_meta={name: cells[name] for name in _CSV_ITEM_COLUMNS if cells.get(name) is not None},
    )


