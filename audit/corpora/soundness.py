"""The cheap checks every open of an index runs beyond names and sizes: no file in the index
directory that the index did not write, and a sample of the suffix array in order.

A table scrambled at its own size passes every size check and would answer counts and matches
wrongly without a word; comparing a few hundred sampled suffixes in rank order catches it in
about a millisecond (see the README), where re-hashing every byte (`audit index verify`) takes
as long as reading the whole index.  What a sample cannot catch, such as a handful of bytes
changed in the text or a pair of neighbouring pointers swapped, only `verify` finds.
"""
from __future__ import annotations

import mmap
import os
import re
from pathlib import Path

import numpy as np

from audit.index.format import INDEX_FILE, MANIFEST, IndexManifest
from audit.outputs import MARKER, marker_files

# What an open has checked, and what it cannot: `audit index info` prints this with the index.
OPEN_CHECKS = (
    "opened after the checks every open runs: file names and sizes against the manifest, no file the index did not write, "
    "offsets in order and on document separators, and a sample of each suffix array in order; damage that keeps every size "
    "and the sampled order (a changed byte of text or metadata, two neighbouring pointers swapped) is found only by `audit index verify`, "
    "which re-hashes every file"
)
# Ranks sampled per shard: a chain of ranks spread over the whole table, and as many adjacent pairs.
SAMPLED_RANKS = 256
# Bytes of two suffixes compared; suffixes equal that far are left undecided.
COMPARED_BYTES = 256
# The temporary sibling of the marker or manifest while the tool rewrites it in place.
_REWRITE = re.compile(rf"\.({re.escape(MARKER)}|{re.escape(MANIFEST)})\.\d+\.tmp")


def _present(path: Path) -> list[str]:
    """Every entry of the directory tree that is not a directory, named relative to it; links
    to directories included, and not followed."""
    found = []
    for folder, directories, files in os.walk(path):
        base = Path(folder).relative_to(path)
        found += [(base / name).as_posix() for name in files]
        found += [(base / name).as_posix() for name in directories if (Path(folder) / name).is_symlink()]
    return sorted(found)


def foreign_files(path: Path, manifest: IndexManifest | None) -> list[str]:
    """Files in an index directory that its marker and manifest do not list: a user's file put
    there, which an open refuses rather than leave a directory `--force` would not replace, or
    a file `verify` would call damage.  Index files by name (`table.0`) are left to the caller,
    which checks them against the shards; an index with neither list (infini-gram's indexer
    wrote it) has only those names checked."""
    listed = marker_files(path, "index")
    recorded = [f.name for f in manifest.recorded_files()] if manifest is not None else []
    if listed is None and not recorded:
        return []
    allowed = {*(listed or []), *recorded, MARKER, MANIFEST}
    return [name for name in _present(path) if name not in allowed and not INDEX_FILE.fullmatch(name) and not _REWRITE.fullmatch(name)]


def _pointers(table: mmap.mmap, ratio: int, ranks: np.ndarray) -> np.ndarray:
    raw = np.frombuffer(table, dtype=np.uint8)
    columns = ranks[:, None] * ratio + np.arange(ratio)
    weights = np.uint64(1) << (np.arange(ratio, dtype=np.uint64) * np.uint64(8))
    return (raw[columns].astype(np.uint64) * weights).sum(axis=1).astype(np.int64)


def _sampled_pairs(count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(earlier ranks, later ranks): a chain of sorted random ranks spanning the table, and
    random adjacent pairs; drawn from a seed of the table's length, so an open is repeatable."""
    rng = np.random.default_rng(count)
    chain = np.unique(np.concatenate(([0, count - 1], rng.integers(0, count, SAMPLED_RANKS))))
    adjacent = np.unique(np.concatenate(([0, count - 2], rng.integers(0, count - 1, SAMPLED_RANKS))))
    return [(chain[:-1], chain[1:]), (adjacent, adjacent + 1)]


def suffix_order_problem(data: mmap.mmap, table: mmap.mmap, ratio: int, width: int) -> str | None:
    """What is wrong with a sample of a shard's suffix array, or None: every sampled pointer
    within the text and on a token boundary, and (for byte-level tokens, whose order is the
    bytes' order) each sampled pair of suffixes in rank order."""
    count = len(table) // ratio
    if count < 2:
        return None
    for earlier, later in _sampled_pairs(count):
        first, second = _pointers(table, ratio, earlier), _pointers(table, ratio, later)
        for ranks, pointers in ((earlier, first), (later, second)):
            bad = np.flatnonzero((pointers >= len(data)) | (pointers % width != 0))
            if len(bad):
                rank = int(ranks[bad[0]])
                return f"the pointer at rank {rank:,} is {int(pointers[bad[0]]):,}, outside the text ({len(data):,} bytes) or off a token boundary"
        if width != 1:
            continue
        for a, b, p, q in zip(earlier.tolist(), later.tolist(), first.tolist(), second.tolist(), strict=True):
            if p == q or data[p : p + COMPARED_BYTES] > data[q : q + COMPARED_BYTES]:
                return f"the suffixes at ranks {a:,} and {b:,} (bytes {p:,} and {q:,}) are out of order; the suffix array is scrambled"
    return None
