"""Request parameters name things the server holds, never paths on it.

Every name a request gives that leads to a file (a job id, an upload's file name, a policy)
is checked against a closed pattern before any path is built from it, and the answer to a bad
one names the rule, not a server path nor any file's content."""
from __future__ import annotations

import re
from pathlib import Path

from audit.errors import AuditError

JOB_ID = re.compile(r"[0-9a-f]{16}")
UPLOAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
POLICY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
RESERVED = ("job.json", "audit.jsonl")


class BadName(AuditError, ValueError):
    """A parameter that is not a name of the kind asked for."""


def job_id(value: str) -> str:
    if not JOB_ID.fullmatch(value):
        raise BadName(f"{_shown(value)} is not a job id (16 hexadecimal digits, as POST /jobs answers)")
    return value


def upload_name(filename: str | None) -> str:
    """The name the uploaded benchmark is kept under: the client's, when it is a plain file
    name (its extension tells the loader the format), never a path or one of the job's files."""
    name = filename or "benchmark"
    if not UPLOAD_NAME.fullmatch(name) or ".." in name:
        raise BadName("filename: give a plain file name (letters, digits, '.', '_', '-'; no path), e.g. benchmark.jsonl")
    return f"benchmark-{name}" if name in RESERVED else name


def policy_file(folder: Path, name: str) -> Path:
    """`folder/NAME.toml` for a policy name (a digest POST /policies answered, or the stem of a
    file the server's operator put in the folder); never a path, nor a link leading out."""
    if not POLICY_NAME.fullmatch(name):
        raise BadName("policy: a policy is named, never a path (letters, digits, '_', '-'; as POST /policies answers)")
    path = folder / f"{name}.toml"
    if path.is_symlink() or (path.exists() and path.resolve().parent != folder.resolve()):
        raise BadName(f"policy {name!r}: not a file of the server's policies folder")
    return path


def _shown(value: str) -> str:
    """A refused value as the message shows it: quoted, and cut when long."""
    return repr(value if len(value) <= 80 else value[:80] + "...")
