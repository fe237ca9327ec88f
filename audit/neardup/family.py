"""MinHash families: how a signature row is computed from shingle hashes (datasketch's affine32
scheme, vectorised, or rensa), and the LSH band keys of signatures."""
from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from audit import _neardup
from audit.neardup.store import NearDupError
from audit.neardup.tokens import _MIX, NearDupParams, _fmix64

# Sketching: both families give one uint32 signature row per set of shingle positions.


class Family:
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

    def describe(self) -> dict[str, str | int | list[list[int]]]:
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
        """datasketch: every position's permuted hash values (invalid positions at the maximum),
        in one compiled pass (`audit._neardup.permuted`)."""
        hashes = np.ascontiguousarray(hashes, dtype=np.uint32)
        found = _neardup.permuted(hashes, np.ascontiguousarray(valid, dtype=bool), self._a, self._b)
        return np.frombuffer(found, dtype=np.uint32).reshape(len(hashes), self.params.num_perm)

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
        every position, so one lines up with any indexed window (their minima taken in C,
        `audit._neardup.sliding_min`).  Returns the signatures and each chunk's number of shingles."""
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
        rows, perm = values.shape
        found = _neardup.sliding_min(np.ascontiguousarray(values, dtype=np.uint32), rows, perm, width)
        return np.frombuffer(found, dtype=np.uint32).reshape(rows - width + 1, perm), sizes


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _import_rensa() -> ModuleType:
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

