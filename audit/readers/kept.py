"""What `load_benchmark` keeps of a reader's items as they stream past: the languages asked
for, and what the manifest must say about all of them (how many were read, the languages
present, the fields no signal reads, the kinds and variants per language of those kept), noted
item by item so no list of items is needed."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from audit.items import Item
from audit.readers.common import BenchmarkError

# Item and variant metadata the audit shows (titles, links) rather than leaves unread.
_SHOWN_FIELDS = frozenset({"title", "url"})


@dataclass
class Kept:
    """Keeps only the variants in `wanted` (when given) and items that still have one."""

    wanted: list[str] | None
    read: int = 0
    present: set[str] = field(default_factory=set)
    fields: set[str] = field(default_factory=set)
    kinds: Counter[str] = field(default_factory=Counter)
    variant_counts: Counter[str] = field(default_factory=Counter)

    def stream(self, items: Iterable[Item]) -> Iterator[Item]:
        for item in items:
            self.read += 1
            self.present.update(item.variants)
            if self.wanted is not None:
                variants = {lang: variant for lang, variant in item.variants.items() if lang in self.wanted}
                if not variants:
                    continue
                item = replace(item, variants=variants)
            self._note_fields(item)
            self.kinds[str(item.kind)] += 1
            self.variant_counts.update(item.variants.keys())
            yield item

    def _note_fields(self, item: Item) -> None:
        self.fields.update(item.meta)
        for variant in item.variants.values():
            self.fields.update(variant.meta)

    def unused_fields(self) -> list[str]:
        """Keys the readers kept in `meta`, so the manifest lists everything on an item that
        the audit did not look at."""
        return sorted(self.fields - _SHOWN_FIELDS)

    def check_wanted(self, path: Path) -> None:
        """Every language asked for must occur: a misspelt or absent one is an error, not an
        empty audit."""
        missing = [lang for lang in self.wanted or [] if lang not in self.present]
        if missing:
            have = ", ".join(sorted(self.present))
            raise BenchmarkError(path, None, "langs", f"not in this benchmark: {', '.join(missing)} (it has {have})")
