"""An uploaded benchmark kept in its job's folder, inflated there when it is gzip or Zstandard.

A compressed upload is inflated once, at upload, in bounded chunks and to at most
`max_inflated_bytes` of output: a small body that inflates without end (a "zip bomb") is
refused with 413 once that much has come out, having cost that much disk and one chunk of
memory, and the job then reads the plain file."""
from __future__ import annotations

import gzip
import io
import os
import tempfile
import zlib
from pathlib import Path
from typing import BinaryIO

import zstandard

from audit.errors import AuditError
from audit.outputs import atomic_write_bytes

GZIP, ZSTD = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"
CHUNK = 1 << 20


class UploadError(AuditError):
    """An upload that cannot be kept; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def store_upload(directory: Path, name: str, body: bytes, max_inflated_bytes: int) -> str:
    """Keep `body` in `directory` under `name` (without its .gz/.zst ending when it is
    compressed, then kept inflated); returns the name kept."""
    if body.startswith(GZIP):
        kind, stream = "gzip", gzip.GzipFile(fileobj=io.BytesIO(body))
    elif body.startswith(ZSTD):
        kind, stream = "Zstandard", zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body), read_across_frames=True)
    else:
        atomic_write_bytes(directory / name, body)
        return name
    plain = name.removesuffix(".gz").removesuffix(".zst").removesuffix(".zstd") or "benchmark"
    with stream:
        _inflate(stream, directory / plain, kind, max_inflated_bytes)
    return plain


def _inflate(stream: BinaryIO, target: Path, kind: str, limit: int) -> None:
    handle = tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False)  # noqa: SIM115 (renamed or removed below)
    try:
        with handle:
            written = 0
            while chunk := _read(stream, kind):
                written += len(chunk)
                if written > limit:
                    raise UploadError(f"the {kind} upload inflates to over {limit} bytes, the limit (`audit serve --max-inflated-bytes`)", 413)
                handle.write(chunk)
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def _read(stream: BinaryIO, kind: str) -> bytes:
    try:
        return stream.read(CHUNK)
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as error:
        raise UploadError(f"the upload is not a whole {kind} stream ({error})") from None
