"""Cutting the input into shards: every discovered file in order, as one run of bytes, cut into N
contiguous runs, so shard 0 holds the first documents and documents keep their global order.

Uncompressed JSONL files, and text files read a block per document, are cut between lines
(between blocks) near the balanced cut points; compressed, Parquet and Arrow files, and text
files read whole, go to one shard whole.  Each document's metadata (`path`, `linenum`) is what
the plain build records, so each cut inside a file carries the number of its first line."""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate, pairwise
from typing import BinaryIO

from audit.index.corpusread import ReadOptions
from audit.index.errors import IndexBuildError
from audit.index.sharded.plan import Piece, PlannedSource, ShardPlan, splittable

COUNT_BLOCK = 1 << 24


def _next_line_start(handle: BinaryIO, offset: int) -> int:
    """The first line start at or after `offset` (the file's size if none)."""
    if offset <= 0:
        return 0
    handle.seek(offset - 1)
    return offset - 1 + len(handle.readline())


def _blank_line_before(handle: BinaryIO, end: int) -> bool:
    """Whether the line that ends at `end` (just after its line break) is blank."""
    at = end - 1
    while at > 0:
        begin = max(0, at - 4096)
        handle.seek(begin)
        block = handle.read(at - begin)
        newline = block.rfind(b"\n")
        if block[newline + 1 :].strip():
            return False
        if newline >= 0:
            return True
        at = begin
    return True


def next_cut(handle: BinaryIO, offset: int, size: int, blocks: bool) -> int:
    """The first place at or after `offset` a file may be cut: a line start, or with `blocks`
    a line start after a blank line, so no block is split (the file's size if none)."""
    start = _next_line_start(handle, offset)
    if not blocks or start in (0, size) or _blank_line_before(handle, start):
        return start
    handle.seek(start)
    for line in iter(handle.readline, b""):
        start += len(line)
        if not line.strip():
            return start
    return size


class _Layout:
    """The input as one run of bytes: the non-empty files one after another, in order."""

    def __init__(self, sources: tuple[PlannedSource, ...], options: ReadOptions) -> None:
        self.sources = sources
        self.files = [i for i, source in enumerate(sources) if source.bytes]
        self.starts = list(accumulate((sources[i].bytes for i in self.files), initial=0))
        self.total = self.starts[-1]
        self.split = [splittable(sources[i], options) for i in self.files]
        self.blocks = [sources[i].format == "text" for i in self.files]

    def locate(self, at: int) -> tuple[int, int]:
        """(file position in `files`, offset in it) of a byte before the end."""
        j = bisect_right(self.starts, at) - 1
        return j, at - self.starts[j]

    def at_or_after(self, at: int) -> int:
        """The first cut point at or after `at`: a file's start, or a cut inside a splittable file."""
        if at >= self.total:
            return self.total
        j, offset = self.locate(at)
        if offset == 0:
            return at
        if not self.split[j]:
            return self.starts[j + 1]
        source = self.sources[self.files[j]]
        with open(source.path, "rb") as handle:
            return self.starts[j] + next_cut(handle, offset, source.bytes, self.blocks[j])

    def near(self, target: int) -> int:
        """The cut point for a balanced `target`: the next one in a splittable file, else the
        nearer end of the file it falls in."""
        j, offset = self.locate(target)
        if offset == 0 or self.split[j]:
            return self.at_or_after(target)
        return self.starts[j] if 2 * offset < self.starts[j + 1] - self.starts[j] else self.starts[j + 1]

    def all_cuts(self) -> list[int]:
        """Every cut point strictly inside the input (a full read of the splittable files)."""
        found: list[int] = []
        for j, i in enumerate(self.files):
            if self.starts[j]:
                found.append(self.starts[j])
            if not self.split[j]:
                continue
            source = self.sources[i]
            with open(source.path, "rb") as handle:
                cut = next_cut(handle, 1, source.bytes, self.blocks[j])
                while cut < source.bytes:
                    found.append(self.starts[j] + cut)
                    cut = next_cut(handle, cut + 1, source.bytes, self.blocks[j])
        return found


def _too_many(shards: int, allowed: int) -> IndexBuildError:
    return IndexBuildError(
        f"the input cannot be cut into {shards} non-empty shards: it allows at most {allowed} "
        "(uncompressed JSONL is cut between lines and text read in blocks between blocks; compressed, Parquet and Arrow files and text read whole are never cut)"
    )


def cut_points(layout: _Layout, shards: int) -> list[int]:
    """0 = c_0 < c_1 < ... < c_N = total: each cut the cut point at or next to the balanced one
    (K * total / N), moved on when it would leave a shard empty.  When that fails, every cut
    point is listed and the cuts chosen among them."""
    total = layout.total
    cuts = [0]
    for k in range(1, shards):
        cut = max(layout.near(k * total // shards), layout.at_or_after(cuts[-1] + 1))
        if cut >= total:
            return _exact_cuts(layout, shards)
        cuts.append(cut)
    return [*cuts, total]


def _exact_cuts(layout: _Layout, shards: int) -> list[int]:
    points = layout.all_cuts()
    if len(points) + 1 < shards:
        raise _too_many(shards, len(points) + 1)
    cuts, j = [0], -1
    for k in range(1, shards):
        j = max(j + 1, min(bisect_left(points, k * layout.total // shards), len(points) - shards + k))
        cuts.append(points[j])
    return [*cuts, layout.total]


def _count_lines(handle: BinaryIO, start: int, end: int) -> int:
    handle.seek(start)
    count, left = 0, end - start
    while left > 0 and (block := handle.read(min(COUNT_BLOCK, left))):
        count += block.count(b"\n")
        left -= len(block)
    return count


def _first_lines(layout: _Layout, cuts: list[int]) -> dict[tuple[int, int], int]:
    """(source, offset) -> the line number there, for every cut inside a file, counted once
    front to back per file."""
    inside: dict[int, list[int]] = {}
    for cut in cuts[1:-1]:
        j, offset = layout.locate(cut)
        if offset:
            inside.setdefault(j, []).append(offset)
    lines: dict[tuple[int, int], int] = {}
    for j, offsets in inside.items():
        source = layout.files[j]
        with open(layout.sources[source].path, "rb") as handle:
            at, line = 0, 1
            for offset in offsets:
                line += _count_lines(handle, at, offset)
                lines[source, offset] = line
                at = offset
    return lines


def make_plan(sources: tuple[PlannedSource, ...], options: ReadOptions, shards: int, digest: str, code: str) -> ShardPlan:
    """Cut the input into `shards` contiguous, byte-balanced shards of pieces."""
    layout = _Layout(sources, options)
    if layout.total == 0:
        raise IndexBuildError("no input: every source file is empty")
    cuts = cut_points(layout, shards)
    lines = _first_lines(layout, cuts)
    planned = []
    for low, high in pairwise(cuts):
        pieces = []
        j = layout.locate(low)[0]
        while j < len(layout.files) and layout.starts[j] < high:
            source, base = layout.files[j], layout.starts[j]
            start, end = max(low, base) - base, min(high, layout.starts[j + 1]) - base
            pieces.append(Piece(source, start, end, lines.get((source, start), 1)))
            j += 1
        planned.append(tuple(pieces))
    return ShardPlan(digest=digest, code=code, options=options, sources=sources, shards=tuple(planned))
