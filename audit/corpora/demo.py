"""The bundled `demo` corpus: documents shipped in the package, indexed on first use.

The index (with its near-duplicate index) lives in the cache directory under a name derived from the shipped files, so a
changed corpus gets a fresh index and concurrent first uses never see a half-built one.  Being
the tool's own cache, it is checked rather than trusted: every use checks its sizes and offsets
(as every open does); a use by code other than the code that last verified it re-hashes every
file (the stamp beside it records which code that was); and a damaged one is rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError
from audit.corpora.verify import verify_index
from audit.index.build import build_index
from audit.index.errors import IndexBuildError
from audit.index.format import MANIFEST
from audit.index.progress import ProgressHook
from audit.index.stamp import code_fingerprint
from audit.neardup import NEARDUP_DIR, NearDupError, add_neardup
from audit.outputs import atomic_write_text
from audit.timestamps import utc_timestamp

DEMO = "demo"


def demo_sources() -> list[Path]:
    root = Path(str(resources.files("audit").joinpath("data/demo/corpus")))
    return sorted(root.glob("*.jsonl.gz"))


def demo_location(cache: Path, sources: list[Path]) -> Path:
    digest = hashlib.blake2b(digest_size=8)
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.stat().st_size.to_bytes(8, "little"))
    return cache / "indexes" / f"demo-{digest.hexdigest()}"


def stamp_path(index: Path) -> Path:
    """Beside the index, not in it, so the index holds only what its manifest lists."""
    return index.with_name(f"{index.name}.verified.json")


def _stamp(index: Path) -> dict:
    """What a verification vouches for: this manifest, checked by this code."""
    manifest = hashlib.blake2b((index / MANIFEST).read_bytes(), digest_size=16).hexdigest()
    return {"code": code_fingerprint(), "manifest": manifest}


def _record_verified(index: Path) -> None:
    atomic_write_text(stamp_path(index), json.dumps({**_stamp(index), "verified": utc_timestamp()}, indent=1) + "\n")


def _verified(index: Path) -> bool:
    try:
        stamp, current = json.loads(stamp_path(index).read_text(encoding="utf-8")), _stamp(index)
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and {key: stamp.get(key) for key in current} == current


def cache_problem(index: Path) -> str | None:
    """Why the cached index must be rebuilt, or None: a failed open, or, when no stamp vouches
    for it under the running code, a failed or impossible verification."""
    try:
        LocalIndex(index)
    except IndexOpenError as error:
        return error.detail
    if _verified(index):
        return None
    verification = verify_index(index)
    if not verification.hashed:
        return "no recorded file hashes to verify it against"
    if verification.damaged:
        first = verification.damaged[0]
        return f"{first.name}: {first.status}"
    if verification.structure:
        return verification.structure
    _record_verified(index)
    return None


def _note(message: str) -> None:
    print(f"audit: {message}", file=sys.stderr)


def _add_neardup(target: Path) -> None:
    """The demo index carries its near-duplicate index (one cached by an older version gets one
    added), so every signal runs against `demo` out of the box."""
    try:
        add_neardup(LocalIndex(target), force=True)
    except (IndexOpenError, NearDupError) as error:
        raise IndexBuildError(f"{target}: cannot add the near-duplicate index: {error}") from None
    _record_verified(target)


def demo_index(cache: Path, progress: ProgressHook | None = None, notify: Callable[[str], None] = _note, steps: Callable[[str], None] = _note) -> Path:
    """The demo index in `cache`, built on first use and rebuilt (saying so through `notify`)
    when the cached one is damaged.  The build's steps are told through `steps`: it takes
    seconds, and a first run must not look stuck."""
    sources = demo_sources()
    target = demo_location(cache, sources)
    problem = cache_problem(target) if target.exists() else ""
    if problem is None:
        if not (target / NEARDUP_DIR).exists():
            _add_neardup(target)
        return target
    started = time.perf_counter()
    steps(f"building the demo index at {target} (once; later runs reuse it) ...")
    try:
        build_index(sources, target, force=True, progress=progress)
        steps(f"adding the demo index's near-duplicate index ({time.perf_counter() - started:.1f} s so far) ...")
        _add_neardup(target)
    except IndexBuildError as error:
        raise IndexBuildError(f"the cached demo index was unusable ({problem}) and cannot be rebuilt: {error}" if problem else str(error)) from None
    if problem:
        notify(f"the cached demo index was unusable ({problem}); rebuilt it at {target}")
    steps(f"built the demo index in {time.perf_counter() - started:.1f} s")
    return target
