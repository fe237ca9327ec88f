"""`audit index verify`: every file of an index against the size and hash its manifest
records, and the structural checks every open runs."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from audit.corpora.shards import Damage, IndexOpenError, check_index, file_size, index_names, load_manifest
from audit.index.format import MANIFEST, FileInfo, hash_file
from audit.outputs import MARKER

OK, SIZE, HASH, MISSING, EXTRA = "ok", "size differs", "hash differs", "missing", "unexpected extra file"


@dataclass(frozen=True)
class FileCheck:
    name: str
    status: str
    detail: str = ""


@dataclass
class Verification:
    """`audit index verify`: each file against the manifest's size and hash (when it records
    them), and the structural checks every open runs."""

    hashed: bool
    files: list[FileCheck] = field(default_factory=list)
    structure: str = ""

    @property
    def damaged(self) -> list[FileCheck]:
        return [check for check in self.files if check.status != OK]

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.structure


def _check_file(path: Path, record: FileInfo, on_bytes: Callable[[int], None]) -> FileCheck:
    name = record.name
    if not (path / name).is_file():
        on_bytes(record.bytes)
        return FileCheck(name, MISSING)
    actual = file_size(path, name)
    if actual != record.bytes:
        on_bytes(record.bytes)
        return FileCheck(name, SIZE, f"{actual:,} bytes, the manifest records {record.bytes:,}")
    found = hash_file(path / name, on_bytes)
    if found != record.blake2b:
        return FileCheck(name, HASH, f"blake2b {found}, the manifest records {record.blake2b}")
    return FileCheck(name, OK, f"{actual:,} bytes")


def verify_index(path: Path, progress: Callable[[int, int], None] | None = None) -> Verification:
    """Re-hash every file the manifest lists and look for files it does not; then the open
    checks.  IndexOpenError only when `path` is not an index directory at all."""
    path = Path(path)
    if not path.is_dir() or not ((path / MANIFEST).exists() or index_names(path)):
        raise IndexOpenError(f"{path}: not an index directory (no {MANIFEST} and no tokenized.N files)")
    try:
        manifest = load_manifest(path)
    except Damage as damage:
        return Verification(hashed=False, structure=str(damage))
    result = Verification(hashed=bool(manifest and manifest.files))
    if manifest is not None and manifest.files:
        records = manifest.recorded_files()
        total, done = sum(f.bytes for f in records), 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, total)

        result.files = [_check_file(path, record, advance) for record in records]
        listed = {f.name for f in records} | {MANIFEST, MARKER}
        folders = {str(PurePosixPath(name).parent) for name in listed} - {"."}
        present = sorted(entry.relative_to(path).as_posix() for entry in path.rglob("*"))
        result.files += [FileCheck(name, EXTRA) for name in present if name not in listed and name not in folders]
    if not result.damaged:
        try:
            check_index(path)
        except IndexOpenError as error:
            result.structure = error.detail
    return result
