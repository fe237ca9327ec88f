"""TyDi QA's primary task: one JSON line per question, asked in its own language against a whole
Wikipedia article, with annotated passages and minimal answers as UTF-8 byte offsets.

Each question is its own item with one language (TyDi questions are written natively, not
translated).  The checked context is the first annotated gold passage and the answer the first
minimal answer; a question no annotator could answer keeps its question only, since the full
article is a retrieval document rather than benchmark text.
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path

from audit.items import Item, Variant
from audit.readers.common import BenchmarkError, Cell, Draft, ReadOptions, Record, Sink, finish_items, item_id_at, json_rows, parsed_rows, text_field, type_name, unique_items
from audit.readers.squad import TYDI_LANGUAGES

TYDI_KEYS = frozenset({"example_id", "question_text", "document_plaintext", "annotations", "language"})


def read_tydi(path: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    drafts = parsed_rows(json_rows(path, sink), partial(_item, str(path)), sink)
    return finish_items(unique_items(drafts, "example_id", sink), "language", sink)


def _item(path: str, line: int, record: Record) -> Draft:
    name = record.get("language")
    lang = TYDI_LANGUAGES.get(name) if isinstance(name, str) else None
    if lang is None:
        raise BenchmarkError(path, line, "language", f"{name!r} is not a TyDi QA language ({', '.join(sorted(TYDI_LANGUAGES))})")
    document = record.get("document_plaintext")
    if not isinstance(document, str):
        raise BenchmarkError(path, line, "document_plaintext", f"expected a string, got {type_name(document)}")
    raw = document.encode("utf-8")
    candidates = record.get("passage_answer_candidates") or []
    annotations = record.get("annotations") or []
    if not isinstance(candidates, list) or not isinstance(annotations, list):
        raise BenchmarkError(path, line, "annotations", "expected lists of passage candidates and annotations")
    passage, answer, yes_no = None, None, None
    for index, annotation in enumerate(annotations):
        where = f"annotations[{index}]"
        if not isinstance(annotation, dict):
            raise BenchmarkError(path, line, where, f"expected an object, got {type_name(annotation)}")
        candidate = (annotation.get("passage_answer") or {}).get("candidate_index", -1)
        if passage is None and isinstance(candidate, int) and candidate >= 0:
            if candidate >= len(candidates):
                raise BenchmarkError(path, line, f"{where}.passage_answer.candidate_index", f"{candidate} but only {len(candidates)} candidates")
            passage = _slice(path, line, f"passage_answer_candidates[{candidate}]", raw, candidates[candidate])
        minimal = annotation.get("minimal_answer") or {}
        if answer is None and minimal.get("plaintext_start_byte", -1) >= 0:
            answer = _slice(path, line, f"{where}.minimal_answer", raw, minimal)
        if yes_no is None and annotation.get("yes_no_answer") in ("YES", "NO"):
            yes_no = annotation["yes_no_answer"].lower()
    variant = Variant(
        question=text_field(path, line, "question_text", record.get("question_text")),
        answer=answer,
        context=passage,
        title=text_field(path, line, "document_title", record.get("document_title")),
        url=text_field(path, line, "document_url", record.get("document_url")),
        meta={"yes_no_answer": yes_no} if yes_no else {},
    )
    draft = Draft(path, item_id_at(path, line, record, "example_id"), lang, [line])
    draft.variants[lang] = variant
    return draft


def _slice(path: str, line: int, where: str, raw: bytes, span: Cell) -> str:
    start, end = (span.get(key) if isinstance(span, dict) else None for key in ("plaintext_start_byte", "plaintext_end_byte"))
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(raw)):
        raise BenchmarkError(path, line, where, f"byte span {start}..{end} is outside the {len(raw)}-byte document")
    try:
        return raw[start:end].decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BenchmarkError(path, line, where, f"byte span {start}..{end} cuts a UTF-8 character") from None
