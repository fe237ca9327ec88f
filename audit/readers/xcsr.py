"""X-CSR (Lin et al. 2021, github INK-USC/XCSR): X-CSQA and X-CODAH, CommonsenseQA and CODAH
translated from English into 15 languages, published as `X-CSR_datasets/{X-CSQA,X-CODAH}/
{lang}/{dev,test}.jsonl` (the training split is English only):

    {"id": "be1920f7ba5454ad", "lang": "en", "question": {"stem": "...", "choices":
     [{"label": "A", "text": "..."}, ...]}, "answerKey": "D"}

X-CODAH adds `question_tag` and leaves `stem` blank (the choices are whole sentences).  One item
per `id` (shared by every language), multiple-choice, English its source.  The folders name
Japanese `jap`, which is read as `ja` (`jap` alone is the ISO 639-3 code of another language);
a row's `lang` must be its folder's.  The test split hides `answerKey`: its items have options
and no answer.
"""
from __future__ import annotations

import glob
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from audit.items import Item, ItemKind, Variant
from audit.readers.common import (
    BenchmarkError,
    Cell,
    Piece,
    ReadOptions,
    Record,
    Sink,
    extras,
    finish_items,
    item_id_at,
    json_rows,
    language_code,
    parsed_rows,
    required,
    text_field,
    type_name,
    with_kind,
)
from audit.readers.folders import check_all_read
from audit.readers.grouping import group_pieces
from audit.readers.tables import is_glob

XCSR_SOURCE_LANG = "en"
# X-CSR's own spellings that are not the language's code.
XCSR_CODES = {"jap": "ja"}
_KEYS = ("id", "lang", "question", "answerKey")


def is_xcsr_row(record: Record) -> bool:
    question = record.get("question")
    return isinstance(question, dict) and "stem" in question and "choices" in question


def xcsr_files(source: Path) -> list[Path]:
    if is_glob(source):
        return sorted(Path(p) for p in glob.glob(str(source), recursive=True) if Path(p).is_file())
    if source.is_dir():
        return sorted(p for p in source.rglob("*.jsonl") if not any(part.startswith(".") for part in p.relative_to(source).parts))
    return [source]


def read_xcsr(source: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    files = xcsr_files(source)
    if not files:
        raise BenchmarkError(source, message="no {lang}/dev.jsonl or {lang}/test.jsonl files")
    if not is_glob(source):
        check_all_read(source, files, "X-CSR ({lang}/dev.jsonl, {lang}/test.jsonl)")
    source_lang = options.source_lang or XCSR_SOURCE_LANG
    pieces = (
        piece
        for file in files
        for piece in parsed_rows(json_rows(file, sink), partial(_piece, file, folder=_folder(source, file), source_lang=source_lang), sink)
    )
    return finish_items(map(with_kind(ItemKind.MULTIPLE_CHOICE, source_required=False), group_pieces(str(source), pieces, sink, "lang", "lang")), None, sink)


def _folder(source: Path, file: Path) -> str | None:
    """The language a file's folder names, where the benchmark is a folder of them."""
    return _code(str(file), None, "lang", file.parent.name) if source.is_dir() or is_glob(source) else None


def _code(path: str, line: int | None, name: str, value: Cell) -> str:
    return language_code(path, line, name, XCSR_CODES.get(value, value) if isinstance(value, str) else value)


def _piece(path: Path, line: int, record: Record, folder: str | None, source_lang: str) -> Piece:
    where = str(path)
    lang = _code(where, line, "lang", required(where, line, record, "lang"))
    if folder is not None and lang != folder:
        raise BenchmarkError(where, line, "lang", f"{record['lang']!r} in the folder of {folder}")
    question = required(where, line, record, "question")
    if not isinstance(question, dict):
        raise BenchmarkError(where, line, "question", f"expected an object with stem and choices, got {type_name(question)}")
    choices = required(where, line, question, "choices")
    if not isinstance(choices, list) or not choices:
        raise BenchmarkError(where, line, "question.choices", "expected a non-empty list of {label, text}")
    labels, options = [], []
    for n, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise BenchmarkError(where, line, f"question.choices[{n}]", f"expected an object, got {type_name(choice)}")
        labels.append(text_field(where, line, f"question.choices[{n}].label", choice.get("label")))
        text = text_field(where, line, f"question.choices[{n}].text", choice.get("text"))
        if text is None:
            raise BenchmarkError(where, line, f"question.choices[{n}].text", "an empty option")
        options.append(text)
    key = text_field(where, line, "answerKey", record.get("answerKey"))
    if key is not None and key not in labels:
        raise BenchmarkError(where, line, "answerKey", f"{key!r} names none of the choices {', '.join(map(str, labels))}")
    variant = Variant(
        question=text_field(where, line, "question.stem", question.get("stem")),
        answer=options[labels.index(key)] if key is not None else None,
        options=tuple(options),
        meta=extras(record, _KEYS),
    )
    return Piece(line=line, item_id=item_id_at(where, line, record, "id"), source_lang=source_lang, lang=lang, variant=variant, file=where)
