"""The tool's own JSONL: one item per line (`variants` keyed by language) or one language per line."""
from __future__ import annotations

import itertools
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from audit.items import FIELDS, Item, Variant
from audit.readers.common import (
    BenchmarkError,
    Draft,
    Piece,
    Record,
    Sink,
    extras,
    finish_items,
    item_id_at,
    json_rows,
    lang_at,
    language_code,
    parsed_rows,
    required,
    text_field,
    type_name,
    unique_items,
)
from audit.readers.grouping import group_pieces

_GENERIC_ITEM_KEYS = ("item_id", "source_lang", "variants")
_GENERIC_ROW_KEYS = ("item_id", "lang", "source_lang", *FIELDS)


def read_jsonl(path: Path, sink: Sink) -> Iterable[Item]:
    rows = json_rows(path, sink)
    first = next(rows, None)
    if first is None:
        return []
    rows = itertools.chain([first], rows)
    line, record = first
    if "variants" in record:
        drafts = parsed_rows(rows, partial(_generic_item, str(path)), sink)
        return finish_items(unique_items(drafts, "item_id", sink), "source_lang", sink)
    if "lang" in record:
        pieces = parsed_rows(rows, partial(_generic_piece, str(path)), sink)
        return finish_items(group_pieces(str(path), pieces, sink, "lang", "source_lang"), "source_lang", sink)
    raise BenchmarkError(path, line, "variants", (
        "required but missing: give 'variants' (one item per line) or 'lang' (one language per line)"
    ))


def _generic_variant(
    path: str, line: int, prefix: str, record: Record, known: Iterable[str]
) -> Variant:
    fields = {name: text_field(path, line, prefix + name, record.get(name)) for name in FIELDS}
    if not any(fields[name] for name in ("question", "answer", "context")):
        raise BenchmarkError(path, line, prefix.rstrip(".") or "question", "no question, answer or context: nothing to check")
    return Variant(**fields, meta=extras(record, known))


def _generic_item(path: str, line: int, record: Record) -> Draft:
    draft = Draft(
        path,
        item_id_at(path, line, record, "item_id"),
        lang_at(path, line, record, "source_lang"),
        [line],
        meta=extras(record, _GENERIC_ITEM_KEYS),
    )
    variants = required(path, line, record, "variants")
    if not isinstance(variants, dict):
        got = type_name(variants)
        raise BenchmarkError(path, line, "variants", f"expected an object keyed by language, got {got}")
    for key, body in variants.items():
        name = f"variants.{key}"
        lang = language_code(path, line, name, key)
        if not isinstance(body, dict):
            raise BenchmarkError(path, line, name, f"expected an object, got {type_name(body)}")
        if lang in draft.variants:
            raise BenchmarkError(path, line, name, f"a second variant for language '{lang}'")
        draft.variants[lang] = _generic_variant(path, line, f"{name}.", body, FIELDS)
    return draft


def _generic_piece(path: str, line: int, record: Record) -> Piece:
    return Piece(
        line=line,
        item_id=item_id_at(path, line, record, "item_id"),
        source_lang=lang_at(path, line, record, "source_lang"),
        lang=lang_at(path, line, record, "lang"),
        variant=_generic_variant(path, line, "", record, _GENERIC_ROW_KEYS),
    )


