"""Every (item, language) checked by every runner and decided, in one place.

Runners arrive as callables, so this module needs no signal by name; an executor
(`audit.run.executors`) gathers each variant's evidence wherever it runs, and the tags are
decided here, in this process, from that evidence: the records come out the same on threads,
forked processes or a Ray cluster.
"""
from __future__ import annotations

from collections.abc import Sequence

from audit.evidence import Evidence
from audit.exposure import decide, decide_knowledge, item_exposure, seen_in
from audit.items import Item
from audit.policyfile import Policy
from audit.records import ExposureRecord
from audit.run.executors import Advance, Threads, VariantExecutor, no_progress
from audit.signals import Runner


def decided(item: Item, lang: str, evidence: list[Evidence], policy: Policy) -> ExposureRecord:
    """One variant's record: its tag and, when a model was probed, what the model knows."""
    variant = item.variants.get(lang)
    field_languages = variant.field_languages if variant is not None else None
    record = ExposureRecord.decided(item.item_id, lang, item.source_lang, decide(policy, evidence, lang), evidence, decide_knowledge(policy, evidence), field_languages)
    record.asked_in = sorted(item.variants)
    return record


def check_items(
    items: list[Item],
    runners: Sequence[Runner],
    policy: Policy,
    *,
    langs: list[str] | None = None,
    workers: int | None = None,
    on_done: Advance = no_progress,
    executor: VariantExecutor | None = None,
) -> list[ExposureRecord]:
    """Records in item order then language order, whatever order the executor finishes in.

    `langs` limits which variants are checked; the others stay on the item, since signals
    compare a target variant with its source-language text.  Without an `executor` the
    variants are checked on `workers` threads."""
    tasks = [(item, lang) for item in items for lang in item.variants if langs is None or lang in langs]
    found = (executor or Threads(workers)).evidence(tasks, runners, on_done)
    records = [decided(item, lang, evidence, policy) for (item, lang), evidence in zip(tasks, found, strict=True)]
    by_item: dict[str, list[ExposureRecord]] = {}
    for record in records:
        by_item.setdefault(record.item_id, []).append(record)
    for group in by_item.values():
        summary = item_exposure(group[0].source_lang, {r.lang: r.exposure for r in group})
        found_in = seen_in([r.seen_in_languages for r in group])
        for record in group:
            record.item_exposure, record.seen_in = summary, found_in
    return records
