"""Corpus-contamination auditing and provenance for multilingual LLM benchmarks.

The Python API: `audit.read(path)` gives a checked `Audit` (see `audit.result`).  It is
imported on first use, so `import audit` (and the command line, and its child processes)
loads nothing more than this module.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Audit", "read"]

TYPE_CHECKING = False  # typing itself is not imported: this module loads in every child process
if TYPE_CHECKING:
    from audit.result import Audit, read

_LAZY = {"Audit": "audit.result", "read": "audit.result"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'audit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
