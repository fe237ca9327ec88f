"""One audit run, shared by the command line, the server's jobs and the Python API: a typed
`AuditRequest` goes in, the written audit file comes out (`run_audit`)."""
from audit.run.audit import run_audit
from audit.run.progress import Note, NoteKind, Progress
from audit.run.request import AuditRequest, RequestError

__all__ = ["AuditRequest", "Note", "NoteKind", "Progress", "RequestError", "run_audit"]
