"""The report's pass over an audit's records, made while `audit check` writes them.

The report reads every record once before any page is rendered (`build.read_records`), on one
core: four seconds of BMLAMA-17's report in which the other core waited.  A check that writes
the report too hands each block of lines it writes to `ReadAsWritten` as well, which makes the
same pass there, while the workers check the next items; the report then starts from it.  The
lines are the ones written, in the order written, so the pass is the one the file would give.
A pass that failed, or a manifest whose policy is not the one read with, gives nothing, and
the report reads the file as it would have.
"""
from __future__ import annotations

import orjson

from audit.auditfile import AuditFile, StoredRecords
from audit.evaluate.stratify import ExposureError
from audit.policyfile import Policy
from audit.records import JsonObject
from audit.recordview import RecordView, Views
from audit.report.build import READ_WHOLE, ReadAudit, RecordsReading


class ReadAsWritten:
    """Reads an audit's record lines as they are written (`start`, then `add` per block)."""

    def __init__(self) -> None:
        self._reading: RecordsReading | None = None
        self._settings: JsonObject | None = None
        self._at = 0
        self._number = 2
        self.failed: str | None = None

    def start(self, policy: Policy) -> Views:
        """Before the first line: the policy the records are decided under; returns how the
        workers are to make the records' views, which then come with their lines."""
        self._settings = policy.settings
        self._reading = RecordsReading({"policy": {"settings": policy.settings}}, None)
        return Views(READ_WHOLE)

    def add(self, lines: bytes, views: list[RecordView] | None = None) -> None:
        """A block of lines as written, with their `views` when the workers made them (else each
        line is parsed).  A line that cannot be read stops the pass (the file is then read by
        the report, which names what is wrong) but never the check."""
        reading = self._reading
        if reading is None or self.failed is not None:
            return
        at, number = self._at, self._number
        try:
            count, start = lines.count(b"\n"), 0
            if views is not None and len(views) != count:
                raise ValueError(f"{len(views)} views for {count} lines")
            for k in range(count):
                end = lines.index(b"\n", start) + 1
                if views is None:
                    reading.add(orjson.loads(lines[start:end]), (at, end - start), number)
                else:
                    reading.add_view(views[k], (at, end - start), number)
                at, start, number = at + end - start, end, number + 1
        except Exception as error:
            self.failed = f"line {number}: {type(error).__name__}: {error}"
        self._at, self._number = at, number

    def read(self, audit: AuditFile) -> ReadAudit | None:
        """The pass, its lines placed after the manifest line of the file written; None when
        there is none to give."""
        reading, manifest = self._reading, audit.manifest
        if reading is None or self.failed is not None or not isinstance(audit.records, StoredRecords):
            return None
        if (manifest.get("policy") or {}).get("settings") != self._settings or manifest.get("records") != self._number - 2:
            return None
        with open(audit.records.path, "rb") as handle:
            shift = len(handle.readline())
        reading.records.placed(audit, shift)
        try:
            return reading.finish(manifest)
        except ExposureError:
            return None
