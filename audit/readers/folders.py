"""A benchmark folder is read whole or not at all: a data file the chosen reader would pass over
(a JSON Lines file named `.json` among `.jsonl` tables, a table among SQuAD documents) is an
error naming it, never a silently smaller benchmark."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from audit.readers.common import BenchmarkError

# What a benchmark's rows are kept in; README, LICENSE, code and the like are not read.
DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")


def is_data_file(path: Path) -> bool:
    return path.name.lower().removesuffix(".gz").endswith(DATA_SUFFIXES)


def data_files(folder: Path) -> list[Path]:
    """Every data file under a folder, hidden ones (and those in hidden folders) aside."""
    return sorted(
        p for p in folder.rglob("*")
        if p.is_file() and is_data_file(p) and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def check_all_read(folder: Path, read: Iterable[Path], what: str) -> None:
    """Refuse a folder holding a data file the reader did not take; `what` says what it takes."""
    if not folder.is_dir():
        return
    taken = {path.resolve() for path in read}
    for path in data_files(folder):
        if path.resolve() not in taken:
            raise BenchmarkError(path, message=(
                f"not read: this folder is read as {what}, which this file is not"
                " (name JSON Lines files .jsonl); move it out, or pass a glob that picks the benchmark's files"
            ))
