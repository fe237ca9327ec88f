"""The records of an audit file checked against each other, against the manifest's counts and
against the benchmark they audit, one record at a time.

The checks need little of each record, but kept per record that little grew with the audit
(a few hundred bytes a variant).  So `Across` keeps per item what the checks compare its
records with (its first line, source language and `asked_in`, the first line that disagrees)
and per variant a line number and a tag, numbered as `audit.labels` numbers them.  A problem is
raised as a check of the whole list would raise it: the first record in the file that fails
against the manifest or an earlier record, then each item in the order first met (its source
language and item tag, then its `seen_in` and `asked_in`), then the manifest's counts; against
the benchmark, the first record in the file that fails.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np

from audit.auditschema import FIRST_RECORD_LINE, SHOWN_MISSING, TAGS, SchemaError
from audit.exposure import item_exposure
from audit.items import Item
from audit.labels import Columns, LabelTable, Variants
from audit.records import Json, JsonObject, Role

# A problem found and where: its line, then the order of its check within that line.
Found = tuple[int, int, SchemaError]
T = TypeVar("T")


@dataclass(slots=True)
class _ItemSeen:
    """One item's records as the checks across them see it: its first record's values, and
    where the later ones first disagree."""

    number: int
    item_id: str
    line: int
    source_lang: str
    asked_in: Json
    item_tag: str
    other_source: tuple[int, str] | None = None
    other_asked: tuple[int, Json] | None = None
    # Item tags other than the first record's, each with the first line giving it.
    other_tags: dict[str, int] | None = None
    seen_in: tuple[tuple[Json, int], ...] = ()
    union: frozenset[str] | None = frozenset()

    def note(self, number: int, record: JsonObject, shared: Shared) -> None:
        if self.other_source is None and record["source_lang"] != self.source_lang:
            self.other_source = (number, record["source_lang"])
        tag = record["item_exposure"]
        if tag != self.item_tag:
            self.other_tags = self.other_tags or {}
            self.other_tags.setdefault(tag, number)
        if "seen_in" in record and all(value != record["seen_in"] for value, _ in self.seen_in):
            self.seen_in = (*self.seen_in, (shared(record["seen_in"]), number))
        found = record.get("seen_in_languages")
        if found is None:
            self.union = None
        elif self.union is not None and not self.union.issuperset(found):
            self.union = shared(self.union.union(found))
        if self.other_asked is None and record.get("asked_in") != self.asked_in:
            self.other_asked = (number, record.get("asked_in"))


class Shared:
    """One object for each value many items' records repeat (a source language, an `asked_in`
    or `seen_in` list, a union of languages): kept once per item, the parsed copies of these
    were most of what the checks held, about 2 KB an item."""

    def __init__(self) -> None:
        self._kept: dict[object, object] = {}

    def __call__(self, value: T) -> T:
        """The first value equal to `value` (lists of strings compared as tuples); other kinds
        of value as they are."""
        if isinstance(value, list):
            key: object = tuple(value) if all(isinstance(element, str) for element in value) else None
        else:
            key = value if isinstance(value, str | frozenset) else None
        return value if key is None else cast(T, self._kept.setdefault(key, value))


class Across:
    """`add` each record (with its line number) in the file's order, then `finish`."""

    def __init__(self, manifest: JsonObject) -> None:
        self.manifest = manifest
        self.languages = set(manifest["benchmark"]["languages"])
        self.variants = Variants()
        self.tags = LabelTable(self.variants, TAGS, ordering=True)
        self.lines = Columns("i")
        self.items: dict[str, _ItemSeen] = {}
        self.tallies: dict[str, Counter[str]] = {}
        self.problem: SchemaError | None = None
        self._by_item: tuple[np.ndarray, np.ndarray] | None = None
        self._shared = Shared()

    @classmethod
    def of(cls, manifest: JsonObject, records: Iterable[JsonObject]) -> Across:
        across = cls(manifest)
        for index, record in enumerate(records):
            across.add(index + FIRST_RECORD_LINE, record)
        return across

    def line(self, item: int, lang: int) -> int:
        """The line of the pair's record, 0 when it has none."""
        return self.lines.get(item, lang)

    def add(self, number: int, record: JsonObject) -> None:
        """Check one record against the manifest and the records before it; the first problem is
        kept, and raised by `finish`."""
        if self.problem is not None:
            return
        item_id, lang = record["item_id"], record["lang"]
        if lang not in self.languages:
            self.problem = SchemaError(number, "lang", f"{lang!r} is not one of the benchmark's languages in the manifest ({', '.join(sorted(self.languages))})")
            return
        item, code = self.variants.number(item_id, lang)
        if first := self.line(item, code):
            self.problem = SchemaError(number, "lang", f"a second record for item {item_id!r} in {lang!r} (the first is on line {first})")
            return
        if (record["role"] == Role.SOURCE) != (lang == record["source_lang"]):
            self.problem = SchemaError(number, "role", f"{record['role']!r} where lang is {lang!r} and source_lang {record['source_lang']!r}")
            return
        self.lines.set(item, code, number)
        self.tags.set(item, code, record["exposure"])
        self._by_item = None
        self.tallies.setdefault(lang, Counter())[record["exposure"]] += 1
        seen = self.items.get(item_id)
        if seen is None:
            shared = self._shared
            seen = self.items[item_id] = _ItemSeen(item, item_id, number, shared(record["source_lang"]), shared(record.get("asked_in")), shared(record["item_exposure"]))
        seen.note(number, record, self._shared)

    def finish(self) -> None:
        """Raise the first problem, as checking the whole list in its order would."""
        if self.problem is not None:
            raise self.problem
        item_tags: Counter[str] = Counter()
        for seen in self.items.values():
            item_tags[self._check_item(seen)] += 1
        self._check_counts(item_tags)

    def _numbers(self, seen: _ItemSeen) -> list[int]:
        """The numbers of the item's languages, ascending (all items' found at the first ask)."""
        if self._by_item is None:
            self._by_item = self.variants.langs_by_item()
        langs, starts = self._by_item
        return langs[starts[seen.number] : starts[seen.number + 1]].tolist()

    def _item_langs(self, seen: _ItemSeen) -> dict[str, str]:
        """The item's tag per language."""
        langs, tags = self.variants.langs, self.tags.tags
        return {langs[lang]: tags[self.tags.code(seen.number, lang) - 1] for lang in self._numbers(seen)}

    def _check_item(self, seen: _ItemSeen) -> str:
        """One item's records agree on its source language, carry the item tag their tags give,
        and where recorded the `seen_in` their `seen_in_languages` give and one `asked_in`.
        Returns the item's tag."""
        expected = item_exposure(seen.source_lang, self._item_langs(seen))
        found: list[Found] = []
        if seen.other_source is not None:
            line, value = seen.other_source
            found.append((line, 0, SchemaError(line, "source_lang", f"{value!r}, where line {seen.line} gives item {seen.item_id!r} source language {seen.source_lang!r}")))
        tags = [(seen.line, seen.item_tag), *((line, tag) for tag, line in (seen.other_tags or {}).items())]
        wrong = sorted((line, tag) for line, tag in tags if tag != expected)
        if wrong:
            line, tag = wrong[0]
            found.append((line, 1, SchemaError(line, "item_exposure", f"{tag!r}, but the exposure of item {seen.item_id!r}'s languages makes it {expected.value!r}")))
        _raise_first(found)
        union = None if seen.union is None else sorted(seen.union)
        differing = sorted((line, index) for index, (value, line) in enumerate(seen.seen_in) if value != union)
        if differing:
            line, index = differing[0]
            found.append((line, 0, SchemaError(line, "seen_in", f"{seen.seen_in[index][0]!r}, but item {seen.item_id!r}'s seen_in_languages give {union!r}")))
        if seen.other_asked is not None:
            line, value = seen.other_asked
            found.append((line, 1, SchemaError(line, "asked_in", f"{value!r}, where line {seen.line} gives item {seen.item_id!r} {seen.asked_in!r}")))
        _raise_first(found)
        return expected.value

    def _check_counts(self, item_tags: Counter[str]) -> None:
        declared = self.manifest["benchmark"]["items"]
        if len(self.items) > declared:
            raise SchemaError(1, "benchmark.items", f"{declared}, but the records are of {len(self.items)} items")
        summary = self.manifest["summary"]
        counted = {lang: {tag: found.get(tag, 0) for tag in TAGS} | {"total": sum(found.values())} for lang, found in self.tallies.items()}
        for lang in sorted(set(counted) | set(summary["languages"])):
            if summary["languages"].get(lang) != counted.get(lang):
                raise SchemaError(1, f"summary.languages.{lang}", f"{summary['languages'].get(lang)}, but the records give {counted.get(lang)}")
        if dict(item_tags) != summary["items"]:
            raise SchemaError(1, "summary.items", f"{summary['items']}, but the records give {dict(item_tags)}")

    def check_benchmark(self, items: Iterable[Item]) -> None:
        """The records against the benchmark they audit: the manifest's item count and
        languages are the benchmark's, every item and language exists, with the item's source
        language, and every variant in an audited language has its record.  The items are gone
        through once and only their languages kept, so items held packed stay packed."""
        declared = self.manifest["benchmark"]
        shapes = _shapes(items)
        if declared["items"] != len(shapes):
            raise SchemaError(1, "benchmark.items", f"{declared['items']}, but the benchmark has {len(shapes)} items")
        found = [problem for seen in self.items.values() for problem in self._against(seen, shapes.get(seen.item_id))]
        _raise_first(found)
        languages = {lang for _, langs in shapes.values() for lang in langs}
        if set(declared["languages"]) != languages:
            raise SchemaError(1, "benchmark.languages", f"{', '.join(sorted(set(declared['languages'])))}, but the benchmark's are {', '.join(sorted(languages))}")
        audited = set(self.variants.langs)
        missing = [f"{item_id}/{lang}" for item_id, (_, langs) in shapes.items() for lang in langs if lang in audited and not self._has(item_id, lang)]
        if missing:
            shown = ", ".join(missing[:SHOWN_MISSING]) + (f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else "")
            raise SchemaError(None, None, f"no record for {len(missing)} variant(s) of the benchmark in the audited languages (item/language): {shown}")

    def _has(self, item_id: str, lang: str) -> bool:
        located = self.variants.locate((item_id, lang))
        return located is not None and self.line(*located) > 0

    def _against(self, seen: _ItemSeen, shape: Shape | None) -> list[Found]:
        """What is wrong with one item's records against its shape in the benchmark, each at the
        line of the first record it is wrong on (an item's records share all but their language)."""
        if shape is None:
            return [(seen.line, 0, SchemaError(seen.line, "item_id", f"{seen.item_id!r} is not an item of the benchmark"))]
        source_lang, langs = shape
        found: list[Found] = []
        for code in self._numbers(seen):
            line, lang = self.line(seen.number, code), self.variants.langs[code]
            if lang not in langs:
                found.append((line, 1, SchemaError(line, "lang", f"{lang!r} is not a language of item {seen.item_id!r} (it has {', '.join(sorted(langs))})")))
        if seen.source_lang != source_lang:
            found.append((seen.line, 2, SchemaError(seen.line, "source_lang", f"{seen.source_lang!r}, but item {seen.item_id!r}'s source language is {source_lang!r}")))
        if seen.asked_in is not None and seen.asked_in != sorted(langs):
            found.append((seen.line, 3, SchemaError(seen.line, "asked_in", f"{seen.asked_in!r}, but item {seen.item_id!r} is asked in {sorted(langs)!r}")))
        return found


def _raise_first(found: list[Found]) -> None:
    if found:
        raise min(found, key=lambda problem: problem[:2])[2]


def check_records(manifest: JsonObject, records: Iterable[JsonObject]) -> Across:
    """The records against each other and against what the manifest declares: one record per
    (item, language), languages of the benchmark, one source language and one item tag per
    item (the tag its languages' tags give), and the manifest's counts."""
    across = Across.of(manifest, records)
    across.finish()
    return across


# An item as the benchmark check needs it: its source language and its languages in order.
Shape = tuple[str, tuple[str, ...]]


def _shapes(items: Iterable[Item]) -> dict[str, Shape]:
    """Each item's shape by id, the many items of one shape sharing one tuple."""
    shared: dict[Shape, Shape] = {}
    shapes: dict[str, Shape] = {}
    for item in items:
        shape = (item.source_lang, tuple(item.variants))
        shapes[item.item_id] = shared.setdefault(shape, shape)
    return shapes
