"""The error of an index build: a source document or the output directory is unusable."""
from __future__ import annotations

from audit.errors import AuditError


class IndexBuildError(AuditError):
    """A source document or the output directory is unusable; the message names which."""
