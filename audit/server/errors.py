"""The error the job routes answer with."""
from __future__ import annotations

from audit.errors import AuditError


class JobError(AuditError):
    """A job that cannot be accepted; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status
