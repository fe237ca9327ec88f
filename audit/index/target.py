"""Where a build writes: the lock that keeps two builds of one index apart, the checks that
refuse an output the build may not replace, and the move of a finished build into place.

A build writes into a hidden sibling directory and moves it into place (`audit.outputs`) only
after `audit-index.json` is written, so an interrupted build never leaves something that looks
like an index, and `--force` never replaces a directory the tool did not write.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from audit.index.doclangs import HEADER, TABLE
from audit.index.errors import IndexBuildError
from audit.index.format import INDEX_FILE, MANIFEST
from audit.outputs import OutputError, check_directory_target, commit_directory


def holds(directory: Path, path: Path) -> bool:
    directory, path = directory.resolve(), path.resolve()
    return path == directory or directory in path.parents


def _written_before_markers(path: Path, inputs: Iterable[Path] = ()) -> bool:
    """An index corpus-audit wrote before directories carried the outputs marker, which
    `--force` may replace: nothing in it but files named `tokenized|table|offset|metadata|
    metaoff.N` and an `audit-index.json` naming corpus-audit, and none of them an input."""
    path = Path(path)
    if path.is_symlink() or not (path / MANIFEST).is_file() or any(holds(path, p) for p in (Path.cwd(), *inputs)):
        return False
    try:
        tool = json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("tool", "")
    except (OSError, ValueError, AttributeError):
        return False
    names_ok = all(
        entry.is_file() and not entry.is_symlink() and (entry.name in (MANIFEST, TABLE, HEADER) or INDEX_FILE.fullmatch(entry.name))
        for entry in path.iterdir()
    )
    return isinstance(tool, str) and tool.startswith("corpus-audit") and names_ok


def _lock_holder(handle: IO[str]) -> str:
    handle.seek(0)
    return handle.read().strip() or "?"


@contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold the lock of builds of `out` (a hidden sibling file holding the builder's pid), or
    IndexBuildError naming the build that holds it: two builds of one index would take each
    other's staging directory away."""
    path = out.parent / f".{out.name}.audit-build.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held until the build ends)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(handle)
            handle.close()
            raise IndexBuildError(f"another build (pid {holder}) is writing {out}; wait for it to end, or stop it, and run again") from None
        # The lock counts only if the file is still the one at `path` (a finishing build removes it).
        if path.exists() and path.stat().st_ino == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        path.unlink(missing_ok=True)
        handle.close()


def check_target(out: Path, inputs: list[Path], force: bool) -> None:
    """Refuse, before the long build, an `out` the build may not replace, or one inside a source
    directory, where the next build of that directory would find it."""
    for source in inputs:
        if source.is_dir() and holds(source, out) and not holds(out, source):
            raise IndexBuildError(f"{out}: inside the source directory {source}; give --out outside it, so the index is never read back as a source")
    if (out.exists() or out.is_symlink()) and not force:
        raise IndexBuildError(f"{out}: already exists (use --force to replace it)")
    if _written_before_markers(out, inputs):
        return
    try:
        check_directory_target(out, "index", inputs=inputs)
    except OutputError as error:
        raise IndexBuildError(str(error)) from None


def commit_index(staging: Path, out: Path, inputs: list[Path]) -> None:
    """Move the finished build into place; an index from before markers is set aside first,
    and put back if the move fails."""
    if not _written_before_markers(out, inputs):
        commit_directory(staging, out, "index", inputs=inputs)
        return
    retired = out.parent / f".{out.name}.replaced-{os.getpid()}"
    out.rename(retired)
    try:
        commit_directory(staging, out, "index", inputs=inputs)
    except BaseException:
        retired.rename(out)
        raise
    shutil.rmtree(retired, ignore_errors=True)
