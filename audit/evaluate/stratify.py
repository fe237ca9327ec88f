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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

from audit.auditfile import AuditFile
from audit.errors import AuditError
from audit.evidence import Evidence, EvidenceError, Json
from audit.exposure import SEEN, UNKNOWN, UNSEEN, Knowledge, decide
from audit.policyfile import compile_policy
from audit.signals import KNOWLEDGE_SIGNALS

STRATA = (SEEN, UNSEEN, UNKNOWN)
KNOWN, NOT_KNOWN, UNDETERMINED = (tag.value for tag in Knowledge)
KNOWLEDGE_STRATA = (KNOWN, NOT_KNOWN, UNDETERMINED)

Labels = dict[tuple[str, str], str]


class ExposureError(AuditError):
    """An audit file whose records cannot be read as exposure labels."""


@dataclass
class Exposure:
    """Labels per (item id, language): overall, by signal and by source, of the corpus signals
    alone.  `judged` are the signals the policy has rules for, the ones a combination is made
    of.  `knowledge` is what the probed model knows, None when no record says (no model was
    probed); `models` are the model signals the audit ran."""

    overall: Labels
    by_signal: dict[str, Labels]
    signals: list[str]
    notes: list[str] = field(default_factory=list)
    by_source: dict[str, Labels] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)
    knowledge: Labels | None = None
    models: list[str] = field(default_factory=list)

    def label(self, item_id: str, lang: str) -> str:
        return self.overall.get((item_id, lang), UNKNOWN)

    def signal_label(self, signal: str, item_id: str, lang: str) -> str:
        return self.by_signal[signal].get((item_id, lang), UNKNOWN)

    def source_label(self, source: str, item_id: str, lang: str) -> str:
        return self.by_source[source].get((item_id, lang), UNKNOWN)

    def knowledge_label(self, item_id: str, lang: str) -> str:
        """`undetermined` for a pair without knowledge (or an audit without any)."""
        return (self.knowledge or {}).get((item_id, lang)) or UNDETERMINED

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
    overall: Labels = {}
    knowledge: Labels = {}
    evidence: dict[tuple[str, str], list[Evidence]] = {}
    models: list[str] = []
    for number, record in enumerate(audit.records, start=2):
        key = (_text(record, "item_id", number), _text(record, "lang", number))
        exposure = record.get("exposure")
        if exposure not in STRATA:
            raise ExposureError(f"audit record {number}: field 'exposure': expected one of {', '.join(STRATA)}, got {exposure!r}")
        if key in overall:
            raise ExposureError(f"audit record {number}: item '{key[0]}' in '{key[1]}' appears twice")
        overall[key] = exposure
        known = record.get("knowledge")
        if known is not None:
            if known not in KNOWLEDGE_STRATA:
                raise ExposureError(f"audit record {number}: field 'knowledge': expected one of {', '.join(KNOWLEDGE_STRATA)} or null, got {known!r}")
            knowledge[key] = known
        entries = [_evidence(entry, number) for entry in record.get("evidence") or []]
        models += [e.signal for e in entries if e.signal in KNOWLEDGE_SIGNALS]
        evidence[key] = [e for e in entries if e.signal not in KNOWLEDGE_SIGNALS]
    found = [e for entries in evidence.values() for e in entries]
    named = audit.manifest.get("signals") or []
    signals = list(dict.fromkeys([*(s for s in named if s not in KNOWLEDGE_SIGNALS), *(e.signal for e in found)]))
    models = list(dict.fromkeys([*(s for s in named if s in KNOWLEDGE_SIGNALS), *models]))
    sources = list(dict.fromkeys([
        *(str(corpus.get("name")) for corpus in audit.manifest.get("corpora") or [] if isinstance(corpus, dict) and corpus.get("name")),
        *(e.source for e in found),
    ]))
    settings = (audit.manifest.get("policy") or {}).get("settings") or {}
    if not settings.get("rules"):
        note = "the audit manifest carries no policy rules, so signals and sources cannot be judged alone: by_signal and by_source are empty"
        return Exposure(overall, {}, signals, [note], sources=sources, knowledge=knowledge or None, models=models)
    policy = compile_policy({"name": "audit", **settings}, "audit manifest's policy")

    def alone(keep: str, name: str) -> Labels:
        return {key: decide(policy, [e for e in entries if getattr(e, keep) == name]).exposure for key, entries in evidence.items()}

    return Exposure(
        overall,
        {signal: alone("signal", signal) for signal in signals},
        signals,
        by_source={source: alone("source", source) for source in sources},
        sources=sources,
        judged=[signal for signal in signals if policy.judges(signal)],
        knowledge=knowledge or None,
        models=models,
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
