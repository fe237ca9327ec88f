"""Objects held pickled one after another in an unnamed temporary file, each read back by its
position.

A forked child unpickles the objects it needs from the file instead of using the parent's,
and the parent sends positions instead of pickling objects as it goes: either way of touching
a shared object writes its reference count, and each page written is copied (the writer gets
the copy, the others keep the original), so memory grew by the objects' size over a run.  The
pickles are a seventh of the objects' own size (a benchmark's items), and in a file rather
than a buffer they are not the process's memory at all: the operating system's page cache
holds them while there is room, so what a run holds stays the same however large the
benchmark (`audit.items.PackedItems`).  Each read is an `os.pread` at the object's offset,
which forked children may do at once on the descriptor they inherit.
"""
from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Iterable
from contextlib import ExitStack
from typing import BinaryIO, Generic, TypeVar

import numpy as np

T = TypeVar("T")


class Packed(Generic[T]):
    """Pickled objects in one file; `ends[k]` is the offset where the k-th one's pickle ends.
    The file has no name and goes when this object does."""

    def __init__(self, file: BinaryIO, ends: np.ndarray) -> None:
        self.file = file
        self.ends = ends

    @classmethod
    def of(cls, objects: Iterable[T]) -> Packed[T]:
        ends, size = [], 0
        with ExitStack() as closed_on_error:
            file = closed_on_error.enter_context(tempfile.TemporaryFile(prefix="audit-packed-"))
            for found in objects:
                size += file.write(pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL))
                ends.append(size)
            file.flush()
            closed_on_error.pop_all()
        return cls(file, np.array(ends, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.ends)

    def size(self) -> int:
        """The pickles' bytes: what the objects take where they wait."""
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, position: int) -> T:
        start = int(self.ends[position - 1]) if position else 0
        end = int(self.ends[position])
        return pickle.loads(os.pread(self.file.fileno(), end - start, start))
