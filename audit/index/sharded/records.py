"""What passes between a sharded build's driver and its shards: the task one shard is sent, and
`shards/K.json`, the record a finished shard leaves, with its files' sizes and hashes."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from audit.index.corpusread import ReadOptions
from audit.index.documents import JsonValue
from audit.index.format import FileInfo, ShardInfo
from audit.index.langtable import LanguagePart
from audit.index.sharded.plan import Piece, PlannedSource

RECORDS = "shards"


@dataclass(frozen=True)
class ShardTask:
    """Everything one shard's build needs, sent to a worker process or a Ray task."""

    staging: str
    shard: int
    digest: str
    code: str
    options: ReadOptions
    sources: tuple[PlannedSource, ...]
    pieces: tuple[Piece, ...]
    budget: int


@dataclass(frozen=True)
class SourceCount:
    """Documents and skipped blank lines one shard read from one source."""

    source: int
    documents: int
    skipped_blank_lines: int


@dataclass
class ShardRecord:
    """`shards/K.json`: a finished shard, its files as written and what it read; `attempt`
    names the attempt directory that wrote it; `languages`, its documents' languages
    (`TableBuilder.part`), which the assembled index's table concatenates in shard order."""

    digest: str
    shard: ShardInfo
    files: list[FileInfo]
    sources: list[SourceCount]
    attempt: str
    languages: LanguagePart

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, JsonValue]) -> ShardRecord:
        return cls(
            digest=data["digest"],
            shard=ShardInfo(**data["shard"]),
            files=[FileInfo(**f) for f in data["files"]],
            sources=[SourceCount(**s) for s in data["sources"]],
            attempt=data["attempt"],
            languages=LanguagePart(**data["languages"]),
        )


@dataclass(frozen=True)
class ShardResult:
    """A shard task's answer: its record, and whether it was found finished (not rebuilt)."""

    record: ShardRecord
    reused: bool


def read_json(path: Path) -> dict[str, JsonValue] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record_path(staging: Path, shard: int) -> Path:
    return staging / RECORDS / f"{shard}.json"


def read_record(staging: Path, shard: int) -> ShardRecord | None:
    data = read_json(record_path(staging, shard))
    try:
        return ShardRecord.from_dict(data) if data else None
    except (KeyError, TypeError):
        return None
