"""Tables: CSV, TSV, JSONL, Parquet and Hugging Face `datasets` directories, read through a column
mapping, from one file (a language column, or one language for every row) or from one file per
language (`{lang}.jsonl`, `test.{lang}.jsonl`, a directory or a glob of them).

Rows of different files are joined into items by the mapped id column, or by row number when
there is none.  Known layouts (XCOPA) come with their mapping, so they need no `--map`.
"""
from __future__ import annotations

import glob
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from audit.errors import json_problem
from audit.items import Item, ItemKind, Variant
from audit.langcodes import ISO_639_1, LEGACY_CODES, normalise_lang
from audit.packed import Packed
from audit.readers.columns import MISSING, ColumnMap, nested
from audit.readers.common import BenchmarkError, Cell, Piece, Record, Sink, clean, csv_rows, finish_items, json_rows, language_code, type_name, with_kind
from audit.readers.folders import check_all_read
from audit.readers.grouping import group_pieces

TABLE_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")
DATASETS_MARKERS = ("state.json", "dataset_dict.json")
_TRUE = {"true", "1", "yes", "y", "x", "excluded", "exclude"}
_GLOB_CHARS = frozenset("*?[")
_POSITION_HINT = "; columns are named by position only in a file without a header: add --header none"


@dataclass(frozen=True)
class Preset:
    """A published layout the tool recognises by its columns, with the mapping it implies."""

    name: str
    columns: frozenset[str]
    mapping: ColumnMap
    source_lang: str
    note: str


PRESETS = (
    Preset(
        name="xcopa",
        columns=frozenset({"premise", "choice1", "choice2", "question", "label", "idx"}),
        mapping=ColumnMap(id="idx", question="premise", options=("choice1", "choice2"), answer_index="label"),
        source_lang="en",
        note="XCOPA: COPA's English premises translated; `question` says whether the cause or the effect is asked",
    ),
)


def is_glob(path: str | Path) -> bool:
    return any(char in _GLOB_CHARS for char in str(path))


def table_suffix(path: Path) -> str | None:
    name = path.name.lower().removesuffix(".gz")
    return next((suffix for suffix in TABLE_SUFFIXES if name.endswith(suffix)), None)


def is_datasets_dir(path: Path) -> bool:
    return path.is_dir() and any((path / marker).is_file() for marker in DATASETS_MARKERS)


# Rows --------------------------------------------------------------------------------------


def table_rows(path: Path, sink: Sink, headerless: bool = False) -> Iterator[tuple[int, Record]]:
    """Records with their line (CSV/JSONL) or 1-based row number (Parquet, Arrow); a headerless
    CSV/TSV names its columns by position from 0."""
    suffix = table_suffix(path)
    if headerless and suffix not in (".csv", ".tsv"):
        raise BenchmarkError(path, message="--header none applies to CSV and TSV files; this one names its own columns")
    if is_datasets_dir(path):
        yield from _datasets_rows(path)
        return
    if suffix in (".csv", ".tsv"):
        yield from _delimited_rows(path, "\t" if suffix == ".tsv" else ",", headerless)
    elif suffix == ".parquet":
        yield from _parquet_rows(path)
    elif suffix in (".jsonl", ".ndjson"):
        yield from json_rows(path, sink)
    else:
        raise BenchmarkError(path, message=f"not a table: expected one of {', '.join(TABLE_SUFFIXES)} (optionally .gz) or a datasets directory")


def table_columns(path: Path, sink: Sink) -> list[str]:
    """The columns of a table's first row (for detection and for naming unused fields)."""
    first = next(table_rows(path, sink), None)
    return list(first[1]) if first else []


def _delimited_rows(path: Path, delimiter: str, headerless: bool = False) -> Iterator[tuple[int, Record]]:
    rows = csv_rows(path, delimiter)
    if headerless:
        first = next(rows, None)
        if first is None:
            return
        header_line, header = first[0], [str(n) for n in range(len(first[1]))]
        rows = itertools.chain([first], rows)
    else:
        header_line, header = next(rows, (1, []))
    header = [name.strip() for name in header]
    twice = next((name for name in header if header.count(name) > 1), None)
    if twice is not None:
        raise BenchmarkError(path, header_line, twice, "appears twice in the header")
    for line, row in rows:
        if not row:
            continue
        if len(row) != len(header):
            raise BenchmarkError(path, line, None, f"expected {len(header)} columns, found {len(row)}")
        yield line, dict(zip(header, row, strict=True))


def _arrow_error(path: Path, error: Exception) -> BenchmarkError:
    return BenchmarkError(path, message=f"cannot read: {error}")


def _parquet_rows(path: Path) -> Iterator[tuple[int, Record]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    number = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            for record in batch.to_pylist():
                number += 1
                yield number, record
    except (pa.ArrowException, OSError) as error:
        raise _arrow_error(path, error) from None


def _datasets_rows(path: Path) -> Iterator[tuple[int, Record]]:
    """A `save_to_disk` directory: its Arrow stream files in `state.json` order."""
    import pyarrow as pa

    if (path / "dataset_dict.json").is_file():
        splits = _json_file(path / "dataset_dict.json").get("splits", [])
        raise BenchmarkError(path, message=f"a DatasetDict with splits {', '.join(map(str, splits))}: pass the split's directory, e.g. {path / str(splits[0] if splits else 'test')}")
    state = _json_file(path / "state.json")
    files = [entry.get("filename") for entry in state.get("_data_files", []) if isinstance(entry, dict)]
    if not files or not all(isinstance(name, str) for name in files):
        raise BenchmarkError(path / "state.json", None, "_data_files", "expected a list of {filename: ...} entries")
    number = 0
    for name in files:
        file = path / name
        try:
            with pa.memory_map(str(file)) as source:
                for batch in pa.ipc.open_stream(source):
                    for record in batch.to_pylist():
                        number += 1
                        yield number, record
        except (pa.ArrowException, OSError) as error:
            raise _arrow_error(file, error) from None


def _json_file(path: Path) -> Record:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise BenchmarkError(path, message=f"cannot read: {error}") from None
    except (ValueError, RecursionError) as error:
        raise BenchmarkError(path, message=json_problem(error)) from None
    if not isinstance(value, dict):
        raise BenchmarkError(path, message=f"expected a JSON object, got {type_name(value)}")
    return value


# Files per language ------------------------------------------------------------------------


def language_of(path: Path, folder: bool = True) -> str | None:
    """The language a file's name names (`de.jsonl`, `test.de.jsonl`, `xquad.de.json`), else its
    folder's (`de/test-00000-of-00001.parquet`) when `folder`, preferring two-letter codes so
    that split names (`dev`, `val`) are never read as languages."""
    stem = path.name.lower().removesuffix(".gz")
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    return _named_language(stem) or (_named_language(path.parent.name.lower()) if folder else None)


def _named_language(name: str) -> str | None:
    tokens = [token for token in name.replace("-", ".").replace("_", ".").split(".") if token]
    short = [token for token in tokens if token in ISO_639_1 or token in LEGACY_CODES]
    if len(set(short)) == 1:
        return normalise_lang(short[0])
    try:
        return normalise_lang(name.split(".")[-1])
    except ValueError:
        return None


def language_files(source: Path) -> list[tuple[Path, str]]:
    """One (file, language) per language of a directory or glob, named by the file names."""
    if is_glob(source):
        files = sorted(Path(p) for p in glob.glob(str(source), recursive=True) if Path(p).is_file())
        where = f"the glob {source}"
    else:
        files = sorted(p for p in source.rglob("*") if p.is_file() and not p.name.startswith(".") and table_suffix(p))
        where = str(source)
    if not files:
        raise BenchmarkError(source, message=(
            f"no benchmark files in {where}: a directory holds BMLAMA's {{lang}}.tsv, SQuAD-style *.json,"
            f" or one table ({', '.join(TABLE_SUFFIXES)}) per language"
        ))
    if not is_glob(source):
        check_all_read(source, files, f"one table per language ({', '.join(TABLE_SUFFIXES)})")
    by_lang: dict[str, Path] = {}
    for file in files:
        lang = language_of(file)
        if lang is None:
            raise BenchmarkError(file, message="cannot tell the language from the file name; name files {lang}.jsonl (or .csv, .tsv, .parquet)")
        other = by_lang.setdefault(lang, file)
        if other != file:
            raise BenchmarkError(file, message=f"language '{lang}' is also in {other}; pass a glob that picks one file per language (e.g. one split)")
    return [(file, lang) for lang, file in by_lang.items()]


def preset_for(columns: list[str]) -> Preset | None:
    return next((preset for preset in PRESETS if preset.columns <= set(columns)), None)


# Mapped rows ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """How to read the rows: the mapping, the source language when no column gives it, and the
    language of every row when neither a column nor the file name does."""

    mapping: ColumnMap
    source_lang: str | None = None
    lang: str | None = None
    source_required: bool = True


def read_tables(files: list[tuple[Path, str | None]], spec: TableSpec, sink: Sink, origin: Path) -> Iterable[Item]:
    """Join the mapped rows of every file into items, in order of each item's first row,
    through temporary files (`_resolved`, `group_pieces`): reading holds no row for long."""
    resolved = _resolved(files, spec, sink, origin)
    drafts = group_pieces(str(origin), resolved, sink, spec.mapping.lang or "lang", spec.mapping.source_lang or "source_lang")
    return finish_items(map(with_kind(*_kind(spec.mapping), spec.source_required), drafts), spec.mapping.source_lang, sink)


def _resolved(files: list[tuple[Path, str | None]], spec: TableSpec, sink: Sink, origin: Path) -> Iterator[Piece]:
    """Every row's piece with its source language.  Unless it is given, the rows are spooled
    (`Packed`) to learn every language first: English is the source where no column names one
    and English is among them."""
    if spec.source_lang:
        return (_sourced(piece, spec.source_lang) for piece in _mapped(files, spec, sink, _Seen()))
    seen = _Seen()
    spooled = Packed.of(_mapped(files, spec, sink, seen))
    default_source = "en" if "en" in seen.languages else None
    if seen.unsourced and default_source is None:
        raise BenchmarkError(origin, message=f"which language is the source? none of {', '.join(sorted(seen.languages))} is 'en'; give --source-lang or map source_lang")
    return (_sourced(spooled[k], default_source) for k in range(len(spooled)))


@dataclass
class _Seen:
    """What the first pass over the rows learns: their languages, and whether any row lacks a source."""

    languages: set[str] = field(default_factory=set)
    unsourced: bool = False


def _mapped(files: list[tuple[Path, str | None]], spec: TableSpec, sink: Sink, seen: _Seen) -> Iterator[Piece]:
    """Every file's rows as pieces, bad rows rejected and excluded ones counted."""
    for file, file_lang in files:
        for line, record in table_rows(file, sink, spec.mapping.headerless):
            try:
                piece = _piece(file, line, record, spec, file_lang)
            except BenchmarkError as error:
                sink.reject(error)
                continue
            if piece is None:
                sink.excluded += 1
                continue
            seen.languages.add(piece.lang)
            seen.unsourced = seen.unsourced or not piece.source_lang
            yield piece


def _sourced(piece: Piece, default_source: str | None) -> Piece:
    return piece if piece.source_lang else replace(piece, source_lang=default_source or "")


def _kind(mapping: ColumnMap) -> tuple[ItemKind, str | None]:
    if mapping.options:
        return ItemKind.MULTIPLE_CHOICE, None
    if mapping.mask:
        return ItemKind.CLOZE, mapping.mask
    return ItemKind.OPEN, None


def _piece(file: Path, line: int, record: Record, spec: TableSpec, file_lang: str | None) -> Piece | None:
    mapping = spec.mapping
    path = str(file)
    row = record
    record = dict(record)
    for column in mapping.columns():
        if column not in record:
            record[column] = _dotted(path, line, row, column, mapping.headerless)
    if mapping.exclude and _truthy(record[mapping.exclude]):
        return None
    if mapping.lang:
        lang = language_code(path, line, mapping.lang, record[mapping.lang])
    elif file_lang or spec.lang:
        lang = file_lang or spec.lang or ""
    else:
        raise BenchmarkError(path, line, None, "no language: map lang to a column, name the file by its language, or give --source-lang for a one-language benchmark")
    source_lang = language_code(path, line, mapping.source_lang, record[mapping.source_lang]) if mapping.source_lang else ""
    item_id = _cell_text(path, line, mapping.id, record[mapping.id]) if mapping.id else str(line)
    if not item_id:
        raise BenchmarkError(path, line, mapping.id, "required but empty")
    texts = {name: _cell_text(path, line, column, record[column]) if column else None for name, column in (
        ("question", mapping.question), ("answer", mapping.answer), ("context", mapping.context), ("title", mapping.title), ("url", mapping.url),
        ("subject", mapping.subject),
    )}
    options = _options(path, line, mapping, record)
    if mapping.answer_index:
        texts["answer"] = options[_answer_index(path, line, mapping, record[mapping.answer_index], len(options))]
    if mapping.mask and texts["question"] and mapping.mask not in texts["question"]:
        raise BenchmarkError(path, line, mapping.question, f"a cloze prompt without the mask {mapping.mask!r}")
    used = set(mapping.columns())
    variant = Variant(
        **texts,
        aliases=_aliases(path, line, mapping.aliases, record[mapping.aliases]) if mapping.aliases else (),
        subject_aliases=_aliases(path, line, mapping.subject_aliases, record[mapping.subject_aliases]) if mapping.subject_aliases else (),
        options=options,
        meta={name: value for name, value in row.items() if name not in used and name not in {c.split(".")[0] for c in used}},
    )
    return Piece(line=line, item_id=item_id, source_lang=source_lang, lang=lang, variant=variant, file=path)


def _dotted(path: str, line: int, record: Record, column: str, headerless: bool) -> Cell:
    """A mapped name that is no column read as a path into nested JSON (`question.stem`); through
    a list it gives the list of each element's value (`question.choices.text`)."""
    found = nested(record, column) if "." in column else MISSING
    if found is MISSING:
        hint = _POSITION_HINT if column.isdigit() and not headerless else ""
        raise BenchmarkError(path, line, column, f"mapped column missing (the row has {', '.join(map(str, record))}){hint}")
    return found


def _truthy(value: Cell) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return isinstance(value, str) and value.strip().lower() in _TRUE


def _cell_text(path: str, line: int, column: str, value: Cell) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BenchmarkError(path, line, column, f"expected text, got {type_name(value)}")
    return clean(str(value))


def _options(path: str, line: int, mapping: ColumnMap, record: Record) -> tuple[str, ...]:
    if not mapping.options:
        return ()
    if len(mapping.options) == 1:
        values = record[mapping.options[0]]
        if not isinstance(values, list):
            raise BenchmarkError(path, line, mapping.options[0], f"one options column must hold a list, got {type_name(values)}")
        cells = [(mapping.options[0], value) for value in values]
    else:
        cells = [(column, record[column]) for column in mapping.options]
    options = []
    for column, value in cells:
        text = _cell_text(path, line, column, value)
        if text is None:
            raise BenchmarkError(path, line, column, "an empty option")
        options.append(text)
    return tuple(options)


def _answer_index(path: str, line: int, mapping: ColumnMap, value: Cell, count: int) -> int:
    column = mapping.answer_index or ""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if mapping.answer_base == "letter":
        index = ord(text.upper()) - ord("A") if len(text) == 1 and text.isalpha() else -1
    else:
        index = int(text) - int(mapping.answer_base) if text.lstrip("-").isdigit() else -1
    if not 0 <= index < count:
        raise BenchmarkError(path, line, column, f"{value!r} names none of the {count} options (answer_base {mapping.answer_base})")
    return index


def _aliases(path: str, line: int, column: str, value: Cell) -> tuple[str, ...]:
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    texts = [_cell_text(path, line, column, v) for v in values]
    return tuple(dict.fromkeys(t for t in texts if t))
