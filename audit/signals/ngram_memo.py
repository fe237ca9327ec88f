"""A field a benchmark repeats, measured twice per process rather than every time.

Templated benchmarks repeat a field's text across items: BMLAMA-17's answers ("France") and
the words of a relation around its subject recur hundreds of times per language, and 43% of
its field checks repeat an earlier one.  Over a corpus whose answers depend only on the
question (a local index: no budget of queries, no network), a field's evidence depends only on
the runner's corpus, settings and rules, and on `FieldText`: the field's name, its normalised
text, its language and what it shares with the source variant.  So a runner keeps the last
answers, up to `HELD_BYTES` of their pickles, and a repeat gets a copy of the evidence's figures
and provenance: the caller may add figures and provenance entries to the evidence it is given,
and changes nothing they hold (a form's label is added; what a figure holds is never changed
once measured).  That copy takes 1.6 µs a repeat in a BMLAMA-17 check where unpickling the whole
answer took 15.5 (2-3% of the check's CPU); the answers held take about five times the memory
of their pickles.  A field is kept the second time it is measured: most fields are never
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

# What one runner's kept answers may take in each process as pickles, their keys counted too
# (about five times as much held): about 3,000 of BMLAMA-17's short fields, or 700 passages
# with their per-character lengths.
HELD_BYTES = 4 << 20
# What an entry costs besides its pickle and its key's text: the key, and the entry itself.
ENTRY_BYTES = 256
# Fields measured once are remembered by a byte per slot of their hash, the table emptied after
# `MET_RESET` of them: a collision only keeps a field at its first measure.
MET_SLOTS = 1 << 20
MET_RESET = 1 << 18

Measured = tuple[Evidence, FieldMatch]


class FieldMemo:
    """The last fields one runner measured twice (a copy per use, `_copy`), each counted at the
    size of its pickle; the oldest go first once they and their keys take more than `limit`
    bytes.  Threads may share a runner."""

    def __init__(self, limit: int = HELD_BYTES) -> None:
        self.limit = limit
        self._kept: OrderedDict[FieldText, tuple[Measured, int]] = OrderedDict()
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
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
        if kept is not None:
            return _copy(kept[0])
        asked = budget.asked
        answer = measure()
        if budget.asked == asked and answer[0].status == OK and self._met_before(key):
            self._keep(key, _copy(answer), len(pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)))
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

    def _keep(self, key: FieldText, answer: Measured, pickled: int) -> None:
        if _size(key, pickled) > self.limit:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            self._held += _size(key, pickled) - (_size(key, old[1]) if old is not None else 0)
            self._kept[key] = (answer, pickled)
            while self._held > self.limit:
                gone, (_, size) = self._kept.popitem(last=False)
                self._held -= _size(gone, size)


def _copy(answer: Measured) -> Measured:
    """The answer with its own figures and provenance lists, the values in them shared: the
    match is only read."""
    evidence, match = answer
    return Evidence(evidence.signal, evidence.source, evidence.field, evidence.status, dict(evidence.figures), list(evidence.provenance), evidence.error), match


def _size(key: FieldText, pickled: int) -> int:
    return pickled + len(key.text) + ENTRY_BYTES
