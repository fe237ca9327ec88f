"""Exposure labels for evaluation strata, read from an audit file.

Each (item, language) gets the audit's own `exposure`, and one label per signal: the audit's
policy (kept in the manifest) applied to that signal's evidence alone, so a split by signal
shows what each signal would have decided by itself. A pair missing from the audit is
`unknown`, and `unknown` is always its own stratum, never merged into `unseen`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.auditfile import AuditFile
from audit.evidence import OK, Evidence
from audit.exposure import SEEN, UNKNOWN, UNSEEN, Policy, decide

STRATA = (SEEN, UNSEEN, UNKNOWN)


class ExposureError(Exception):
    """An audit file whose records cannot be read as exposure labels."""


@dataclass
class Exposure:
    """Labels per (item id, language): overall and by signal."""

    overall: dict[tuple[str, str], str]
    by_signal: dict[str, dict[tuple[str, str], str]]
    signals: list[str]
    notes: list[str] = field(default_factory=list)

    def label(self, item_id: str, lang: str) -> str:
        return self.overall.get((item_id, lang), UNKNOWN)

    def signal_label(self, signal: str, item_id: str, lang: str) -> str:
        return self.by_signal[signal].get((item_id, lang), UNKNOWN)

    def clean(self, item_id: str, lang: str) -> bool:
        """Unseen overall and unseen by every signal judged alone."""
        return self.label(item_id, lang) == UNSEEN and all(
            self.signal_label(signal, item_id, lang) == UNSEEN for signal in self.by_signal
        )


def read_exposure(audit: AuditFile) -> Exposure:
    """Labels from the audit's records; per-signal labels need the manifest's policy rules."""
    overall: dict[tuple[str, str], str] = {}
    evidence: dict[tuple[str, str], list[Evidence]] = {}
    for number, record in enumerate(audit.records, start=2):
        key = (_text(record, "item_id", number), _text(record, "lang", number))
        exposure = record.get("exposure")
        if exposure not in STRATA:
            raise ExposureError(f"audit record {number}: field 'exposure': expected one of {', '.join(STRATA)}, got {exposure!r}")
        if key in overall:
            raise ExposureError(f"audit record {number}: item '{key[0]}' in '{key[1]}' appears twice")
        overall[key] = exposure
        evidence[key] = [_evidence(entry, number) for entry in record.get("evidence") or []]
    signals = list(dict.fromkeys([
        *(audit.manifest.get("signals") or []),
        *(e.signal for entries in evidence.values() for e in entries),
    ]))
    settings = (audit.manifest.get("policy") or {}).get("settings") or {}
    if not settings.get("rules"):
        note = "the audit manifest carries no policy rules, so signals cannot be judged alone: by_signal is empty"
        return Exposure(overall, {}, signals, [note])
    policy = Policy(str(settings.get("name", "audit")), "audit manifest", settings)
    by_signal = {
        signal: {key: decide(policy, [e for e in entries if e.signal == signal]).exposure for key, entries in evidence.items()}
        for signal in signals
    }
    return Exposure(overall, by_signal, signals)


def _text(record: dict[str, Any], name: str, number: int) -> str:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
        raise ExposureError(f"audit record {number}: field '{name}': expected a string, got {value!r}")
    return str(value)


def _evidence(entry: Any, number: int) -> Evidence:
    if not isinstance(entry, dict) or not isinstance(entry.get("signal"), str) or not isinstance(entry.get("field"), str):
        raise ExposureError(f"audit record {number}: field 'evidence': each entry needs a 'signal' and a 'field'")
    figures = entry.get("figures")
    return Evidence(
        signal=entry["signal"],
        source=str(entry.get("source", entry.get("corpus", ""))),
        field=entry["field"],
        status=str(entry.get("status", OK)),
        figures=figures if isinstance(figures, dict) else {},
        error=entry.get("error"),
    )
