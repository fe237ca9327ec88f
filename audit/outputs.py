"""Writing outputs without ever destroying what the tool did not write.

A file is written to a hidden sibling and renamed into place, so the target is either the old
file or the whole new one.  A directory (a report, a filtered BMLAMA copy, an index) is built in
a hidden sibling too, and carries a marker naming every file the tool put in it; an existing
directory is replaced only when it has that marker and holds nothing else, and never when it is,
or holds, one of the command's own inputs or the current directory.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from audit import __version__
from audit.errors import AuditError

MARKER = ".corpus-audit.json"
STAGING_TAG = ".corpus-audit-staging"


class OutputError(AuditError):
    """An output that cannot be written without risking a file the tool did not write."""


AT_FDCWD = -100
RENAME_EXCHANGE = 2
# What a full disk (or quota, or size limit) looks like to a writer.
DISK_FULL = {errno.ENOSPC: "", errno.EDQUOT: " (disk quota exceeded)", errno.EFBIG: " (file size limit reached)"}
# Staging directories being written, each with the output it becomes: a write error inside one
# names the output, not the hidden staging path.
_BUILDING: dict[Path, Path] = {}
# The output this process began writing last: the one a full disk reported with no file
# name (a database's "disk is full") was being written.
_LATEST: list[Path] = []


# numpy's `tofile` reports a write the disk cut short with no error number.
SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


class DiskFull(OSError):
    """A write that found no room; its message names the device and the output.  A refusal of
    the system, not of the tool: an OSError only, so every command reports it as the system's
    (exit 1), never as bad input."""

    def __str__(self) -> str:
        return str(self.strerror)


def _device(path: Path) -> str:
    """The device (or file system) holding `path`, and where it is mounted."""
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    device = here.stat().st_dev
    while here != here.parent and here.parent.stat().st_dev == device:
        here = here.parent
    try:
        mounts = [line.split()[:2] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        mounts = []
    names = [name for name, point in mounts if point.replace("\\040", " ") == str(here)]
    return f"{names[-1]} (mounted at {here})" if names else str(here)


def _output_of(path: Path | None) -> Path | None:
    """The output a written path belongs to: itself, or the target of the staging holding it."""
    if path is None:
        return next((target for staging, target in reversed(_BUILDING.items()) if staging.exists()), _LATEST[-1] if _LATEST else None)
    absolute = Path(os.path.abspath(path))
    for staging, target in _BUILDING.items():
        if _inside(absolute, staging):
            return target
    return Path(path)


def disk_full(error: BaseException, path: Path | None = None) -> DiskFull | None:
    """`error` as "no space left on DEVICE while writing FILE", when it is a full disk (or an
    exhausted quota or size limit), else None.  The one translation every writer relies on."""
    number = getattr(error, "errno", None)
    if number is None and isinstance(error, OSError) and SHORT_WRITE.fullmatch(str(error)):
        number = errno.ENOSPC
    if isinstance(error, DiskFull) or number not in DISK_FULL:
        return error if isinstance(error, DiskFull) else None
    target = _output_of(Path(error.filename) if getattr(error, "filename", None) else path)
    where = _device(target) if target is not None else "the device"
    return DiskFull(number, f"no space left on {where} while writing {target or 'an output'}{DISK_FULL[number]}")


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Raise a full disk met while writing `path` as `DiskFull`, naming it."""
    try:
        yield
    except OSError as error:
        full = disk_full(error, path)
        if full is None or full is error:
            raise
        raise full from None


def _staging_file(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _dead_siblings(path: Path, kind: str) -> list[Path]:
    """Hidden siblings `.NAME.<kind>-PID` (or `.NAME.PID.tmp`) left by a process that died."""
    pattern = f".{path.name}.*.tmp" if kind == "tmp" else f".{path.name}.{kind}-*"
    found = []
    for candidate in path.parent.glob(pattern):
        pid = candidate.name.removesuffix(".tmp").rsplit(".", 1)[-1] if kind == "tmp" else candidate.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            found.append(candidate)
    return found


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a synced temporary sibling and one rename, after removing
    the temporary siblings of writes to the same path whose process died."""
    atomic_write_parts(path, data)


def _append_file(source: BinaryIO, out: BinaryIO) -> None:
    """The whole of `source` after what `out` holds (flushed), copied by the kernel where it can
    (`os.sendfile`: an audit body of half a gigabyte never passes through this process), else
    through a buffer."""
    size, done = os.fstat(source.fileno()).st_size, 0
    try:
        while done < size:
            sent = os.sendfile(out.fileno(), source.fileno(), done, size - done)
            if not sent:
                break
            done += sent
    except (AttributeError, OSError) as error:
        if done or (isinstance(error, OSError) and error.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSOCK, errno.EOPNOTSUPP)):
            raise
    if done < size:
        source.seek(done)
        shutil.copyfileobj(source, out, 1 << 20)


def atomic_write_parts(path: Path, head: bytes, body: Path | None = None) -> None:
    """`head`, then the bytes of the file `body` (a stream written beforehand, whose size was not
    known when it began), as one atomic write of `path`."""
    path = Path(path)
    for stale in _dead_siblings(path, "tmp"):
        if stale.is_file():
            stale.unlink(missing_ok=True)
    staging = _staging_file(path)
    _LATEST[:] = [path]
    try:
        with writing(path), open(staging, "wb") as out:
            out.write(head)
            if body is not None:
                with open(body, "rb") as rest:
                    out.flush()
                    _append_file(rest, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise


class BodyStream:
    """A hidden sibling `.NAME.body-PID` that a long output's body is appended to as it is
    made, so the whole never sits in memory; `atomic_write_parts` then puts a head before it.
    Removed on leaving, whatever happened; siblings of dead processes are removed on entering."""

    def __init__(self, path: Path) -> None:
        self.target = Path(path)
        self.path = self.target.with_name(f".{self.target.name}.body-{os.getpid()}")
        self._out: BinaryIO | None = None

    def __enter__(self) -> BodyStream:
        for stale in _dead_siblings(self.target, "body"):
            stale.unlink(missing_ok=True)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        with writing(self.target):
            self._out = open(self.path, "wb")
        return self

    def write(self, data: bytes) -> None:
        if self._out is None:
            raise RuntimeError("a body stream is written while entered")
        with writing(self.target):
            self._out.write(data)

    def close(self) -> None:
        """Flush what was written, so the body can be read back whole."""
        if self._out is not None:
            with writing(self.target):
                self._out.close()
            self._out = None

    def __exit__(self, *exc: object) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        self.path.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def check_file_target(path: Path, *, inputs: Iterable[Path] = (), force: bool = False) -> None:
    """Refuse to write a file over a directory, over one of the command's inputs (whatever
    `force` says) or, without `force`, over any existing file."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; give a file name")
    if path.name in ("", ".", ".."):
        raise OutputError(f"{path}: not a file name")
    for source in inputs:
        if path.exists() and Path(source).exists() and path.samefile(source):
            raise OutputError(f"{path}: is this command's input {source}; refusing to overwrite it (--force does not change this)")
    if path.exists() and not force:
        raise OutputError(f"{path}: already exists (use --force to replace it)")


def _written_files(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file() or p.is_symlink()}


def _marker(directory: Path) -> dict | None:
    try:
        data = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), list) else None


def _marker_text(kind: str, files: Iterable[str]) -> str:
    return json.dumps({"kind": kind, "tool": f"corpus-audit {__version__}", "files": sorted(files)}, indent=1) + "\n"


def marker_files(directory: Path, kind: str) -> list[str] | None:
    """The files a `kind` directory's marker lists, or None when it has no readable marker of
    that kind (a directory the tool did not write)."""
    marker = _marker(Path(directory))
    return list(marker["files"]) if marker is not None and marker.get("kind") == kind else None


def rewrite_marker(directory: Path, kind: str, files: Iterable[str]) -> None:
    """Replace the marker of a directory the tool wrote, in one rename, when the tool adds or
    removes files in it in place (a near-duplicate index added to an index)."""
    atomic_write_text(Path(directory) / MARKER, _marker_text(kind, files))


def check_directory_target(path: Path, kind: str, *, inputs: Iterable[Path] = ()) -> None:
    """Refuse a directory target unless it is new, empty, or a `kind` directory this tool wrote
    that holds nothing else and none of the command's inputs."""
    path = Path(path)
    target = _absolute(path)
    if target.name in ("", ".", "..") or _inside(Path.cwd(), target):
        raise OutputError(f"{path}: is the current directory or holds it; give a new directory for the {kind}")
    for source in inputs:
        if _inside(_absolute(Path(source)), target):
            raise OutputError(f"{path}: holds this command's input {source}; give another directory for the {kind}")
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_dir():
        raise OutputError(f"{path}: is not a directory (a file or a link); give a directory for the {kind}")
    present = _written_files(path)
    if not present and not any(path.iterdir()):
        return
    marker = _marker(path)
    if marker is None:
        raise OutputError(f"{path}: exists and was not written by audit; refusing to replace it (give a new or empty directory, or remove it yourself)")
    if marker.get("kind") != kind:
        raise OutputError(f"{path}: holds a {marker.get('kind')}, not a {kind}; refusing to replace it")
    foreign = sorted(present - set(marker["files"]) - {MARKER})
    if foreign:
        raise OutputError(f"{path}: holds {foreign[0]}" + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "") + ", which audit did not write; refusing to replace it")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_staging(path: Path) -> list[Path]:
    """Remove what an interrupted build of `path` left: its staging directory (tagged as the
    tool's) and the previous version it had moved aside, if it died between the two renames."""
    path = Path(path)
    stale = [p for p in _dead_siblings(path, "building") if (p / STAGING_TAG).is_file() or (p / MARKER).is_file()]
    stale += [p for p in _dead_siblings(path, "replaced") if (p / MARKER).is_file()]
    for candidate in stale:
        shutil.rmtree(candidate, ignore_errors=True)
    return stale


def staging_directory(path: Path) -> Path:
    """A fresh hidden sibling to build `path` in, after clearing dead builds' leftovers."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(path)
    staging = path.parent / f".{path.name}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    _BUILDING[Path(os.path.abspath(staging))] = path
    _LATEST[:] = [path]
    with writing(path):
        (staging / STAGING_TAG).touch()
    return staging


def commit_directory(staging: Path, path: Path, kind: str, *, inputs: Iterable[Path] = ()) -> None:
    """Mark `staging` as a `kind` directory and move it into place, replacing `path` only when
    `check_directory_target` allows it."""
    staging, path = Path(staging), Path(path)
    inputs = list(inputs)
    check_directory_target(path, kind, inputs=inputs)
    files = sorted(_written_files(staging) - {MARKER, STAGING_TAG})
    with writing(path):
        (staging / MARKER).write_text(_marker_text(kind, files), encoding="utf-8")
    (staging / STAGING_TAG).unlink()
    _BUILDING.pop(Path(os.path.abspath(staging)), None)
    if not path.exists():
        staging.rename(path)
        return
    if _exchange(staging, path):
        shutil.rmtree(staging, ignore_errors=True)
        return
    retired = path.parent / f".{path.name}.replaced-{os.getpid()}"
    shutil.rmtree(retired, ignore_errors=True)
    path.rename(retired)
    staging.rename(path)
    shutil.rmtree(retired, ignore_errors=True)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two directories in one step (Linux renameat2 RENAME_EXCHANGE), so a replaced
    output is never absent nor half there, even for a process killed mid-way; False where the
    system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE)
    return done == 0


def discard_staging(staging: Path) -> None:
    _BUILDING.pop(Path(os.path.abspath(staging)), None)
    shutil.rmtree(staging, ignore_errors=True)
