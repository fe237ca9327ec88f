"""The audit file: JSONL, a manifest line then one record per (item, language).

Written to a temporary sibling and renamed into place, so a file at the target path is always
complete.  The schema is documented in the README; `SCHEMA_VERSION` changes with it.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
MANIFEST, EXPOSURE = "manifest", "exposure"


class AuditFileError(Exception):
    """Not an audit file, or a damaged one; the message names the file and line."""


def benchmark_digest(path: Path) -> str:
    """sha256 of a benchmark file, or of a directory's files (names and contents, sorted): what
    the manifest records so a filter or report can tell it is looking at the audited input."""
    digest = hashlib.sha256()
    if Path(path).is_dir():
        for child in sorted(p for p in Path(path).rglob("*") if p.is_file()):
            digest.update(child.name.encode())
            digest.update(child.read_bytes())
    else:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def is_audit_file(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.loads(handle.readline()).get("record") == MANIFEST
    except (OSError, ValueError, AttributeError):
        return False


def write_audit(path: Path, manifest: dict[str, Any], records: Iterable[dict[str, Any]]) -> AuditFile:
    """Write the file and return it as `read_audit` would read it back."""
    path = Path(path)
    header = {"record": MANIFEST, "schema_version": SCHEMA_VERSION, **manifest}
    written: list[dict[str, Any]] = []
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(staging, "w", encoding="utf-8") as out:
            out.write(json.dumps(header, ensure_ascii=False) + "\n")
            for record in records:
                written.append({"record": EXPOSURE, **record})
                out.write(json.dumps(written[-1], ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    return AuditFile(header, written)


@dataclass
class AuditFile:
    manifest: dict[str, Any]
    records: list[dict[str, Any]]


def read_audit(path: Path) -> AuditFile:
    path = Path(path)
    records = []
    manifest: dict[str, Any] | None = None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise AuditFileError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            kind = record.get("record") if isinstance(record, dict) else None
            if number == 1:
                if kind != MANIFEST:
                    raise AuditFileError(f"{path}:1: field 'record': expected the manifest line, got {kind!r}")
                if record.get("schema_version") != SCHEMA_VERSION:
                    raise AuditFileError(f"{path}:1: field 'schema_version': {record.get('schema_version')!r}, this tool reads {SCHEMA_VERSION}")
                manifest = record
            elif kind != EXPOSURE:
                raise AuditFileError(f"{path}:{number}: field 'record': expected 'exposure', got {kind!r}")
            else:
                records.append(record)
    if manifest is None:
        raise AuditFileError(f"{path}: empty file")
    return AuditFile(manifest, records)
