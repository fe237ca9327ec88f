"""Exposure labels for evaluation strata, read from an audit file.

Each (item, language) gets the audit's own `exposure`, one label per signal and one per source:
the audit's policy (kept in the manifest) applied to that signal's evidence alone, or to that
source's evidence alone (every signal), so a split shows what each would have decided by itself.
The signals' labels together place a target in a combination (seen by `ngram` only, by both,
by neither).  A pair missing from the audit is `unknown`, and `unknown` is always its own
stratum, never merged into `unseen` or "neither".

What a probed model knows (`knowledge`) is read beside exposure, never into it: the model
signals' evidence takes no part in any exposure label, signal or source here.  A pair with no
knowledge is `undetermined`; an audit where no record has any carries no knowledge labels.
The membership verdict (`membership`) is read the same way, beside both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

from audit.auditfile import AuditFile
from audit.errors import AuditError
from audit.evidence import Evidence, EvidenceError, Json
from audit.exposure import SEEN, UNKNOWN, UNSEEN, Knowledge, Membership, decide, exposure_of
from audit.labels import LabelTable, Variants
from audit.policyfile import compile_policy
from audit.recordview import Piece, RecordView, pieces
from audit.rules import Outcome
from audit.signals import KNOWLEDGE_SIGNALS, MODEL_SIGNALS

STRATA = (SEEN, UNSEEN, UNKNOWN)
KNOWN, NOT_KNOWN, UNDETERMINED = (tag.value for tag in Knowledge)
KNOWLEDGE_STRATA = (KNOWN, NOT_KNOWN, UNDETERMINED)
MEMBER, NON_MEMBER = Membership.MEMBER.value, Membership.NON_MEMBER.value
MEMBERSHIP_STRATA = tuple(tag.value for tag in Membership)

Labels = LabelTable


class ExposureError(AuditError):
    """An audit file whose records cannot be read as exposure labels."""


@dataclass
class Exposure:
    """Labels per (item id, language): overall, by signal and by source, of the corpus signals
    alone.  `judged` are the signals the policy has rules for, the ones a combination is made
    of.  `knowledge` is what the probed model knows, None when no record says (no model was
    probed); `membership` the membership verdict, None when no record has a decided one (no
    calibrated threshold applied, so there is nothing to split by); `models` are the model
    signals the audit ran."""

    overall: Labels
    by_signal: dict[str, Labels]
    signals: list[str]
    notes: list[str] = field(default_factory=list)
    by_source: dict[str, Labels] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)
    knowledge: Labels | None = None
    models: list[str] = field(default_factory=list)
    membership: Labels | None = None

    def label(self, item_id: str, lang: str) -> str:
        return self.overall.get((item_id, lang), UNKNOWN)

    def signal_label(self, signal: str, item_id: str, lang: str) -> str:
        return self.by_signal[signal].get((item_id, lang), UNKNOWN)

    def source_label(self, source: str, item_id: str, lang: str) -> str:
        return self.by_source[source].get((item_id, lang), UNKNOWN)

    def knowledge_label(self, item_id: str, lang: str) -> str:
        """`undetermined` for a pair without knowledge (or an audit without any)."""
        return (self.knowledge.get((item_id, lang)) if self.knowledge is not None else None) or UNDETERMINED

    def membership_label(self, item_id: str, lang: str) -> str:
        """`undetermined` for a pair without a membership verdict."""
        return (self.membership.get((item_id, lang)) if self.membership is not None else None) or Membership.UNDETERMINED.value

    def everywhere(self, verdicts: Labels | None, tags: tuple[str, ...], default: str) -> Labels:
        """A model's verdicts on every pair the audit labels, `default` where it has none."""
        table = verdicts if verdicts is not None else LabelTable(self.overall.variants, tags)
        return table.filled(self.overall, default)

    def crosstab(self, verdicts: Labels, tags: tuple[str, ...], lang: str | None) -> dict[str, dict[str, int]]:
        """Variants (of one language, or all) by a model verdict (`tags`) and by exposure: for
        each verdict, the count per exposure tag and the total."""
        pairs = verdicts.joint(self.overall, lang, UNKNOWN)
        return {tag: {seen: pairs.get((tag, seen), 0) for seen in STRATA} | {"total": sum(pairs.get((tag, seen), 0) for seen in STRATA)} for tag in tags}

    def clean(self, item_id: str, lang: str) -> bool:
        """Unseen overall and unseen by every signal judged alone."""
        return self.label(item_id, lang) == UNSEEN and all(
            self.signal_label(signal, item_id, lang) == UNSEEN for signal in self.by_signal
        )

    def combinations(self) -> list[str]:
        """Every combination label, in a fixed order: each signal alone, then larger sets,
        then none of them, then `unknown`."""
        if not self.judged:
            return []
        seen_sets = [combination_name(list(group), self.judged) for size in range(1, len(self.judged) + 1)
                     for group in combinations(self.judged, size)]
        return [*seen_sets, combination_name([], self.judged), UNKNOWN]

    def combination(self, item_id: str, lang: str) -> str:
        """The set of signals that saw this variant, each judged alone.  A variant some signal
        could not judge is `unknown` even when another saw it: which set it belongs to is then
        not known."""
        labels = [self.signal_label(signal, item_id, lang) for signal in self.judged]
        if UNKNOWN in labels:
            return UNKNOWN
        return combination_name([s for s, label in zip(self.judged, labels, strict=True) if label == SEEN], self.judged)


def combination_name(seen: list[str], signals: list[str]) -> str:
    """"ngram only", "ngram+minhash", "neither" (of two signals) or "none" (of more)."""
    if not seen:
        return "neither" if len(signals) == 2 else "none"
    if len(seen) == 1 and len(signals) > 1:
        return f"{seen[0]} only"
    return "+".join(seen)


def read_exposure(audit: AuditFile) -> Exposure:
    """Labels from the audit's records; per-signal and per-source labels need the manifest's
    policy rules.  Only the corpus signals' evidence is judged: a model is no source of
    exposure."""
    reader = ExposureReader(audit.manifest)
    for number, record in enumerate(audit.records, start=2):
        reader.add(record, number)
    return reader.finish()


class ExposureReader:
    """`read_exposure` one record at a time: each record's evidence is judged as it comes and
    only its labels are kept, so a benchmark of any size is labelled without holding its
    evidence."""

    def __init__(self, manifest: dict[str, Json]) -> None:
        self.manifest = manifest
        settings = (manifest.get("policy") or {}).get("settings") or {}
        self.policy = compile_policy({"name": "audit", **settings}, "audit manifest's policy") if settings.get("rules") else None
        self.variants = Variants()
        self.overall = LabelTable(self.variants, STRATA, ordering=True)
        self.knowledge = LabelTable(self.variants, KNOWLEDGE_STRATA)
        self.membership = LabelTable(self.variants, MEMBERSHIP_STRATA)
        # Each record's labels by the signals and sources it has evidence of; the others get
        # the policy's label of no evidence when the reading is finished.
        self.own_signal: dict[str, Labels] = {}
        self.own_source: dict[str, Labels] = {}
        self.found_signals: dict[str, None] = {}
        self.found_sources: dict[str, None] = {}
        self.models: dict[str, None] = {}

    def add(self, record: dict[str, Json], number: int) -> tuple[str, str]:
        """Judge one record (`number` is its line, for errors); returns its (item id, language)."""
        pair = self._numbered(record, number)
        entries = [_evidence(entry, number) for entry in record.get("evidence") or []]
        self._judge(pair, pieces(entries, self.policy))
        return str(record["item_id"]), str(record["lang"])

    def add_view(self, view: RecordView, number: int) -> None:
        """`add` of a record whose evidence its worker judged (`audit.recordview`)."""
        self._judge(self._numbered(view.record, number), view.pieces)

    def _numbered(self, record: dict[str, Json], number: int) -> tuple[int, int]:
        """The record's tags set at its (item, language) numbers, which are returned."""
        item_id, lang = _text(record, "item_id", number), _text(record, "lang", number)
        exposure = record.get("exposure")
        if exposure not in STRATA:
            raise ExposureError(f"audit record {number}: field 'exposure': expected one of {', '.join(STRATA)}, got {exposure!r}")
        pair = self.variants.number(item_id, lang)
        if self.overall.code(*pair):
            raise ExposureError(f"audit record {number}: item '{item_id}' in '{lang}' appears twice")
        self.overall.set(*pair, exposure)
        known = record.get("knowledge")
        if known is not None:
            if known not in KNOWLEDGE_STRATA:
                raise ExposureError(f"audit record {number}: field 'knowledge': expected one of {', '.join(KNOWLEDGE_STRATA)} or null, got {known!r}")
            self.knowledge.set(*pair, known)
        member = record.get("membership")
        if member is not None:
            if member not in MEMBERSHIP_STRATA:
                raise ExposureError(f"audit record {number}: field 'membership': expected one of {', '.join(MEMBERSHIP_STRATA)} or null, got {member!r}")
            self.membership.set(*pair, member)
        return pair

    def _judge(self, pair: tuple[int, int], found: list[Piece]) -> None:
        """Each signal's (each source's) tag of the variant, from what its pieces say alone."""
        self.models.update(dict.fromkeys(piece.signal for piece in found if piece.signal in KNOWLEDGE_SIGNALS))
        corpus = [piece for piece in found if piece.signal not in MODEL_SIGNALS]
        said = [piece.said for piece in corpus] if self.policy is not None else None
        self._judge_alone(pair, [piece.signal for piece in corpus], said, self.found_signals, self.own_signal)
        self._judge_alone(pair, [piece.source for piece in corpus], said, self.found_sources, self.own_source)

    def _judge_alone(self, pair: tuple[int, int], names: list[str], said: list[Outcome | None] | None, found: dict[str, None], own: dict[str, Labels]) -> None:
        found.update(dict.fromkeys(names))
        if said is None:
            return
        grouped: dict[str, list[Outcome | None]] = {}
        for name, outcome in zip(names, said, strict=True):
            grouped.setdefault(name, []).append(outcome)
        for name, outcomes in grouped.items():
            if name not in own:
                own[name] = LabelTable(self.variants, STRATA)
            own[name].set(*pair, exposure_of(outcomes))

    def finish(self, manifest: dict[str, Json] | None = None) -> Exposure:
        """The labels; the signals and sources named are those of `manifest` when given (the
        audit file's own, when its records were read as they were written), else the one read with."""
        if manifest is not None:
            self.manifest = manifest
        named = self.manifest.get("signals") or []
        signals = list(dict.fromkeys([*(s for s in named if s not in MODEL_SIGNALS), *self.found_signals]))
        models = list(dict.fromkeys([*(s for s in named if s in KNOWLEDGE_SIGNALS), *self.models]))
        sources = list(dict.fromkeys([
            *(str(corpus.get("name")) for corpus in self.manifest.get("corpora") or [] if isinstance(corpus, dict) and corpus.get("name")),
            *self.found_sources,
        ]))
        knowledge = self.knowledge if len(self.knowledge) else None
        decided = any(tag != Membership.UNDETERMINED for tag in self.membership.counts())
        membership = self.membership if decided else None
        if self.policy is None:
            note = "the audit manifest carries no policy rules, so signals and sources cannot be judged alone: by_signal and by_source are empty"
            return Exposure(self.overall, {}, signals, [note], sources=sources, knowledge=knowledge, models=models, membership=membership)
        unjudged = decide(self.policy, []).exposure

        def alone(own: dict[str, Labels], name: str) -> Labels:
            return own.get(name, LabelTable(self.variants, STRATA)).filled(self.overall, unjudged)

        return Exposure(
            self.overall,
            {signal: alone(self.own_signal, signal) for signal in signals},
            signals,
            by_source={source: alone(self.own_source, source) for source in sources},
            sources=sources,
            judged=[signal for signal in signals if self.policy.judges(signal)],
            knowledge=knowledge,
            models=models,
            membership=membership,
        )


def _text(record: dict[str, Json], name: str, number: int) -> str:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
        raise ExposureError(f"audit record {number}: field '{name}': expected a string, got {value!r}")
    return str(value)


def _evidence(entry: Json, number: int) -> Evidence:
    try:
        return Evidence.from_dict(entry)
    except EvidenceError as error:
        raise ExposureError(f"audit record {number}: field 'evidence': {error}") from None
