"""Benchmark readers: every supported format becomes a `LoadReport` of `Item`s.

One module per format; `common` holds what they share.  `load_benchmark` picks the reader
(named, or detected from the path's shape, a JSON line's keys or a table's columns), runs it
and records what the user must be able to check afterwards: rows skipped or excluded, language
codes as the benchmark spelled them, fields no signal reads, and the column mapping.
"""
from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from audit.errors import json_problem, regular_file
from audit.items import Item, LoadReport, PackedItems
from audit.langcodes import normalise_lang
from audit.readers.bmlama import is_bmlama, read_bmlama
from audit.readers.columns import ColumnMap, MappingError, mapping_from_dict, parse_mapping
from audit.readers.common import GIVEN_CODES, BenchmarkError, ReadOptions, Sink, json_rows, read_lines
from audit.readers.eclektic import read_eclektic_csv, read_eclektic_jsonl
from audit.readers.generic import read_jsonl
from audit.readers.kept import Kept
from audit.readers.mkqa import MKQA_KEYS, read_mkqa
from audit.readers.mlama import is_mlama, read_mlama
from audit.readers.squad import is_squad, read_squad, squad_files
from audit.readers.tables import (
    TableSpec,
    is_datasets_dir,
    is_glob,
    language_files,
    language_of,
    preset_for,
    read_tables,
    table_columns,
    table_suffix,
)
from audit.readers.tydi import TYDI_KEYS, read_tydi
from audit.readers.xcsr import is_xcsr_row, read_xcsr, xcsr_files
from audit.readers.xfactr import read_xfactr

__all__ = ["FORMATS", "BenchmarkError", "ColumnMap", "MappingError", "ReadOptions", "detect_format", "load_benchmark", "mapping_from_dict", "parse_mapping", "recorded_options"]

Reader = Callable[[Path, ReadOptions, Sink], Iterable[Item]]


@dataclass(frozen=True)
class Format:
    """A benchmark format: its name, its reader, what it reads (a file, a directory, either,
    or many files), and whether each item is one line of one JSON Lines file (`lines`), which
    `audit filter` then copies line for line."""

    name: str
    read: Reader
    shape: str
    description: str
    lines: bool = False


def _read_table(path: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    """One file; a name that names a language (`test.it.jsonl`) gives its rows' language when
    no column does, as in a directory of per-language files (its folder's name does not: a
    lone file's folder is rarely named for its language)."""
    lang = language_of(path, folder=False)
    if lang is None:
        return read_tables([(path, None)], _spec(path, options, [(path, None)], sink), sink, path)
    return _read_languages(path, options, sink, [(path, lang)])


def _read_per_language(path: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    return _read_languages(path, options, sink, list(language_files(path)))


def _read_languages(path: Path, options: ReadOptions, sink: Sink, files: list[tuple[Path, str | None]]) -> Iterable[Item]:
    spec = _spec(path, options, files, sink)
    present = {lang for _, lang in files}
    source = spec.source_lang or ("en" if "en" in present else None)
    return read_tables(files, replace(spec, source_required=source in present or spec.mapping.source_lang is not None), sink, path)


def _spec(path: Path, options: ReadOptions, files: list[tuple[Path, str | None]], sink: Sink) -> TableSpec:
    """The user's mapping, else the preset the first file's columns match."""
    if options.mapping is not None:
        return TableSpec(options.mapping, options.source_lang, lang=options.source_lang)
    columns = table_columns(files[0][0], sink)
    preset = preset_for(columns)
    if preset is None:
        raise BenchmarkError(files[0][0], message=(
            f"no reader knows the columns {', '.join(columns)}; say which is which with --map question=COLUMN,answer=COLUMN,..."
            " (a CSV/TSV without a header row: --header none and --map question=0,answer=1)"
        ))
    return TableSpec(preset.mapping, options.source_lang or preset.source_lang, lang=options.source_lang)


def _plain(read: Callable[[Path, Sink], Iterable[Item]]) -> Reader:
    return lambda path, _options, sink: read(path, sink)


FORMATS: dict[str, Format] = {
    format.name: format
    for format in (
        Format("eclektic-jsonl", _plain(read_eclektic_jsonl), "file", "ECLeKTic main JSONL: one item per line, {L}_q/{L}_a/{L}_c per language", lines=True),
        Format("eclektic-csv", _plain(read_eclektic_csv), "file", "ECLeKTic long CSV: one row per (q_id, language)"),
        Format("bmlama", _plain(read_bmlama), "directory", "BMLAMA: {lang}.tsv cloze files aligned by line"),
        Format("jsonl", _plain(read_jsonl), "file", "this tool's JSONL: item_id, source_lang, variants (or one language per line)", lines=True),
        Format("squad", read_squad, "any", "SQuAD-style JSON per language (XQuAD, MLQA, TyDi QA GoldP), joined by question id"),
        Format("mkqa", read_mkqa, "file", "MKQA JSONL: queries and answers (with aliases) per language", lines=True),
        Format("tydiqa", read_tydi, "file", "TyDi QA primary task JSONL: native questions, gold passages by byte offsets", lines=True),
        Format("xfactr", read_xfactr, "directory", "X-FACTR: cloze templates per relation and language, facts and per-language entity names"),
        Format("mlama", read_mlama, "directory", "mLAMA: {lang}/templates.jsonl and {lang}/P*.jsonl facts, joined by relation and Wikidata ids"),
        Format("xcsr", read_xcsr, "any", "X-CSR (X-CSQA, X-CODAH): {lang}/dev.jsonl with nested question.stem and question.choices, joined by id"),
        Format("table", _read_table, "file", "one CSV/TSV/JSONL/Parquet file or datasets directory read through --map"),
        Format("per-language", _read_per_language, "many", "one table per language ({lang}.jsonl, test.{lang}.jsonl; a directory or glob), joined by id or row"),
    )
}


def load_benchmark(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    skip_bad_rows: bool = False,
    langs: list[str] | None = None,
    options: ReadOptions | None = None,
    packed: bool = False,
) -> LoadReport:
    """Read a benchmark (a file, a directory, or a glob of per-language files) into items,
    detecting the format if unnamed.

    Bad rows raise `BenchmarkError`, or with `skip_bad_rows` are left out and listed in
    `LoadReport.skipped`; problems with the input as a whole always raise. `langs` keeps only
    those variants (and items that still have one) and must all occur in the benchmark.
    Readers hand items over one at a time where their format allows (a line per item, or
    BMLAMA's tables read side by side); `packed` holds them pickled in a temporary file
    (`PackedItems`, what a run holds) as they come, so reading a benchmark of any size holds
    one item object at a time.
    """
    source = Path(path)
    options = _checked(source, options or ReadOptions())
    if not is_glob(source) and not source.exists():
        raise BenchmarkError(source, message="no such file or directory")
    regular_file(source, BenchmarkError)
    wanted = _requested_langs(source, langs) if langs else None
    fmt = fmt or detect_format(source, options)
    spec = FORMATS.get(fmt)
    if spec is None:
        raise BenchmarkError(source, message=f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    _check_shape(source, spec)
    _check_options(source, spec, options)
    sink = Sink(skip_bad_rows)
    kept = Kept(wanted)
    given: dict[str, str] = {}
    token = GIVEN_CODES.set(given)
    try:
        streamed = kept.stream(spec.read(source, options, sink))
        items: Sequence[Item] = PackedItems(streamed) if packed else list(streamed)
    finally:
        GIVEN_CODES.reset(token)
    if not kept.read:
        skipped = f" ({len(sink.skipped)} bad rows skipped)" if sink.skipped else ""
        excluded = f" ({sink.excluded} rows excluded by the benchmark)" if sink.excluded else ""
        raise BenchmarkError(source, message=f"no items found{skipped}{excluded}")
    kept.check_wanted(source)
    return LoadReport(
        items=items,
        format=fmt,
        path=str(source),
        kinds=kept.kinds,
        variant_counts=kept.variant_counts,
        skipped=sink.skipped,
        excluded=sink.excluded,
        language_codes={code: canonical for code, canonical in given.items() if code != canonical},
        unused_fields=kept.unused_fields(),
        mapping=options.mapping.to_dict() if options.mapping else {},
        source_lang=options.source_lang,
        notes=sink.notes,
    )


def recorded_options(mapping: dict[str, object], source_lang: str | None) -> ReadOptions:
    """The options an audit manifest recorded, so `filter` and `report` read what `check` read."""
    return ReadOptions(mapping_from_dict(mapping) if mapping else None, source_lang, recorded=True)


def _checked(source: Path, options: ReadOptions) -> ReadOptions:
    if options.source_lang is None:
        return options
    try:
        return replace(options, source_lang=normalise_lang(options.source_lang))
    except ValueError as exc:
        raise BenchmarkError(source, None, "source_lang", str(exc)) from None


# What reads a column mapping, and what names every item's source language itself: an option
# the format would ignore is refused rather than silently dropped.
_MAPPED = frozenset({"table", "per-language"})
_OWN_SOURCE = frozenset({"eclektic-jsonl", "eclektic-csv", "bmlama", "jsonl", "tydiqa"})


def _check_options(source: Path, spec: Format, options: ReadOptions) -> None:
    if options.recorded:
        return
    if options.mapping is not None and spec.name not in _MAPPED:
        raise BenchmarkError(source, message=f"--map applies to the table and per-language formats; the {spec.name} format reads its own fields")
    if options.source_lang is not None and spec.name in _OWN_SOURCE:
        raise BenchmarkError(source, message=f"--source-lang: the {spec.name} format names each item's source language itself; leave the option out")


def _check_shape(source: Path, spec: Format) -> None:
    many = is_glob(source) or source.is_dir()
    if spec.shape == "directory" and not source.is_dir():
        raise BenchmarkError(source, message=f"format {spec.name!r} reads a directory")
    if spec.shape == "file" and many and not (spec.name == "table" and is_datasets_dir(source)):
        raise BenchmarkError(source, message=f"format {spec.name!r} reads a file")
    if spec.shape == "many" and not many:
        raise BenchmarkError(source, message=f"format {spec.name!r} reads a directory or a glob of per-language files")


def detect_format(path: str | os.PathLike[str], options: ReadOptions | None = None) -> str:
    """Name the format from the path's shape, the first JSON object's keys or a table's header."""
    source = Path(path)
    mapped = options is not None and options.mapping is not None
    if is_glob(source) or source.is_dir():
        return _detect_many(source, mapped)
    suffix = table_suffix(source)
    if suffix == ".parquet":
        return "table"
    line, first = next(((n, text) for n, text in enumerate(read_lines(source), 1) if text.strip()), (0, ""))
    if not first:
        raise BenchmarkError(source, message="empty file: no items")
    if mapped:
        return "table"
    if first.lstrip().startswith("{"):
        return _detect_json(source, line, first)
    if suffix in (".jsonl", ".ndjson") or source.name.lower().removesuffix(".gz").endswith(".json"):
        raise BenchmarkError(source, line, message="expected a JSON object on each line")
    header = [cell.strip() for cell in next(csv.reader([first], delimiter="\t" if suffix == ".tsv" else ","))]
    if {"q_id", "language"} <= set(header):
        return "eclektic-csv"
    if suffix == ".tsv" and [w.lower() for cell in header for w in cell.split()][:1] == ["prompt"]:
        raise BenchmarkError(source, message="BMLAMA is read from a directory of {lang}.tsv files; pass the directory")
    raise BenchmarkError(source, line, message=f"cannot detect the format from the columns {', '.join(header)}; map them with --map question=...,answer=...")


def _detect_many(source: Path, mapped: bool) -> str:
    if is_datasets_dir(source):
        return "table"
    if source.is_dir() and (source / "TREx_prompts.csv").is_file():
        return "xfactr"
    if source.is_dir() and is_mlama(source):
        return "mlama"
    if source.is_dir() and not mapped and is_bmlama(source):
        return "bmlama"
    if not mapped and _first_row_is_xcsr(source):
        return "xcsr"
    if mapped:
        return "per-language"
    files = [p for p, _ in language_files(source)] if not _has_json_documents(source) else []
    return "squad" if not files else "per-language"


def _first_row_is_xcsr(source: Path) -> bool:
    files = xcsr_files(source)
    first = next(json_rows(files[0], Sink(skip=True)), None) if files else None
    return first is not None and is_xcsr_row(first[1])


def _has_json_documents(source: Path) -> bool:
    files = [f for f in squad_files(source) if f.name.lower().removesuffix(".gz").endswith(".json")]
    return bool(files) and is_squad(files[0])


def _detect_json(path: Path, line: int, text: str) -> str:
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        if is_squad(path):
            return "squad"
        raise BenchmarkError(path, line, message="not one JSON object per line; pretty-printed JSON is read only as SQuAD-style data") from None
    except (ValueError, RecursionError) as error:
        raise BenchmarkError(path, line, message=json_problem(error)) from None
    if not isinstance(record, dict):
        raise BenchmarkError(path, line, message="expected a JSON object")
    keys = set(record)
    if "data" in keys and isinstance(record["data"], list):
        return "squad"
    if is_xcsr_row(record):
        return "xcsr"
    for name, required in (("jsonl", {"item_id"}), ("eclektic-jsonl", {"q_id"}), ("mkqa", MKQA_KEYS), ("tydiqa", TYDI_KEYS)):
        if required <= keys:
            return name
    if preset_for(list(keys)) is not None:
        return "table"
    raise BenchmarkError(path, line, message=(
        "cannot detect the format: expected 'item_id' (jsonl), 'q_id' (eclektic-jsonl), MKQA's or TyDi QA's keys; "
        "map other columns with --map question=...,answer=..."
    ))


def _requested_langs(path: Path, langs: list[str]) -> list[str]:
    try:
        return [normalise_lang(lang) for lang in langs]
    except ValueError as exc:
        raise BenchmarkError(path, None, "langs", str(exc)) from None
