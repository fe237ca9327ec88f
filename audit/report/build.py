"""Turn an audit file (and, when given, an evaluation) into the report's data: plain dicts
that report.json carries as they are and the templates render, but for the item rows, which
are made as they are read (`ItemRows`).  Every section is counted in one pass over the
records, each dropped once counted, so a report's memory does not grow with the evidence."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from audit.auditfile import AuditFile, AuditFileError
from audit.evaluate.stratify import KNOWLEDGE_STRATA, KNOWN, NOT_KNOWN, STRATA, UNDETERMINED, UNSEEN, Exposure, ExposureError, ExposureReader
from audit.labels import LabelTable, Variants
from audit.probes.judge import UNPARSED
from audit.records import JsonObject
from audit.recordview import RecordView
from audit.report.itemrecords import ItemRecords
from audit.report.itemrows import ItemRows
from audit.report.membership import MembershipScores
from audit.report.premise import Premise
from audit.signals import langlinks_spec, membership_spec
from audit.signals import probe_spec as probe

VERDICTS = (KNOWN, NOT_KNOWN, UNPARSED)
# The signals whose evidence the sections read (the premise, the judge's calibration, the
# membership scores): a record's view keeps theirs as written, and only judges the others'.
READ_WHOLE = frozenset({langlinks_spec.NAME, probe.NAME, membership_spec.NAME})
# Answer recall of the self-summaries, in the bands the calibration table counts.
RECALL_BANDS = ("0", "(0, 0.5)", "[0.5, 1)", "1")


def _counts(counts: Counter[str]) -> JsonObject:
    total = sum(counts.values())
    return {tag: counts.get(tag, 0) for tag in STRATA} | {"total": total, "seen_rate": counts.get("seen", 0) / total if total else 0.0}


def _alone(labels: LabelTable, languages: list[str]) -> JsonObject:
    """Counts of one signal's (or one source's) own labels, overall and per language."""
    return {"overall": _counts(labels.counts()), "languages": {lang: _counts(labels.counts(lang)) for lang in languages}}


class ExposureRows:
    """The exposure section read one record at a time: a row per item (`ItemRows`), the
    languages in the order met, and how often each check decided `seen`."""

    def __init__(self, variants: Variants) -> None:
        self.variants = variants
        self.languages: dict[str, None] = {}
        self.rows = ItemRows(variants)
        self.fires: Counter = Counter()

    def add(self, record: JsonObject) -> None:
        """A record the exposure reader has numbered (`variants`)."""
        item, lang = self.variants.item_number[record["item_id"]], self.variants.lang_number[record["lang"]]
        self.languages[self.variants.langs[lang]] = None
        self.rows.add(item, lang, record)
        if record["exposure"] == "seen":
            self.fires.update({f"{d.get('signal')}.{d['field']}.{d['figure']}" for d in record["decided_by"] if "figure" in d})

    def section(self, manifest: JsonObject, labels: Exposure, elsewhere: JsonObject | None) -> JsonObject:
        languages = list(self.languages)
        per_language = {}
        for lang, counts in manifest["summary"]["languages"].items():
            per_language[lang] = counts | {"seen_rate": counts["seen"] / counts["total"] if counts["total"] else 0.0}
        self.rows.finish(labels.overall)
        return {
            "languages": languages,
            "per_language": per_language,
            "per_signal": {signal: _alone(by_key, languages) for signal, by_key in labels.by_signal.items()},
            "per_source": {source: _alone(by_key, languages) for source, by_key in labels.by_source.items()},
            "notes": labels.notes,
            "item_summary": manifest["summary"]["items"],
            # Most fired first, ties by name: a set's order changes with the hash seed.
            "rule_fires": dict(sorted(self.fires.items(), key=lambda fired: (-fired[1], fired[0]))),
            "items": self.rows,
            "seen_elsewhere": elsewhere,
        }


class SeenElsewhere:
    """For targets: how often their text or fact was seen only in other languages ("seen in
    English only"), per target language and per (target, other language) pair, counted one
    record at a time."""

    def __init__(self) -> None:
        self.per_target: dict[str, Counter] = {}
        self.pairs: dict[tuple[str, str], Counter] = {}

    def add(self, record: JsonObject) -> None:
        if record.get("role") != "target" or not isinstance(record.get("seen_in_languages"), list):
            return
        lang, found = record["lang"], record["seen_in_languages"]
        counts = self.per_target.setdefault(lang, Counter())
        counts["targets"] += 1
        if not found or lang in found:
            return
        counts["only_elsewhere"] += 1
        for other in found:
            self.pairs.setdefault((lang, other), Counter()).update(["targets"] + (["only"] if found == [other] else []))

    def section(self) -> JsonObject | None:
        """None when the audit did not record the languages seen in (written before they were)."""
        if not self.per_target:
            return None
        return {
            "per_target": {lang: {"targets": c["targets"], "only_elsewhere": c["only_elsewhere"]} for lang, c in sorted(self.per_target.items())},
            "pairs": [
                {"target": t, "seen_in": o, "targets": c["targets"], "only": c["only"]}
                for (t, o), c in sorted(self.pairs.items(), key=lambda kv: (-kv[1]["targets"], kv[0]))
            ],
        }


def _knowledge_counts(counts: Counter[str]) -> JsonObject:
    total = sum(counts.values())
    return {tag: counts.get(tag, 0) for tag in KNOWLEDGE_STRATA} | {"total": total, "known_rate": counts.get(KNOWN, 0) / total if total else 0.0}


def _recall_band(recall: float) -> str:
    if recall <= 0:
        return RECALL_BANDS[0]
    if recall < 0.5:
        return RECALL_BANDS[1]
    return RECALL_BANDS[2] if recall < 1 else RECALL_BANDS[3]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class Calibration:
    """The judge's verdicts on the self-summaries against answer recall and chrF, which need
    no model: a judge that says `known` of summaries that never name the answer, or `not_known`
    of ones that do, is not to be trusted.  `unparsed`: the judge was asked but gave no verdict
    (a reply that could not be read, no strict majority of samples, or no reply)."""

    def __init__(self) -> None:
        self.rows: dict[str, JsonObject] = {
            verdict: {"summaries": 0, "answer_recall": dict.fromkeys(RECALL_BANDS, 0), "no_answer": 0, "recall": [], "chrf": []} for verdict in VERDICTS
        }

    def add(self, record: JsonObject) -> None:
        for evidence in record.get("evidence") or []:
            if evidence.get("signal") != probe.NAME or evidence.get("field") != probe.SUMMARY:
                continue
            if not any(isinstance(shown, dict) and "judge" in shown for shown in evidence.get("provenance") or []):
                continue
            figures = evidence.get("figures") or {}
            row = self.rows[figures["judge"] if figures.get("judge") in (KNOWN, NOT_KNOWN) else UNPARSED]
            row["summaries"] += 1
            recall = figures.get("answer_recall")
            if isinstance(recall, int | float):
                row["answer_recall"][_recall_band(recall)] += 1
                row["recall"].append(recall)
            else:
                row["no_answer"] += 1
            if isinstance(figures.get("chrf"), int | float):
                row["chrf"].append(figures["chrf"])

    def section(self) -> JsonObject:
        return {
            "bands": list(RECALL_BANDS),
            "verdicts": {
                verdict: {k: v for k, v in row.items() if k not in ("recall", "chrf")} | {"mean_answer_recall": _mean(row["recall"]), "mean_chrf": _mean(row["chrf"])}
                for verdict, row in self.rows.items()
            },
        }


def knowledge_section(manifest: JsonObject, labels: Exposure, languages: list[str], judged: JsonObject) -> JsonObject | None:
    """What the probed model knows, per language; against what the corpus signals found (a
    variant the model knows and no corpus signal saw is exposure the audit could not explain);
    and the judge's calibration.  None when no model was probed."""
    if labels.knowledge is None:
        return None
    known = labels.everywhere(labels.knowledge, KNOWLEDGE_STRATA, UNDETERMINED)

    models = manifest.get("models") or {}
    return {
        "models": {role: {k: models[role].get(k) for k in ("name", "model_id", "backend")} for role in ("probe", "judge") if isinstance(models.get(role), dict)},
        "prompts": models.get("prompts"),
        "signals": labels.models,
        "languages": languages,
        "per_language": {lang: _knowledge_counts(known.counts(lang)) for lang in languages},
        "total": _knowledge_counts(known.counts()),
        "crosstab": {"languages": {lang: labels.crosstab(known, KNOWLEDGE_STRATA, lang) for lang in languages}, "total": labels.crosstab(known, KNOWLEDGE_STRATA, None)},
        "known_unseen": [{"item_id": item_id, "lang": lang} for (item_id, lang), label in known.items() if label == KNOWN and labels.label(item_id, lang) == UNSEEN],
        "calibration": judged,
    }


@dataclass
class ReadAudit:
    """Everything the report needs of the audit's records, from one pass over them: the labels,
    the sections' data, and where each item's records are for its provenance page."""

    labels: Exposure
    sections: JsonObject
    records: ItemRecords


class RecordsReading:
    """The report's pass over the records, one record at a time: each is judged, counted and
    dropped, and its item keeps where its line lies (`where`: the byte offset and length, or
    the record itself when the audit is held in memory).  `audit` is None while the file is
    still being written (`audit.report.aswritten`); its records are then placed at the end."""

    def __init__(self, manifest: JsonObject, audit: AuditFile | None) -> None:
        self.reader = ExposureReader(manifest)
        self.rows = ExposureRows(self.reader.variants)
        self.elsewhere, self.judged, self.premise, self.scores = SeenElsewhere(), Calibration(), Premise(), MembershipScores()
        self.records = ItemRecords(audit, self.reader.variants)

    def add(self, record: JsonObject, where: tuple[int, int] | JsonObject, number: int) -> None:
        """One record, `number` its line in the file (for errors)."""
        self.reader.add(record, number)
        self._sections(record, where)

    def add_view(self, view: RecordView, where: tuple[int, int], number: int) -> None:
        """`add` of a record's view, made where the record was (`audit.recordview`)."""
        self.reader.add_view(view, number)
        self._sections(view.record, where)

    def _sections(self, record: JsonObject, where: tuple[int, int] | JsonObject) -> None:
        for section in (self.rows, self.elsewhere, self.judged, self.premise, self.scores):
            section.add(record)
        self.records.keep(record["item_id"], where)

    def finish(self, manifest: JsonObject) -> ReadAudit:
        """The labels and sections, under the audit file's own manifest."""
        labels = self.reader.finish(manifest)
        self.records.finish()
        sections = {
            "exposure": self.rows.section(manifest, labels, self.elsewhere.section()),
            "knowledge": knowledge_section(manifest, labels, list(self.rows.languages), self.judged.section()),
            "premise": self.premise.section(manifest),
            "membership": self.scores.section(manifest, labels, list(self.rows.languages)),
        }
        return ReadAudit(labels, sections, self.records)


def read_records(audit: AuditFile, audit_path: str) -> ReadAudit:
    """One pass over the records, holding none of them when they are read from disk."""
    reading = RecordsReading(audit.manifest, audit)
    try:
        for number, (record, where) in enumerate(reading.records.located(), start=2):
            reading.add(record, where, number)
        return reading.finish(audit.manifest)
    except ExposureError as error:
        raise AuditFileError(f"{audit_path}: {error}") from None


def report_data(audit: AuditFile, audit_path: str, evaluation: JsonObject | None, read: ReadAudit) -> JsonObject:
    manifest = audit.manifest
    labels = read.labels
    return {
        "title": f"Contamination audit of {manifest['benchmark']['path']}",
        "audit": {
            "path": audit_path,
            "created": manifest["created"],
            "tool": f"{manifest['tool']} {manifest['version']}",
            "benchmark": manifest["benchmark"],
            "corpora": manifest["corpora"],
            "signals": [*labels.signals, *labels.models],
            "signal_runs": manifest.get("signal_runs") or [],
            "policy": {k: manifest["policy"][k] for k in ("name", "source", "hash")},
            "config_hash": manifest["config_hash"],
            "links": manifest.get("links"),
        },
        **read.sections,
        "evaluation": evaluation,
    }
