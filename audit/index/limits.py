"""What a build may use: the memory one shard's sort may take and the processes it runs on, and
sizes as people read them."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class BuildLimits:
    """`memory_bytes` bounds one shard's sort; `workers` processes parse the input (a plain build)
    or build shards at once (a sharded one on this machine), by default one per CPU."""

    memory_bytes: int = 8 << 30
    workers: int | None = None

    @property
    def shard_bytes(self) -> int:
        return shard_budget(self.memory_bytes)

    @property
    def processes(self) -> int:
        return self.workers or os.cpu_count() or 1


def shard_budget(memory_bytes: int) -> int:
    """Largest shard whose sort fits the budget: the text plus a 4- or 8-byte suffix array."""
    per_byte = 5 if memory_bytes // 5 < 2**31 else 9
    return max(1 << 16, memory_bytes // per_byte)


def describe_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    exponent = min(int(math.log(n, 1024)), 4)
    return f"{n / 1024 ** exponent:.1f} {'BKMGT'[exponent]}{'iB' if exponent else ''}"
