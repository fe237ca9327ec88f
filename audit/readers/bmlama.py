"""BMLAMA: a directory of `{lang}.tsv` cloze files aligned by line (line k is fact k everywhere)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from audit.items import Item, ItemKind, Variant
from audit.langcodes import normalise_lang
from audit.readers.common import BenchmarkError, Draft, Record, Sink, csv_rows, finish_items

# BMLAMA facts are English Wikidata labels translated into the other languages.
BMLAMA_SOURCE_LANG = "en"
BMLAMA_MASK = "<mask>"

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


def read_bmlama(path: Path, sink: Sink) -> list[Item]:
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
        Draft(str(path), f"bmlama-{index:05d}", BMLAMA_SOURCE_LANG, [line], kind=ItemKind.CLOZE, mask=BMLAMA_MASK)
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
            draft.rows.append((str(table.path), line))
            draft.variants[table.lang] = variant
    return finish_items(drafts, None, sink)


def is_bmlama(folder: Path) -> bool:
    """A folder whose first `.tsv` file has BMLAMA's header (MGSM's `mgsm_{lang}.tsv`, headerless,
    or any other folder of per-language tables is not BMLAMA)."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith((".tsv", ".tsv.gz")))
    header = next(csv_rows(files[0], "\t"), (1, []))[1] if files else []
    return [word.lower() for cell in header for word in cell.split()] == _BMLAMA_HEADER


def _bmlama_table(path: Path) -> _Table:
    try:
        lang = normalise_lang(path.name.split(".")[0])
    except ValueError as exc:
        raise BenchmarkError(path, message=f"file name must be a language code: {exc}") from None
    rows = list(csv_rows(path, "\t"))
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
    meta: Record = {}
    if candidates is not None:
        # The same few candidates stand in every row of a relation: each kept once.
        meta["candidates"] = [sys.intern(name) for name in filter(None, map(str.strip, candidates.split(", ")))]
    return Variant(question=prompt, answer=answer, subject=subject, meta=meta)


