"""The plan of a sharded build: the input files as planned, and the pieces of them each shard
reads.  `plan.json` holds it with a digest of everything that decides the build's bytes, so a
build resumes only the plan it started."""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from audit import __version__
from audit.index.corpusread import CorpusFile, ReadOptions
from audit.index.documents import JsonValue
from audit.index.errors import IndexBuildError
from audit.index.limits import describe_size, shard_budget

PLAN_KIND = "sharded-build"
PLAN_VERSION = 1
COMPRESSED = (".gz", ".zst")


@dataclass(frozen=True)
class PlannedSource:
    """An input file as planned: a change of its size or modification time makes a new plan."""

    path: str
    name: str
    format: str
    bytes: int
    mtime_ns: int


@dataclass(frozen=True)
class Piece:
    """Bytes `start` to `end` of source `source`, whose first line is line `first_line`."""

    source: int
    start: int
    end: int
    first_line: int


@dataclass(frozen=True)
class ShardPlan:
    """The cut of one build: `shards[K]` is the pieces shard K reads, in order."""

    digest: str
    code: str
    options: ReadOptions
    sources: tuple[PlannedSource, ...]
    shards: tuple[tuple[Piece, ...], ...]

    def input_bytes(self, shard: int) -> int:
        return sum(piece.end - piece.start for piece in self.shards[shard])

    def to_json(self) -> str:
        return json.dumps({"kind": PLAN_KIND, "tool": f"corpus-audit {__version__}", "plan_version": PLAN_VERSION, **asdict(self)}, ensure_ascii=False, indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, JsonValue]) -> ShardPlan:
        return cls(
            digest=data["digest"],
            code=data["code"],
            options=ReadOptions(**data["options"]),
            sources=tuple(PlannedSource(**s) for s in data["sources"]),
            shards=tuple(tuple(Piece(**p) for p in pieces) for pieces in data["shards"]),
        )


def planned_sources(files: list[CorpusFile]) -> tuple[PlannedSource, ...]:
    found = []
    for file in files:
        stat = file.path.stat()
        found.append(PlannedSource(str(file.path.absolute()), file.name, file.format, stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def plan_digest(sources: tuple[PlannedSource, ...], options: ReadOptions, shards: int, code: str) -> str:
    """A hash of everything that decides a sharded build's bytes."""
    decided = {"sources": [asdict(s) for s in sources], "options": asdict(options), "shards": shards, "code": code, "plan_version": PLAN_VERSION}
    return hashlib.blake2b(json.dumps(decided, sort_keys=True).encode(), digest_size=16).hexdigest()


def splittable(source: PlannedSource, options: ReadOptions) -> bool:
    """Whether a file may be cut: uncompressed JSONL between lines, uncompressed text read a
    block per document between blocks; everything else is read whole by one shard."""
    if Path(source.path).name.lower().endswith(COMPRESSED):
        return False
    return source.format == "jsonl" or (source.format == "text" and options.text_docs == "block")


def check_budget(plan: ShardPlan, memory_bytes: int) -> int:
    """The most one shard may hold, once every planned shard's input is known to fit it."""
    budget = shard_budget(memory_bytes)
    shards = len(plan.shards)
    largest = max(range(shards), key=plan.input_bytes)
    size = plan.input_bytes(largest)
    if size <= budget:
        return budget
    whole = [p for pieces in plan.shards for p in pieces if p.end - p.start > budget and not splittable(plan.sources[p.source], plan.options)]
    limit = f"more than --mem {describe_size(memory_bytes)} lets one shard sort ({describe_size(budget)})"
    if whole:
        source = plan.sources[whole[0].source]
        raise IndexBuildError(f"{source.path}: {describe_size(source.bytes)}, read whole by one shard, is {limit}; give a larger --mem")
    total = sum(s.bytes for s in plan.sources)
    needed = max(shards + 1, math.ceil(total / budget))
    raise IndexBuildError(f"shard {largest}'s input is {describe_size(size)}, {limit}: use --shards {needed} or more, or a larger --mem")
