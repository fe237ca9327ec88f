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
    """One language's TSV, read whole because its alignment with the English one is checked
    before any of its rows is used."""

    path: Path
    lang: str
    rows: list[tuple[int, list[str]]]


def read_bmlama(path: Path, sink: Sink) -> list[Item]:
    """The English table first (it numbers the items), then each other language's table read,
    checked against it and let go before the next is read: the tables' cells would otherwise
    sit in memory beside the items made of them."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".tsv", ".tsv.gz")))
    if not files:
        raise BenchmarkError(path, message="no *.tsv files: a BMLAMA directory holds one {lang}.tsv per language")
    by_lang: dict[str, Path] = {}
    for file in files:
        other = by_lang.setdefault(_table_lang(file), file)
        if other is not file:
            raise BenchmarkError(file, message=f"language '{_table_lang(file)}' is also in {other.name}")
    if BMLAMA_SOURCE_LANG not in by_lang:
        raise BenchmarkError(path, message=f"no {BMLAMA_SOURCE_LANG}.tsv: BMLAMA items take it as their source")
    source = _bmlama_table(by_lang[BMLAMA_SOURCE_LANG])
    drafts = [
        Draft(str(path), f"bmlama-{index:05d}", BMLAMA_SOURCE_LANG, [line], kind=ItemKind.CLOZE, mask=BMLAMA_MASK)
        for index, (line, _) in enumerate(source.rows, 1)
    ]
    rows = len(source.rows)
    _add_variants(source, drafts, sink)
    for file in files:
        if file == source.path:
            continue
        table = _bmlama_table(file)
        if len(table.rows) != rows:
            raise BenchmarkError(table.path, message=f"misaligned: {table.path.name} has {len(table.rows)} data rows but {source.path.name} has {rows}")
        _add_variants(table, drafts, sink)
    return finish_items(drafts, None, sink)


def _add_variants(table: _Table, drafts: list[Draft], sink: Sink) -> None:
    where = str(table.path)  # one string for every row's origin, not one per row
    for draft, (line, cells) in zip(drafts, table.rows, strict=True):
        try:
            variant = _bmlama_variant(table.path, line, cells)
        except BenchmarkError as error:
            sink.reject(error)
            continue
        draft.lines.append(line)
        draft.rows.append((where, line))
        draft.variants[table.lang] = variant


def is_bmlama(folder: Path) -> bool:
    """A folder whose first `.tsv` file has BMLAMA's header (MGSM's `mgsm_{lang}.tsv`, headerless,
    or any other folder of per-language tables is not BMLAMA)."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith((".tsv", ".tsv.gz")))
    header = next(csv_rows(files[0], "\t"), (1, []))[1] if files else []
    return [word.lower() for cell in header for word in cell.split()] == _BMLAMA_HEADER


def _table_lang(path: Path) -> str:
    try:
        return normalise_lang(path.name.split(".")[0])
    except ValueError as exc:
        raise BenchmarkError(path, message=f"file name must be a language code: {exc}") from None


def _bmlama_table(path: Path) -> _Table:
    lang = _table_lang(path)
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


