"""An audit as Python reads it: the manifest and one typed record per (item, language), read
and checked exactly as every command reads an audit file, and a table of them for pandas.

`Audit.to_pandas()` gives one row per (item, language) with its tags and, flattened into
columns named `signal.source.field.figure`, every figure the policy's rules judge (taken from
the evidence, so a figure is there whether or not its rule fired) and each piece of evidence's
`status`.  The columns are listed in docs/python-api.md.
"""
from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from audit.auditfile import AuditFile, read_audit
from audit.records import AuditManifest, Check, ExposureRecord, Json, JsonObject

if TYPE_CHECKING:
    import pandas as pd

# The columns every table has, before the figures; documented in docs/python-api.md.
BASE_COLUMNS = (
    "item_id", "lang", "source_lang", "role", "exposure", "item_exposure", "knowledge",
    "seen_in_languages", "seen_in", "asked_in", "decided_by", "knowledge_decided_by", "membership", "membership_decided_by",
)
LIST_SEPARATOR = ","
CHECK_SEPARATOR = "; "
SCOPED = "source:"


@dataclass(frozen=True)
class Audit:
    """A checked audit: `manifest` and `records` typed, `file` the checked file as written
    (what `audit report` and `audit filter` take), `path` where it was read from."""

    manifest: AuditManifest
    records: list[ExposureRecord]
    file: AuditFile
    path: Path | None = None

    @classmethod
    def from_file(cls, file: AuditFile, path: Path | None = None) -> Audit:
        return cls(AuditManifest.from_dict(file.manifest), [ExposureRecord.from_dict(record) for record in file.records], file, path)

    @property
    def languages(self) -> list[str]:
        """The audited languages (those with records), in the benchmark's order."""
        audited = {record.lang for record in self.records}
        return [lang for lang in self.manifest.benchmark.languages if lang in audited]

    @property
    def summary(self) -> JsonObject:
        return self.manifest.summary

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[ExposureRecord]:
        return iter(self.records)

    def figure_columns(self, all_figures: bool = False) -> list[tuple[str, str, str, str]]:
        """(signal, source, field, figure) of every figure column, in a stable order: the
        evidence's order of signals, sources and fields, then each field's rule figures (or,
        with `all_figures`, every figure whose value is a number, a string or a truth value)."""
        ruled = _rule_figures(self.manifest.policy)
        for record in self.records:
            for check in [*record.decided_by, *record.knowledge_decided_by, *record.membership_decided_by]:
                if check.figure and check.signal and check.field is not None:
                    ruled.setdefault((check.signal, check.field), []).append(check.figure)
        seen: dict[tuple[str, str, str], list[str]] = {}
        for found in (found for record in self.records for found in record.evidence):
            names = seen.setdefault((found.signal, found.source, found.field), list(ruled.get((found.signal, found.field), [])))
            if all_figures:
                names.extend(name for name, value in found.figures.items() if not isinstance(value, list | dict))
        return [(signal, source, name, figure) for (signal, source, name), names in seen.items() for figure in dict.fromkeys(names)]

    def to_pandas(self, all_figures: bool = False) -> pd.DataFrame:
        """One row per (item, language): the record's tags, the checks that decided them and
        the deciding figures (see docs/python-api.md for every column); `all_figures` adds
        every other scalar figure the signals reported (a minhash `jaccard`, an n-gram
        `exact_count` of a field no rule reads)."""
        import pandas as pd

        figures = self.figure_columns(all_figures)
        statuses = list(dict.fromkeys((signal, source, name) for signal, source, name, _ in figures))
        columns = [*BASE_COLUMNS, *(".".join(key) for key in figures), *(".".join((*key, "status")) for key in statuses)]
        rows = [_row(record, figures, statuses) for record in self.records]
        return pd.DataFrame.from_records(rows, columns=columns)



TABLE_FORMATS = ("parquet", "csv")


def table_bytes(frame: pd.DataFrame, kind: str) -> bytes:
    """A table as a Parquet (through pyarrow) or CSV file's bytes."""
    if kind == "csv":
        return frame.to_csv(index=False).encode("utf-8")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ImportError("writing Parquet needs pyarrow (pip install pyarrow), or write --csv") from None
    buffer = io.BytesIO()
    _one_type_per_column(frame).to_parquet(buffer, index=False)
    return buffer.getvalue()


def _one_type_per_column(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet holds one type per column: a figure some signal gave as a number on one row
    and as text (or a truth value) on another is written as text throughout."""
    mixed = [name for name in frame.columns if frame[name].dtype == object and len(_kinds(frame[name])) > 1]
    return frame.astype({name: "string" for name in mixed}) if mixed else frame


def _kinds(column: pd.Series) -> set[str]:
    return {"number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__ for value in column if value is not None}


def read(path: Path | str) -> Audit:
    """The audit file at `path`, checked as `audit report` and `audit filter` check it: a
    damaged, truncated, edited or invalid file raises `AuditFileError` naming file, line and
    field."""
    return Audit.from_file(read_audit(Path(path)), Path(path))


def _rule_figures(policy: JsonObject) -> dict[tuple[str, str], list[str]]:
    """(signal, field) -> the figures the policy's rules judge, scoped tables included."""
    settings = policy.get("settings")
    rules = settings.get("rules") if isinstance(settings, dict) else None
    found: dict[tuple[str, str], list[str]] = {}
    for signal, table in (rules.items() if isinstance(rules, dict) else ()):
        for name, figures in (table.items() if isinstance(table, dict) else ()):
            if not isinstance(figures, dict):
                continue
            for figure, setting in figures.items():
                scoped = list(setting) if figure.startswith(SCOPED) and isinstance(setting, dict) else [figure]
                found.setdefault((signal, name), []).extend(scoped)
    return found


def _joined(languages: list[str] | None) -> str | None:
    return None if languages is None else LIST_SEPARATOR.join(languages)


def _check_text(check: Check) -> str:
    """A check as one phrase: `signal.source.field.figure`, a source's failure, or the reason."""
    if check.figure:
        return check.key
    if check.reason:
        return check.reason
    return f"{check.signal}.{check.source}.{check.field} {check.status}"


def _cell(value: Json) -> Json:
    """A figure as a cell: lists and objects (rare among rule figures) as their text."""
    return str(value) if isinstance(value, list | dict) else value


def _row(record: ExposureRecord, figures: list[tuple[str, str, str, str]], statuses: list[tuple[str, str, str]]) -> list[Json]:
    found = {(e.signal, e.source, e.field): e for e in record.evidence}
    row: list[Json] = [
        record.item_id, record.lang, record.source_lang, record.role.value, record.exposure.value,
        record.item_exposure.value if record.item_exposure else None, record.knowledge.value if record.knowledge else None,
        _joined(record.seen_in_languages), _joined(record.seen_in), _joined(record.asked_in),
        CHECK_SEPARATOR.join(_check_text(check) for check in record.decided_by),
        CHECK_SEPARATOR.join(_check_text(check) for check in record.knowledge_decided_by),
        record.membership.value if record.membership else None,
        CHECK_SEPARATOR.join(_check_text(check) for check in record.membership_decided_by),
    ]
    for signal, source, name, figure in figures:
        evidence = found.get((signal, source, name))
        row.append(_cell(evidence.figures.get(figure)) if evidence is not None else None)
    for key in statuses:
        evidence = found.get(key)
        row.append(evidence.status.value if evidence is not None else None)
    return row
