"""Each item's records for its provenance page, without holding them all.

An audit this process has just written is read from disk (`StoredRecords`): the report keeps
only where each item's lines lie, and whoever renders the page reads them back, so the report
of a benchmark of any size is rendered in flat memory, by workers that each read their own
items.  An audit already held in memory (one `read_audit` read) keeps its records as they are.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import orjson

from audit.auditfile import AuditFile, StoredRecords
from audit.records import JsonObject


class ItemRecords:
    """Item id → where its records are, in the audit's order of items: (byte offset, length)
    runs of lines in the file, or the records themselves."""

    def __init__(self, audit: AuditFile) -> None:
        self.audit = audit
        self.path = audit.records.path if isinstance(audit.records, StoredRecords) else None
        self.where: dict[str, list] = {}

    def located(self) -> Iterator[tuple[JsonObject, tuple[int, int] | JsonObject]]:
        """The audit's records, each with what `keep` takes of it."""
        if isinstance(self.audit.records, StoredRecords):
            yield from self.audit.records.located()
        else:
            for record in self.audit.records:
                yield record, record

    def keep(self, item_id: str, where: tuple[int, int] | JsonObject) -> None:
        runs = self.where.setdefault(item_id, [])
        if self.path is None:
            runs.append(where)
            return
        offset, length = where
        if runs and sum(runs[-1]) == offset:
            runs[-1] = (runs[-1][0], runs[-1][1] + length)
        else:
            runs.append((offset, length))

    def check_unchanged(self) -> None:
        """Refuse an audit file changed since it was checked (`StoredRecords.check_unchanged`)."""
        if isinstance(self.audit.records, StoredRecords):
            self.audit.records.check_unchanged()

    def item_ids(self) -> list[str]:
        return list(self.where)

    @contextmanager
    def reading(self) -> Iterator[Callable[[str], list[JsonObject]]]:
        """A function from an item id to its records, read back from the file (opened once for
        every item asked within the block) when they are not held."""
        if self.path is None:
            yield self.where.__getitem__
            return
        with open(self.path, "rb") as handle:

            def records(item_id: str) -> list[JsonObject]:
                found = []
                for offset, length in self.where[item_id]:
                    handle.seek(offset)
                    found += [orjson.loads(line) for line in handle.read(length).splitlines()]
                return found

            yield records
