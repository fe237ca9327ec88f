"""The audit file: JSONL, a manifest line then one record per (item, language).

Written to a temporary sibling and renamed into place, so a file at the target path is always
complete.  The manifest carries the number of records and the sha256 of their lines, so a file
cut short (at a line boundary, where JSON alone cannot tell) or edited is refused, never read
as a smaller audit.  The schema is documented in the README; `SCHEMA_VERSION` changes with it.
"""
from __future__ import annotations

import glob
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, overload

import orjson

from audit.auditacross import Across, check_records
from audit.auditlines import AuditFileError, json_line, parse_line
from audit.auditschema import (
    FIRST_RECORD_LINE,
    SchemaError,
    check_manifest,
    check_record,
)
from audit.errors import special_kind
from audit.items import Item
from audit.outputs import BodyStream, atomic_write_parts
from audit.records import AuditManifest, ExposureRecord, Json, JsonObject
from audit.recordview import RecordView

SCHEMA_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
MANIFEST, EXPOSURE = "manifest", "exposure"


def benchmark_files(path: Path) -> list[Path]:
    """The files a benchmark path stands for: itself, a directory's files, or a glob's matches."""
    if any(char in str(path) for char in "*?["):
        return sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
    if Path(path).is_dir():
        return sorted(p for p in Path(path).rglob("*") if p.is_file())
    return [Path(path)] if Path(path).exists() else []


def benchmark_digest(path: Path) -> str:
    """sha256 of a benchmark file, or of a directory's (or glob's) files, names and contents
    sorted: what the manifest records so a filter or report can tell it is looking at the
    audited input."""
    digest = hashlib.sha256()
    files = benchmark_files(path)
    if files == [Path(path)]:
        digest.update(Path(path).read_bytes())
        return digest.hexdigest()
    for child in files:
        digest.update(child.name.encode())
        digest.update(child.read_bytes())
    return digest.hexdigest()


def is_audit_file(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.loads(handle.readline()).get("record") == MANIFEST
    except (OSError, ValueError, AttributeError):
        return False


def as_written(record: ExposureRecord | JsonObject) -> JsonObject:
    """A record as its audit-file line holds it; a typed record as its `to_dict()`."""
    return {"record": EXPOSURE, **(record.to_dict() if isinstance(record, ExposureRecord) else record)}


def record_lines(records: Iterable[ExposureRecord | JsonObject]) -> bytes:
    """Records as the audit file's lines."""
    return b"".join(json_line(as_written(record)) for record in records)


class AuditStream:
    """An audit file written as its records come, in order, in blocks of lines made wherever
    the records were decided: the records go to a hidden sibling as they arrive, their count
    and digest are kept, and `finish` puts the manifest before them in one atomic write, so
    memory stays flat however long the benchmark, and the target is never a partial file."""

    def __init__(self, path: Path, also: Callable[[bytes, list[RecordView] | None], None] | None = None) -> None:
        self.path = Path(path)
        self.count = 0
        self._digest = hashlib.sha256()
        self._body = BodyStream(self.path)
        # Handed each block of lines once written, with their views when the workers made them
        # (the report reading them as they come).
        self._also = also

    def __enter__(self) -> AuditStream:
        self._body.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._body.__exit__(*exc)

    def add(self, lines: bytes, count: int, views: list[RecordView] | None = None) -> None:
        """`count` records, as `record_lines` makes them, and their `views` when made."""
        self._digest.update(lines)
        self._body.write(lines)
        self.count += count
        if self._also is not None:
            self._also(lines, views)

    def finish(self, manifest: AuditManifest | JsonObject) -> AuditFile:
        """The file in place, returned with its records read from disk when iterated."""
        manifest = manifest.to_dict() if isinstance(manifest, AuditManifest) else manifest
        header = {"record": MANIFEST, "schema_version": SCHEMA_VERSION, **manifest, "records": self.count, "records_sha256": self._digest.hexdigest()}
        self._body.close()
        atomic_write_parts(self.path, json_line(header), self._body.path)
        return AuditFile(header, StoredRecords(self.path, self.count))


def write_audit(path: Path, manifest: AuditManifest | JsonObject, records: Iterable[ExposureRecord | JsonObject]) -> AuditFile:
    """Write the file and return it as `read_audit` would read it back."""
    written = [as_written(record) for record in records]
    with AuditStream(path) as stream:
        stream.add(record_lines(written), len(written))
        header = stream.finish(manifest).manifest
    return AuditFile(header, written)


# Records are lines of a few kilobytes: read a file of them through a buffer of many lines, not
# Python's 8 KiB (two thirds of the time of splitting a large audit into lines).
LINES_BUFFER = 1 << 16


class StoredRecords(Sequence[JsonObject]):
    """The records of an audit file, read from disk each time they are iterated rather than
    held: a benchmark of any size is reported in flat memory.  With `digest` (a file this
    process did not write, checked by `scan_audit`), each reading checks the lines are still
    the ones checked, and a file changed since is refused."""

    def __init__(self, path: Path, count: int, digest: str | None = None) -> None:
        self.path, self.count, self.digest = Path(path), count, digest
        self._stamp = _stamp(self.path) if digest is not None else None

    def check_unchanged(self) -> None:
        """Refuse a checked file whose size or modification time moved since it was checked:
        what was read of it after the check (an item's lines, by offset) may not be what was checked."""
        if self._stamp is not None and _stamp(self.path) != self._stamp:
            raise self._changed()

    def _changed(self) -> AuditFileError:
        return AuditFileError(f"{self.path}: changed while it was being read (its records differ from those checked); run the command again")

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[JsonObject]:
        for record, _ in self.located():
            yield record

    def located(self) -> Iterator[tuple[JsonObject, tuple[int, int]]]:
        """Each record with where its line lies in the file: (byte offset, length)."""
        # Only a file `scan_audit` checked is hashed again; one this process just wrote needs no second check.
        digest, count = hashlib.sha256() if self.digest is not None else None, 0
        with open(self.path, "rb", buffering=LINES_BUFFER) as handle:
            offset = len(handle.readline())
            for line in split_lines(handle):
                if digest is not None:
                    digest.update(line)
                count += 1
                yield orjson.loads(line), (offset, len(line))
                offset += len(line)
        if digest is not None and (count != self.count or digest.hexdigest() != self.digest):
            raise self._changed()

    @overload
    def __getitem__(self, index: int) -> JsonObject: ...
    @overload
    def __getitem__(self, index: slice) -> list[JsonObject]: ...
    def __getitem__(self, index: int | slice) -> JsonObject | list[JsonObject]:
        return list(self)[index]


def split_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The file's lines as `read_audit` splits them (`bytes.splitlines`, which also ends a
    line at a lone carriage return), read a line at a time."""
    for line in handle:
        yield from line.splitlines(keepends=True) if b"\r" in line else (line,)


def _stamp(path: Path) -> tuple[int, int, int]:
    status = path.stat()
    return status.st_ino, status.st_size, status.st_mtime_ns


@dataclass
class AuditFile:
    manifest: JsonObject
    records: Sequence[JsonObject]


@dataclass(frozen=True)
class AuditedBenchmark:
    """What the manifest says about the benchmark the audit read."""

    path: str
    absolute_path: str | None
    format: str
    sha256: str
    mapping: JsonObject = field(default_factory=dict)
    source_lang: str | None = None


def audited_benchmark(audit: AuditFile, audit_path: Path) -> AuditedBenchmark:
    recorded = audit.manifest.get("benchmark")
    fields = ("path", "format", "sha256")
    if not isinstance(recorded, dict) or not all(isinstance(recorded.get(name), str) for name in fields):
        raise AuditFileError(f"{audit_path}:1: field 'benchmark': expected path, format and sha256 of the audited benchmark")
    absolute = recorded.get("absolute_path")
    mapping, source_lang = recorded.get("mapping") or {}, recorded.get("source_lang")
    if not isinstance(mapping, dict) or not (source_lang is None or isinstance(source_lang, str)):
        raise AuditFileError(f"{audit_path}:1: field 'benchmark': mapping must be an object and source_lang a string")
    return AuditedBenchmark(recorded["path"], absolute if isinstance(absolute, str) else None, recorded["format"], recorded["sha256"], mapping, source_lang)


def locate_benchmark(audit: AuditFile, audit_path: Path, given: Path | None) -> tuple[Path, AuditedBenchmark]:
    """The audited benchmark: `given`, else the path the audit recorded (as given, then
    absolute), checked against the recorded sha256 before anything reads it."""
    recorded = audited_benchmark(audit, audit_path)
    if given is None:
        candidates = [Path(recorded.path)] + ([Path(recorded.absolute_path)] if recorded.absolute_path else [])
        found = next((path for path in candidates if benchmark_files(path)), None)
        if found is None:
            raise AuditFileError(
                f"{audit_path}: the audited benchmark {recorded.absolute_path or recorded.path} is not found from {Path.cwd()}; pass it with --bench"
            )
        given = found
    if not benchmark_files(Path(given)):
        raise AuditFileError(f"{given}: no such benchmark file or directory")
    if special_kind(given):
        raise AuditFileError(f"{given}: not a regular file (a device, pipe or socket); pass the audited benchmark with --bench")
    actual = benchmark_digest(Path(given))
    if actual != recorded.sha256:
        raise AuditFileError(
            f"{given}: not the audited benchmark: its sha256 {actual[:12]}... differs from the audited benchmark's {recorded.sha256[:12]}... "
            f"({recorded.path}, recorded in {audit_path}); pass that file with --bench, or re-run `audit check` on this one"
        )
    return Path(given), recorded


def check_integrity(path: Path, manifest: JsonObject, count: int, digest: str) -> None:
    expected, recorded = manifest.get("records"), manifest.get("records_sha256")
    if "records" in manifest and (isinstance(expected, bool) or not isinstance(expected, int)):
        raise AuditFileError(f"{path}:1: field 'records': expected the number of records, got {expected!r}")
    if "records_sha256" in manifest and not isinstance(recorded, str):
        raise AuditFileError(f"{path}:1: field 'records_sha256': expected a sha256 in hex, got {recorded!r}")
    if not isinstance(expected, int) or not isinstance(recorded, str):
        raise AuditFileError(
            f"{path}:1: fields 'records' and 'records_sha256' are missing, so the file cannot be checked for completeness "
            "(written by an older version?); re-run `audit check` to write it again"
        )
    if count != expected:
        raise AuditFileError(f"{path}: {count} records where the manifest says {expected}: the file is truncated or damaged; re-run `audit check`")
    if digest != recorded:
        raise AuditFileError(f"{path}: the records' sha256 differs from the manifest's: the file was damaged or edited; re-run `audit check`")


def located(path: Path | str, problem: SchemaError) -> AuditFileError:
    """A schema problem as the one-line error every reader prints: file, line, field, why."""
    where = f"{path}:{problem.line}" if problem.line is not None else str(path)
    what = f"field '{problem.field}': {problem.message}" if problem.field else problem.message
    return AuditFileError(f"{where}: {what}")


def check_manifest_line(path: Path, record: Json) -> JsonObject:
    kind = record.get("record") if isinstance(record, dict) else None
    if kind != MANIFEST:
        raise AuditFileError(f"{path}:1: field 'record': expected the manifest line, got {kind!r}; not an audit file")
    if record.get("schema_version") not in READABLE_VERSIONS or isinstance(record.get("schema_version"), bool):
        raise AuditFileError(f"{path}:1: field 'schema_version': {record.get('schema_version')!r}, this tool reads {' and '.join(map(str, READABLE_VERSIONS))}")
    return record


def read_audit(path: Path) -> AuditFile:
    """The whole file, checked: a damaged, truncated or edited file raises `AuditFileError`,
    and so does any record the schema, the other records or the manifest's counts refuse,
    whatever the digest says."""
    path = Path(path)
    records = []
    manifest: JsonObject | None = None
    digest = hashlib.sha256()
    try:
        if special_kind(path):
            raise AuditFileError(f"{path}: not a regular file (a device, pipe or socket); an audit file is one `audit check` wrote")
        data = path.read_bytes()
    except OSError as error:
        raise AuditFileError(f"{path}: cannot read the audit file ({error.strerror or error})") from None
    for number, raw in enumerate(data.splitlines(keepends=True), start=1):
        record = parse_line(path, number, raw)
        if number == 1:
            manifest = check_manifest_line(path, record)
            continue
        kind = record.get("record") if isinstance(record, dict) else None
        if kind != EXPOSURE:
            raise AuditFileError(f"{path}:{number}: field 'record': expected 'exposure', got {kind!r}")
        digest.update(raw)
        records.append(record)
    if manifest is None:
        raise AuditFileError(f"{path}: empty file; not an audit file")
    check_integrity(path, manifest, len(records), digest.hexdigest())
    audit = upgrade_v1(manifest, records) if manifest["schema_version"] == 1 else AuditFile(manifest, records)
    try:
        check_manifest(audit.manifest)
        for index, record in enumerate(audit.records):
            check_record(index + FIRST_RECORD_LINE, record)
        check_records(audit.manifest, audit.records)
    except SchemaError as problem:
        raise located(path, problem) from None
    return audit


def check_against_benchmark(audit: AuditFile, audit_path: Path | str, items: Sequence[Item], across: Across | None = None) -> None:
    """The records against the benchmark they audit (see `audit.auditacross.Across.check_benchmark`):
    what `scan_audit` kept of them, or else the audit's records gone through again."""
    try:
        (across or Across.of(audit.manifest, audit.records)).check_benchmark(items)
    except SchemaError as problem:
        raise located(audit_path, problem) from None


def upgrade_v1(manifest: JsonObject, records: list[JsonObject]) -> AuditFile:
    """A version-1 audit (one corpus, the n-gram signal, rules keyed by field) in version 2's
    shape, so every reader handles one schema: evidence names its `source`, checks name their
    source and operator, the policy's rules sit under `ngram`, and the one corpus is the
    source of every signal run.  `upgraded_from` says it was read this way."""
    corpora = manifest.get("corpora")
    first = corpora[0] if isinstance(corpora, list) and corpora and isinstance(corpora[0], dict) else {}
    source = str(first.get("name", ""))
    upgraded = dict(manifest, schema_version=SCHEMA_VERSION, upgraded_from=1)
    signals = manifest.get("signals")
    upgraded["signal_runs"] = [{"signal": name, "source": source, "ran": True, "reason": None} for name in signals] if isinstance(signals, list) else signals
    policy = manifest.get("policy") if isinstance(manifest.get("policy"), dict) else {}
    settings = policy.get("settings") if isinstance(policy.get("settings"), dict) else {}
    if isinstance(settings.get("rules"), dict):
        settings["rules"] = {"ngram": settings["rules"]}
        upgraded["policy"] = dict(policy, settings=settings)
    converted = []
    for record in records:
        evidence, checks = record.get("evidence"), record.get("decided_by")
        if isinstance(evidence, list):
            evidence = [{("source" if k == "corpus" else k): v for k, v in e.items()} if isinstance(e, dict) else e for e in evidence]
        if isinstance(checks, list):
            checks = [
                dict(check, source=source, **({"op": ">="} if "figure" in check else {})) if isinstance(check, dict) and "field" in check else check
                for check in checks
            ]
        converted.append(dict(record, evidence=evidence, decided_by=checks))
    return AuditFile(upgraded, converted)
