"""Half-open position ranges, as the API backend and the near-duplicate index both gather them."""
from __future__ import annotations


def merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Position ranges with touching or overlapping ones joined, in order, and empty ones left
    out."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined
