"""The near-duplicate index: MinHash signatures of overlapping windows of every document of a
local index, banded for LSH, so that a benchmark field that was lightly edited, re-punctuated,
reordered or partly copied is still found where exact n-gram matching misses it.

Why it is built this way (the figures are measured by `tests/test_minhash.py` and
`bench/bench_minhash.py`, and written up in the README):

* **Shingles follow the script.**  Text is normalised as the n-gram signal queries it
  (`audit.text.normalize`), then cut into tokens as `audit.text.units` cuts it: words in
  space-separated scripts, single characters in Han, Kana, Thai and the other unsegmented
  scripts.  Punctuation, symbols and spaces only separate tokens, and tokens are case-folded,
  so a copy with other punctuation, spacing or capitals has the same shingles.  A shingle is
  the k tokens starting at a token, k set by that token's script (`ShingleSizes`): 3 words, 3
  Han or Kana characters, 5 characters of the alphabetic unsegmented scripts.  Trigrams, not
  bigrams: with bigrams unrelated text reached containment 0.45 (function-word pairs, Japanese
  `されたのは何年ですか` templates); with trigrams it stays under the thresholds while one
  altered word in seven still leaves over half of a field's shingles.
* **Windows, not whole documents.**  Items are short and documents long: a 12-word question
  inside a 5,000-word article has Jaccard similarity 0.002 with it, far below what any MinHash
  of a practical size resolves, and LSH Ensemble's containment search over whole documents
  has the same limit (its partitions rescale the threshold, not the sketch's resolution), gives
  no position inside the document, and keeps every band in Python dictionaries.  So every
  document is cut into windows of `window` tokens every `stride` tokens (every token in
  `window / stride` windows), each stored with its document number and byte offset and length.
  A field longer than a window is queried as chunks of `window` tokens starting at every token,
  one of which lines up with an indexed window; a shorter one is queried whole.
* **Candidates, then the text itself.**  LSH with `bands` bands of `rows` rows makes a window
  a candidate with probability 1 - (1 - s^rows)^bands at Jaccard similarity s.  A short field
  inside a 32-token window has low Jaccard even when copied whole (9 shingles of 32: 0.28, less
  once edited), so the default (32 bands of 1 row over 32 permutations) rises early: 0.81 at
  s = 0.05, 0.97 at 0.1, 0.999 at 0.2.  Precision is not left to the sketch: candidates are
  ranked by their estimated Jaccard with the best chunk, and the best `candidates` of them are
  read back from the corpus and compared shingle by shingle.  The figures a policy rule reads
  are exact: the containment |Q ∩ S| / |Q| of the field's shingles Q in the best span S of the
  document of the field's own length, and their Jaccard |Q ∩ S| / |Q ∪ S|.
* **Hash families never mix.**  `datasketch` is the reference: signatures are exactly
  `datasketch.MinHash(num_perm, seed, scheme="affine32")` of the 32-bit shingle hashes,
  computed for all windows at once from per-block minima.  `rensa` (Rust) sketches faster and
  is offered as `sketcher = "rensa"`.  The manifest records the family, its version and every
  parameter, and an index is refused to a query that expects another.

On disk, inside the index directory (`DIR/minhash/`): `windows.npy` (document, byte offset,
byte length and shingle count of each window), `signatures.npy` (windows x num_perm), and per
band the windows' band keys sorted (`bands.npy`) with the window each belongs to
(`band_windows.npy`), so a lookup is a binary search in a memory map and opening costs nothing.
`manifest.json` records the parameters, the hash family, the source index's fingerprint and
every file's size and blake2b hash; the index's own `audit-index.json` lists the files too, so
`audit index verify` hashes them.  The same bands can be loaded into Redis through datasketch's
own storage backend (`RedisLSH`), to share one LSH between processes and machines.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import multiprocessing
import os
import shutil
import struct
import time
import unicodedata
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from audit import __version__
from audit.children import WorkerPool
from audit.corpora.base import DocumentHit, Occurrence
from audit.corpora.local import IndexOpenError, LocalIndex
from audit.indexing import MANIFEST, FileInfo, IndexManifest, hash_file, read_manifest
from audit.outputs import STAGING_TAG, atomic_write_text, discard_staging, marker_files, rewrite_marker, staging_directory
from audit.ranges import merged
from audit.text import UNSEGMENTED_SCRIPTS, script_of
from audit.timestamps import utc_timestamp

NEARDUP_DIR = "minhash"
MANIFEST_NAME = "manifest.json"
FORMAT = "corpus-audit-minhash"
FORMAT_VERSION = 1
# The tokeniser and shingle hash below: an index built by another version is refused.
TOKENS_VERSION = 1
ARRAYS = ("windows.npy", "signatures.npy", "bands.npy", "band_windows.npy")
WINDOW_DTYPE = np.dtype([("document", "<u8"), ("offset", "<u8"), ("length", "<u4"), ("shingles", "<u2")])
TASK_BYTES = 1 << 21
BATCH_BYTES = 1 << 20
# LSH candidates of a query compared signature by signature, the most band collisions first.
ESTIMATED = 256

ProgressHook = Callable[[str, int, int], None]


class NearDupError(Exception):
    """The near-duplicate index is missing, damaged, built otherwise than asked, or could not
    be queried; the message names the file or the parameter and says what to do."""


# Tokens: learned per code point on first sight, so no table of all of Unicode is built.

SEPARATOR, WORD, CHARACTER, _UNSEEN = 0, 1, 2, 255
SCRIPT_NAMES = (
    "other", "latin", "cyrillic", "greek", "arabic", "hebrew", "devanagari", "hangul",
    "han", "kana", "thai", "lao", "khmer", "myanmar", "tibetan", "fullwidth",
)  # fmt: skip
_SCRIPT_IDS = {name: i for i, name in enumerate(SCRIPT_NAMES)}
_OWN_UNIT = UNSEGMENTED_SCRIPTS | {"fullwidth"}


class _CodePoints:
    """Per code point: separator (punctuation, symbol, space, control), word character, or a
    character that is a token by itself (`audit.text`'s unsegmented scripts); its simple case
    fold; its script.  Filled in for the code points a text holds, the first time they occur."""

    def __init__(self) -> None:
        self.kind = np.full(0x110000, _UNSEEN, dtype=np.uint8)
        self.fold = np.arange(0x110000, dtype=np.uint32)
        self.script = np.zeros(0x110000, dtype=np.uint8)

    def learn(self, points: np.ndarray) -> None:
        unseen = points[self.kind[points] == _UNSEEN]
        for point in np.unique(unseen).tolist():
            char = chr(point)
            category = unicodedata.category(char)
            if category[0] in "PSZ" or category == "Cc":
                self.kind[point] = SEPARATOR
                continue
            script = script_of(char)
            folded = char.casefold()
            if len(folded) == 1:
                self.fold[point] = ord(folded)
            self.script[point] = _SCRIPT_IDS.get(script, 0)
            self.kind[point] = CHARACTER if script in _OWN_UNIT else WORD


_CODE_POINTS: list[_CodePoints] = []


def _code_points() -> _CodePoints:
    if not _CODE_POINTS:
        _CODE_POINTS.append(_CodePoints())
    return _CODE_POINTS[0]


_U32 = np.uint32(0xFFFFFFFF)
_MIX = np.uint64(0x9E3779B97F4A7C15)
# Weights of a token's characters by position (a polynomial hash; positions past 63 share one).
_POWERS = np.array([pow(0x100000001B3, i, 1 << 64) for i in range(64)], dtype=np.uint64)


def _fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: spreads structured inputs over all bits."""
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser, which datasketch's affine32 scheme applies before permuting."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


@dataclass(frozen=True)
class Tokens:
    """Tokens of a text: character start and end, a 64-bit hash of the case-folded token, and
    the script id (`SCRIPT_NAMES`) of its first character."""

    starts: np.ndarray
    ends: np.ndarray
    hashes: np.ndarray
    scripts: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)


def code_points(text: str) -> np.ndarray:
    """The text's code points; undecodable bytes kept as lone surrogates (one per byte)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def tokenize_points(points: np.ndarray) -> Tokens:
    """Tokens of a code point array, all at once: a word is a run of word characters, an
    unsegmented-script character is a token alone, separators only separate."""
    table = _code_points()
    table.learn(points)
    kind = table.kind[points]
    word = kind == WORD
    own = kind == CHARACTER
    first = own.copy()
    first[0:1] |= word[0:1]
    first[1:] |= word[1:] & ~word[:-1]
    last = own.copy()
    last[-1:] |= word[-1:]
    last[:-1] |= word[:-1] & ~word[1:]
    starts, ends = np.flatnonzero(first), np.flatnonzero(last) + 1
    if not len(starts):
        empty = np.zeros(0, dtype=np.int64)
        return Tokens(empty, empty, np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint8))
    token = np.cumsum(first) - 1
    position = np.arange(len(points)) - starts[np.maximum(token, 0)]
    weights = _POWERS[np.clip(position, 0, len(_POWERS) - 1)]
    values = np.where(kind != SEPARATOR, (table.fold[points].astype(np.uint64) + np.uint64(1)) * weights, np.uint64(0))
    sums = np.add.reduceat(values, starts)
    hashes = _fmix64(sums ^ ((ends - starts).astype(np.uint64) * _MIX))
    return Tokens(starts, ends, hashes, table.script[points[starts]])


def tokenize(text: str) -> Tokens:
    return tokenize_points(code_points(text))


class _Table(BaseModel):
    """Parameters as they are recorded: unknown keys and loose types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ShingleSizes(_Table):
    """Tokens per shingle, by the script of the shingle's first token: words for
    space-separated scripts, characters for the unsegmented ones; a script left unset uses
    `default` (fullwidth forms use `han`)."""

    default: int = Field(3, ge=1, le=16)
    arabic: int | None = Field(None, ge=1, le=16)
    cyrillic: int | None = Field(None, ge=1, le=16)
    devanagari: int | None = Field(None, ge=1, le=16)
    greek: int | None = Field(None, ge=1, le=16)
    hangul: int | None = Field(None, ge=1, le=16)
    hebrew: int | None = Field(None, ge=1, le=16)
    latin: int | None = Field(None, ge=1, le=16)
    han: int | None = Field(3, ge=1, le=16)
    kana: int | None = Field(3, ge=1, le=16)
    thai: int | None = Field(5, ge=1, le=16)
    lao: int | None = Field(5, ge=1, le=16)
    khmer: int | None = Field(5, ge=1, le=16)
    myanmar: int | None = Field(5, ge=1, le=16)
    tibetan: int | None = Field(5, ge=1, le=16)

    def size(self, script: str) -> int:
        name = "han" if script == "fullwidth" else script
        value = getattr(self, name) if name in type(self).model_fields and name != "default" else None
        return value or self.default

    def table(self) -> np.ndarray:
        return np.array([self.size(name) for name in SCRIPT_NAMES], dtype=np.int64)


Sketcher = Literal["datasketch", "rensa"]


class NearDupParams(_Table):
    """How a near-duplicate index is built; all of it is recorded in its manifest, and a query
    uses the index's own.  `window` must be a multiple of `stride`."""

    sketcher: Sketcher = "datasketch"
    num_perm: int = Field(32, ge=2, le=1024)
    bands: int = Field(32, ge=1)
    rows: int = Field(1, ge=1)
    seed: int = Field(1, ge=0, lt=2**32)
    window: int = Field(32, ge=2, le=65535)
    stride: int = Field(16, ge=1)
    shingle: ShingleSizes = Field(default_factory=ShingleSizes)

    @model_validator(mode="after")
    def _consistent(self) -> NearDupParams:
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows ({self.bands} x {self.rows}) exceeds num_perm ({self.num_perm})")
        if self.window % self.stride:
            raise ValueError(f"window ({self.window}) must be a multiple of stride ({self.stride})")
        return self

    def candidate_probability(self, similarity: float) -> float:
        """The LSH S-curve: the chance that a window at this Jaccard similarity is a candidate."""
        return 1 - (1 - similarity**self.rows) ** self.bands


def shingle_hashes(tokens: Tokens, sizes: np.ndarray, limits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The 32-bit hash of the shingle starting at each token, and whether one starts there (it
    needs k tokens before `limits`, the end of the token's document; default: the text's end)."""
    count = len(tokens)
    hashes = np.zeros(count, dtype=np.uint64)
    valid = np.zeros(count, dtype=bool)
    if not count:
        return hashes.astype(np.uint32), valid
    ends = np.full(count, count) if limits is None else limits
    k = sizes[tokens.scripts]
    index = np.arange(count)
    for size in np.unique(k).tolist():
        at = index[(k == size) & (index + size <= ends)]
        combined = tokens.hashes[at].copy()
        for step in range(1, size):
            combined = combined * _MIX + tokens.hashes[at + step]
        hashes[at] = combined ^ np.uint64(size)
        valid[at] = True
    return (_fmix64(hashes) & np.uint64(0xFFFFFFFF)).astype(np.uint32), valid


@dataclass(frozen=True)
class Shingled:
    """A text's tokens and the shingle (if any) starting at each."""

    tokens: Tokens
    hashes: np.ndarray
    valid: np.ndarray

    @property
    def positions(self) -> int:
        return len(self.hashes)

    def distinct(self) -> np.ndarray:
        return np.unique(self.hashes[self.valid])


def shingle_text(text: str, sizes: ShingleSizes) -> Shingled:
    tokens = tokenize(text)
    hashes, valid = shingle_hashes(tokens, sizes.table())
    return Shingled(tokens, hashes, valid)


# Sketching: both families give one uint32 signature row per set of shingle positions.


class _Family:
    """One hash family with its parameters: how a signature row is computed."""

    def __init__(self, params: NearDupParams, permutations: Sequence[Sequence[int]] | None = None) -> None:
        """`permutations`: datasketch's (a, b) as an index's manifest records them, so that
        opening an index needs no datasketch import (a second of start-up); drawn by datasketch
        when not given."""
        self.params = params
        if params.sketcher == "rensa":
            self._rensa = _import_rensa()
            return
        if permutations is None:
            from datasketch import MinHash

            permutations = MinHash(num_perm=params.num_perm, seed=params.seed, scheme="affine32").permutations
        a, b = (np.asarray(row, dtype=np.uint32) for row in permutations)
        if a.shape != (params.num_perm,) or b.shape != (params.num_perm,):
            raise NearDupError(f"the recorded permutations are not 2 x {params.num_perm} numbers")
        self._a, self._b = a, b

    def describe(self) -> dict[str, Any]:
        if self.params.sketcher == "rensa":
            return {"sketcher": "rensa", "library": f"rensa {_version('rensa')}", "algorithm": f"RMinHash v{self._rensa.RMinHash.ALGORITHM_VERSION}", "seed": self.params.seed, "num_perm": self.params.num_perm}
        return {
            "sketcher": "datasketch",
            "library": f"datasketch {_version('datasketch')}",
            "algorithm": "MinHash affine32 (a*fmix32(h)+b mod 2^32)",
            "seed": self.params.seed,
            "num_perm": self.params.num_perm,
            "permutations": [self._a.tolist(), self._b.tolist()],
        }

    def permuted(self, hashes: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """datasketch: every position's permuted hash values (invalid positions at the maximum)."""
        values = _fmix32(hashes)[:, None] * self._a[None, :] + self._b[None, :]
        values[~valid] = _U32
        return values

    def _rensa_ranges(self, hashes: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        if not len(starts):
            return np.zeros((0, self.params.num_perm), dtype=np.uint32)
        kept = np.flatnonzero(valid)
        lo, hi = np.searchsorted(kept, starts), np.searchsorted(kept, ends)
        lengths = hi - lo
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        flat = kept[np.repeat(lo - offsets[:-1], lengths) + np.arange(offsets[-1])]
        matrix = self._rensa.RMinHash.digest_matrix_from_flat_token_hashes(
            hashes[flat].astype(np.uint64), offsets.astype(np.uint64), self.params.num_perm, self.params.seed
        )
        return np.array(matrix.to_rows(), dtype=np.uint32).reshape(len(starts), self.params.num_perm)

    def windows(self, hashes: np.ndarray, valid: np.ndarray, blocks: np.ndarray, first: np.ndarray, last: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Document windows: with datasketch, the minimum over each window's blocks of `stride`
        positions, so each position is permuted once however many windows hold it."""
        if self.params.sketcher == "rensa":
            return self._rensa_ranges(hashes, valid, starts, ends)
        minima = np.minimum.reduceat(self.permuted(hashes, valid), blocks, axis=0)
        span = self.params.window // self.params.stride
        result = minima[first]
        for step in range(1, span):
            np.minimum(result, minima[np.minimum(first + step, last)], out=result)
        return result

    def chunks(self, hashes: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A query's chunks: the whole text if it fits a window, else `window` positions from
        every position, so one lines up with any indexed window.  Returns the signatures and
        each chunk's number of shingles."""
        count, width = len(hashes), self.params.window
        starts = np.arange(max(1, count - width + 1))
        ends = np.minimum(starts + width, count)
        before = np.concatenate(([0], np.cumsum(valid)))
        sizes = before[ends] - before[starts]
        if self.params.sketcher == "rensa":
            return self._rensa_ranges(hashes, valid, starts, ends), sizes
        values = self.permuted(hashes, valid)
        if count <= width:
            return values.min(axis=0, keepdims=True), sizes
        return np.lib.stride_tricks.sliding_window_view(values, width, axis=0).min(axis=-1), sizes


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _import_rensa() -> Any:
    try:
        import rensa
    except ImportError:
        raise NearDupError("sketcher 'rensa' needs the rensa package: pip install 'corpus-audit[rensa]'") from None
    return rensa


def band_keys(signatures: np.ndarray, params: NearDupParams) -> np.ndarray:
    """One key per band and row of signatures (windows x bands): the band's value itself for
    one row, the two values packed for two (both exact, as datasketch compares band bytes), a
    64-bit hash of the values for more."""
    rows, bands = params.rows, params.bands
    if rows == 1:
        return np.ascontiguousarray(signatures[:, :bands])
    keys = signatures[:, 0 : bands * rows : rows].astype(np.uint64)
    if rows == 2:
        return (keys << np.uint64(32)) | signatures[:, 1 : bands * rows : rows].astype(np.uint64)
    for step in range(1, rows):
        keys = _fmix64(keys * _MIX + signatures[:, step : bands * rows : rows].astype(np.uint64))
    return keys


# Building.


def sketch_documents(documents: Iterable[tuple[int, bytes]], params: NearDupParams, family: _Family | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The window table and signatures of a run of documents, in batches of about BATCH_BYTES."""
    family = family or _Family(params)
    tables, signatures, batch, size = [], [], [], 0
    for document in documents:
        batch.append(document)
        size += len(document[1])
        if size >= BATCH_BYTES:
            table, sigs = _sketch_batch(batch, params, family)
            tables.append(table)
            signatures.append(sigs)
            batch, size = [], 0
    if batch or not tables:
        table, sigs = _sketch_batch(batch, params, family)
        tables.append(table)
        signatures.append(sigs)
    return np.concatenate(tables), np.concatenate(signatures)


def _utf8_widths(points: np.ndarray) -> np.ndarray:
    widths = 1 + (points >= 0x80).astype(np.int64) + (points >= 0x800) + (points >= 0x10000)
    widths[(points >= 0xD800) & (points < 0xE000)] = 1
    return widths


def _sketch_batch(batch: list[tuple[int, bytes]], params: NearDupParams, family: _Family) -> tuple[np.ndarray, np.ndarray]:
    """Windows of a batch of documents, tokenised as one text (documents joined by a line end,
    a separator) so that every step runs over whole arrays."""
    empty = (np.zeros(0, dtype=WINDOW_DTYPE), np.zeros((0, params.num_perm), dtype=np.uint32))
    if not batch:
        return empty
    texts = [raw.decode("utf-8", "surrogateescape") for _, raw in batch]
    points = code_points("\n".join(texts))
    if not len(points):
        return empty
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    char_start = np.cumsum(lengths + 1) - (lengths + 1)
    widths = _utf8_widths(points)
    byte_at = np.concatenate(([0], np.cumsum(widths)))
    tokens = tokenize_points(points)
    if not len(tokens):
        return empty
    owner = np.searchsorted(char_start, tokens.starts, side="right") - 1
    numbers = np.arange(len(batch))
    first_token, end_token = np.searchsorted(owner, numbers, "left"), np.searchsorted(owner, numbers, "right")
    hashes, valid = shingle_hashes(tokens, params.shingle.table(), end_token[owner])
    stride, span = params.stride, params.window // params.stride
    counts = end_token - first_token
    blocks_per = -(-counts // stride)
    block_base = np.cumsum(blocks_per) - blocks_per
    block_doc = np.repeat(numbers, blocks_per)
    blocks = first_token[block_doc] + stride * (np.arange(blocks_per.sum()) - block_base[block_doc])
    windows_per = np.where(counts > 0, np.maximum(1, blocks_per - span + 1), 0)
    window_doc = np.repeat(numbers, windows_per)
    within = np.arange(windows_per.sum()) - np.repeat(np.cumsum(windows_per) - windows_per, windows_per)
    first = block_base[window_doc] + within
    last = block_base[window_doc] + blocks_per[window_doc] - 1
    starts = first_token[window_doc] + stride * within
    ends = np.minimum(starts + params.window, end_token[window_doc])
    before = np.concatenate(([0], np.cumsum(valid)))
    shingles = before[ends] - before[starts]
    keep = shingles > 0
    signatures = family.windows(hashes, valid, blocks, first[keep], last[keep], starts[keep], ends[keep])
    window_doc, starts, ends = window_doc[keep], starts[keep], ends[keep]
    doc_byte = byte_at[char_start[window_doc]]
    table = np.zeros(len(window_doc), dtype=WINDOW_DTYPE)
    table["document"] = np.array([number for number, _ in batch], dtype=np.uint64)[window_doc]
    table["offset"] = byte_at[tokens.starts[starts]] - doc_byte
    table["length"] = byte_at[tokens.ends[ends - 1]] - byte_at[tokens.starts[starts]]
    table["shingles"] = np.minimum(shingles[keep], np.iinfo(np.uint16).max)
    return table, signatures


_WORKER_INDEXES: dict[str, LocalIndex] = {}


def _sketch_range(path: str, start: int, stop: int, params_json: str) -> tuple[np.ndarray, np.ndarray]:
    """A worker's task: documents start..stop-1 of the index at `path`."""
    corpus = _WORKER_INDEXES.get(path)
    if corpus is None:
        corpus = _WORKER_INDEXES[path] = LocalIndex(Path(path))
    return sketch_documents(corpus.documents(start, stop), NearDupParams.model_validate_json(params_json))


def _tasks(corpus: LocalIndex) -> list[tuple[int, int]]:
    documents = corpus.info.documents or 0
    per_task = max(1, int(documents * TASK_BYTES / max(1, corpus.info.bytes or 1)))
    return [(start, min(start + per_task, documents)) for start in range(0, documents, per_task)]


def _sketch_corpus(corpus: LocalIndex, params: NearDupParams, workers: int, progress: ProgressHook | None) -> tuple[np.ndarray, np.ndarray]:
    """Every document's windows, in document order, on `workers` forked processes with a
    bounded number of tasks in flight (as the n-gram build parses its input)."""
    tasks = _tasks(corpus)
    total = corpus.info.documents or 0
    results: list[tuple[np.ndarray, np.ndarray]] = []
    if workers <= 1 or len(tasks) <= 1:
        family = _Family(params)
        for start, stop in tasks:
            results.append(sketch_documents(corpus.documents(start, stop), params, family))
            if progress:
                progress("minhash", stop, total)
    else:
        path, settings = str(corpus.path), params.model_dump_json()
        with WorkerPool(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for ready in [pool.submit(os.getpid) for _ in range(workers)]:
                ready.result()
            pending: deque[tuple[int, Future]] = deque()
            for start, stop in tasks:
                pending.append((stop, pool.submit(_sketch_range, path, start, stop, settings)))
                while len(pending) > 2 * workers or (pending and stop == tasks[-1][1]):
                    done, future = pending.popleft()
                    results.append(future.result())
                    if progress:
                        progress("minhash", done, total)
    if not results:
        return np.zeros(0, dtype=WINDOW_DTYPE), np.zeros((0, params.num_perm), dtype=np.uint32)
    return np.concatenate([table for table, _ in results]), np.concatenate([sigs for _, sigs in results])


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


NORMALIZATION = "the index's stored text (NFC, whitespace collapsed with --normalize text); tokens case-folded (simple folding); punctuation, symbols, spaces and controls separate tokens"


def _code_hash() -> str:
    return hashlib.blake2b(Path(__file__).read_bytes(), digest_size=8).hexdigest()


def _save(directory: Path, name: str, array: np.ndarray) -> FileInfo:
    path = directory / name
    np.save(path, array, allow_pickle=False)
    return FileInfo(name=name, bytes=path.stat().st_size, blake2b=hash_file(path))


def _write_arrays(directory: Path, table: np.ndarray, signatures: np.ndarray, params: NearDupParams, progress: ProgressHook | None) -> list[FileInfo]:
    """The window table, the signatures, and each band's keys sorted with their windows."""
    files = [_save(directory, "windows.npy", table), _save(directory, "signatures.npy", signatures)]
    keys = band_keys(signatures, params)
    id_type = np.uint32 if len(table) < 2**32 else np.uint64
    sorted_keys = np.empty((params.bands, len(table)), dtype=keys.dtype)
    owners = np.empty((params.bands, len(table)), dtype=id_type)
    for band in range(params.bands):
        order = np.argsort(keys[:, band], kind="stable")
        sorted_keys[band] = keys[order, band]
        owners[band] = order
        if progress:
            progress("bands", band + 1, params.bands)
    files.append(_save(directory, "bands.npy", sorted_keys))
    files.append(_save(directory, "band_windows.npy", owners))
    return files


def _require_writable_index(directory: Path) -> IndexManifest:
    """An index `audit index build` wrote (manifest with file hashes, and its marker), which
    the near-duplicate index can be added to and recorded in."""
    LocalIndex(directory)
    manifest = read_manifest(directory)
    if manifest is None or not manifest.files:
        raise NearDupError(f"{directory}: has no {MANIFEST} with file hashes, so a near-duplicate index could not be recorded in it; rebuild it with `audit index build`")
    if marker_files(directory, "index") is None:
        raise NearDupError(f"{directory}: has no .corpus-audit.json marker of an index audit wrote; rebuild it with `audit index build`")
    return manifest


def add_neardup(
    directory: Path,
    params: NearDupParams | None = None,
    *,
    force: bool = False,
    workers: int | None = None,
    progress: ProgressHook | None = None,
) -> NearDupManifest:
    """Build the near-duplicate index of an existing index into `directory/minhash/`.

    It is built in a hidden sibling of the index and moved in when complete; then the index's
    marker and `audit-index.json` are rewritten (each in one rename) to list its files, the
    marker first, so that at every moment `--force` may still replace the index and a crash
    leaves at worst files `audit index verify` reports.  Without `force` an existing one is
    refused."""
    directory = Path(directory)
    params = params or NearDupParams()
    try:
        index_manifest = _require_writable_index(directory)
    except IndexOpenError as error:
        raise NearDupError(str(error)) from None
    target = directory / NEARDUP_DIR
    if (target.exists() or target.is_symlink()) and not force:
        raise NearDupError(f"{target}: already exists (use --force to rebuild it)")
    family = _Family(params)
    corpus = LocalIndex(directory)
    staging = staging_directory(directory.parent / f"{directory.name}.{NEARDUP_DIR}")
    try:
        started = time.perf_counter()
        table, signatures = _sketch_corpus(corpus, params, workers or os.cpu_count() or 1, progress)
        files = _write_arrays(staging, table, signatures, params, progress)
        manifest = NearDupManifest(
            params=params.model_dump(),
            hash_family=family.describe(),
            normalization=NORMALIZATION,
            source={"fingerprint": index_manifest.fingerprint, "documents": index_manifest.documents, "bytes": index_manifest.bytes, "normalization": index_manifest.normalization},
            windows=len(table),
            documents=len(np.unique(table["document"])),
            created=utc_timestamp(),
            tool=f"corpus-audit {__version__}",
            build_seconds=round(time.perf_counter() - started, 3),
            code=_code_hash(),
            files=files,
        )
        (staging / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
        (staging / STAGING_TAG).unlink()
        records = [FileInfo(name=f"{NEARDUP_DIR}/{f.name}", bytes=f.bytes, blake2b=f.blake2b) for f in files]
        records.append(FileInfo(name=f"{NEARDUP_DIR}/{MANIFEST_NAME}", bytes=(staging / MANIFEST_NAME).stat().st_size, blake2b=hash_file(staging / MANIFEST_NAME)))
        _install(directory, staging, index_manifest, records)
        return manifest
    except BaseException:
        discard_staging(staging)
        raise


def _install(directory: Path, staging: Path, index_manifest: IndexManifest, records: list[FileInfo]) -> None:
    listed = marker_files(directory, "index") or []
    ours = [f.name for f in records]
    rewrite_marker(directory, "index", {*listed, *ours})
    target = directory / NEARDUP_DIR
    retired = None
    if target.exists() or target.is_symlink():
        retired = staging_directory(directory.parent / f"{directory.name}.{NEARDUP_DIR}-replaced")
        target.rename(retired / NEARDUP_DIR)
    staging.rename(target)
    index_manifest.minhash = records
    atomic_write_text(directory / MANIFEST, index_manifest.to_json())
    rewrite_marker(directory, "index", [name for name in listed if not name.startswith(f"{NEARDUP_DIR}/")] + ours)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)


# Opening and querying.


@dataclass
class Match:
    """The best span of one document for a field: exact figures from its text (`shingles`:
    how many of the field's shingles the span holds), and the sketch's estimates for the
    candidate window that led to it."""

    document: int
    shingles: int
    offset: int
    length: int
    containment: float
    jaccard: float
    estimated_jaccard: float
    estimated_containment: float
    window: int


@dataclass
class QueryResult:
    """What a query found: the field's distinct shingles kept as evidence and those set aside
    as shared with the source text, its shingle positions (the length of the span it is
    compared with), the chunks it was cut into, the LSH candidates and how many were verified."""

    shingles: int
    shared_with_source: int
    positions: int
    chunks: int
    candidates: int
    verified: int
    matches: list[Match] = field(default_factory=list)

    @property
    def best(self) -> Match | None:
        return self.matches[0] if self.matches else None


def _damaged(path: Path, problem: str, directory: Path) -> NearDupError:
    return NearDupError(
        f"{path}: {problem}. The near-duplicate index is damaged: rebuild it (`audit index minhash {directory} --force`), "
        f"or run `audit index verify {directory}` to check every file"
    )


def _load_manifest(directory: Path) -> NearDupManifest:
    path = directory / NEARDUP_DIR / MANIFEST_NAME
    if not path.parent.is_dir():
        raise NearDupError(f"{directory}: has no near-duplicate index; build one with `audit index minhash {directory}`")
    try:
        return NearDupManifest.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise _damaged(path, "is missing", directory) from None
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise _damaged(path, f"not a readable near-duplicate manifest ({error})", directory) from None


def _check_files(directory: Path, manifest: NearDupManifest, index_manifest: IndexManifest | None) -> NearDupParams:
    """Sizes, the source fingerprint and the tokeniser, before any array is mapped."""
    folder = directory / NEARDUP_DIR
    if (manifest.format, manifest.version) != (FORMAT, FORMAT_VERSION) or manifest.tokens != TOKENS_VERSION:
        raise NearDupError(f"{folder / MANIFEST_NAME}: format {manifest.format} {manifest.version} (tokens {manifest.tokens}) is not the one this version reads; rebuild it (`audit index minhash {directory} --force`)")
    recorded = {f.name: f for f in manifest.files}
    if set(recorded) != set(ARRAYS):
        raise _damaged(folder / MANIFEST_NAME, f"lists {sorted(recorded)}, not {list(ARRAYS)}", directory)
    for name in ARRAYS:
        path = folder / name
        if not path.is_file():
            raise _damaged(path, "is missing", directory)
        if path.stat().st_size != recorded[name].bytes:
            raise _damaged(path, f"{path.stat().st_size:,} bytes, but the manifest records {recorded[name].bytes:,}", directory)
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
        raise _damaged(folder / MANIFEST_NAME, f"its params are invalid ({error.errors()[0]['msg']})", directory) from None


def _map(path: Path, directory: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise _damaged(path, f"not a readable array ({error})", directory) from None


def _distinct_per_band(keys: np.ndarray) -> list[np.ndarray]:
    """Each band's distinct chunk keys, sorted; 32-bit keys (one row per band) in one pass."""
    if keys.dtype != np.uint32:
        return [np.unique(keys[:, band]) for band in range(keys.shape[1])]
    bands = np.arange(keys.shape[1], dtype=np.uint64)
    packed = np.unique((bands[:, None] << np.uint64(32)) | keys.T.astype(np.uint64))
    cuts = np.searchsorted(packed >> np.uint64(32), np.arange(1, keys.shape[1]))
    return [(part & np.uint64(0xFFFFFFFF)).astype(np.uint32) for part in np.split(packed, cuts)]


@dataclass(frozen=True)
class _Regions:
    """Several texts shingled in one pass: tokens and shingles of all of them, which text each
    token belongs to (`owner`), each text's first token (`first`, one more entry at the end)
    and first character in the joined text."""

    tokens: Tokens
    hashes: np.ndarray
    valid: np.ndarray
    owner: np.ndarray
    first: np.ndarray
    char_start: np.ndarray


def _shingle_regions(texts: list[str], sizes: np.ndarray) -> _Regions:
    """Shingles of every text, none reaching across from one text into the next."""
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    char_start = np.cumsum(lengths + 1) - (lengths + 1)
    tokens = tokenize("\n".join(texts)) if texts else tokenize("")
    owner = np.searchsorted(char_start, tokens.starts, side="right") - 1
    first = np.searchsorted(owner, np.arange(len(texts) + 1), "left")
    hashes, valid = shingle_hashes(tokens, sizes, first[1:][owner])
    return _Regions(tokens, hashes, valid, owner, first, char_start)


class NearDuplicateIndex:
    """An index's near-duplicate index, memory-mapped, queried in memory or through Redis."""

    def __init__(self, directory: Path, corpus: LocalIndex, manifest: NearDupManifest, params: NearDupParams, redis: RedisLSH | None) -> None:
        self.directory = directory
        self.corpus = corpus
        self.manifest = manifest
        self.params = params
        try:
            self.family = _Family(params, manifest.hash_family.get("permutations"))
        except (NearDupError, TypeError, ValueError) as error:
            raise _damaged(directory / NEARDUP_DIR / MANIFEST_NAME, f"its hash family is unreadable ({error})", directory) from None
        self._check_family()
        folder = directory / NEARDUP_DIR
        # Plain array views of the memory maps: indexing a np.memmap costs a Python call more.
        self.windows = np.asarray(_map(folder / "windows.npy", directory))
        self.signatures = np.asarray(_map(folder / "signatures.npy", directory))
        self.bands = np.asarray(_map(folder / "bands.npy", directory))
        self.band_windows = np.asarray(_map(folder / "band_windows.npy", directory))
        count = len(self.windows)
        shapes = {
            "windows.npy": (self.windows.dtype == WINDOW_DTYPE and self.windows.ndim == 1, f"{WINDOW_DTYPE.descr}"),
            "signatures.npy": (self.signatures.shape == (count, params.num_perm) and self.signatures.dtype == np.uint32, f"uint32 ({count}, {params.num_perm})"),
            "bands.npy": (self.bands.shape == (params.bands, count), f"({params.bands}, {count})"),
            "band_windows.npy": (self.band_windows.shape == (params.bands, count), f"({params.bands}, {count})"),
        }
        for name, (ok, expected) in shapes.items():
            if not ok:
                raise _damaged(folder / name, f"does not hold the {expected} array the manifest implies", directory)
        if count != manifest.windows:
            raise _damaged(folder / "windows.npy", f"{count:,} windows, but the manifest records {manifest.windows:,}", directory)
        self._redis = redis
        self._tables = self.family.params.shingle.table()
        # The source variant's shingles, asked for by each of an item's languages in turn.
        self._distinct: dict[tuple[str, ...], np.ndarray] = {}

    @classmethod
    def open(cls, directory: Path, *, corpus: LocalIndex | None = None, redis: str | None = None, expect: Mapping[str, Any] | None = None) -> NearDuplicateIndex:
        """Open after the cheap checks (sizes, shapes, the source index's fingerprint, the hash
        family), or raise NearDupError naming the file or parameter at fault.  With `redis`,
        candidates come from the LSH loaded there by `audit index minhash DIR --redis URL`."""
        directory = Path(directory)
        try:
            corpus = corpus or LocalIndex(directory)
        except IndexOpenError as error:
            raise NearDupError(str(error)) from None
        manifest = _load_manifest(directory)
        params = _check_files(directory, manifest, read_manifest(directory))
        if expect:
            check_expected(directory, params, expect)
        lsh = RedisLSH(redis, manifest_digest(directory), params) if redis else None
        index = cls(directory, corpus, manifest, params, lsh)
        if lsh is not None:
            lsh.require_loaded(directory, len(index.windows))
        return index

    def __reduce__(self) -> tuple:
        return (_reopened, (self.directory, self.corpus, self._redis.url if self._redis else None))

    def _check_family(self) -> None:
        recorded, running = self.manifest.hash_family, self.family.describe()
        for key in ("sketcher", "algorithm", "seed", "num_perm"):
            if recorded.get(key) != running.get(key):
                raise NearDupError(
                    f"{self.directory / NEARDUP_DIR}: signatures are {recorded.get('sketcher')} {recorded.get('algorithm')}, "
                    f"but this installation computes {running.get('sketcher')} {running.get('algorithm')} ({key} differs); "
                    f"rebuild it (`audit index minhash {self.directory} --force`)"
                )

    def shingle(self, text: str) -> Shingled:
        tokens = tokenize(text)
        hashes, valid = shingle_hashes(tokens, self._tables)
        return Shingled(tokens, hashes, valid)

    def lsh_candidates(self, chunks: np.ndarray) -> np.ndarray:
        """Windows sharing at least one band with at least one chunk: from the memory-mapped
        band tables, or from Redis."""
        return self.lsh_collisions(chunks)[0]

    def lsh_collisions(self, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The LSH candidates, sorted, and in how many bands each met some chunk: a free first
        ranking, so that only the likeliest candidates are compared signature by signature."""
        keys = band_keys(chunks, self.params)
        if self._redis is not None:
            per_band = [members for members in self._redis.band_members(chunks, keys) if len(members)]
            found = np.concatenate(per_band) if per_band else np.zeros(0, dtype=np.int64)
        else:
            found = self._band_members(keys)
        windows, counts = np.unique(found.astype(np.int64), return_counts=True)
        return windows, counts

    def _band_members(self, keys: np.ndarray) -> np.ndarray:
        """Every window whose key in some band equals a chunk's key in that band, once per
        band it matches in (a window has one key per band): binary searches in each band's
        sorted keys, then one gather."""
        count = len(self.windows)
        low, high, rows = [], [], []
        for band, wanted in enumerate(_distinct_per_band(keys)):
            column = self.bands[band]
            lo, hi = np.searchsorted(column, wanted, "left"), np.searchsorted(column, wanted, "right")
            hit = hi > lo
            low.append(lo[hit])
            high.append(hi[hit])
            rows.append(np.full(int(hit.sum()), band * count, dtype=np.int64))
        lo, hi, base = np.concatenate(low), np.concatenate(high), np.concatenate(rows)
        lengths = hi - lo
        total = int(lengths.sum())
        if not total:
            return np.zeros(0, dtype=np.int64)
        starts = np.repeat(base + lo - (np.cumsum(lengths) - lengths), lengths)
        return self.band_windows.reshape(-1)[starts + np.arange(total)]

    def estimate(self, candidates: np.ndarray, chunks: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate window, the estimated Jaccard with its most similar chunk, and the
        containment of that chunk in it that the estimate implies."""
        best = np.zeros(len(candidates))
        query_size = np.ones(len(candidates))
        chunk_sizes = np.maximum(sizes, 1).astype(float)
        step = max(1, (1 << 22) // max(1, chunks.size))
        for at in range(0, len(candidates), step):
            rows = np.asarray(self.signatures[candidates[at : at + step]])
            agreement = (rows[:, None, :] == chunks[None, :, :]).sum(axis=2) / self.params.num_perm
            pick = agreement.argmax(axis=1)
            best[at : at + step] = agreement[np.arange(len(pick)), pick]
            query_size[at : at + step] = chunk_sizes[pick]
        window_size = self.windows["shingles"][candidates].astype(float)
        containment = np.clip(best * (query_size + window_size) / ((1 + best) * query_size), 0, 1)
        return best, containment

    def distinct_shingles(self, texts: Sequence[str]) -> np.ndarray:
        """The distinct shingle hashes of some texts together (a source-language variant's)."""
        if not texts:
            return np.zeros(0, np.uint32)
        key = tuple(texts)
        if key not in self._distinct:
            if len(self._distinct) >= 64:
                self._distinct.pop(next(iter(self._distinct)))
            self._distinct[key] = np.unique(np.concatenate([self.shingle(t).distinct() for t in texts]))
        return self._distinct[key]

    def query(self, text: str, *, exclude: Sequence[str] | np.ndarray = (), candidates: int = 50, limit: int = 3) -> QueryResult:
        """The documents holding most of `text`: LSH candidates ranked by the bands they share
        with it, the likeliest `ESTIMATED` then ranked by estimated Jaccard, the best
        `candidates` of those verified on their text, one match per document, best first.
        Shingles that also occur in an `exclude` text (the source-language variant; or their
        `distinct_shingles`, computed once) are not evidence and are left out of the figures."""
        field_shingles = self.shingle(text)
        own = field_shingles.distinct()
        shared = exclude if isinstance(exclude, np.ndarray) else self.distinct_shingles(exclude)
        kept = np.setdiff1d(own, shared)
        result = QueryResult(shingles=len(kept), shared_with_source=len(own) - len(kept), positions=int(field_shingles.valid.sum()), chunks=0, candidates=0, verified=0)
        if not len(own):
            return result
        chunks, sizes = self.family.chunks(field_shingles.hashes, field_shingles.valid)
        result.chunks = len(chunks)
        found, collisions = self.lsh_collisions(chunks)
        result.candidates = len(found)
        if not len(found) or not len(kept):
            return result
        likeliest = np.lexsort((found, -collisions))[:ESTIMATED]
        found = found[likeliest]
        estimated, implied = self.estimate(found, chunks, sizes)
        order = np.lexsort((found, -estimated))[:candidates]
        result.verified = len(order)
        result.matches = self._verify(found[order], estimated[order], implied[order], kept, shared, result.positions, len(text.encode("utf-8")), limit)
        return result

    def _verify(self, windows: np.ndarray, estimated: np.ndarray, implied: np.ndarray, kept: np.ndarray, shared: np.ndarray, positions: int, query_bytes: int, limit: int) -> list[Match]:
        """The `limit` documents whose text around the candidate windows holds the span with the
        most of the field's shingles, best first.  All regions are shingled in one pass; a
        region is searched only while the distinct field shingles it holds (a bound on any span
        in it) could still place its document above the `limit`-th best, so every containment
        reported is what searching every region gives; among documents of equal containment,
        the first searched is kept (its Jaccard, exact for its span, may not be the largest)."""
        rows = self.windows[windows]
        pad = query_bytes + query_bytes // 4 + 64
        regions = []
        for document in dict.fromkeys(rows["document"].tolist()):
            ranges = [(int(r["offset"]) - pad, int(r["offset"]) + int(r["length"]) + pad) for r in rows[rows["document"] == document]]
            regions += [self._region(document, max(0, start), end) for start, end in merged(ranges)]
        shingled = _shingle_regions([text for _, _, text in regions], self._tables)
        inside = shingled.valid & np.isin(shingled.hashes, kept)
        at = np.flatnonzero(inside)
        pairs = np.unique((shingled.owner[at].astype(np.uint64) << np.uint64(32)) | shingled.hashes[at].astype(np.uint64))
        bounds = np.bincount((pairs >> np.uint64(32)).astype(np.int64), minlength=len(regions))
        best: dict[int, Match] = {}
        for number in np.argsort(-bounds, kind="stable").tolist():
            counts = sorted((m.shingles for m in best.values()), reverse=True)
            if not bounds[number] or (len(counts) >= limit and bounds[number] <= counts[limit - 1]):
                break
            document, start, text = regions[number]
            span = self._best_span(shingled, inside, number, document, start, text, kept, shared, positions)
            held = best.get(document)
            if span is not None and (held is None or (span.containment, span.jaccard) > (held.containment, held.jaccard)):
                best[document] = span
        for document, match in best.items():
            mine = rows["document"] == document
            pick = int(np.argmax(estimated[mine]))
            match.estimated_jaccard = round(float(estimated[mine][pick]), 4)
            match.estimated_containment = round(float(implied[mine][pick]), 4)
            match.window = int(windows[mine][pick])
        return sorted(best.values(), key=lambda m: (-m.containment, -m.jaccard, m.document))[:limit]

    def _region(self, document: int, start: int, end: int) -> tuple[int, int, str]:
        """(document, byte offset, text) of a stretch of a document, starting on a character."""
        raw = self.corpus.surrounding(Occurrence(document, start), 0, end - start)
        skip = 0
        while skip < len(raw) and raw[skip] & 0xC0 == 0x80:
            skip += 1
        return document, start + skip, raw[skip:].decode("utf-8", "ignore")

    def _best_span(self, shingled: _Regions, kept_at: np.ndarray, number: int, document: int, start: int, text: str, kept: np.ndarray, shared: np.ndarray, positions: int) -> Match | None:
        lo, hi = int(shingled.first[number]), int(shingled.first[number + 1])
        hashes, valid, inside = shingled.hashes[lo:hi], shingled.valid[lo:hi], kept_at[lo:hi]
        count, at = _best_window(np.flatnonzero(inside), hashes[inside], positions, hi - lo)
        if not count:
            return None
        window = slice(at, at + positions)
        span_set = np.setdiff1d(np.unique(hashes[window][valid[window]]), shared)
        matched = lo + at + np.flatnonzero(inside[window])
        sizes = self._tables[shingled.tokens.scripts[matched]]
        base = int(shingled.char_start[number])
        first_char = int(shingled.tokens.starts[matched[0]]) - base
        last_char = int(shingled.tokens.ends[min(hi - 1, int((matched + sizes - 1).max()))]) - base
        return Match(
            document=document,
            shingles=count,
            offset=start + len(text[:first_char].encode("utf-8")),
            length=len(text[first_char:last_char].encode("utf-8")),
            containment=round(count / len(kept), 4),
            jaccard=round(count / (len(kept) + len(span_set) - count), 4),
            estimated_jaccard=0.0,
            estimated_containment=0.0,
            window=-1,
        )

    def hit(self, match: Match, snippet_chars: int) -> DocumentHit:
        return self.corpus.document_hit(Occurrence(match.document, match.offset), match.length, snippet_chars)


def _best_window(positions: np.ndarray, values: np.ndarray, width: int, count: int) -> tuple[int, int]:
    """The most distinct `values` among positions inside any `width` consecutive positions
    (starting no later than count - width): (how many, first position).  Each occurrence counts
    for the windows that hold it and no earlier occurrence of the same value."""
    if not len(positions):
        return 0, 0
    order = np.lexsort((positions, values))
    sorted_positions, sorted_values = positions[order], values[order]
    previous = np.full(len(order), -(1 << 40), dtype=np.int64)
    same = sorted_values[1:] == sorted_values[:-1]
    previous[1:][same] = sorted_positions[:-1][same]
    before = np.empty(len(order), dtype=np.int64)
    before[order] = previous
    lo = np.maximum(np.maximum(before + 1, positions - width + 1), 0)
    last_start = max(0, count - width)
    hi = np.minimum(positions, last_start)
    ok = lo <= hi
    changes = np.zeros(last_start + 2, dtype=np.int64)
    np.add.at(changes, lo[ok], 1)
    np.add.at(changes, hi[ok] + 1, -1)
    totals = np.cumsum(changes)[: last_start + 1]
    at = int(np.argmax(totals))
    return int(totals[at]), at


def check_expected(directory: Path, params: NearDupParams, expect: Mapping[str, Any]) -> None:
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


# Redis: the same bands, in datasketch's own Redis storage.

READY = b":ready"


def redis_settings(url: str) -> dict[str, Any]:
    """datasketch's `redis` storage settings from a redis://[:password@]host[:port][/db] URL."""
    parsed = urlparse(url)
    if parsed.scheme != "redis" or not parsed.hostname:
        raise NearDupError(f"{url}: not a redis://host[:port][/db] URL")
    try:
        db = int(parsed.path.strip("/") or 0)
        port = parsed.port or 6379
    except ValueError:
        raise NearDupError(f"{url}: not a redis://host[:port][/db] URL") from None
    settings: dict[str, Any] = {"host": parsed.hostname, "port": port, "db": db}
    if parsed.password:
        settings["password"] = unquote(parsed.password)
    return settings


# Near-duplicate indexes re-opened in this process for runners sent from another (a cluster's).
_REOPENED: dict[tuple[str, str | None, str], NearDuplicateIndex] = {}


def _reopened(directory: Path, corpus: LocalIndex, redis: str | None) -> NearDuplicateIndex:
    """The index where a runner was sent, opened and checked once per process."""
    key = (str(directory), redis, corpus.info.fingerprint)
    if key not in _REOPENED:
        _REOPENED[key] = NearDuplicateIndex.open(directory, corpus=corpus, redis=redis)
    return _REOPENED[key]


class RedisLSH:
    """The index's bands in Redis, as `datasketch.MinHashLSH` stores them, under a name derived
    from the near-duplicate manifest's hash: another index's bands can never be read for this
    one.  Keys are window numbers as 8 bytes, not pickles, so nothing read back is unpickled."""

    def __init__(self, url: str, digest: str, params: NearDupParams) -> None:
        try:
            import redis
        except ImportError:
            raise NearDupError(f"{url}: Redis needs the redis package: pip install 'corpus-audit[redis]'") from None
        from datasketch import MinHashLSH

        self.url = url
        self.params = params
        self.basename = f"corpus-audit:minhash:{digest}".encode()
        settings = redis_settings(url)
        self._client = redis.Redis(**settings)
        self._errors = (redis.exceptions.RedisError,)
        try:
            self.lsh = MinHashLSH(
                num_perm=params.num_perm,
                params=(params.bands, params.rows),
                storage_config={"type": "redis", "basename": self.basename, "redis": settings},
                prepickle=False,
            )
        except self._errors as error:
            raise NearDupError(f"{url}: {error}") from None

    def _ready_key(self) -> bytes:
        return self.basename + READY

    def loaded(self) -> dict | None:
        try:
            raw = self._client.get(self._ready_key())
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None
        return json.loads(raw) if raw else None

    def require_loaded(self, directory: Path, windows: int) -> None:
        state = self.loaded()
        if state is None or state.get("windows") != windows:
            raise NearDupError(f"{self.url}: the near-duplicate index of {directory} is not loaded there; load it with `audit index minhash {directory} --redis {self.url}`")

    def load(self, signatures: np.ndarray, progress: ProgressHook | None = None) -> None:
        """Replace whatever is stored under this name with the index's bands, then mark it
        loaded (last, so a load cut short is never taken for a whole one)."""
        from datasketch import MinHash

        try:
            self._client.delete(self._ready_key())
            for keys in _batches(self._client.scan_iter(match=self.basename + b"*", count=1000), 1000):
                self._client.delete(*keys)
            total = len(signatures)
            # A container for the values: the bands only read `hashvalues`, whatever the family.
            permutations = MinHash(num_perm=self.params.num_perm, seed=self.params.seed, scheme="affine32").permutations
            with self.lsh.insertion_session(buffer_size=10000) as session:
                for at in range(total):
                    sketch = MinHash(hashvalues=np.asarray(signatures[at]), permutations=permutations, scheme="affine32")
                    session.insert(_key(at), sketch, check_duplication=False)
                    if progress and (at % 4096 == 0 or at == total - 1):
                        progress("redis", at + 1, total)
            self._client.set(self._ready_key(), json.dumps({"windows": total, "loaded": utc_timestamp()}))
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None

    def band_members(self, chunks: np.ndarray, keys: np.ndarray) -> list[np.ndarray]:
        """Per band, the windows stored under any chunk's key (as `MinHashLSH.query` finds
        them for every chunk), with one pipelined request per band."""
        per_band = []
        try:
            for band, (start, end) in enumerate(self.lsh.hashranges):
                _, first = np.unique(keys[:, band], return_index=True)
                wanted = [self.lsh._H(chunks[i, start:end]) for i in first.tolist()]
                members = {int.from_bytes(member, "big") for found in self.lsh.hashtables[band].getmany(*wanted) for member in found}
                if members:
                    per_band.append(np.array(sorted(members), dtype=np.int64))
        except self._errors as error:
            raise NearDupError(f"{self.url}: {error}") from None
        return per_band


def _key(window: int) -> bytes:
    return struct.pack(">Q", window)


def _batches(items: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def load_redis(directory: Path, url: str, progress: ProgressHook | None = None) -> int:
    """Load an index's near-duplicate bands into Redis at `url`; the number of windows."""
    index = NearDuplicateIndex.open(directory)
    RedisLSH(url, manifest_digest(directory), index.params).load(index.signatures, progress)
    return len(index.windows)
