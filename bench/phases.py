"""Where a sampled run's CPU went: py-spy's raw stacks (all processes) attributed to phases of
a check by the innermost frame found in a known place of the package, and the package's
files the most samples were in."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

# Phases of a sampled stack, decided by its innermost frame from one of these places.
PHASES = (
    ("near-duplicate signal", ("audit/neardup/", "audit/signals/minhash")),
    ("n-gram signal", ("audit/signals/ngram", "audit/corpora/", "audit/_suffix")),
    ("report", ("audit/report/",)),
    ("passing work between processes", ("multiprocessing/", "concurrent/futures/", "pickle", "copyreg")),
    ("reading, policy, writing", ("audit/",)),
)


def phase_of(frames: list[str]) -> str:
    """The phase of one sampled stack: that of its innermost frame in a known place."""
    for frame in reversed(frames):
        for phase, places in PHASES:
            if any(place in frame for place in places):
                return phase
    return PHASES[-1][0]


def innermost_place(frames: list[str]) -> str:
    """The file of a stack's innermost frame in `audit` (or its leaf), without the line."""
    inner = [frame for frame in frames if "(audit/" in frame] or frames[-1:] or ["?"]
    return inner[-1].rpartition("(")[2].rpartition(":")[0]


def phase_shares(raw: Path) -> dict:
    """Shares of py-spy's samples (all processes, idle threads left out) per phase, and the
    files of `audit` the most samples were in."""
    counts: Counter = Counter()
    places: Counter = Counter()
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            frames = [frame for frame in stack.split(";") if not frame.startswith("process ")]
            counts[phase_of(frames)] += int(count)
            places[innermost_place(frames)] += int(count)
    total = sum(counts.values()) or 1
    shares = {phase: round(counts.get(phase, 0) / total, 3) for phase, _ in PHASES}
    return shares | {"samples": total, "places": {place: round(n / total, 3) for place, n in places.most_common(8)}}
