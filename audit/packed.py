"""Objects held pickled one after another in one buffer, each read back by its position.

A forked child unpickles the objects it needs from the buffer instead of using the parent's,
and the parent sends positions instead of pickling objects as it goes: either way of touching
a shared object writes its reference count, and each page written is copied (the writer gets
the copy, the others keep the original), so memory grew by the objects' size over a run.  The
buffer is also a seventh of the objects' own size (a benchmark's items), which is why a run
holds its items this way from the moment they are read (`audit.items.PackedItems`).
"""
from __future__ import annotations

import pickle
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class Packed(Generic[T]):
    """Pickled objects in one buffer; `ends[k]` is where the k-th one's pickle ends."""

    data: bytearray
    ends: np.ndarray

    @classmethod
    def of(cls, objects: Iterable[T]) -> Packed[T]:
        data, ends = bytearray(), []
        for found in objects:
            data += pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL)
            ends.append(len(data))
        return cls(data, np.array(ends, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, position: int) -> T:
        start = int(self.ends[position - 1]) if position else 0
        return pickle.loads(memoryview(self.data)[start : int(self.ends[position])])
