"""Corpus-contamination auditing and provenance for multilingual LLM benchmarks.

The Python API: `audit.read(path)` gives a checked `Audit` (see `audit.result`), and
`audit.check(benchmark, corpus, **options)` runs an audit and gives the one it wrote.  It is
imported on first use, so `import audit` (and the command line, and its child processes)
loads nothing more than this module.
"""
from __future__ import annotations

from os import PathLike

__version__ = "0.1.0"
__all__ = ["Audit", "check", "read"]

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


def check(benchmark: str | PathLike[str], corpus: str | PathLike[str] | list[str | PathLike[str]], **options: object) -> Audit:
    """Audit `benchmark` against `corpus` (a registry name or an index directory, or a list
    of them) as `audit check` does, and return the audit it wrote.  `options` are the check
    command's options by name (`langs="en,fr"`, `signals`, `policy`, `out`, `workers`, ...;
    docs/python-api.md lists them); a bad one raises `audit.run.RequestError` naming it."""
    from audit.result import Audit
    from audit.run import AuditRequest, run_audit

    corpora = [corpus] if isinstance(corpus, str | PathLike) else list(corpus)
    request = AuditRequest.of(benchmark=benchmark, corpora=tuple(str(name) for name in corpora), **options)
    return Audit.from_file(run_audit(request), request.target)
