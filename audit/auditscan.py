"""Reading an audit file someone hands the report, checked in one pass that holds a few
fields per record rather than the records: `read_audit`'s checks in its order, each record
parsed and checked as it comes, and what the checks across records need kept.  The records
are read back from disk when the report iterates them, and refused if the file changed since.
"""
from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

from audit.auditfile import (
    EXPOSURE,
    AuditFile,
    AuditFileError,
    StoredRecords,
    check_integrity,
    check_manifest_line,
    located,
    read_audit,
    split_lines,
)
from audit.auditlines import parse_line
from audit.auditschema import SchemaError, check_manifest, check_record, check_records
from audit.errors import special_kind
from audit.records import Json, JsonObject

# What the checks across records read of each (`check_records`, `check_benchmark`): all that
# `scan_audit` keeps of a record, a few hundred bytes where the record is kilobytes.
ACROSS = ("item_id", "lang", "role", "source_lang", "exposure", "item_exposure", "seen_in", "seen_in_languages", "asked_in")


def scan_audit(path: Path) -> tuple[AuditFile, list[JsonObject]]:
    """`read_audit`'s checks, in the same order, in one pass that holds only each record's
    `ACROSS` fields; the audit's records are read back from disk when iterated, refused if
    the file changed since (`StoredRecords`).  Returns the audit and the fields kept.  A
    version-1 file is read whole and upgraded, as `read_audit` reads it."""
    path = Path(path)
    if special_kind(path):
        raise AuditFileError(f"{path}: not a regular file (a device, pipe or socket); an audit file is one `audit check` wrote")
    try:
        with open(path, "rb") as handle:
            lines = split_lines(handle)
            first = next(lines, None)
            manifest = check_manifest_line(path, parse_line(path, 1, first)) if first is not None else None
            if manifest is not None and manifest["schema_version"] == 1:
                audit = read_audit(path)
                return audit, [_kept(record, {}) for record in audit.records]
            kept, first_problem, digest = _scanned(path, lines)
    except OSError as error:
        raise AuditFileError(f"{path}: cannot read the audit file ({error.strerror or error})") from None
    if manifest is None:
        raise AuditFileError(f"{path}: empty file; not an audit file")
    check_integrity(path, manifest, len(kept), digest)
    try:
        check_manifest(manifest)
        if first_problem is not None:
            raise first_problem
        check_records(manifest, kept)
    except SchemaError as problem:
        raise located(path, problem) from None
    return AuditFile(manifest, StoredRecords(path, len(kept), digest)), kept


def _scanned(path: Path, lines: Iterator[bytes]) -> tuple[list[JsonObject], SchemaError | None, str]:
    """The records after the manifest line, each parsed and checked as it comes: the fields
    `ACROSS` of each, the first schema problem (raised after the file's integrity, as
    `read_audit` raises it), and the lines' sha256."""
    kept: list[JsonObject] = []
    shared: dict[tuple[str, ...], list[str]] = {}
    problem: SchemaError | None = None
    digest = hashlib.sha256()
    for number, raw in enumerate(lines, start=2):
        record = parse_line(path, number, raw)
        kind = record.get("record") if isinstance(record, dict) else None
        if kind != EXPOSURE:
            raise AuditFileError(f"{path}:{number}: field 'record': expected 'exposure', got {kind!r}")
        digest.update(raw)
        if problem is None:
            try:
                check_record(number, record)
            except SchemaError as found:
                problem = found
        kept.append(_kept(record, shared))
    return kept, problem, digest.hexdigest()


def _kept(record: JsonObject, shared: dict[tuple[str, ...], list[str]]) -> JsonObject:
    return {name: _shared(record[name], shared) for name in ACROSS if name in record}


def _shared(value: Json, shared: dict[tuple[str, ...], list[str]]) -> Json:
    """Short strings interned and equal lists of them made one: an item's id, its languages
    and its `asked_in` recur on every record of the item."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return shared.setdefault(tuple(value), value)
    return value
