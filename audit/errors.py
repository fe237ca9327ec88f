"""Errors that point at a place in an input file, so every loader reports problems alike."""
from __future__ import annotations

import gzip
import json
import os
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class AuditError(Exception):
    """The base of every error the tool raises about its inputs, indexes, sources or outputs,
    so a caller (the command line, the server, a notebook) catches them all in one clause.
    Errors that know the place carry it as `path`, `line` and `field`; `place()` reads them."""

    def place(self) -> tuple[str | None, int | None, str | None]:
        """(path, line, field) where the error knows them, else None in each."""
        return getattr(self, "path", None), getattr(self, "line", None), getattr(self, "field", None)


class LocatedError(AuditError):
    """A bad input, located by file, line and field: `path:line: field 'x': message`."""

    def __init__(self, path: str | os.PathLike[str], line: int | None = None, field: str | None = None, message: str = "") -> None:
        super().__init__(str(path), line, field, message)
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        what = self.message if self.field is None else f"field '{self.field}': {self.message}"
        return f"{where}: {what}"


class PlacedError(AuditError):
    """An error whose message is complete as given, which may also name the file and the key it
    is about (`place()` reads them), as a bad registry entry does (`audit.entries`)."""

    def __init__(self, message: str = "", *, path: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.field = field


# Longer than any real benchmark row (a TyDi QA line with its whole article is a few MB), short
# enough that a file without newlines (/dev/zero, a disk image) is refused before memory runs out.
MAX_LINE_BYTES = 128 * 2**20


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What `path` is when it is neither a regular file nor a directory ("a character device",
    "a FIFO", ...), else None (missing paths too: their readers say so).  Every reader asks
    before opening, since reading a device or a pipe may never end."""
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return "a character device" if stat.S_ISCHR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a block device" if stat.S_ISBLK(mode) else "a socket"


def regular_file(path: Path, error: type[LocatedError]) -> None:
    """Refuse a device, FIFO or socket before opening it: reading one may never end."""
    if kind := special_kind(path):
        raise error(path, message=f"is {kind}, not a regular file")


def text_lines(path: Path, error: type[LocatedError]) -> Iterator[str]:
    """Physical lines of a UTF-8 file, gzipped or not (told by content), with their endings and
    no byte-order mark, decoded one by one so a bad byte is reported with its line number; a
    line longer than `MAX_LINE_BYTES` is refused."""
    regular_file(path, error)
    try:
        with path.open("rb") as probe:
            compressed = probe.read(2) == b"\x1f\x8b"
        with gzip.open(path, "rb") if compressed else path.open("rb") as handle:
            for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
                if len(raw) > MAX_LINE_BYTES:
                    raise error(path, number, None, f"line longer than {MAX_LINE_BYTES // 2**20} MiB; not a text file of records")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise error(path, number, None, f"not valid UTF-8 ({exc.reason})") from None
                yield text.removeprefix("\ufeff") if number == 1 else text
    except (OSError, EOFError) as exc:
        raise error(path, message=f"cannot read file: {exc}") from exc


def json_problem(error: ValueError | RecursionError) -> str:
    """What is wrong with a JSON text, however `json.loads` failed: a syntax error (with its
    column), nesting deeper than Python's stack, or a number too long to convert."""
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON: {error.msg} (column {error.colno})"
    if isinstance(error, RecursionError):
        return "invalid JSON: nested too deeply"
    return f"invalid JSON: {str(error).split(';')[0]}"


class UnreadableFile(AuditError):
    """A user's file that cannot be read as text; the message names the file and says why."""


def read_toml_file(path: Path, what: str) -> dict[str, Any]:
    """A user's TOML file (a policy, a registry, a column mapping), or one line saying why not."""
    try:
        return tomllib.loads(read_text_file(path, what))
    except tomllib.TOMLDecodeError as error:
        raise UnreadableFile(f"{path}: not valid TOML ({error})") from None


def read_text_file(path: Path, what: str) -> str:
    """A user's whole UTF-8 text file (a policy, a registry), or one line saying why not; a
    device or FIFO is refused unopened, and a file larger than any such file is refused unread."""
    try:
        mode = Path(path).stat()
    except OSError:
        mode = None
    if special_kind(path):
        raise UnreadableFile(f"{path}: not a regular file; not a {what}")
    if mode is not None and mode.st_size > MAX_LINE_BYTES:
        raise UnreadableFile(f"{path}: {mode.st_size:,} bytes, larger than any {what}")
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise UnreadableFile(f"{path}: is a directory, not a {what}") from None
    except UnicodeDecodeError as error:
        raise UnreadableFile(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}); not a {what}") from None
    except OSError as error:
        raise UnreadableFile(f"{path}: cannot be read ({error.strerror or error})") from None
