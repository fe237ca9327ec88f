"""The counts an audit's manifest and the printed table give, from the typed records."""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

from audit.evidence import FAILED
from audit.evidence import UNKNOWN as UNKNOWN_STATUS
from audit.exposure import SEEN, UNKNOWN, UNSEEN, Knowledge, Membership
from audit.records import Check, ExposureRecord
from audit.signals import KNOWLEDGE_SIGNALS, MODEL_SIGNALS

Counts = dict[str, dict[str, int]]


@dataclass
class Summary:
    """Counts per language and per item; the checks behind the tags per signal and source;
    what the model knows and its membership verdicts per language, when it was probed; and, for sources that derive
    matches from counts, the count queries each variant cost.  Written in this field order."""

    languages: Counts
    items: dict[str, int]
    checks: Counts
    knowledge: Counts | None = None
    knowledge_checks: Counts | None = None
    membership: Counts | None = None
    count_queries: dict[str, dict[str, float]] | None = None

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass
class Failures:
    """Per (status, signal, source) of evidence that failed or could not tell: the fields, the
    variants it left undecided, and the first reason given, for the line a run prints."""

    fields: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    variants: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    first: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def add(self, record: ExposureRecord) -> None:
        undecided = set()
        for evidence in record.evidence:
            if evidence.status in (FAILED, UNKNOWN_STATUS):
                key = (str(evidence.status), evidence.signal, evidence.source)
                self.fields[key] += 1
                self.first.setdefault(key, evidence.error or "")
                undecided.add(key)
        for key in undecided:
            left = record.knowledge == Knowledge.UNDETERMINED if key[1] in KNOWLEDGE_SIGNALS else key[1] not in MODEL_SIGNALS and record.exposure == UNKNOWN
            self.variants[key] += int(left)

    def merge(self, other: Failures) -> None:
        self.fields.update(other.fields)
        self.variants.update(other.variants)
        for key, reason in other.first.items():
            self.first.setdefault(key, reason)


@dataclass
class Tally:
    """What the summary is made of, counted record by record where the records are decided and
    merged in the records' order, so the parent of a run holds counts rather than records and
    the summary is the one the whole list would give.  Nothing is kept per item or variant: an
    item is counted at its first record (an item's records come together, as an audit file
    holds them, and a tally that ends inside an item is merged with the one that goes on), and
    the count queries per variant are a histogram."""

    languages: dict[str, Counter[str]] = field(default_factory=dict)
    items: Counter[str] = field(default_factory=Counter)
    knowledge: dict[str, Counter[str]] = field(default_factory=dict)
    checks: dict[str, Counter[str]] = field(default_factory=dict)
    knowledge_checks: dict[str, Counter[str]] = field(default_factory=dict)
    membership: dict[str, Counter[str]] = field(default_factory=dict)
    queries: dict[str, Counter[int]] = field(default_factory=dict)
    failures: Failures = field(default_factory=Failures)
    # The first and the last item counted, with its tag, to merge tallies that split an item.
    first_item: tuple[str, str] | None = None
    last_item: tuple[str, str] | None = None

    @classmethod
    def of(cls, records: Iterable[ExposureRecord]) -> Tally:
        tally = cls()
        for record in records:
            tally.add(record)
        return tally

    def add(self, record: ExposureRecord) -> None:
        self.languages.setdefault(record.lang, Counter())[record.exposure] += 1
        self._count_item(record.item_id, str(record.item_exposure))
        if record.knowledge is not None:
            self.knowledge.setdefault(record.lang, Counter())[record.knowledge] += 1
        if record.membership is not None:
            self.membership.setdefault(record.lang, Counter())[record.membership] += 1
        _count_checks(self.checks, record.exposure, record.decided_by, {SEEN: "fired", UNSEEN: "passed"})
        _count_checks(self.knowledge_checks, record.knowledge, record.knowledge_decided_by, {Knowledge.KNOWN: "fired", Knowledge.NOT_KNOWN: "passed"})
        per_source: Counter[str] = Counter()
        for evidence in record.evidence:
            per_source[evidence.source] += evidence.figures.get("count_queries", 0)
        for source, spent in per_source.items():
            self.queries.setdefault(source, Counter())[spent] += 1
        self.failures.add(record)

    def _count_item(self, item_id: str, tag: str) -> None:
        if self.last_item is not None and self.last_item[0] == item_id:
            return
        self.items[tag] += 1
        self.last_item = (item_id, tag)
        if self.first_item is None:
            self.first_item = self.last_item

    def merge(self, other: Tally) -> None:
        """Another tally of the records that follow this one's."""
        for mine, theirs in ((self.languages, other.languages), (self.knowledge, other.knowledge), (self.checks, other.checks), (self.knowledge_checks, other.knowledge_checks),
                             (self.membership, other.membership)):
            for key, counts in theirs.items():
                mine.setdefault(key, Counter()).update(counts)
        self.items.update(other.items)
        if other.first_item is not None and self.last_item is not None and other.first_item[0] == self.last_item[0]:
            self.items[other.first_item[1]] -= 1  # one item, its records in both tallies
        self.first_item = self.first_item or other.first_item
        self.last_item = other.last_item or self.last_item
        for source, spent in other.queries.items():
            self.queries.setdefault(source, Counter()).update(spent)
        self.failures.merge(other.failures)

    def summary(self) -> Summary:
        summary = Summary(
            languages={lang: {tag: counts.get(tag, 0) for tag in (SEEN, UNSEEN, UNKNOWN)} | {"total": sum(counts.values())} for lang, counts in self.languages.items()},
            items={tag: count for tag, count in self.items.items() if count},
            checks=_sorted(self.checks),
        )
        if self.knowledge:
            summary.knowledge = {lang: {tag.value: counts.get(tag, 0) for tag in Knowledge} | {"total": sum(counts.values())} for lang, counts in self.knowledge.items()}
            summary.knowledge_checks = _sorted(self.knowledge_checks)
        if self.membership:
            summary.membership = {lang: {tag.value: counts.get(tag, 0) for tag in Membership} | {"total": sum(counts.values())} for lang, counts in self.membership.items()}
        queries = {
            source: {"total": sum(spent * times for spent, times in values.items()), "median_per_variant": histogram_median(values), "max_per_variant": max(values)}
            for source, values in self.queries.items()
            if any(values)
        }
        summary.count_queries = queries or None
        return summary


def histogram_median(histogram: Counter[int]) -> float:
    """`statistics.median` of the values a histogram counts (an int when their number is odd,
    the mean of the middle two when even)."""
    values = sorted(histogram.items())
    total = sum(histogram.values())
    wanted = [(total - 1) // 2, total // 2]
    found: list[int] = []
    seen = 0
    for value, times in values:
        found += [value] * sum(seen <= at < seen + times for at in wanted)
        seen += times
    return found[0] if total % 2 else statistics.median(found)


def summarise(records: Iterable[ExposureRecord]) -> Summary:
    """The summary of a whole list of records, each item counted once (its last record's tag)
    wherever its records lie: a list may be one a user edited, where a tally's count at each
    item's first record would count an item whose records are apart twice."""
    records = list(records)
    tally = Tally.of(records)
    tally.items = Counter({record.item_id: str(record.item_exposure) for record in records}.values())
    return tally.summary()


def _count_checks(counts: dict[str, Counter[str]], tag: object, checks: Sequence[Check] | None, outcome: Mapping[object, str]) -> None:
    """Per `signal/source`, the checks a tag rests on (`decided_by`): rules that fired on a
    seen (known) variant, rules that passed on an unseen (not known) one, and rules left
    undecided by a bound or a failed source on an unknown (undetermined) one."""
    for check in checks or []:
        if check.source is not None:
            counts.setdefault(f"{check.signal}/{check.source}", Counter())[check.status or outcome.get(str(tag), "undecided")] += 1


def _sorted(counts: dict[str, Counter[str]]) -> Counts:
    return {key: dict(sorted(found.items())) for key, found in sorted(counts.items())}
