"""What the report's pass reads of a record, made where the record is made.

A check that also writes its report reads every record as it is written
(`audit.report.aswritten`).  Parsing the lines again there, and judging each piece of evidence
alone, cost BMLAMA-17's parent 21 s of CPU while it also wrote the file, and the workers waited
for a core.  A worker holds each record typed, and has just judged each piece of its evidence
to decide its tag (`Decision.said`), so it hands the parent, beside the lines, a `RecordView`:
the record as written without the evidence the pass only judges, and what each piece says
alone.  The pass over a file makes the same pieces from the lines it parses (`pieces`), so the
report is the same whichever way it was read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from audit.evidence import Evidence, Json
from audit.exposure import said_alone
from audit.policyfile import Policy
from audit.records import ExposureRecord
from audit.rules import Outcome
from audit.signals import MODEL_SIGNALS


class Piece(NamedTuple):
    """One piece of a record's evidence as the report's pass counts it: its signal and source,
    and what it says alone (None for a model's, where no rule applies, or when not judged)."""

    signal: str
    source: str
    said: Outcome | None


def pieces(evidence: list[Evidence], policy: Policy | None) -> list[Piece]:
    """Each piece of `evidence` with what it says alone under `policy` (None: not judged)."""
    judged = policy is not None
    return [Piece(e.signal, e.source, said_alone(policy, e) if judged and e.signal not in MODEL_SIGNALS else None) for e in evidence]


@dataclass(frozen=True)
class RecordView:
    """A record for the report's pass: as written but for its evidence, which holds only the
    signals the pass reads whole (`Views.whole`), and all of its evidence as `pieces`."""

    record: dict[str, Json]
    pieces: list[Piece]


@dataclass(frozen=True)
class Views:
    """How a worker makes its records' views: the evidence of the `whole` signals kept as
    written."""

    whole: frozenset[str]

    def view(self, record: ExposureRecord, written: dict[str, Json], said: list[Outcome | None]) -> RecordView:
        """`record`'s view; `written` is the record as its line holds it (`as_written`), `said`
        what each piece of its evidence says alone, as its tag was decided (`Decision.said`)."""
        entries = written.get("evidence") or []
        kept = [entry for found, entry in zip(record.evidence, entries, strict=True) if found.signal in self.whole]
        made = [Piece(found.signal, found.source, alone) for found, alone in zip(record.evidence, said, strict=True)]
        return RecordView({**written, "evidence": kept}, made)
