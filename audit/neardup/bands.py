"""Where the LSH bands are kept, behind one interface: each band's window keys, asked by key.

`BandStore` is what a query needs: the windows sharing a band key with some chunk of the
field.  `MappedBands` answers from the index's own files (each band's keys sorted, with the
window each belongs to, so a lookup is a binary search in a memory map and opening costs
nothing; `audit._neardup` searches every band in one compiled pass);
`audit.neardup.redis_bands.RedisBands` answers from a copy of the same bands in Redis, shared
between processes and machines.  Both are given the same keys and give the same windows, so
which one answered never shows in a result.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from audit import _neardup
from audit.neardup.store import damaged, map_array
from audit.neardup.tokens import NearDupParams

# Every FENCE-th key of a band is kept in memory to narrow each search to one block of the map.
FENCE = 64


class BandStore(Protocol):
    """The LSH bands of an index's windows, asked by band key."""

    def members(self, keys: np.ndarray) -> np.ndarray:
        """Every window whose key in some band equals a chunk's key in that band (`keys`:
        chunks x bands), once per band it matches in (a window has one key per band)."""
        ...

    def collisions(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The `members` once each, ascending (int64), and how many times each was listed."""
        ...


def distinct_per_band(keys: np.ndarray) -> list[np.ndarray]:
    """Each band's distinct chunk keys, sorted; 32-bit keys (one row per band) in one pass."""
    if keys.dtype != np.uint32:
        return [np.unique(keys[:, band]) for band in range(keys.shape[1])]
    bands = np.arange(keys.shape[1], dtype=np.uint64)
    packed = np.unique((bands[:, None] << np.uint64(32)) | keys.T.astype(np.uint64))
    cuts = np.searchsorted(packed >> np.uint64(32), np.arange(1, keys.shape[1]))
    return [(part & np.uint64(0xFFFFFFFF)).astype(np.uint32) for part in np.split(packed, cuts)]


class MappedBands:
    """The bands as `audit index minhash` writes them: `bands.npy` (bands x windows, each
    band's keys sorted) and `band_windows.npy` (the window each sorted key belongs to)."""

    def __init__(self, folder: Path, directory: Path, params: NearDupParams, windows: int) -> None:
        # Plain array views of the memory maps: indexing a np.memmap costs a Python call more.
        self.keys = np.asarray(map_array(folder / "bands.npy", directory))
        self.windows = np.asarray(map_array(folder / "band_windows.npy", directory))
        for name, array in (("bands.npy", self.keys), ("band_windows.npy", self.windows)):
            if array.shape != (params.bands, windows):
                raise damaged(folder / name, f"does not hold the ({params.bands}, {windows}) array the manifest implies", directory)
        self._fences: np.ndarray | None = None

    def runs(self, band: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One band's distinct keys, and where each key's windows start and end in `windows[band]`."""
        column = self.keys[band]
        if not len(column):
            return column, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        starts = np.flatnonzero(np.concatenate(([True], column[1:] != column[:-1])))
        return column[starts], starts, np.append(starts[1:], len(column))

    def collisions(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every band searched in one compiled pass (`audit._neardup.collisions`), through
        every `FENCE`-th key of each band, copied on the first query (1/64 of the bands' size)."""
        query = np.ascontiguousarray(keys, dtype=self.keys.dtype)
        bands, count = self.keys.shape
        if query.ndim != 2 or query.shape[1] != bands:
            raise ValueError(f"band keys must be chunks x {bands}, not {query.shape}")
        if self._fences is None:
            self._fences = np.ascontiguousarray(self.keys[:, ::FENCE])
        windows, counts = _neardup.collisions(self.keys, self.windows, self._fences, query, bands, count, len(query), FENCE)
        return np.frombuffer(windows, dtype=np.int64), np.frombuffer(counts, dtype=np.int64)

    def members(self, keys: np.ndarray) -> np.ndarray:
        """Each colliding window repeated once per band it matches in."""
        windows, counts = self.collisions(keys)
        return np.repeat(windows, counts)
