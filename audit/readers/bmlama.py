"""BMLAMA: a directory of `{lang}.tsv` cloze files aligned by line (line k is fact k everywhere)."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from audit.items import Item, ItemKind, Variant
from audit.langcodes import normalise_lang
from audit.readers.common import BenchmarkError, Draft, Record, Sink, csv_rows, finish_item

# BMLAMA facts are English Wikidata labels translated into the other languages.
BMLAMA_SOURCE_LANG = "en"
BMLAMA_MASK = "<mask>"

# zh.tsv spells the header `Prompt\tAns\tCandidate\tAns\tSubject`, so headers are compared
# word by word, ignoring whether tabs or spaces separate the words.
_BMLAMA_HEADER = ["prompt", "ans", "candidate", "ans", "subject"]
_BMLAMA_COLUMNS = 4


@dataclass
class _Table:
    """One language's TSV, its header checked on opening and its data rows then taken one at
    a time, in step with the English table's; `count` is how many have been taken."""

    path: Path
    lang: str
    rows: Iterator[tuple[int, list[str]]]
    # Rows this table rejected, held so that skipped rows are listed table by table (the
    # order of reading each table whole) although the tables are read side by side.
    rejects: Sink
    count: int = 0

    def next_row(self) -> tuple[int, list[str]] | None:
        row = next(self.rows, None)
        self.count += row is not None
        return row

    def total(self) -> int:
        """All its data rows, reading on to the end: asked only once the tables disagree."""
        self.count += sum(1 for _ in self.rows)
        return self.count


def read_bmlama(path: Path, sink: Sink) -> Iterator[Item]:
    """The tables read side by side, row k of every one making item k, so that no table and
    no list of items is held whole; the English table numbers the items.  Every header is
    checked before any item is made, and tables of unequal length are refused naming the
    first (in file order) that disagrees with the English one."""
    files = _files(path)
    tables = [_open(file, sink) for file in files]
    source, others = tables[0], tables[1:]
    finished = Sink(sink.skip)
    where = {table.lang: str(table.path) for table in tables}  # one origin string per table
    while (row := source.next_row()) is not None:
        draft = Draft(str(path), f"bmlama-{source.count:05d}", BMLAMA_SOURCE_LANG, [row[0]], kind=ItemKind.CLOZE, mask=BMLAMA_MASK)
        _add_variant(source, draft, row, where)
        for table in others:
            if (other := table.next_row()) is None:
                raise _misaligned(source, others)
            _add_variant(table, draft, other, where)
        if (item := finish_item(draft, None, finished)) is not None:
            yield item
    if any(table.next_row() is not None for table in others):
        raise _misaligned(source, others)
    for held in (*tables, None):
        sink.skipped.extend(finished.skipped if held is None else held.rejects.skipped)


def _files(path: Path) -> list[Path]:
    """The `{lang}.tsv` files, English first, each language in one file only."""
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
    source = by_lang[BMLAMA_SOURCE_LANG]
    return [source, *(file for file in files if file != source)]


def _misaligned(source: _Table, others: list[_Table]) -> BenchmarkError:
    rows = source.total()
    table = next(table for table in others if table.total() != rows)
    return BenchmarkError(table.path, message=f"misaligned: {table.path.name} has {table.count} data rows but {source.path.name} has {rows}")


def _add_variant(table: _Table, draft: Draft, row: tuple[int, list[str]], where: dict[str, str]) -> None:
    line, cells = row
    try:
        variant = _bmlama_variant(table.path, line, cells)
    except BenchmarkError as error:
        table.rejects.reject(error)
        return
    draft.lines.append(line)
    draft.rows.append((where[table.lang], line))
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


def _open(path: Path, sink: Sink) -> _Table:
    rows = csv_rows(path, "\t")
    first = next(rows, None)
    if first is None:
        raise BenchmarkError(path, message="empty file: no header")
    header_line, header = first
    if [word.lower() for cell in header for word in cell.split()] != _BMLAMA_HEADER:
        expected = "Prompt, Ans, Candidate Ans, Subject"
        raise BenchmarkError(path, header_line, None, f"header {header} does not read {expected}")
    return _Table(path, _table_lang(path), _without_trailing_blanks(rows), Sink(sink.skip))


def _without_trailing_blanks(rows: Iterator[tuple[int, list[str]]]) -> Iterator[tuple[int, list[str]]]:
    """Empty rows are data (and refused) between rows, but not at the end of a file."""
    blanks: list[tuple[int, list[str]]] = []
    for row in rows:
        if not row[1]:
            blanks.append(row)
            continue
        yield from blanks
        blanks.clear()
        yield row


def _bmlama_variant(path: Path, line: int, cells: list[str]) -> Variant:
    if len(cells) != _BMLAMA_COLUMNS:
        raise BenchmarkError(path, line, None, f"expected {_BMLAMA_COLUMNS} tab-separated cells, found {len(cells)}")
    prompt, answer, candidates, subject = [cell.strip() or None for cell in cells]
    meta: Record = {}
    if candidates is not None:
        # The same few candidates stand in every row of a relation: each kept once.
        meta["candidates"] = [sys.intern(name) for name in filter(None, map(str.strip, candidates.split(", ")))]
    return Variant(question=prompt, answer=answer, subject=subject, meta=meta)


