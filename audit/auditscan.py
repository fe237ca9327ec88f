"""Reading an audit file someone hands the report, checked in one pass that holds no record:
`read_audit`'s checks in its order, each record parsed and checked as it comes, and what the
checks across records need kept (`audit.auditacross.Across`: a little per item, a few bytes per
variant).  The records are read back from disk when the report iterates them, and refused if
the file changed since.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from audit.auditacross import Across
from audit.auditfile import (
    EXPOSURE,
    LINES_BUFFER,
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
from audit.auditschema import SchemaError, check_manifest, check_record
from audit.errors import special_kind
from audit.records import JsonObject


def scan_audit(path: Path) -> tuple[AuditFile, Across]:
    """`read_audit`'s checks, in the same order, in one pass that holds no record; the audit's
    records are read back from disk when iterated, refused if the file changed since
    (`StoredRecords`).  Returns the audit and what was kept for the checks across records,
    which `check_against_benchmark` reads.  A version-1 file is read whole and upgraded, as
    `read_audit` reads it."""
    path = Path(path)
    if special_kind(path):
        raise AuditFileError(f"{path}: not a regular file (a device, pipe or socket); an audit file is one `audit check` wrote")
    try:
        with open(path, "rb", buffering=LINES_BUFFER) as handle:
            lines = split_lines(handle)
            first = next(lines, None)
            manifest = check_manifest_line(path, parse_line(path, 1, first)) if first is not None else None
            if manifest is not None and manifest["schema_version"] == 1:
                audit = read_audit(path)
                return audit, Across.of(audit.manifest, audit.records)
            unsound = _manifest_problem(manifest) if manifest is not None else None
            # The records are checked across only against a sound manifest: a problem with the
            # manifest is raised first in any case.
            across = Across(manifest) if manifest is not None and unsound is None else None
            count, first_problem, digest = _scanned(path, lines, across)
    except OSError as error:
        raise AuditFileError(f"{path}: cannot read the audit file ({error.strerror or error})") from None
    if manifest is None:
        raise AuditFileError(f"{path}: empty file; not an audit file")
    check_integrity(path, manifest, count, digest)
    try:
        for problem in (unsound, first_problem):
            if problem is not None:
                raise problem
        assert across is not None
        across.finish()
    except SchemaError as problem:
        raise located(path, problem) from None
    return AuditFile(manifest, StoredRecords(path, count, digest)), across


def _manifest_problem(manifest: JsonObject) -> SchemaError | None:
    try:
        check_manifest(manifest)
    except SchemaError as problem:
        return problem
    return None


def _scanned(path: Path, lines: Iterator[bytes], across: Across | None) -> tuple[int, SchemaError | None, str]:
    """The records after the manifest line, each parsed and checked as it comes, and handed to
    `across` while none has failed: the number of records, the first schema problem (raised
    after the file's integrity, as `read_audit` raises it), and the lines' sha256."""
    problem: SchemaError | None = None
    digest = hashlib.sha256()
    count = 0
    for number, raw in enumerate(lines, start=2):
        record = parse_line(path, number, raw)
        kind = record.get("record") if isinstance(record, dict) else None
        if kind != EXPOSURE:
            raise AuditFileError(f"{path}:{number}: field 'record': expected 'exposure', got {kind!r}")
        digest.update(raw)
        count += 1
        if problem is None:
            try:
                check_record(number, record)
            except SchemaError as found:
                problem = found
        if problem is None and across is not None:
            across.add(number, record)
    return count, problem, digest.hexdigest()
