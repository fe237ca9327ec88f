"""SQuAD-style JSON (`data → paragraphs → qas`): XQuAD, MLQA, TyDi QA GoldP and the like.

One file per language (`xquad.de.json`, MLQA's `dev-context-de-question-de.json`), a directory
or glob of them, or one file whose question ids name their language (TyDi QA GoldP's
`english-…`).  Questions are joined across languages by id; an item's source is `--source-lang`,
else English where the item has it, else its only language.  Places are JSON paths
(`data[3].paragraphs[0].qas[2]`), since a JSON document has no row per question.
"""
from __future__ import annotations

import glob
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from audit.errors import json_problem, text_lines
from audit.items import Item, Variant
from audit.readers.common import BenchmarkError, Cell, Draft, Piece, ReadOptions, Record, Sink, finish_items, language_code, text_field, type_name
from audit.readers.folders import check_all_read
from audit.readers.grouping import Grouping
from audit.readers.tables import is_glob, language_of

# TyDi QA GoldP names each question's language in its id (`finnish-123-0`).
TYDI_LANGUAGES = {
    "arabic": "ar", "bengali": "bn", "english": "en", "finnish": "fi", "indonesian": "id", "japanese": "ja",
    "korean": "ko", "russian": "ru", "swahili": "sw", "telugu": "te", "thai": "th",
}


# MLQA: `{split}-context-{c}-question-{q}.json`.
_MLQA = re.compile(r"^(?:dev|test)-context-([a-z-]+)-question-([a-z-]+)\.json(?:\.gz)?$")
_CONTEXT_FIELDS = ("context", "answer", "title")


@dataclass
class _Question:
    lang: str
    ordinal: int
    variant: Variant


def is_squad(path: Path) -> bool:
    """A JSON document whose top level is an object with a `data` list of articles."""
    head = ""
    for line in text_lines(path, BenchmarkError):
        head += line
        if len(head) > 2000:
            break
    return head.lstrip().startswith("{") and re.search(r'"data"\s*:\s*\[', head) is not None


def squad_files(source: Path) -> list[Path]:
    if is_glob(source):
        return sorted(Path(p) for p in glob.glob(str(source), recursive=True) if Path(p).is_file())
    if source.is_dir():
        return sorted(p for p in source.rglob("*") if p.is_file() and not p.name.startswith(".") and p.name.lower().removesuffix(".gz").endswith(".json"))
    return [source]


def read_squad(source: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    """Each file's questions joined by id through a temporary file (`Grouping`), one file
    parsed at a time, so no file's questions are held once the next is read."""
    files = squad_files(source)
    if not files:
        raise BenchmarkError(source, message="no *.json files")
    check_all_read(source, files, "SQuAD-style JSON documents")
    roles = [_file_role(file, len(files), options) for file in files]
    known = _known_source(files)
    grouping = Grouping(str(source), sink, "lang", "source_lang", duplicate=_second_question)
    try:
        for file, (file_lang, fields) in zip(files, roles, strict=True):
            for item_id, question in _questions(file, file_lang, sink):
                question.variant.field_languages = dict(fields)
                grouping.add(Piece(question.ordinal, item_id, "", question.lang, question.variant, file=str(file)))
        named = all(lang is not None for lang, _ in roles)
        given = options.source_lang or known
        sources = {item_id: _source_of(source, item_id, langs, given, named) for item_id, langs in grouping.languages()} if not given else None
    except BaseException:
        grouping.close()
        raise
    if known and not options.source_lang and all(lang != known for lang, _ in roles):
        sink.notes.append(f"source language: {known}, the language this benchmark was translated from (none of its files is in it); give --source-lang if these questions were written in their own language")
    return finish_items((_with_source(draft, given or sources[draft.item_id]) for draft in grouping.drafts()), None, sink)


def _with_source(draft: Draft, source_lang: str) -> Draft:
    """The draft with its source language, and its first question's place as its line."""
    draft.source_lang, draft.source_required, draft.lines = source_lang, source_lang in draft.variants, draft.lines[:1]
    return draft


def _second_question(piece: Piece, first: Piece) -> BenchmarkError:
    hint = " (MLQA: pass a glob that picks one file per question language)" if piece.variant.field_languages or _MLQA.match(Path(piece.file or "").name) else ""
    return BenchmarkError(piece.file, None, f"qas[id={piece.item_id}]", f"a second '{piece.lang}' question with this id (first in {first.file}){hint}")


def _file_role(file: Path, count: int, options: ReadOptions) -> tuple[str | None, dict[str, str]]:
    """A file's question language and the fields written in another (MLQA's cross-lingual files:
    `dev-context-en-question-de.json` asks German questions about English paragraphs, whose
    answers are spans of the paragraph)."""
    mlqa = _MLQA.match(file.name.lower())
    if mlqa:
        context, question = (language_code(str(file), None, None, code) for code in mlqa.group(1, 2))
        return question, {} if context == question else dict.fromkeys(_CONTEXT_FIELDS, context)
    lang = language_of(file) if count > 1 else language_of(file, folder=False)
    return lang or (options.source_lang if count == 1 else None), {}


def _known_source(files: list[Path]) -> str | None:
    """English for XQuAD and MLQA, whose every other language is a translation of English text."""
    names = [file.name.lower() for file in files]
    return "en" if names and all(name.startswith("xquad.") or _MLQA.match(name) for name in names) else None


def _source_of(source: Path, item_id: str, langs: list[str], given: str | None, named: bool) -> str:
    if given:
        return given
    if "en" in langs:
        return "en"
    if len(langs) == 1 and not named:
        return langs[0]
    raise BenchmarkError(source, message=(
        f"which language were these questions first written in (question {item_id!r})? the files name {', '.join(langs)}; "
        f"give --source-lang (the language translated from, or {langs[0]} if they were written in it)"
    ))


def _document(path: Path) -> Record:
    text = "".join(text_lines(path, BenchmarkError))
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise BenchmarkError(path, getattr(error, "lineno", None), None, json_problem(error)) from None
    if not isinstance(value, dict) or not isinstance(value.get("data"), list):
        raise BenchmarkError(path, None, "data", "expected a SQuAD-style object with a 'data' list of articles")
    return value


def _questions(path: Path, file_lang: str | None, sink: Sink) -> list[tuple[str, _Question]]:
    found = []
    ordinal = 0
    for a, article in enumerate(_document(path)["data"]):
        where = f"data[{a}]"
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise BenchmarkError(path, None, f"{where}.paragraphs", "expected a list of paragraphs")
        title = article.get("title")
        title = title.replace("_", " ").strip() if isinstance(title, str) else None
        for p, paragraph in enumerate(article["paragraphs"]):
            here = f"{where}.paragraphs[{p}]"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
                raise BenchmarkError(path, None, f"{here}.qas", "expected a list of questions")
            context = text_field(str(path), None, f"{here}.context", paragraph.get("context"))
            for q, qa in enumerate(paragraph["qas"]):
                ordinal += 1
                try:
                    found.append(_question(path, f"{here}.qas[{q}]", qa, file_lang, context, title, ordinal))
                except BenchmarkError as error:
                    sink.reject(error)
    return found


def _question(path: Path, where: str, qa: Cell, file_lang: str | None, context: str | None, title: str | None, ordinal: int) -> tuple[str, _Question]:
    if not isinstance(qa, dict):
        raise BenchmarkError(path, None, where, f"expected an object, got {type_name(qa)}")
    item_id = qa.get("id")
    if not isinstance(item_id, str) or not item_id.strip():
        raise BenchmarkError(path, None, f"{where}.id", "required: a non-empty string")
    lang = file_lang or TYDI_LANGUAGES.get(item_id.split("-", 1)[0])
    if lang is None:
        raise BenchmarkError(path, None, f"{where}.id", "cannot tell the question's language: name the file by it (xquad.de.json) or give --source-lang for a one-language file")
    answers = qa.get("answers") or []
    if not isinstance(answers, list):
        raise BenchmarkError(path, None, f"{where}.answers", f"expected a list, got {type_name(answers)}")
    texts: dict[str, None] = {}
    for i, answer in enumerate(answers):
        if not isinstance(answer, dict):
            raise BenchmarkError(path, None, f"{where}.answers[{i}]", f"expected an object, got {type_name(answer)}")
        text = text_field(str(path), None, f"{where}.answers[{i}].text", answer.get("text"))
        if text:
            texts.setdefault(text)
    answer_texts = list(texts)
    variant = Variant(
        question=text_field(str(path), None, f"{where}.question", qa.get("question")),
        answer=answer_texts[0] if answer_texts else None,
        aliases=tuple(answer_texts[1:]),
        context=context,
        title=title,
        meta={"is_impossible": True} if qa.get("is_impossible") else {},
    )
    return item_id.strip(), _Question(lang, ordinal, variant)
