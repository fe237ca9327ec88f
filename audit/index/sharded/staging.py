"""The directory a sharded build works in: `.NAME.sharded-build/`, a stable hidden sibling of the
index holding `plan.json`, the finished shards' files and their records, found again on resume."""
from __future__ import annotations

import shutil
from pathlib import Path

from audit.index.errors import IndexBuildError
from audit.index.sharded.plan import PLAN_KIND, ShardPlan
from audit.index.sharded.records import RECORDS, read_json, read_record
from audit.index.target import holds
from audit.outputs import STAGING_TAG, atomic_write_text

PLAN = "plan.json"


def staging_path(out: Path) -> Path:
    """The stable hidden sibling a sharded build of `out` works in, found again on resume."""
    out = Path(out).absolute()
    return out.parent / f".{out.name}.sharded-build"


def _is_tool_staging(staging: Path) -> bool:
    plan = read_json(staging / PLAN)
    return (staging / STAGING_TAG).is_file() or (plan is not None and plan.get("kind") == PLAN_KIND)


def check_staging(staging: Path, inputs: list[Path]) -> None:
    """Refuse a staging path the build may not use: not a directory, holding an input, or a
    directory the tool did not write."""
    if not (staging.exists() or staging.is_symlink()):
        return
    if staging.is_symlink() or not staging.is_dir():
        raise IndexBuildError(f"{staging}: is not a directory; the sharded build works there (remove it)")
    if any(holds(staging, p) for p in (Path.cwd(), *inputs)):
        raise IndexBuildError(f"{staging}: holds this command's input or the current directory; the sharded build works there")
    if not _is_tool_staging(staging):
        raise IndexBuildError(f"{staging}: exists and was not written by audit; refusing to replace it (the sharded build works there; remove it yourself)")


def resumable(staging: Path, digest: str) -> ShardPlan | None:
    data = read_json(staging / PLAN)
    if not data or data.get("digest") != digest or not (staging / RECORDS).is_dir():
        return None
    try:
        return ShardPlan.from_dict(data)
    except (KeyError, TypeError):
        return None


def start_staging(staging: Path, plan: ShardPlan) -> None:
    """A fresh staging directory for `plan`; `plan.json` comes last, so its presence means the
    directory is ready."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    (staging / STAGING_TAG).touch()
    (staging / RECORDS).mkdir()
    atomic_write_text(staging / PLAN, plan.to_json())


def finished_count(staging: Path, plan: ShardPlan) -> int:
    return sum(1 for k in range(len(plan.shards)) if (record := read_record(staging, k)) and record.digest == plan.digest)


def clear_work(staging: Path) -> None:
    """Remove what only the build needed, leaving the index files and the manifest."""
    for attempt in staging.glob("shard-*.attempt-*"):
        shutil.rmtree(attempt, ignore_errors=True)
    shutil.rmtree(staging / RECORDS)
    (staging / PLAN).unlink()
