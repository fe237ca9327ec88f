"""The near-duplicate index on disk: its layout, its manifest, and the checks made before any
array is mapped (format, sizes, the source index's fingerprint, the parameters a policy expects)."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from audit.errors import AuditError
from audit.index.format import MANIFEST, FileInfo, IndexManifest, hash_file
from audit.neardup.tokens import SCRIPT_NAMES, NearDupParams, ShingleSizes

NEARDUP_DIR = "minhash"
MANIFEST_NAME = "manifest.json"
FORMAT = "corpus-audit-minhash"
FORMAT_VERSION = 1
# The tokeniser and shingle hash below: an index built by another version is refused.
TOKENS_VERSION = 1
ARRAYS = ("windows.npy", "signatures.npy", "bands.npy", "band_windows.npy")
WINDOW_DTYPE = np.dtype([("document", "<u8"), ("offset", "<u8"), ("length", "<u4"), ("shingles", "<u2")])

ProgressHook = Callable[[str, int, int], None]
# A policy's `[minhash.index]` table: build parameters, `shingle` a table of sizes by script.
Expected = Mapping[str, int | str | Mapping[str, int] | None]


class NearDupError(AuditError):
    """The near-duplicate index is missing, damaged, built otherwise than asked, or could not
    be queried; the message names the file or the parameter and says what to do."""



@dataclass(kw_only=True)
class NearDupManifest:
    """`minhash/manifest.json`."""

    format: str = FORMAT
    version: int = FORMAT_VERSION
    tokens: int = TOKENS_VERSION
    params: dict[str, Any]
    hash_family: dict[str, Any]
    normalization: str
    source: dict[str, Any]
    windows: int
    documents: int
    created: str
    tool: str
    build_seconds: float
    code: str
    files: list[FileInfo] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> NearDupManifest:
        data = dict(data)
        data["files"] = [FileInfo(**f) for f in data.get("files", [])]
        return cls(**data)



def damaged(path: Path, problem: str, directory: Path) -> NearDupError:
    return NearDupError(
        f"{path}: {problem}. The near-duplicate index is damaged: rebuild it (`audit index minhash {directory} --force`), "
        f"or run `audit index verify {directory}` to check every file"
    )


def load_manifest(directory: Path) -> NearDupManifest:
    path = directory / NEARDUP_DIR / MANIFEST_NAME
    if not path.parent.is_dir():
        raise NearDupError(f"{directory}: has no near-duplicate index; build one with `audit index minhash {directory}`")
    try:
        return NearDupManifest.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise damaged(path, "is missing", directory) from None
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise damaged(path, f"not a readable near-duplicate manifest ({error})", directory) from None


def check_files(directory: Path, manifest: NearDupManifest, index_manifest: IndexManifest | None) -> NearDupParams:
    """Sizes, the source fingerprint and the tokeniser, before any array is mapped."""
    folder = directory / NEARDUP_DIR
    if (manifest.format, manifest.version) != (FORMAT, FORMAT_VERSION) or manifest.tokens != TOKENS_VERSION:
        raise NearDupError(f"{folder / MANIFEST_NAME}: format {manifest.format} {manifest.version} (tokens {manifest.tokens}) is not the one this version reads; rebuild it (`audit index minhash {directory} --force`)")
    recorded = {f.name: f for f in manifest.files}
    if set(recorded) != set(ARRAYS):
        raise damaged(folder / MANIFEST_NAME, f"lists {sorted(recorded)}, not {list(ARRAYS)}", directory)
    for name in ARRAYS:
        path = folder / name
        if not path.is_file():
            raise damaged(path, "is missing", directory)
        if path.stat().st_size != recorded[name].bytes:
            raise damaged(path, f"{path.stat().st_size:,} bytes, but the manifest records {recorded[name].bytes:,}", directory)
    if index_manifest is None or manifest.source.get("fingerprint") != index_manifest.fingerprint:
        found = index_manifest.fingerprint if index_manifest else "none"
        raise NearDupError(f"{folder}: built from the index with fingerprint {manifest.source.get('fingerprint')}, but {directory} has {found}; rebuild it (`audit index minhash {directory} --force`)")
    entry = {f.name: f for f in index_manifest.minhash}.get(f"{NEARDUP_DIR}/{MANIFEST_NAME}")
    size = (folder / MANIFEST_NAME).stat().st_size
    if entry is None or entry.bytes != size:
        raise NearDupError(f"{folder / MANIFEST_NAME}: not the near-duplicate index {directory / MANIFEST} records; rebuild it (`audit index minhash {directory} --force`)")
    try:
        return NearDupParams.model_validate(manifest.params)
    except ValidationError as error:
        raise damaged(folder / MANIFEST_NAME, f"its params are invalid ({error.errors()[0]['msg']})", directory) from None


def map_array(path: Path, directory: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise damaged(path, f"not a readable array ({error})", directory) from None



def check_expected(directory: Path, params: NearDupParams, expect: Expected) -> None:
    """Refuse an index built otherwise than a policy expects (its `[minhash.index]` table)."""
    if expect.get("shingle") is not None:
        wanted_sizes = ShingleSizes.model_validate(expect["shingle"])
        for script in SCRIPT_NAMES[1:]:
            if params.shingle.size(script) != wanted_sizes.size(script):
                raise NearDupError(
                    f"{directory / NEARDUP_DIR}: built with {script} shingles of {params.shingle.size(script)} tokens, but the policy expects {wanted_sizes.size(script)}; "
                    f"rebuild it to match (`audit index minhash {directory} --force --policy ...`) or change the policy"
                )
    built = params.model_dump(exclude={"shingle"})
    for key, wanted in expect.items():
        if key == "shingle" or wanted is None:
            continue
        if key not in built:
            raise NearDupError(f"{directory / NEARDUP_DIR}: no build parameter {key!r} (known: {', '.join(built)})")
        if built[key] != wanted:
            raise NearDupError(
                f"{directory / NEARDUP_DIR}: built with {key} = {built[key]!r}, but the policy expects {wanted!r}; "
                f"rebuild it to match (`audit index minhash {directory} --force`) or change the policy"
            )


def manifest_digest(directory: Path) -> str:
    return hash_file(Path(directory) / NEARDUP_DIR / MANIFEST_NAME)


