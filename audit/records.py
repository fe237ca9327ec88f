"""The audit file's records, typed: one `ExposureRecord` per (item, language), with its rule
`Check`s and its signals' `Evidence`, and the `AuditManifest` that heads the file.  The
README's schema tables are checked against these fields (tests/test_signals.py), so the
documentation cannot drift from what is written.  `to_dict()` gives exactly the keys, in the
order, the file has always held, so a record read and written again is the same bytes.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import TypeAlias

from audit.evidence import Evidence, SignalRun, Status
from audit.exposure import Decision, Exposure, ItemExposure, Knowledge, KnowledgeDecision, Membership, MembershipDecision

# A value as JSON gives it: what the audit file holds below the fields its records type.
Json: TypeAlias = "bool | int | float | str | list[Json] | dict[str, Json] | None"
JsonObject: TypeAlias = "dict[str, Json]"
Scalar: TypeAlias = "bool | int | float | str | None"


class Role(StrEnum):
    SOURCE = "source"
    TARGET = "target"


# Statuses of a check made on a source that could not be asked: the check names the error.
_SOURCE_STATUSES = (Status.FAILED.value, Status.UNKNOWN.value)


@dataclass(frozen=True)
class Check:
    """One check behind a tag: the signal, source and field (and form) it looked at, the rule's
    figure, operator and threshold against the value found; or, for a source that could not
    be asked, its `status` and `error`; or the one `reason` no rule applied.  A membership
    check names the language or script `group` whose calibrated threshold it used.  `status` is
    `below_floor` or `bounded` for a figure that could not carry the decision (with its
    `floor` or `bounds`)."""

    signal: str | None = None
    source: str | None = None
    field: str | None = None
    form: str | None = None
    group: str | None = None
    figure: str | None = None
    op: str | None = None
    value: Scalar = None
    threshold: Scalar = None
    status: str | None = None
    error: str | None = None
    bounds: list[Scalar] | None = None
    floor: JsonObject | None = None
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: JsonObject) -> Check:
        return cls(**{name: data.get(name) for name in _CHECK_FIELDS})

    @property
    def key(self) -> str:
        """`signal.source.field.figure`: how tables and columns name the figure checked."""
        return f"{self.signal}.{self.source}.{self.field}.{self.figure}"

    def to_dict(self) -> JsonObject:
        """The written keys: those set, and `error` (even when null) on a source's failure."""
        data: JsonObject = {}
        for name in _CHECK_FIELDS:
            value = getattr(self, name)
            if value is not None or (name == "error" and self.figure is None and self.status in _SOURCE_STATUSES):
                data[name] = value
        return data


# Field names, in order, worked out once: every record's checks are made and written by them.
_CHECK_FIELDS = tuple(f.name for f in fields(Check))


def evidence_from_dict(data: JsonObject) -> Evidence:
    """A checked evidence entry of the audit file as the `Evidence` a signal gave."""
    figures, provenance, error = data.get("figures"), data.get("provenance"), data.get("error")
    return Evidence(
        str(data["signal"]), str(data["source"]), str(data["field"]), Status(str(data["status"])),
        figures if isinstance(figures, dict) else {}, [p for p in provenance if isinstance(p, dict)] if isinstance(provenance, list) else [],
        error if isinstance(error, str) else None,
    )


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
    decided_by: list[Check]
    evidence: list[Evidence]
    item_exposure: ItemExposure | None = None
    knowledge: Knowledge | None = None
    knowledge_decided_by: list[Check] = field(default_factory=list)
    # Fields written in another language than `lang` (MLQA's cross-lingual files); written only
    # when there are some, so records of other benchmarks, and older audits, have none.
    field_languages: dict[str, str] = field(default_factory=dict)
    seen_in_languages: list[str] | None = None
    seen_in: list[str] | None = None
    asked_in: list[str] | None = None
    # The membership verdict, when the membership signal ran; written only then, so audits
    # without it keep their bytes.
    membership: Membership | None = None
    membership_decided_by: list[Check] = field(default_factory=list)

    @classmethod
    def decided(cls, item_id: str, lang: str, source_lang: str, decision: Decision, evidence: list[Evidence], knowledge: KnowledgeDecision | None = None,
                field_languages: dict[str, str] | None = None, membership: MembershipDecision | None = None) -> ExposureRecord:
        role = Role.SOURCE if lang == source_lang else Role.TARGET
        checks = [Check.from_dict(check) for check in knowledge.decided_by] if knowledge else []
        record = cls(item_id, lang, source_lang, role, decision.exposure, [Check.from_dict(check) for check in decision.decided_by], list(evidence), None,
                     knowledge.knowledge if knowledge else None, checks, dict(field_languages or {}))
        record.seen_in_languages = list(decision.seen_in_languages)
        if membership is not None:
            record.membership = membership.membership
            record.membership_decided_by = [Check.from_dict(check) for check in membership.decided_by]
        return record

    @classmethod
    def from_dict(cls, data: JsonObject) -> ExposureRecord:
        """A record the schema has checked (`audit.auditschema.check_record`), typed."""

        def checks(name: str) -> list[Check]:
            found = data.get(name)
            return [Check.from_dict(check) for check in found if isinstance(check, dict)] if isinstance(found, list) else []

        def languages(name: str) -> list[str] | None:
            found = data.get(name)
            return [str(lang) for lang in found] if isinstance(found, list) else None

        evidence = data.get("evidence")
        knowledge, item_tag, written, member = data.get("knowledge"), data.get("item_exposure"), data.get("field_languages"), data.get("membership")
        return cls(
            str(data["item_id"]), str(data["lang"]), str(data["source_lang"]), Role(str(data["role"])), Exposure(str(data["exposure"])), checks("decided_by"),
            [evidence_from_dict(found) for found in evidence if isinstance(found, dict)] if isinstance(evidence, list) else [],
            ItemExposure(item_tag) if isinstance(item_tag, str) else None, Knowledge(knowledge) if isinstance(knowledge, str) else None, checks("knowledge_decided_by"),
            {str(name): str(lang) for name, lang in written.items()} if isinstance(written, dict) else {},
            languages("seen_in_languages"), languages("seen_in"), languages("asked_in"),
            Membership(member) if isinstance(member, str) else None, checks("membership_decided_by"),
        )

    def to_dict(self) -> JsonObject:
        """Its fields as they are written; evidence figures and provenance are plain data
        already, so they are not copied again (a deep copy of every record's evidence costs
        seconds).  `field_languages` is left out when the variant has none, `membership` and its
        checks when the membership signal did not run."""
        data: JsonObject = {}
        for name in _RECORD_FIELDS:
            value = getattr(self, name)
            if name in ("decided_by", "knowledge_decided_by", "membership_decided_by", "evidence"):
                value = [entry.to_dict() for entry in value]
            if (name != "field_languages" or value) and (name not in ("membership", "membership_decided_by") or self.membership is not None):
                data[name] = value
        return data


_RECORD_FIELDS = tuple(f.name for f in fields(ExposureRecord))


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

    @classmethod
    def from_dict(cls, data: JsonObject) -> BenchmarkRecord:
        """The manifest's `benchmark`, checked; what an older audit did not record is empty."""

        def text(name: str) -> str:
            value = data.get(name)
            return value if isinstance(value, str) else ""

        def strings(name: str) -> list[str]:
            value = data.get(name)
            return [str(entry) for entry in value] if isinstance(value, list) else []

        def table(name: str) -> JsonObject:
            value = data.get(name)
            return dict(value) if isinstance(value, dict) else {}

        items, excluded, source_lang = data.get("items"), data.get("excluded_rows"), data.get("source_lang")
        return cls(
            text("path"), text("absolute_path"), text("format"), text("sha256"), items if isinstance(items, int) else 0, strings("languages"), strings("skipped_rows"),
            excluded if isinstance(excluded, int) else 0, {k: v for k, v in table("kinds").items() if isinstance(v, int)}, {k: str(v) for k, v in table("language_codes").items()},
            strings("unused_fields"), dict(table("mapping")), source_lang if isinstance(source_lang, str) else None,
        )


@dataclass
class AuditManifest:
    """The first line: what was checked, against what, with which signals, under which policy.
    `records` and `records_sha256` are added when the file is written."""

    tool: str
    version: str
    created: str
    command: list[str]
    benchmark: BenchmarkRecord
    corpora: list[JsonObject]
    signals: list[str]
    signal_runs: list[SignalRun]
    policy: JsonObject
    config_hash: str
    summary: JsonObject = field(default_factory=dict)
    links: JsonObject | None = None
    models: JsonObject | None = None
    executor: str | None = None

    @classmethod
    def from_dict(cls, data: JsonObject) -> AuditManifest:
        """A manifest the schema has checked (`audit.auditschema.check_manifest`), typed; the
        file's own bookkeeping (`record`, `schema_version`, the records' count and digest) is
        not part of it."""

        def text(name: str) -> str:
            value = data.get(name)
            return value if isinstance(value, str) else ""

        def table(name: str) -> JsonObject | None:
            value = data.get(name)
            return value if isinstance(value, dict) else None

        corpora, signals, runs, benchmark = data.get("corpora"), data.get("signals"), data.get("signal_runs"), table("benchmark")
        return cls(
            text("tool"), text("version"), text("created"), [str(word) for word in data.get("command") or [] if isinstance(word, str)],
            BenchmarkRecord.from_dict(benchmark or {}), [entry for entry in corpora if isinstance(entry, dict)] if isinstance(corpora, list) else [],
            [str(name) for name in signals] if isinstance(signals, list) else [],
            [SignalRun(str(run["signal"]), str(run["source"]), bool(run["ran"]), run.get("reason") if isinstance(run.get("reason"), str) else None) for run in runs if isinstance(run, dict)]
            if isinstance(runs, list) else [],
            table("policy") or {}, text("config_hash"), table("summary") or {}, table("links"), table("models"), data.get("executor") if isinstance(data.get("executor"), str) else None,
        )

    def to_dict(self) -> JsonObject:
        data: JsonObject = asdict(self)
        for optional in ("links", "models", "executor"):
            if data[optional] is None:
                del data[optional]
        return data
