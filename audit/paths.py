"""Where the tool keeps what it builds or caches on a user's machine."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$AUDIT_CACHE_DIR, else the user's cache directory ($XDG_CACHE_HOME or ~/.cache)."""
    configured = os.environ.get("AUDIT_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "corpus-audit"


# The registry read when no --registry is given, relative to where the tool runs.
DEFAULT_REGISTRY = Path("indexes/corpora.toml")


def registry_file(given: Path | None) -> Path | None:
    """The registry file to read: the one given, else ./indexes/corpora.toml if there is one."""
    return given or (DEFAULT_REGISTRY if DEFAULT_REGISTRY.exists() else None)
