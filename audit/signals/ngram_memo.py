"""A field a benchmark repeats, measured twice per process rather than every time.

Templated benchmarks repeat a field's text across items: BMLAMA-17's answers ("France") and
the words of a relation around its subject recur hundreds of times per language, and 43% of
its field checks repeat an earlier one.  Over a corpus whose answers depend only on the
question (a local index: no budget of queries, no network), a field's evidence depends only on
the runner's corpus, settings and rules, and on `FieldText`: the field's name, its normalised
text, its language and what it shares with the source variant.  So a runner keeps the last
answers, up to `HELD_BYTES` of memory, and a repeat gets a fresh copy: the caller may add to the
evidence it is given.  A field is kept the second time it is measured: most fields are never
met again (BMLAMA-17's whole statements, a benchmark's passages), and copying each of them
cost more than the memo saved on a benchmark of distinct items, and pushed the repeated ones
out.  Evidence whose corpus spent count queries on it is never kept, since its figures say how
many it cost.
"""
from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable

from audit.corpora.base import Budget
from audit.evidence import OK, Evidence
from audit.signals.ngram_match import FieldMatch, FieldText

# Memory one runner's kept answers may take in each process, their keys counted too: about
# 3,000 of BMLAMA-17's short fields, or 700 passages with their per-character lengths.
HELD_BYTES = 4 << 20
# What an entry costs besides its pickle and its key's text: the key, and the entry itself.
ENTRY_BYTES = 256
# Fields measured once are remembered by a byte per slot of their hash, the table emptied after
# `MET_RESET` of them: a collision only keeps a field at its first measure.
MET_SLOTS = 1 << 20
MET_RESET = 1 << 18

Measured = tuple[Evidence, FieldMatch]


class FieldMemo:
    """The last fields one runner measured twice, as pickles (a copy per use, and their size
    known); the oldest go first once they and their keys take more than `limit` bytes.
    Threads may share a runner."""

    def __init__(self, limit: int = HELD_BYTES) -> None:
        self.limit = limit
        self._kept: OrderedDict[FieldText, bytes] = OrderedDict()
        self._held = 0
        self._met: bytearray | None = None  # made on first use: a forked parent never needs it
        self._met_count = 0
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[FieldMemo], tuple[int]]:
        """A runner shipped to another process starts with nothing kept."""
        return FieldMemo, (self.limit,)

    def __len__(self) -> int:
        return len(self._kept)

    def measured(self, key: FieldText, budget: Budget, measure: Callable[[], Measured]) -> Measured:
        """The kept answer for `key`, else `measure()`'s, kept when it is sound, asked the
        corpus no count queries, and `key` was measured before."""
        with self._lock:
            blob = self._kept.get(key)
            if blob is not None:
                self._kept.move_to_end(key)
        if blob is not None:
            return pickle.loads(blob)
        asked = budget.asked
        answer = measure()
        if budget.asked == asked and answer[0].status == OK and self._met_before(key):
            self._keep(key, pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
        return answer

    def _met_before(self, key: FieldText) -> bool:
        """Whether `key` was measured before (or shares its slot with one that was); notes it."""
        slot = hash(key) & (MET_SLOTS - 1)
        with self._lock:
            if self._met is None or self._met_count >= MET_RESET:
                self._met, self._met_count = bytearray(MET_SLOTS), 0
            if self._met[slot]:
                return True
            self._met[slot] = 1
            self._met_count += 1
            return False

    def _keep(self, key: FieldText, blob: bytes) -> None:
        if _size(key, blob) > self.limit:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            self._held += _size(key, blob) - (_size(key, old) if old is not None else 0)
            self._kept[key] = blob
            while self._held > self.limit:
                self._held -= _size(*self._kept.popitem(last=False))


def _size(key: FieldText, blob: bytes) -> int:
    return len(blob) + len(key.text) + ENTRY_BYTES
