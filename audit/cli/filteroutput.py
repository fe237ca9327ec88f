"""What the filter writes, and the names `--out` and `--manifest` may have for it.

The clean benchmark is the input's own rows copied as they are, so it is in the input's format
and nothing else: a name of another format is refused rather than converted, since converting
would rewrite what the audit did not judge (and, for nested JSON into CSV or Parquet, lose its
structure).  A `.gz` name gzips the text formats.
"""
from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from audit.filter import LINE_FORMATS, FilterError, writes_directory
from audit.readers.tables import table_suffix


class Written(StrEnum):
    """What the clean benchmark is, as its reader reads it again."""

    JSONL = "JSON Lines"
    CSV = "CSV"
    TSV = "TSV"
    PARQUET = "Parquet"
    JSON = "JSON"
    DIRECTORY = "a directory"


SUFFIXES = {
    Written.JSONL: (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz"),
    Written.CSV: (".csv", ".csv.gz"),
    Written.TSV: (".tsv", ".tsv.gz"),
    Written.PARQUET: (".parquet",),
    Written.JSON: (".json", ".json.gz"),
}
# Names that say "a file of some format", so a directory given one would mislead.
FILE_SUFFIXES = (*(suffix for names in SUFFIXES.values() for suffix in names), ".gz", ".xlsx", ".xls", ".arrow", ".feather", ".txt", ".zip", ".xz", ".bz2", ".zst")
TABLES = {".csv": Written.CSV, ".tsv": Written.TSV, ".parquet": Written.PARQUET, ".jsonl": Written.JSONL, ".ndjson": Written.JSONL}


def written_as(fmt: str, benchmark: Path) -> Written | None:
    """What the filter writes for an input of `fmt` at `benchmark`; None where it cannot write
    the format at all (`filter_benchmark` says so)."""
    if writes_directory(fmt, benchmark):
        return Written.DIRECTORY
    if fmt == "eclektic-csv":
        return Written.CSV
    if fmt in LINE_FORMATS:
        return Written.JSONL
    if fmt == "squad":
        return Written.JSON
    if fmt == "table" and not benchmark.is_dir():
        return TABLES.get(table_suffix(benchmark) or "", Written.JSONL)
    return None


def output_suffixes(written: Written) -> tuple[str, ...]:
    return SUFFIXES.get(written, ())


def check_output_name(out: Path, fmt: str, benchmark: Path) -> None:
    """`--out` must name what is written: the input's format (a directory for inputs of several
    files, then without a file suffix)."""
    written, name = written_as(fmt, benchmark), out.name.lower()
    if written is None:
        return
    if written is Written.DIRECTORY:
        named = next((suffix for suffix in FILE_SUFFIXES if name.endswith(suffix)), None)
        if named:
            raise FilterError(f"--out {out}: the clean {fmt} benchmark is a directory of files like the input's, not a {named} file; give a directory name without {named}")
        return
    allowed = output_suffixes(written)
    if name.endswith(allowed):
        return
    named = next((kind for kind, suffixes in SUFFIXES.items() if name.removesuffix(".gz").endswith(suffixes[0].removesuffix(".gz"))), None)
    said = f"names {named}" if named else ("has no suffix to name a format" if "." not in name.strip(".") else f"ends in {Path(name).suffix}, not a format this tool writes")
    ending = f"{', '.join(allowed[:-1])} or {allowed[-1]}" if len(allowed) > 1 else allowed[0]
    raise FilterError(
        f"--out {out}: {said}, but the filter writes the input's own format, {written} ({benchmark.name}, format {fmt}), and does not convert; "
        f"give --out a name ending in {ending}"
    )


def check_manifest_name(manifest: Path) -> None:
    """The removal manifest is JSON; a name that says otherwise is refused."""
    if not manifest.name.lower().endswith(".json"):
        raise FilterError(f"--manifest {manifest}: the removal manifest is JSON; give it a name ending in .json")
