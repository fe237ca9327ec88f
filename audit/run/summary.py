"""The counts an audit's manifest and the printed table give, from the typed records."""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from audit.exposure import SEEN, UNKNOWN, UNSEEN, Knowledge
from audit.records import ExposureRecord

Counts = dict[str, dict[str, int]]


@dataclass
class Summary:
    """Counts per language and per item; the checks behind the tags per signal and source;
    what the model knows per language, when it was probed; and, for sources that derive
    matches from counts, the count queries each variant cost.  Written in this field order."""

    languages: Counts
    items: dict[str, int]
    checks: Counts
    knowledge: Counts | None = None
    knowledge_checks: Counts | None = None
    count_queries: dict[str, dict[str, float]] | None = None

    def to_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def summarise(records: Sequence[ExposureRecord]) -> Summary:
    per_lang: dict[str, Counter[str]] = {}
    knowledge: dict[str, Counter[str]] = {}
    items: dict[str, str] = {}
    for record in records:
        per_lang.setdefault(record.lang, Counter())[record.exposure] += 1
        items[record.item_id] = str(record.item_exposure)
        if record.knowledge is not None:
            knowledge.setdefault(record.lang, Counter())[record.knowledge] += 1
    summary = Summary(
        languages={lang: {tag: counts.get(tag, 0) for tag in (SEEN, UNSEEN, UNKNOWN)} | {"total": sum(counts.values())} for lang, counts in per_lang.items()},
        items=dict(Counter(items.values())),
        checks=check_counts(records),
    )
    if knowledge:
        summary.knowledge = {lang: {tag.value: counts.get(tag, 0) for tag in Knowledge} | {"total": sum(counts.values())} for lang, counts in knowledge.items()}
        summary.knowledge_checks = check_counts(records, knowledge=True)
    summary.count_queries = count_queries(records) or None
    return summary


def check_counts(records: Sequence[ExposureRecord], *, knowledge: bool = False) -> Counts:
    """Per `signal/source`, the checks the tags rest on (`decided_by`): rules that fired on
    `seen` variants, rules that passed on `unseen` ones, and rules left undecided by a bound
    or a failed source on `unknown` ones (the same for `knowledge`, from its own checks)."""
    counts: dict[str, Counter[str]] = {}
    outcome: Mapping[str, str] = {Knowledge.KNOWN: "fired", Knowledge.NOT_KNOWN: "passed"} if knowledge else {SEEN: "fired", UNSEEN: "passed"}
    for record in records:
        tag, checks = (record.knowledge, record.knowledge_decided_by) if knowledge else (record.exposure, record.decided_by)
        for check in checks or []:
            if check.source is not None:
                counts.setdefault(f"{check.signal}/{check.source}", Counter())[check.status or outcome.get(str(tag), "undecided")] += 1
    return {key: dict(sorted(found.items())) for key, found in sorted(counts.items())}


def count_queries(records: Sequence[ExposureRecord]) -> dict[str, dict[str, float]]:
    """Per source whose matches were derived from counts: the count queries charged to each
    variant's budget, in all, at the median and at most."""
    spent: dict[str, list[int]] = {}
    for record in records:
        per_source: Counter[str] = Counter()
        for evidence in record.evidence:
            per_source[evidence.source] += evidence.figures.get("count_queries", 0)
        for source, queries in per_source.items():
            spent.setdefault(source, []).append(queries)
    return {
        source: {"total": sum(values), "median_per_variant": statistics.median(values), "max_per_variant": max(values)}
        for source, values in spent.items()
        if any(values)
    }
