"""Every (item, language) checked by every runner and decided, an item at a time.

Runners arrive as callables, so this module needs no signal by name.  An item is the unit of
work: its variants are checked together, decided by the one function here (`decided`) and,
since an item's tag and `seen_in` need all its languages, summed up together; the records then
leave as the audit file's lines with a tally of their counts.  An executor
(`audit.run.executors`) runs that wherever it runs, so the records come out the same on
threads, forked processes or a Ray cluster, and the parent of a run holds counts, not records.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from audit.auditfile import as_written, record_lines
from audit.evidence import Evidence
from audit.exposure import decide, decide_knowledge, decide_membership, item_exposure, seen_in
from audit.items import Item
from audit.policyfile import Policy
from audit.records import ExposureRecord
from audit.recordview import RecordView, Views
from audit.rules import Outcome
from audit.run.summary import Tally
from audit.signals import Runner


def decided(item: Item, lang: str, evidence: list[Evidence], policy: Policy) -> tuple[ExposureRecord, list[Outcome | None]]:
    """One variant's record: its tag and, when a model was probed, what the model knows and
    what its membership scores say; and what each piece of its evidence says alone, as the
    tag was decided (`Decision.said`), which the record's view hands the report."""
    variant = item.variants.get(lang)
    field_languages = variant.field_languages if variant is not None else None
    decision = decide(policy, evidence, lang)
    record = ExposureRecord.decided(item.item_id, lang, item.source_lang, decision, evidence, decide_knowledge(policy, evidence), field_languages,
                                    decide_membership(policy, evidence, lang))
    record.asked_in = sorted(item.variants)
    return record, decision.said


@dataclass(frozen=True)
class ItemOutcome:
    """One item's outcome: its records as the audit file's lines, how many, and their tally;
    the records themselves only when the caller asked to keep them, and their views for the
    report's pass only when it asked for those."""

    lines: bytes
    variants: int
    tally: Tally
    records: list[ExposureRecord] | None = None
    views: list[RecordView] | None = None


@dataclass(frozen=True)
class ItemWork:
    """What checking an item takes: the runners, the policy deciding, the languages checked
    (None: all; the others stay on the item, since signals compare a target variant with its
    source-language text), whether the records are kept beside their lines, and how their views
    for the report's pass are made (None: none are)."""

    runners: Sequence[Runner]
    policy: Policy
    langs: list[str] | None = None
    keep: bool = False
    views: Views | None = None

    def languages(self, item: Item) -> list[str]:
        return [lang for lang in item.variants if self.langs is None or lang in self.langs]

    def gather(self, item: Item, lang: str, runners: Sequence[Runner] | None = None) -> list[Evidence]:
        """One variant's evidence from every runner (or those given), in the runners' order."""
        return [evidence for run in (self.runners if runners is None else runners) for evidence in run(item, lang)]

    def finish(self, item: Item, found: Sequence[list[Evidence]]) -> ItemOutcome:
        """The item's variants decided from their evidence (in `languages` order) and summed up."""
        made = [decided(item, lang, evidence, self.policy) for lang, evidence in zip(self.languages(item), found, strict=True)]
        records = [record for record, _ in made]
        if records:
            summary = item_exposure(records[0].source_lang, {r.lang: r.exposure for r in records})
            found_in = seen_in([r.seen_in_languages for r in records])
            for record in records:
                record.item_exposure, record.seen_in = summary, found_in
        kept = records if self.keep else None
        if self.views is None:
            return ItemOutcome(record_lines(records), len(records), Tally.of(records), kept)
        written = [as_written(record) for record in records]
        views = [self.views.view(record, line, said) for (record, said), line in zip(made, written, strict=True)]
        return ItemOutcome(record_lines(written), len(records), Tally.of(records), kept, views)

    def __call__(self, item: Item) -> ItemOutcome:
        return self.finish(item, [self.gather(item, lang) for lang in self.languages(item)])
