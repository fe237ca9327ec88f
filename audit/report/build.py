"""Turn an audit file (and, when given, an evaluation) into the report's data: plain dicts
that report.json carries as they are and the templates render."""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable

from audit.auditfile import AuditFile, AuditFileError
from audit.evaluate.stratify import KNOWLEDGE_STRATA, KNOWN, NOT_KNOWN, STRATA, UNSEEN, Exposure, ExposureError, read_exposure
from audit.items import Item, Variant
from audit.probes.judge import UNPARSED
from audit.records import JsonObject
from audit.report.premise import premise_section
from audit.signals import probe_spec as probe
from audit.text import normalize

TEXT_FIELDS = ("question", "answer", "context")
VERDICTS = (KNOWN, NOT_KNOWN, UNPARSED)
# Answer recall of the self-summaries, in the bands the calibration table counts.
RECALL_BANDS = ("0", "(0, 0.5)", "[0.5, 1)", "1")


def page_name(item_id: str) -> str:
    """A file name for the item's provenance page that no item id can escape or collide on."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", item_id)[:80]
    if safe != item_id:
        safe += "-" + hashlib.sha1(item_id.encode()).hexdigest()[:8]
    return f"items/{safe}.html"


def exposure_labels(audit: AuditFile, audit_path: str) -> Exposure:
    """Every variant's label overall, by signal and by source, read once for the whole report."""
    try:
        return read_exposure(audit)
    except ExposureError as error:
        raise AuditFileError(f"{audit_path}: {error}") from None


def _counts(labels: list[str]) -> JsonObject:
    counts = Counter(labels)
    total = len(labels)
    return {tag: counts.get(tag, 0) for tag in STRATA} | {"total": total, "seen_rate": counts.get("seen", 0) / total if total else 0.0}


def _alone(labels: dict[tuple[str, str], str], languages: list[str]) -> JsonObject:
    """Counts of one signal's (or one source's) own labels, overall and per language."""
    return {
        "overall": _counts(list(labels.values())),
        "languages": {lang: _counts([label for (_, l), label in labels.items() if l == lang]) for lang in languages},
    }


def exposure_section(audit: AuditFile, labels: Exposure) -> JsonObject:
    manifest = audit.manifest
    languages: list[str] = []
    items: dict[str, JsonObject] = {}
    fires: Counter = Counter()
    for record in audit.records:
        if record["lang"] not in languages:
            languages.append(record["lang"])
        row = items.setdefault(
            record["item_id"],
            {"item_id": record["item_id"], "source_lang": record["source_lang"], "item_exposure": record["item_exposure"], "tags": {}, "page": page_name(record["item_id"]),
             "seen_in": record.get("seen_in"), "asked_in": record.get("asked_in")},
        )  # fmt: skip
        row["tags"][record["lang"]] = record["exposure"]
        if record["exposure"] == "seen":
            fires.update({f"{d.get('signal')}.{d['field']}.{d['figure']}" for d in record["decided_by"] if "figure" in d})
    per_language = {}
    for lang, counts in manifest["summary"]["languages"].items():
        per_language[lang] = counts | {"seen_rate": counts["seen"] / counts["total"] if counts["total"] else 0.0}
    return {
        "languages": languages,
        "per_language": per_language,
        "per_signal": {signal: _alone(by_key, languages) for signal, by_key in labels.by_signal.items()},
        "per_source": {source: _alone(by_key, languages) for source, by_key in labels.by_source.items()},
        "notes": labels.notes,
        "item_summary": manifest["summary"]["items"],
        # Most fired first, ties by name: a set's order changes with the hash seed.
        "rule_fires": dict(sorted(fires.items(), key=lambda fired: (-fired[1], fired[0]))),
        "items": [row | {"asked_in": row["asked_in"] or sorted(row["tags"])} for row in items.values()],
        "seen_elsewhere": seen_elsewhere(audit.records),
    }


def seen_elsewhere(records: list[JsonObject]) -> JsonObject | None:
    """For targets: how often their text or fact was seen only in other languages ("seen in
    English only"), per target language and per (target, other language) pair.  None when the
    audit did not record the languages seen in (written before they were)."""
    recorded = [r for r in records if r.get("role") == "target" and isinstance(r.get("seen_in_languages"), list)]
    if not recorded:
        return None
    per_target: dict[str, Counter] = {}
    pairs: dict[tuple[str, str], Counter] = {}
    for record in recorded:
        lang, found = record["lang"], record["seen_in_languages"]
        counts = per_target.setdefault(lang, Counter())
        counts["targets"] += 1
        if not found or lang in found:
            continue
        counts["only_elsewhere"] += 1
        for other in found:
            pairs.setdefault((lang, other), Counter()).update(["targets"] + (["only"] if found == [other] else []))
    return {
        "per_target": {lang: {"targets": c["targets"], "only_elsewhere": c["only_elsewhere"]} for lang, c in sorted(per_target.items())},
        "pairs": [{"target": t, "seen_in": o, "targets": c["targets"], "only": c["only"]} for (t, o), c in sorted(pairs.items(), key=lambda kv: (-kv[1]["targets"], kv[0]))],
    }


def _knowledge_counts(labels: list[str]) -> JsonObject:
    counts = Counter(labels)
    total = len(labels)
    return {tag: counts.get(tag, 0) for tag in KNOWLEDGE_STRATA} | {"total": total, "known_rate": counts.get(KNOWN, 0) / total if total else 0.0}


def _recall_band(recall: float) -> str:
    if recall <= 0:
        return RECALL_BANDS[0]
    if recall < 0.5:
        return RECALL_BANDS[1]
    return RECALL_BANDS[2] if recall < 1 else RECALL_BANDS[3]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def calibration(records: list[JsonObject]) -> JsonObject:
    """The judge's verdicts on the self-summaries against answer recall and chrF, which need
    no model: a judge that says `known` of summaries that never name the answer, or `not_known`
    of ones that do, is not to be trusted.  `unparsed`: the judge was asked but gave no verdict
    (a reply that could not be read, no strict majority of samples, or no reply)."""
    rows: dict[str, JsonObject] = {
        verdict: {"summaries": 0, "answer_recall": dict.fromkeys(RECALL_BANDS, 0), "no_answer": 0, "recall": [], "chrf": []} for verdict in VERDICTS
    }
    for record in records:
        for evidence in record.get("evidence") or []:
            if evidence.get("signal") != probe.NAME or evidence.get("field") != probe.SUMMARY:
                continue
            if not any(isinstance(shown, dict) and "judge" in shown for shown in evidence.get("provenance") or []):
                continue
            figures = evidence.get("figures") or {}
            row = rows[figures["judge"] if figures.get("judge") in (KNOWN, NOT_KNOWN) else UNPARSED]
            row["summaries"] += 1
            recall = figures.get("answer_recall")
            if isinstance(recall, int | float):
                row["answer_recall"][_recall_band(recall)] += 1
                row["recall"].append(recall)
            else:
                row["no_answer"] += 1
            if isinstance(figures.get("chrf"), int | float):
                row["chrf"].append(figures["chrf"])
    return {
        "bands": list(RECALL_BANDS),
        "verdicts": {
            verdict: {k: v for k, v in row.items() if k not in ("recall", "chrf")} | {"mean_answer_recall": _mean(row["recall"]), "mean_chrf": _mean(row["chrf"])}
            for verdict, row in rows.items()
        },
    }


def knowledge_section(audit: AuditFile, labels: Exposure) -> JsonObject | None:
    """What the probed model knows, per language; against what the corpus signals found (a
    variant the model knows and no corpus signal saw is exposure the audit could not explain);
    and the judge's calibration.  None when no model was probed."""
    if labels.knowledge is None:
        return None
    languages = list(dict.fromkeys(record["lang"] for record in audit.records))
    keys = [(record["item_id"], record["lang"]) for record in audit.records]
    known = {key: labels.knowledge_label(*key) for key in keys}

    def crosstab(lang: str | None) -> dict[str, dict[str, int]]:
        pairs = Counter((known[key], labels.label(*key)) for key in keys if lang is None or key[1] == lang)
        return {k: {tag: pairs.get((k, tag), 0) for tag in STRATA} | {"total": sum(pairs.get((k, tag), 0) for tag in STRATA)} for k in KNOWLEDGE_STRATA}

    models = audit.manifest.get("models") or {}
    return {
        "models": {role: {k: models[role].get(k) for k in ("name", "model_id", "backend")} for role in ("probe", "judge") if isinstance(models.get(role), dict)},
        "prompts": models.get("prompts"),
        "signals": labels.models,
        "languages": languages,
        "per_language": {lang: _knowledge_counts([label for (_, l), label in known.items() if l == lang]) for lang in languages},
        "total": _knowledge_counts(list(known.values())),
        "crosstab": {"languages": {lang: crosstab(lang) for lang in languages}, "total": crosstab(None)},
        "known_unseen": [{"item_id": item_id, "lang": lang} for (item_id, lang), label in known.items() if label == KNOWN and labels.label(item_id, lang) == UNSEEN],
        "calibration": calibration(audit.records),
    }


def report_data(audit: AuditFile, audit_path: str, evaluation: JsonObject | None, labels: Exposure) -> JsonObject:
    manifest = audit.manifest
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
        "exposure": exposure_section(audit, labels),
        "knowledge": knowledge_section(audit, labels),
        "premise": premise_section(audit),
        "evaluation": evaluation,
    }


def highlighted(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """The text cut into (piece, matched) segments, overlapping spans merged."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    segments, at = [], 0
    for start, end in merged:
        if start > at:
            segments.append((text[at:start], False))
        segments.append((text[start:end], True))
        at = end
    if at < len(text):
        segments.append((text[at:], False))
    return segments


def _prepare_ngram(evidence: JsonObject, variant: Variant | None) -> JsonObject:
    """n-gram spans are character offsets into the normalised field text (or the form's text,
    which the evidence carries): cut that text into highlighted segments (a match of the whole
    text counts as one span)."""
    figures = evidence.get("figures") or {}
    prepared = dict(evidence, figures={k: v for k, v in figures.items() if k != "spans"})
    if "text" in figures or evidence["field"] in TEXT_FIELDS:
        raw = figures.get("text") or (variant.text(evidence["field"]) if variant else None)
        text = normalize(raw) if raw else ""
        spans = [(int(s[0]), int(s[1])) for s in figures.get("spans", [])]
        if figures.get("longest_match_fraction") == 1.0:
            spans.append((0, len(text)))
        prepared["segments"] = highlighted(text, spans) if text else []
    return prepared


# What a signal's evidence needs beyond the audit record before its template can show it;
# a signal without an entry is shown as recorded.
PREPARE: dict[str, Callable[[JsonObject, Variant | None], JsonObject]] = {"ngram": _prepare_ngram}


def grouped_evidence(evidence: list[JsonObject], variant: Variant | None) -> dict[str, dict[str, list[JsonObject]]]:
    """{signal: {source: [evidence, ...]}}, in the order the audit recorded them."""
    grouped: dict[str, dict[str, list[JsonObject]]] = {}
    for entry in evidence:
        signal, source = str(entry.get("signal", "")), str(entry.get("source", ""))
        prepare = PREPARE.get(signal)
        grouped.setdefault(signal, {}).setdefault(source, []).append(prepare(entry, variant) if prepare else dict(entry))
    return grouped


def item_page(item: Item | None, records: list[JsonObject], labels: Exposure) -> JsonObject:
    """Everything the provenance page of one item shows, language by language: each signal's
    evidence from each source, and what each signal and each source decides alone."""
    languages = []
    for record in records:
        key = (record["item_id"], record["lang"])
        languages.append(
            {
                "lang": record["lang"],
                "role": record["role"],
                "exposure": record["exposure"],
                "decided_by": record["decided_by"],
                "seen_in_languages": record.get("seen_in_languages"),
                "knowledge": labels.knowledge_label(*key) if labels.knowledge is not None else None,
                "knowledge_decided_by": record.get("knowledge_decided_by") or [],
                "alone": {
                    "signal": {signal: labels.signal_label(signal, *key) for signal in labels.by_signal},
                    "source": {source: labels.source_label(source, *key) for source in labels.by_source},
                },
                "signals": grouped_evidence(record["evidence"], item.variants.get(record["lang"]) if item else None),
            }
        )
    first = records[0]
    asked_in = first.get("asked_in") or sorted(record["lang"] for record in records)
    return {"item_id": first["item_id"], "source_lang": first["source_lang"], "item_exposure": first["item_exposure"], "seen_in": first.get("seen_in"), "asked_in": asked_in, "languages": languages}
