"""MKQA: one JSON line per question, with the English `query`, its translations under `queries`
and typed answers (with aliases) per language under `answers`.  The questions are Natural
Questions translated from English, so English is the source."""
from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path

from audit.items import Item, Variant
from audit.readers.common import (
    BenchmarkError,
    Cell,
    Draft,
    ReadOptions,
    Record,
    Sink,
    finish_items,
    item_id_at,
    json_rows,
    language_code,
    parsed_rows,
    text_field,
    type_name,
    unique_items,
)

MKQA_SOURCE_LANG = "en"
MKQA_KEYS = frozenset({"example_id", "queries", "answers"})


def read_mkqa(path: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    drafts = parsed_rows(json_rows(path, sink), partial(_item, str(path), options.source_lang or MKQA_SOURCE_LANG), sink)
    return finish_items(unique_items(drafts, "example_id", sink), None, sink)


def _item(path: str, source_lang: str, line: int, record: Record) -> Draft:
    draft = Draft(path, item_id_at(path, line, record, "example_id"), source_lang, [line])
    queries, answers = _by_language(path, line, record, "queries"), _by_language(path, line, record, "answers")
    for key, query in queries.items():
        lang = language_code(path, line, f"queries.{key}", key)
        if lang in draft.variants:
            raise BenchmarkError(path, line, f"queries.{key}", f"a second query for language '{lang}'")
        texts, types = _answers(path, line, f"answers.{key}", answers.get(key))
        draft.variants[lang] = Variant(
            question=text_field(path, line, f"queries.{key}", query),
            answer=texts[0] if texts else None,
            aliases=tuple(texts[1:]),
            meta={"answer_types": types},
        )
    english = text_field(path, line, "query", record.get("query"))
    source = draft.variants.get(source_lang)
    if english is not None and source is not None and source.question != english:
        draft.meta["query"] = english
    return draft


def _by_language(path: str, line: int, record: Record, name: str) -> Record:
    value = record.get(name)
    if not isinstance(value, dict):
        raise BenchmarkError(path, line, name, f"expected an object keyed by language, got {type_name(value)}")
    return value


def _answers(path: str, line: int, name: str, value: Cell) -> tuple[list[str], list[str]]:
    """Every distinct answer text and alias (the first answer's text first), and the answer types;
    unanswerable questions have answers of type `unanswerable` with no text."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        raise BenchmarkError(path, line, name, f"expected a list of answers, got {type_name(value)}")
    texts: dict[str, None] = {}
    types = []
    for index, answer in enumerate(value):
        where = f"{name}[{index}]"
        if not isinstance(answer, dict):
            raise BenchmarkError(path, line, where, f"expected an object, got {type_name(answer)}")
        types.append(str(answer.get("type")))
        text = text_field(path, line, f"{where}.text", answer.get("text"))
        if text:
            texts.setdefault(text)
        aliases = answer.get("aliases") or []
        if not isinstance(aliases, list):
            raise BenchmarkError(path, line, f"{where}.aliases", f"expected a list, got {type_name(aliases)}")
        for alias in aliases:
            alias_text = text_field(path, line, f"{where}.aliases", alias)
            if alias_text:
                texts.setdefault(alias_text)
    return list(texts), types
