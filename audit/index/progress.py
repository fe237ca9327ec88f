"""How a build reports its progress: a hook called with the stage, the work done and the whole.

The stages of a build are named here; the hook's callers elsewhere (the language table added
to an old index, the near-duplicate index) name their own stages with it.
"""
from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

ProgressHook = Callable[[str, int, int], None]


class Stage(StrEnum):
    """`READ`: input bytes read; `SORT`: shards sorted; `SHARDS`: shards of a sharded build finished."""

    READ = "read"
    SORT = "sort"
    SHARDS = "shards"
