"""Where the tool keeps what it builds or caches on a user's machine."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from audit.errors import UnreadableFile, read_toml_file


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


def registry_entries(given: Path | None, table: str, error: type[Exception]) -> tuple[Path | None, dict[str, Any]]:
    """The registry file read (see `registry_file`) and its `[table.NAME]` entries, raising
    `error` for a file that cannot be read or a `table` that is not a table of entries."""
    path = registry_file(given)
    if path is None:
        return None, {}
    try:
        data = read_toml_file(path, "registry file")
    except UnreadableFile as problem:
        raise error(str(problem)) from None
    entries = data.get(table, {})
    if not isinstance(entries, dict):
        raise error(f"{path}: {table} must be a table of entries")
    return path, entries
