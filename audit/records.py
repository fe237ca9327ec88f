"""The audit file's records, typed: one `ExposureRecord` per (item, language) and the
`AuditManifest` that heads the file.  The README's schema tables are checked against these
fields (tests/test_signals.py), so the documentation cannot drift from what is written.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from audit.evidence import Evidence, SignalRun
from audit.exposure import Decision, Exposure, ItemExposure, Knowledge, KnowledgeDecision


class Role(StrEnum):
    SOURCE = "source"
    TARGET = "target"


@dataclass
class ExposureRecord:
    """One (item, language): its tag, the checks that decided it and every signal's evidence;
    and, when a model was probed, what the model knows (`knowledge`) and the checks behind it.

    `seen_in_languages`: the languages whose documents hold this variant's text or fact;
    `seen_in` / `asked_in`: the item's, over all its variants (the same on each of its
    records).  None in an audit written before they were recorded."""

    item_id: str
    lang: str
    source_lang: str
    role: Role
    exposure: Exposure
    decided_by: list[dict[str, Any]]
    evidence: list[dict[str, Any]]
    item_exposure: ItemExposure | None = None
    knowledge: Knowledge | None = None
    knowledge_decided_by: list[dict[str, Any]] = field(default_factory=list)
    # Fields written in another language than `lang` (MLQA's cross-lingual files); written only
    # when there are some, so records of other benchmarks, and older audits, have none.
    field_languages: dict[str, str] = field(default_factory=dict)
    seen_in_languages: list[str] | None = None
    seen_in: list[str] | None = None
    asked_in: list[str] | None = None

    @classmethod
    def decided(cls, item_id: str, lang: str, source_lang: str, decision: Decision, evidence: list[Evidence], knowledge: KnowledgeDecision | None = None, field_languages: dict[str, str] | None = None) -> ExposureRecord:
        role = Role.SOURCE if lang == source_lang else Role.TARGET
        known = (knowledge.knowledge, knowledge.decided_by) if knowledge else (None, [])
        record = cls(item_id, lang, source_lang, role, decision.exposure, decision.decided_by, [e.to_dict() for e in evidence], None, *known, dict(field_languages or {}))
        record.seen_in_languages = list(decision.seen_in_languages)
        return record

    def to_dict(self) -> dict[str, Any]:
        """Its fields as they are written; decided_by and evidence are plain data already, so
        they are not copied again (a deep copy of every record's evidence costs seconds).
        `field_languages` is left out when the variant has none."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "field_languages" or self.field_languages}


@dataclass
class BenchmarkRecord:
    """The audited benchmark, as filter and report find and check it again."""

    path: str
    absolute_path: str
    format: str
    sha256: str
    items: int
    languages: list[str]
    skipped_rows: list[str]
    excluded_rows: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    language_codes: dict[str, str] = field(default_factory=dict)
    unused_fields: list[str] = field(default_factory=list)
    mapping: dict[str, object] = field(default_factory=dict)
    source_lang: str | None = None


@dataclass
class AuditManifest:
    """The first line: what was checked, against what, with which signals, under which policy.
    `records` and `records_sha256` are added when the file is written."""

    tool: str
    version: str
    created: str
    command: list[str]
    benchmark: BenchmarkRecord
    corpora: list[dict[str, Any]]
    signals: list[str]
    signal_runs: list[SignalRun]
    policy: dict[str, Any]
    config_hash: str
    summary: dict[str, Any] = field(default_factory=dict)
    links: dict[str, Any] | None = None
    models: dict[str, Any] | None = None
    executor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for optional in ("links", "models", "executor"):
            if data[optional] is None:
                del data[optional]
        return data
