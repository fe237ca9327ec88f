"""Rows of a MediaWiki SQL dump (`enwiki-20230701-langlinks.sql.gz`, `...-page.sql.gz`) without
MySQL: the `INSERT INTO ... VALUES (...),(...);` lines are parsed as they stream past.

Columns are found by name in the dump's `CREATE TABLE`, so a schema change between MediaWiki
versions moves nothing; an excerpt without one is read in the documented column order.  A
statement that does not parse, bytes that are not UTF-8, or a dump cut short (a gzip stream
ended early, a last statement without its `;`, a `mysqldump` file without its closing
`-- Dump completed` line) is an error naming the file and the byte offset in the SQL text.
"""
from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path

from audit.errors import AuditError

_QUOTED = r"'[^'\\]*(?:\\.[^'\\]*)*'"
_TUPLE = re.compile(rf"\((?:{_QUOTED}|[^'()])*\)", re.DOTALL)
_VALUE = re.compile(rf"({_QUOTED})|(NULL)|(-?[0-9][0-9.eE+-]*)")
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_COLUMN = re.compile(r"^\s*`([^`]+)`\s", re.MULTILINE)
_FOOTER = re.compile(r"^-- Dump completed on (\d{4}-\d{2}-\d{2})")
_FILE_DATE = re.compile(r"-(\d{8})-")

Value = int | float | str | None


class DumpError(AuditError):
    """A dump that cannot be read; the message names the file and the byte offset."""


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def parse_tuple(text: str) -> list[Value]:
    """The values of one `( ... )` group, in order."""
    values: list[Value] = []
    position, inner = 0, text[1:-1]
    while position <= len(inner):
        match = _VALUE.match(inner, position)
        if match is None:
            raise ValueError(f"cannot read a value at {inner[position:position + 30]!r}")
        quoted, null, number = match.groups()
        if quoted is not None:
            values.append(_unescape(quoted[1:-1]))
        elif null is not None:
            values.append(None)
        else:
            values.append(float(number) if any(c in number for c in ".eE") else int(number))
        position = match.end()
        if position == len(inner):
            break
        if inner[position] != ",":
            raise ValueError(f"expected ',' between values, found {inner[position:position + 30]!r}")
        position += 1
    return values


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(byte offset in the SQL text, line) of a plain or gzipped dump."""
    offset = 0
    with open(path, "rb") as raw:
        stream = gzip.open(raw) if path.name.endswith(".gz") else raw  # noqa: SIM115 (closed with raw)
        try:
            for line in stream:
                yield offset, line
                offset += len(line)
        except (EOFError, OSError, zlib.error) as error:
            raise DumpError(f"{path}: byte {offset}: the dump is cut short or damaged ({error})") from None


@dataclass
class DumpInfo:
    """What a dump said about itself: its columns, when it was completed, and whether it is a
    whole `mysqldump` file (which must end with its footer)."""

    columns: tuple[str, ...] | None = None
    completed: date | None = None
    whole_dump: bool = False
    rows: int = 0


def read_rows(path: Path, table: str, default_columns: Sequence[str], wanted: Sequence[str], info: DumpInfo | None = None) -> Iterator[tuple[Value, ...]]:
    """The `wanted` columns of every row of `table`, streamed; `info` is filled as the dump is
    read (columns, completion date, rows)."""
    info = info if info is not None else DumpInfo()
    insert = f"INSERT INTO `{table}` VALUES ".encode()
    create = f"CREATE TABLE `{table}` (".encode()
    schema: list[str] | None = None
    positions: tuple[int, ...] | None = None
    arity = 0
    for offset, line in _lines(path):
        if offset == 0 and line.startswith(b"-- MySQL dump"):
            info.whole_dump = True
        if line.startswith(create):
            schema = []
            continue
        if schema is not None and not line.startswith(insert):
            if line.startswith(b")"):
                info.columns = tuple(schema)
                schema = None
            else:
                schema += _COLUMN.findall(_decoded(path, offset, line))
            continue
        if line.startswith(insert):
            if positions is None:
                names = info.columns or tuple(default_columns)
                missing = [name for name in wanted if name not in names]
                if missing:
                    raise DumpError(f"{path}: byte {offset}: table `{table}` has no column {', '.join(missing)} (it has {', '.join(names)})")
                positions = tuple(names.index(name) for name in wanted)
                arity = len(names)
            yield from _statement_rows(path, offset, _decoded(path, offset, line), len(insert), arity, positions, info)
        elif line.startswith(b"-- Dump completed on"):
            found = _FOOTER.match(_decoded(path, offset, line))
            info.completed = date.fromisoformat(found.group(1)) if found else None
    if info.whole_dump and info.completed is None:
        raise DumpError(f"{path}: the dump is cut short: no closing '-- Dump completed on' line")


def _decoded(path: Path, offset: int, line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DumpError(f"{path}: byte {offset + error.start}: not valid UTF-8") from None


@lru_cache(maxsize=16)
def _row_pattern(arity: int) -> re.Pattern[str]:
    """One row of `arity` values as a single regular expression, three groups a value (the
    quoted text without its quotes, NULL, a number), so a whole line is read in C."""
    value = r"'([^'\\]*(?:\\.[^'\\]*)*)'|(NULL)|(-?[0-9][0-9.eE+-]*)"
    return re.compile(r"\(" + ",".join(f"(?:{value})" for _ in range(arity)) + r"\)")


def _convert(quoted: str, null: str, number: str) -> Value:
    if number:
        return int(number) if number.isdigit() or (number[0] == "-" and number[1:].isdigit()) else float(number)
    if null:
        return None
    return _unescape(quoted) if "\\" in quoted else quoted


def _statement_rows(path: Path, offset: int, text: str, start: int, arity: int, positions: tuple[int, ...], info: DumpInfo) -> Iterator[tuple[Value, ...]]:
    """The rows of one INSERT line.  The fast way matches every row in one pass and checks, in
    another, that nothing but the separators lies between them; a line that fails the check is
    read row by row, so the error names the byte where it went wrong."""
    fast = _row_pattern(arity)
    body = text.rstrip("\r\n")
    rows = fast.findall(body, start)
    if fast.sub("", body[start:]) == "," * (len(rows) - 1) + ";":
        info.rows += len(rows)
        if rows:
            groups = list(zip(*rows, strict=True))
            yield from zip(*(map(_convert, groups[3 * i], groups[3 * i + 1], groups[3 * i + 2]) for i in positions), strict=True)
        return
    yield from _checked_rows(path, offset, body, start, positions, info)


def _checked_rows(path: Path, offset: int, body: str, start: int, positions: tuple[int, ...], info: DumpInfo) -> Iterator[tuple[Value, ...]]:
    position = start
    while True:
        match, row = _slow_row(path, offset, body, position, positions)
        info.rows += 1
        yield row
        position = match.end()
        rest = body[position : position + 1]
        if rest == ";" and position + 1 == len(body):
            return
        if rest != ",":
            where = offset + len(body[:position].encode("utf-8"))
            raise DumpError(f"{path}: byte {where}: the statement is cut short or damaged (expected ',' or a final ';')")
        position += 1


def _slow_row(path: Path, offset: int, body: str, position: int, positions: tuple[int, ...]) -> tuple[re.Match[str], tuple[Value, ...]]:
    where = offset + len(body[:position].encode("utf-8"))
    match = _TUPLE.match(body, position)
    if match is None:
        raise DumpError(f"{path}: byte {where}: not a row of values: {body[position:position + 40]!r}")
    try:
        values = parse_tuple(match.group(0))
    except ValueError as error:
        raise DumpError(f"{path}: byte {where}: {error}") from None
    if len(values) <= max(positions):
        raise DumpError(f"{path}: byte {where}: a row of {len(values)} values, expected at least {max(positions) + 1}")
    return match, tuple(values[i] for i in positions)


def file_date(path: Path) -> date | None:
    """The date in a dump's standard file name (`enwiki-20230701-langlinks.sql.gz`)."""
    found = _FILE_DATE.search(path.name)
    if not found:
        return None
    try:
        return date(int(found.group(1)[:4]), int(found.group(1)[4:6]), int(found.group(1)[6:]))
    except ValueError:
        return None
