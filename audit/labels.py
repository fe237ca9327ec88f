"""Tags per (item id, language), a byte per variant.

An audit's labels are read for every variant and several times over (overall, per signal, per
source, knowledge, membership), so a dict keyed by (item id, language) tuples would grow by a
few hundred bytes a variant and table.  Here each id and language is numbered once, in the
order the records name them (`Variants`, shared by all of an audit's tables), and a table keeps
one byte per variant: per language, the tag's code at the item's number, 0 where there is none.
Reading a tag writes nothing of the table, so forked workers reading it copy no page of it.
"""
from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

import numpy as np


class Variants:
    """The (item id, language) pairs in the order first met, each id and language numbered."""

    def __init__(self) -> None:
        self.item_number: dict[str, int] = {}
        self.item_ids: list[str] = []
        self.lang_number: dict[str, int] = {}
        self.langs: list[str] = []
        # The pairs in order, as item and language numbers side by side (32-bit: 8 bytes a variant).
        self.order_items = array("i")
        self.order_langs = array("i")

    def item(self, item_id: str) -> int:
        """The id's number, numbering an id not met before."""
        item = self.item_number.get(item_id)
        if item is None:
            item = self.item_number[item_id] = len(self.item_ids)
            self.item_ids.append(item_id)
        return item

    def number(self, item_id: str, lang: str) -> tuple[int, int]:
        """The pair's numbers, numbering an id or language not met before."""
        item = self.item(item_id)
        code = self.lang_number.get(lang)
        if code is None:
            code = self.lang_number[lang] = len(self.langs)
            self.langs.append(lang)
        return item, code

    def locate(self, key: tuple[str, str]) -> tuple[int, int] | None:
        item, lang = self.item_number.get(key[0]), self.lang_number.get(key[1])
        return None if item is None or lang is None else (item, lang)

    def met(self, item: int, lang: int) -> None:
        """Record the pair's place in the order (once: the first table to hold it calls this)."""
        self.order_items.append(item)
        self.order_langs.append(lang)

    def pairs(self) -> Iterator[tuple[int, int]]:
        return zip(self.order_items, self.order_langs, strict=True)

    def langs_by_item(self) -> tuple[np.ndarray, np.ndarray]:
        """Each item's language numbers among the pairs met, ascending: item i's are
        `langs[starts[i]:starts[i + 1]]`.  What goes through an item's languages then costs
        its own variants, not every language of the audit."""
        items, langs = np.frombuffer(self.order_items, dtype=np.int32), np.frombuffer(self.order_langs, dtype=np.int32)
        order, starts = grouped(items, len(self.item_ids), langs)
        return langs[order], starts


def grouped(items: np.ndarray, count: int, within: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Positions of `items` (item numbers below `count`) grouped by item, in their order or by
    `within` inside a group, and where each group starts: item i's positions are
    `order[starts[i]:starts[i + 1]]`."""
    order = np.argsort(items, kind="stable") if within is None else np.lexsort((within, items))
    return order, np.searchsorted(items[order], np.arange(count + 1))


class Columns:
    """Per language number, a column of whole numbers indexed by item number, 0 where none was
    set, each grown (doubling) as higher item numbers come."""

    def __init__(self, typecode: str) -> None:
        self.typecode = typecode
        self.columns: list[array[int]] = []

    def __len__(self) -> int:
        return len(self.columns)

    def get(self, item: int, lang: int) -> int:
        column = self.columns[lang] if lang < len(self.columns) else ()
        return column[item] if item < len(column) else 0

    def set(self, item: int, lang: int, value: int) -> None:
        while len(self.columns) <= lang:
            self.columns.append(array(self.typecode))
        column = self.columns[lang]
        if len(column) <= item:
            column.frombytes(bytes(column.itemsize * max(item + 1 - len(column), len(column))))
        column[item] = value

    def add(self, values: np.ndarray) -> None:
        """Append a whole column (the next language number's)."""
        self.columns.append(array(self.typecode, values.astype(np.dtype(self.typecode)).tobytes()))

    def array(self, lang: int, length: int) -> np.ndarray:
        """Language number `lang`'s column for items 0..length-1, as numpy."""
        found = np.zeros(length, dtype=np.dtype(self.typecode))
        column = self.columns[lang] if lang < len(self.columns) else array(self.typecode)
        shown = min(length, len(column))
        found[:shown] = np.frombuffer(column, dtype=found.dtype, count=shown)
        return found


class LabelTable(Mapping[tuple[str, str], str]):
    """A tag, one of `tags`, per (item id, language), readable as a mapping in the order the
    pairs were met.  `ordering` tables add the pairs they hold first to the shared order."""

    def __init__(self, variants: Variants, tags: Iterable[str], ordering: bool = False) -> None:
        self.variants = variants
        self.tags = tuple(str(tag) for tag in tags)
        self.code_of = {tag: code for code, tag in enumerate(self.tags, start=1)}
        self.codes = Columns("B")
        self.size = 0
        self.ordering = ordering

    def set(self, item: int, lang: int, tag: str) -> None:
        """Give the numbered pair its tag (a pair holds one: setting it again replaces it)."""
        if not self.codes.get(item, lang):
            self.size += 1
            if self.ordering:
                self.variants.met(item, lang)
        self.codes.set(item, lang, self.code_of[tag])

    def put(self, key: tuple[str, str], tag: str) -> None:
        self.set(*self.variants.number(*key), tag)

    def code(self, item: int, lang: int) -> int:
        return self.codes.get(item, lang)

    def __getitem__(self, key: tuple[str, str]) -> str:
        located = self.variants.locate(key)
        code = self.code(*located) if located else 0
        if not code:
            raise KeyError(key)
        return self.tags[code - 1]

    def get(self, key: tuple[str, str], default: str | None = None) -> str | None:  # type: ignore[override]
        located = self.variants.locate(key)
        code = self.code(*located) if located else 0
        return self.tags[code - 1] if code else default

    def __contains__(self, key: object) -> bool:
        located = self.variants.locate(key) if isinstance(key, tuple) and len(key) == 2 else None
        return bool(located and self.code(*located))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        ids, langs = self.variants.item_ids, self.variants.langs
        for item, lang in self.variants.pairs():
            if self.code(item, lang):
                yield ids[item], langs[lang]

    def __len__(self) -> int:
        return self.size

    def array(self, lang: int, length: int) -> np.ndarray:
        """The codes of language number `lang` for items 0..length-1 (0: no tag)."""
        return self.codes.array(lang, length)

    def _numbers(self, lang: str | None) -> list[int]:
        """The numbers of every language held, or of `lang` alone (none when never met)."""
        if lang is None:
            return list(range(len(self.codes)))
        return [self.variants.lang_number[lang]] if lang in self.variants.lang_number else []

    def counts(self, lang: str | None = None) -> Counter[str]:
        """How many pairs hold each tag, of one language or of all."""
        numbers = self._numbers(lang)
        found: Counter[str] = Counter()
        for number in numbers:
            held = np.bincount(self.array(number, len(self.variants.item_ids)), minlength=len(self.tags) + 1)
            found.update({tag: int(held[code]) for tag, code in self.code_of.items() if held[code]})
        return found

    def filled(self, present: LabelTable, default: str) -> LabelTable:
        """A table holding every pair of `present`: this table's tag where it has one, else
        `default`.  Both must number their pairs alike."""
        table = LabelTable(self.variants, self.tags)
        length = len(self.variants.item_ids)
        fill = self.code_of[str(default)]
        for lang in range(len(present.codes)):
            own, there = self.array(lang, length), present.array(lang, length)
            table.codes.add(np.where(there > 0, np.where(own > 0, own, fill), 0))
        table.size = len(present)
        return table

    def joint(self, other: LabelTable, lang: str | None, missing: str) -> Counter[tuple[str, str]]:
        """(this table's tag, `other`'s tag or `missing`) counted over this table's pairs."""
        numbers, length = self._numbers(lang), len(self.variants.item_ids)
        theirs = (missing, *other.tags)
        found: Counter[tuple[str, str]] = Counter()
        for number in numbers:
            mine, other_codes = self.array(number, length), other.array(number, length)
            held = mine > 0
            pairs, counts = np.unique(mine[held].astype(np.int64) << 8 | other_codes[held], return_counts=True)
            for pair, count in zip(pairs.tolist(), counts.tolist(), strict=True):
                found[self.tags[(pair >> 8) - 1], theirs[pair & 0xFF]] += count
        return found
