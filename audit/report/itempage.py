"""What a provenance page shows of one item: each language's evidence grouped by signal and
source, prepared for its template, and what each signal and each source decides alone."""
from __future__ import annotations

from collections.abc import Callable

from audit.evaluate.stratify import Exposure
from audit.items import Item, Variant
from audit.records import JsonObject
from audit.text import normalize

TEXT_FIELDS = ("question", "answer", "context")


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
    prepared = dict(evidence)
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


def by_field(grouped: dict[str, dict[str, list[JsonObject]]]) -> list[tuple[str, list[tuple[str, list[tuple[str, list[JsonObject]]]]]]]:
    """[(signal, [(field, [(source, evidence on that field), ...]), ...]), ...]: each signal's
    fields in the order first met across its sources, and under each field every source of the
    signal (one without evidence on the field shows so).  Grouped here, once, rather than by
    the page filtering every source's evidence for every field."""
    shown = []
    for signal, by_source in grouped.items():
        fields = dict.fromkeys(entry["field"] for entries in by_source.values() for entry in entries)
        on_field: dict[tuple[str, str], list[JsonObject]] = {}
        for source, entries in by_source.items():
            for entry in entries:
                on_field.setdefault((entry["field"], source), []).append(entry)
        shown.append((signal, [(field, [(source, on_field.get((field, source), [])) for source in by_source]) for field in fields]))
    return shown


def item_page(item: Item | None, records: list[JsonObject], labels: Exposure) -> JsonObject:
    """Everything the provenance page of one item shows, language by language: each signal's
    evidence from each source, and what each signal and each source decides alone."""
    languages = []
    for record in records:
        key = (record["item_id"], record["lang"])
        grouped = grouped_evidence(record["evidence"], item.variants.get(record["lang"]) if item else None)
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
                "signals": by_field(grouped),
            }
        )
    first = records[0]
    asked_in = first.get("asked_in") or sorted(record["lang"] for record in records)
    return {"item_id": first["item_id"], "source_lang": first["source_lang"], "item_exposure": first["item_exposure"], "seen_in": first.get("seen_in"), "asked_in": asked_in, "languages": languages}
