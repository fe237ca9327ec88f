"""Evidence: what one signal found for one (item, language, field) in one source, with its
provenance.

A source is whatever the signal asked: a corpus (by its registry name), a wiki snapshot, a
model.  Records are plain dataclasses that serialise to JSON as they are, so the audit file
carries exactly what the policy decided on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

from audit.errors import AuditError

# A value as the audit file holds it: what figures and provenance are made of.
Json: TypeAlias = "str | int | float | bool | list[Json] | dict[str, Json] | None"
Figures: TypeAlias = dict[str, Json]


class Status(StrEnum):
    """`absent`: the variant has no such text; `failed`: the source could not be asked;
    `unknown`: it was asked but cannot tell (offline with nothing cached, a title no snapshot
    has, a snapshot that cannot speak for the cutoff).  The policy reads both of the last as
    `unknown`, never as "not found"."""

    OK = "ok"
    ABSENT = "absent"
    FAILED = "failed"
    UNKNOWN = "unknown"


OK, ABSENT, FAILED, UNKNOWN = Status.OK, Status.ABSENT, Status.FAILED, Status.UNKNOWN
# A status as written → its member: every record's evidence is read through here.
_STATUS_OF = {status.value: status for status in Status}


class EvidenceError(AuditError):
    """An evidence entry of an audit file that cannot be read back as Evidence."""


@dataclass
class Evidence:
    signal: str
    source: str
    field: str
    status: Status = OK
    figures: Figures = field(default_factory=dict)
    provenance: list[Figures] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def from_dict(cls, entry: Json) -> Evidence:
        """An entry of a record's `evidence` as written by `to_dict` (an older file's `corpus`
        names the source); EvidenceError says what is missing or wrong."""
        if not isinstance(entry, dict) or not isinstance(entry.get("signal"), str) or not isinstance(entry.get("field"), str):
            raise EvidenceError("each entry needs a 'signal' and a 'field'")
        written = entry.get("status", OK)
        status = _STATUS_OF.get(written) if isinstance(written, str) else None
        if status is None:
            raise EvidenceError(f"'status': expected one of {', '.join(Status)}, got {written!r}")
        figures, provenance, error = entry.get("figures"), entry.get("provenance"), entry.get("error")
        return cls(
            signal=entry["signal"],
            source=str(entry.get("source", entry.get("corpus", ""))),
            field=entry["field"],
            status=status,
            figures=figures if isinstance(figures, dict) else {},
            provenance=[p for p in provenance if isinstance(p, dict)] if isinstance(provenance, list) else [],
            error=error if isinstance(error, str) else None,
        )

    def to_dict(self) -> Figures:
        """Shallow: figures and provenance are plain JSON values already, and a deep copy of
        every record's evidence is a tenth of an audit's time."""
        data = {"signal": self.signal, "source": self.source, "field": self.field, "status": self.status, "figures": self.figures, "provenance": self.provenance}
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class SignalRun:
    """For the audit manifest: whether a signal asked a source, and if not, why."""

    signal: str
    source: str
    ran: bool
    reason: str | None = None
