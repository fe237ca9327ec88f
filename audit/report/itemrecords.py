"""Each item's records for its provenance page, without holding them all.

An audit this process has just written is read from disk (`StoredRecords`): the report keeps
only where each item's lines lie, and whoever renders the page reads them back, so the report
of a benchmark of any size is rendered in flat memory, by workers that each read their own
items.  An audit already held in memory (one `read_audit` read) keeps its records as they are.
"""
from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import orjson

from audit.auditfile import AuditFile, StoredRecords
from audit.labels import Variants, grouped
from audit.records import JsonObject


class ItemRecords:
    """Item id → where its records are, in the audit's order of items: (byte offset, length)
    runs of lines in the file, kept in arrays by the items' numbers (`Variants`, shared with
    the labels), or the records themselves."""

    def __init__(self, audit: AuditFile | None, variants: Variants | None = None) -> None:
        # No audit yet: its lines are kept as they are written, and `placed` in the file at the end.
        self.audit = audit
        self.stored = audit is None or isinstance(audit.records, StoredRecords)
        self.path = audit.records.path if audit is not None and isinstance(audit.records, StoredRecords) else None
        self.variants = variants if variants is not None else Variants()
        self.held: list[list[JsonObject]] = []
        # Per run: its item's number, offset and length; per item, its last run (-1: none).
        self.runs = (array("q"), array("q"), array("q"))
        self.last = array("q")
        self._by_item: tuple[np.ndarray, np.ndarray] | None = None

    def located(self) -> Iterator[tuple[JsonObject, tuple[int, int] | JsonObject]]:
        """The audit's records, each with what `keep` takes of it."""
        if self.audit is None:
            raise ValueError("records kept as they are written are not read back before they are placed")
        if isinstance(self.audit.records, StoredRecords):
            yield from self.audit.records.located()
        else:
            for record in self.audit.records:
                yield record, record

    def placed(self, audit: AuditFile, shift: int) -> None:
        """Lines kept as they were written (offsets in the records alone) placed in `audit`,
        where they lie `shift` bytes further on, after its manifest line."""
        if not isinstance(audit.records, StoredRecords):
            raise ValueError("lines kept as written are placed in a file")
        self.audit, self.path = audit, audit.records.path
        offsets = self.runs[1]
        for run in range(len(offsets)):
            offsets[run] += shift

    def keep(self, item_id: str, where: tuple[int, int] | JsonObject) -> None:
        item = self.variants.item(item_id)
        if not self.stored:
            while len(self.held) <= item:
                self.held.append([])
            self.held[item].append(where)
            return
        while len(self.last) <= item:
            self.last.append(-1)
        items, offsets, lengths = self.runs
        offset, length = where
        last = self.last[item]
        if last >= 0 and offsets[last] + lengths[last] == offset:
            lengths[last] += length
            return
        self.last[item] = len(items)
        items.append(item)
        offsets.append(offset)
        lengths.append(length)
        self._by_item = None

    def finish(self) -> None:
        """Sort the runs by item once, here, before the page workers fork."""
        self.runs_of(0)

    def runs_of(self, item: int) -> list[tuple[int, int]]:
        """Item number `item`'s runs, in the file's order."""
        if self._by_item is None:
            self._by_item = grouped(np.frombuffer(self.runs[0], dtype=np.int64), len(self.last))
        order, starts = self._by_item
        _, offsets, lengths = self.runs
        return [(offsets[run], lengths[run]) for run in order[starts[item] : starts[item + 1]].tolist()] if item < len(self.last) else []

    def check_unchanged(self) -> None:
        """Refuse an audit file changed since it was checked (`StoredRecords.check_unchanged`)."""
        if self.audit is not None and isinstance(self.audit.records, StoredRecords):
            self.audit.records.check_unchanged()

    def item_ids(self) -> list[str]:
        return self.variants.item_ids[: max(len(self.held), len(self.last))]

    @contextmanager
    def reading(self) -> Iterator[Callable[[str], list[JsonObject]]]:
        """A function from an item id to its records, read back from the file (opened once for
        every item asked within the block) when they are not held."""
        if not self.stored:
            yield lambda item_id: self.held[self.variants.item_number[item_id]]
            return
        if self.path is None:
            raise ValueError("records kept as they are written are read back once placed")
        with open(self.path, "rb") as handle:

            def records(item_id: str) -> list[JsonObject]:
                found = []
                for offset, length in self.runs_of(self.variants.item_number[item_id]):
                    handle.seek(offset)
                    found += [orjson.loads(line) for line in handle.read(length).splitlines()]
                return found

            yield records
