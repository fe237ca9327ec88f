"""One line of an audit file as bytes: written as compact JSON by orjson, and read back
strictly, so no reader meets NaN, infinities, integers past 64 bits or lone surrogates."""
from __future__ import annotations

import json
from pathlib import Path

import orjson

from audit.auditschema import bounded_int, finite_float, no_constant, surrogate_field
from audit.errors import AuditError
from audit.records import Json, JsonObject

# A run of digits as long as an integer past 64 bits can be (`parse_line`), found by mapping
# every ASCII digit to a zero byte and anything else to one: ten times a regular expression's
# speed, on every line of every audit read.
_DIGITS_AS_ZEROS = bytes(0 if byte in b"0123456789" else 1 for byte in range(256))
_LONG_RUN = bytes(19)
_LINE = orjson.OPT_APPEND_NEWLINE
_LINE_ODD_KEYS = _LINE | orjson.OPT_NON_STR_KEYS


class AuditFileError(AuditError):
    """Not an audit file, or a damaged one; the message names the file and line."""


def json_line(value: JsonObject) -> bytes:
    """One audit line: compact JSON in UTF-8 by orjson (a fifth of `json.dumps`'s time, 6% of a
    BMLAMA-17 run); non-string keys as `json.dumps` writes them, on a second pass only for a
    value that has some (orjson's option for them takes 2.6 times as long on every record); a
    lone surrogate refused."""
    try:
        return orjson.dumps(value, option=_LINE)
    except TypeError:
        return orjson.dumps(value, option=_LINE_ODD_KEYS)


def has_long_digits(raw: bytes) -> bool:
    """Whether `raw` holds a run of 19 ASCII digits."""
    return _LONG_RUN in raw.translate(_DIGITS_AS_ZEROS)


def parse_line(path: Path, number: int, raw: bytes) -> Json:
    """One line as JSON: strict about what Python's parser lets through (NaN, infinities,
    numbers past 64 bits, lone surrogates), so no reader meets them later.  orjson reads a
    record line first: it refuses NaN, infinities, lone surrogates and bad UTF-8 itself, and
    a line with a run of 19 digits (where it would read an integer past 64 bits as a float)
    goes to the strict path, as does any line it refuses, for that path's message."""
    if number > 1 and not has_long_digits(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return _parse_strictly(path, number, raw)


def _parse_strictly(path: Path, number: int, raw: bytes) -> Json:
    try:
        text = raw.decode("utf-8")
        value = json.loads(text.removeprefix("\ufeff") if number == 1 else text, parse_constant=no_constant, parse_float=finite_float, parse_int=bounded_int)
    except UnicodeDecodeError:
        raise AuditFileError(f"{path}:{number}: not valid UTF-8; not an audit file, or a damaged one") from None
    except json.JSONDecodeError as error:
        raise AuditFileError(f"{path}:{number}: not valid JSON ({error.msg})") from None
    except (ValueError, RecursionError) as error:
        raise AuditFileError(f"{path}:{number}: not valid JSON ({'nested too deeply' if isinstance(error, RecursionError) else error})") from None
    if b"\\u" in raw and (field_name := surrogate_field(value)):
        raise AuditFileError(f"{path}:{number}: field '{field_name}': a lone surrogate escape (\\ud800-\\udfff) is not text")
    return value
