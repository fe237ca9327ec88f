"""Evidence: what one signal found for one (item, language, field) in one source, with its
provenance.

A source is whatever the signal asked: a corpus (by its registry name), a wiki snapshot, a
model.  Records are plain dataclasses that serialise to JSON as they are, so the audit file
carries exactly what the policy decided on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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


@dataclass
class Evidence:
    signal: str
    source: str
    field: str
    status: Status = OK
    figures: dict[str, Any] = field(default_factory=dict)
    provenance: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
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
