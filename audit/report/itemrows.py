"""The exposure section's rows, one per item, kept as two shared tuples an item and made one
at a time wherever they are read: report.json, the index page, the grid.

A row shows an item's tag in each of its languages, its page, and where it was seen and asked.
Held as dicts they took 2 KB an item, grew the report with the benchmark and were copied, page
by page, into every worker that touched them.  Here an item keeps its first record's fields
and its languages in the order its records came, each as a tuple shared by every item alike;
its tags are read from the overall label table, which holds them already.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, overload

from audit.labels import LabelTable, Variants
from audit.records import Json, JsonObject

# The rows' first-record fields: source language, item tag, seen in, asked in.
Firsts = tuple[Json, Json, Json, Json]


def page_name(item_id: str) -> str:
    """A file name for the item's provenance page that no item id can escape or collide on."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", item_id)[:80]
    if safe != item_id:
        safe += "-" + hashlib.sha1(item_id.encode()).hexdigest()[:8]
    return f"items/{safe}.html"


class ItemRows(Sequence[JsonObject]):
    """The rows in the order the items were first met, each made when read: as dicts equal,
    key for key and in the same order, to the rows the report has always written."""

    def __init__(self, variants: Variants) -> None:
        self.variants = variants
        self.overall: LabelTable | None = None
        self.firsts: list[Firsts] = []
        self.langs: list[tuple[int, ...]] = []
        # The directory of another report whose pages the rows point at (`link`).
        self.linked: str | None = None
        self._firsts: dict[str, Firsts] = {}
        self._grown: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}

    def add(self, item: int, lang: int, record: JsonObject) -> None:
        """Item number `item`'s record in language number `lang` (numbered by `variants`)."""
        while len(self.firsts) <= item:
            self.firsts.append((None, None, None, None))
            self.langs.append(())
        if not self.langs[item]:
            firsts = (record["source_lang"], record["item_exposure"], record.get("seen_in"), record.get("asked_in"))
            self.firsts[item] = self._firsts.setdefault(repr(firsts), firsts)
        before = self.langs[item]
        grown = self._grown.get((before, lang))
        if grown is None:
            grown = self._grown[before, lang] = (*before, lang)
        self.langs[item] = grown

    def finish(self, overall: LabelTable) -> None:
        """The rows are complete; their tags are `overall`'s (numbered by the same `variants`)."""
        self.overall = overall

    def link(self, report: Path, out: Path) -> None:
        """Point every row at the page another report (`report`) holds, as a path relative to
        `out`; refuse when one is missing."""
        for item_id in self.variants.item_ids[: len(self)]:
            page = report / page_name(item_id)
            if not page.is_file():
                raise FileNotFoundError(f"{page}: no provenance page for item {item_id}")
        self.linked = os.path.relpath(report, out.absolute())

    def page_of(self, item_id: str) -> str:
        """The row's page of `item_id`; "" for an item without a row."""
        if self.variants.item_number.get(item_id, len(self)) >= len(self):
            return ""
        return page_name(item_id) if self.linked is None else (Path(self.linked) / page_name(item_id)).as_posix()

    def row(self, item: int) -> JsonObject:
        assert self.overall is not None, "rows read before they were finished"
        source_lang, item_exposure, seen_in, asked_in = self.firsts[item]
        langs, tags, code = self.variants.langs, self.overall.tags, self.overall.code
        item_id = self.variants.item_ids[item]
        held = {langs[lang]: tags[code(item, lang) - 1] for lang in self.langs[item]}
        return {
            "item_id": item_id, "source_lang": source_lang, "item_exposure": item_exposure, "tags": held, "page": self.page_of(item_id),
            "seen_in": list(seen_in) if isinstance(seen_in, list) else seen_in,
            "asked_in": (list(asked_in) if isinstance(asked_in, list) else asked_in) or sorted(held),
        }  # fmt: skip

    def __len__(self) -> int:
        return len(self.firsts)

    @overload
    def __getitem__(self, index: int) -> JsonObject: ...

    @overload
    def __getitem__(self, index: slice) -> list[JsonObject]: ...

    def __getitem__(self, index: int | slice) -> JsonObject | list[JsonObject]:
        if isinstance(index, slice):
            return [self.row(item) for item in range(len(self))[index]]
        return self.row(range(len(self))[index])

    def __iter__(self) -> Iterator[JsonObject]:
        return (self.row(item) for item in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


def dump(value: Json | ItemRows, handle: IO[str], level: int = 0) -> None:
    """`json.dump(value, handle, indent=2, ensure_ascii=False)`, byte for byte, with the rows
    of an `ItemRows` made and written one at a time rather than all held at once.  Rows are
    found as values of dicts with string keys (as report.json's data holds them), not inside
    lists."""
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value):
        handle.write("{")
        for number, (key, item) in enumerate(value.items()):
            handle.write(("," if number else "") + "\n" + "  " * (level + 1) + json.dumps(key, ensure_ascii=False) + ": ")
            dump(item, handle, level + 1)
        handle.write("\n" + "  " * level + "}")
    elif isinstance(value, ItemRows) and len(value):
        for number, row in enumerate(value):
            handle.write(("," if number else "[") + "\n" + "  " * (level + 1))
            dump(row, handle, level + 1)
        handle.write("\n" + "  " * level + "]")
    else:
        text = json.dumps([] if isinstance(value, ItemRows) else value, indent=2, ensure_ascii=False)
        handle.write(text.replace("\n", "\n" + "  " * level) if level else text)
