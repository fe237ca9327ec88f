"""The audit file's schema, checked on every line whatever the manifest's digest says.

The digest only proves the records are the bytes the manifest was written with; anyone can
recompute it after an edit.  So each record is checked against the schema (every field's type
and closed choices), the records against each other and against the manifest's own counts, and,
where the benchmark is at hand, against the benchmark itself.  A check raises `SchemaError`
naming the line and the field; `audit.auditfile` adds the file's name.
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from enum import StrEnum

from audit.errors import AuditError
from audit.evidence import Status
from audit.exposure import BELOW_FLOOR, Exposure, ItemExposure, Knowledge, Membership, item_exposure, seen_in
from audit.items import Item
from audit.records import AuditManifest, ExposureRecord, Json, JsonObject, Role
from audit.rules import Op, Outcome

FIRST_RECORD_LINE = 2
MANIFEST_KEYS = frozenset({f.name for f in fields(AuditManifest)} | {"record", "schema_version", "records", "records_sha256", "upgraded_from"})
RECORD_KEYS = frozenset({f.name for f in fields(ExposureRecord)} | {"record"})
CHECK_STATUSES = (Status.FAILED.value, Status.UNKNOWN.value, Outcome.UNDECIDED.value, BELOW_FLOOR)
TAGS = tuple(tag.value for tag in Exposure)
SHOWN_MISSING = 5


@dataclass
class SchemaError(AuditError):
    """One bad value: the line it is on (None for the file as a whole), the field, and why."""

    line: int | None
    field: str | None
    message: str


class _Bad(Exception):
    """A value below a record's top level is wrong; `path` is its field, as `evidence[2].status`."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.path, self.message = path, message


def _shown(value: Json) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _string(path: str, value: Json, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise _Bad(path, f"expected a {'string' if empty else 'non-empty string'}, got {_shown(value)}")
    return value


@functools.cache
def _values(choices: type[StrEnum]) -> tuple[str, ...]:
    """A closed choice's values, worked out once: every record's every field asks."""
    return tuple(c.value for c in choices)


def _choice(path: str, value: Json, choices: type[StrEnum] | tuple[str, ...], null: bool = False) -> None:
    allowed = _values(choices) if isinstance(choices, type) else choices
    if (value is None and null) or (isinstance(value, str) and value in allowed):
        return
    raise _Bad(path, f"expected one of {', '.join(allowed)}{' or null' if null else ''}, got {_shown(value)}")


def _count(path: str, value: Json) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(path, f"expected a whole number >= 0, got {_shown(value)}")
    return value


def _scalar(path: str, value: Json) -> None:
    if isinstance(value, dict | list):
        raise _Bad(path, f"expected a number, a string, true, false or null, got {_shown(value)}")


def _object(path: str, value: Json) -> JsonObject:
    if not isinstance(value, dict):
        raise _Bad(path, f"expected an object, got {_shown(value)}")
    return value


def _array(path: str, value: Json) -> list[Json]:
    if not isinstance(value, list):
        raise _Bad(path, f"expected an array, got {_shown(value)}")
    return value


def _keys(path: str, value: JsonObject, required: Iterable[str], allowed: Iterable[str]) -> None:
    """Every required key present and no key the schema lacks (a misspelt or invented one)."""
    prefix = f"{path}." if path else ""
    for name in required:
        if name not in value:
            raise _Bad(f"{prefix}{name}", "missing")
    extra = sorted(set(value) - set(allowed))
    if extra:
        raise _Bad(f"{prefix}{extra[0]}", f"not a field of this schema; expected one of {', '.join(sorted(allowed))}")


_CHECK_FIELDS: dict[str, Callable[[str, Json], Json]] = {
    "signal": _string,
    "source": lambda p, v: _string(p, v, empty=True),
    "field": _string,
    "form": _string,
    "group": _string,
    "figure": _string,
    "op": lambda p, v: _choice(p, v, Op),
    "value": _scalar,
    "threshold": _scalar,
    "status": lambda p, v: _choice(p, v, CHECK_STATUSES),
    "error": lambda p, v: v if v is None else _string(p, v, empty=True),
    "bounds": lambda p, v: [_scalar(f"{p}[{i}]", b) for i, b in enumerate(_array(p, v))],
    "reason": _string,
    "floor": _object,
}


def _checks(path: str, value: Json) -> None:
    """Rule checks (`decided_by`, `knowledge_decided_by`): each names where it looked, or is the
    one `reason` no rule applied."""
    for index, check in enumerate(_array(path, value)):
        where = f"{path}[{index}]"
        _object(where, check)
        _keys(where, check, () if "reason" in check else ("signal", "source", "field"), _CHECK_FIELDS)
        for name, valid in _CHECK_FIELDS.items():
            if name in check:
                valid(f"{where}.{name}", check[name])


_EVIDENCE_FIELDS = ("signal", "source", "field", "status", "figures", "provenance")


def _evidence(path: str, value: Json) -> None:
    for index, found in enumerate(_array(path, value)):
        where = f"{path}[{index}]"
        _keys(where, _object(where, found), _EVIDENCE_FIELDS, (*_EVIDENCE_FIELDS, "error"))
        _string(f"{where}.signal", found["signal"])
        _string(f"{where}.source", found["source"], empty=True)
        _string(f"{where}.field", found["field"])
        _choice(f"{where}.status", found["status"], Status)
        _object(f"{where}.figures", found["figures"])
        for number, entry in enumerate(_array(f"{where}.provenance", found["provenance"])):
            _object(f"{where}.provenance[{number}]", entry)
        if found.get("error") is not None:
            _string(f"{where}.error", found["error"], empty=True)


def _languages(path: str, value: Json) -> None:
    """A list of language names, or null where the audit did not record it."""
    if value is not None:
        for index, lang in enumerate(_array(path, value)):
            _string(f"{path}[{index}]", lang)


_REQUIRED = ("item_id", "lang", "source_lang", "role", "exposure", "decided_by", "evidence", "item_exposure")


def check_record(number: int, record: JsonObject) -> None:
    """One record's fields: present, of their type, within their closed choices, none extra."""
    try:
        _keys("", record, _REQUIRED, RECORD_KEYS)
        for name in ("item_id", "lang", "source_lang"):
            _string(name, record[name])
        _choice("role", record["role"], Role)
        _choice("exposure", record["exposure"], Exposure)
        _choice("item_exposure", record["item_exposure"], ItemExposure)
        _choice("knowledge", record.get("knowledge"), Knowledge, null=True)
        _checks("decided_by", record["decided_by"])
        _checks("knowledge_decided_by", record.get("knowledge_decided_by", []))
        _choice("membership", record.get("membership"), Membership, null=True)
        _checks("membership_decided_by", record.get("membership_decided_by", []))
        _evidence("evidence", record["evidence"])
        for name in ("seen_in_languages", "seen_in", "asked_in"):
            _languages(name, record.get(name))
        for name, lang in _object("field_languages", record.get("field_languages", {})).items():
            _string(f"field_languages.{name}", lang)
    except _Bad as bad:
        raise SchemaError(number, bad.path, bad.message) from None


def check_manifest(manifest: JsonObject) -> None:
    """The manifest keys the readers use, typed; and no key this schema does not define."""
    try:
        _keys("", manifest, ("benchmark", "summary", "created", "corpora", "signals", "signal_runs", "policy"), MANIFEST_KEYS)
        for name in ("tool", "version", "created", "config_hash"):
            if name in manifest:
                _string(name, manifest[name])
        _check_provenance(manifest)
        benchmark = _object("benchmark", manifest["benchmark"])
        _keys("benchmark", benchmark, ("items", "languages"), benchmark.keys())
        _count("benchmark.items", benchmark["items"])
        for index, lang in enumerate(_array("benchmark.languages", benchmark["languages"])):
            _string(f"benchmark.languages[{index}]", lang)
        summary = _object("summary", manifest["summary"])
        _keys("summary", summary, ("languages", "items"), summary.keys())
        for lang, counts in _object("summary.languages", summary["languages"]).items():
            _keys(f"summary.languages.{lang}", _object(f"summary.languages.{lang}", counts), (*TAGS, "total"), (*TAGS, "total"))
            for tag, count in counts.items():
                _count(f"summary.languages.{lang}.{tag}", count)
        for tag, count in _object("summary.items", summary["items"]).items():
            _choice("summary.items", tag, ItemExposure)
            _count(f"summary.items.{tag}", count)
    except _Bad as bad:
        raise SchemaError(1, bad.path, bad.message) from None


def _check_provenance(manifest: JsonObject) -> None:
    """What the report shows of where the audit came from: sources, signals, policy, models."""
    _object("policy", manifest["policy"])
    for name, entry in (("corpora", _object), ("signals", _string), ("command", _string)):
        for index, value in enumerate(_array(name, manifest.get(name, []))):
            entry(f"{name}[{index}]", value)
    for index, run in enumerate(_array("signal_runs", manifest["signal_runs"])):
        where = f"signal_runs[{index}]"
        _keys(where, _object(where, run), ("signal", "source", "ran"), ("signal", "source", "ran", "reason"))
        _string(f"{where}.signal", run["signal"])
        _string(f"{where}.source", run["source"], empty=True)
        if not isinstance(run["ran"], bool):
            raise _Bad(f"{where}.ran", f"expected true or false, got {_shown(run['ran'])}")
    for name in ("links", "models"):
        if manifest.get(name) is not None:
            _object(name, manifest[name])
    if manifest.get("executor") is not None:
        _string("executor", manifest["executor"])


def check_records(manifest: JsonObject, records: list[JsonObject]) -> None:
    """The records against each other and against what the manifest declares: one record per
    (item, language), languages of the benchmark, one source language and one item tag per
    item (the tag its languages' tags give), and the manifest's counts."""
    languages = set(manifest["benchmark"]["languages"])
    first: dict[tuple[str, str], int] = {}
    by_item: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        number = index + FIRST_RECORD_LINE
        if record["lang"] not in languages:
            raise SchemaError(number, "lang", f"{record['lang']!r} is not one of the benchmark's languages in the manifest ({', '.join(sorted(languages))})")
        key = (record["item_id"], record["lang"])
        if key in first:
            raise SchemaError(number, "lang", f"a second record for item {key[0]!r} in {key[1]!r} (the first is on line {first[key]})")
        first[key] = number
        if (record["role"] == Role.SOURCE) != (record["lang"] == record["source_lang"]):
            raise SchemaError(number, "role", f"{record['role']!r} where lang is {record['lang']!r} and source_lang {record['source_lang']!r}")
        by_item.setdefault(record["item_id"], []).append(index)
    for indexes in by_item.values():
        _check_item(records, indexes)
    _check_counts(manifest, records, len(by_item))


def _check_item(records: list[JsonObject], indexes: list[int]) -> None:
    """One item's records agree on its source language and carry the item tag their tags give."""
    head = records[indexes[0]]
    expected = item_exposure(head["source_lang"], {records[i]["lang"]: records[i]["exposure"] for i in indexes})
    for index in indexes:
        record = records[index]
        if record["source_lang"] != head["source_lang"]:
            raise SchemaError(index + FIRST_RECORD_LINE, "source_lang", f"{record['source_lang']!r}, where line {indexes[0] + FIRST_RECORD_LINE} gives item {head['item_id']!r} source language {head['source_lang']!r}")
        if record["item_exposure"] != expected:
            raise SchemaError(
                index + FIRST_RECORD_LINE, "item_exposure", f"{record['item_exposure']!r}, but the exposure of item {head['item_id']!r}'s languages makes it {expected.value!r}"
            )
    _check_item_languages(records, indexes)


def _check_item_languages(records: list[JsonObject], indexes: list[int]) -> None:
    """Where recorded, an item's `seen_in` is the union of its records' `seen_in_languages`,
    and its `asked_in` the same on each of its records (the benchmark, where at hand, says
    whether it is right)."""
    head = records[indexes[0]]
    union = seen_in([records[i].get("seen_in_languages") for i in indexes])
    for index in indexes:
        record, number = records[index], index + FIRST_RECORD_LINE
        if "seen_in" in record and record["seen_in"] != union:
            raise SchemaError(number, "seen_in", f"{record['seen_in']!r}, but item {head['item_id']!r}'s seen_in_languages give {union!r}")
        if record.get("asked_in") != head.get("asked_in"):
            raise SchemaError(number, "asked_in", f"{record.get('asked_in')!r}, where line {indexes[0] + FIRST_RECORD_LINE} gives item {head['item_id']!r} {head.get('asked_in')!r}")


def _check_counts(manifest: JsonObject, records: list[JsonObject], items: int) -> None:
    declared = manifest["benchmark"]["items"]
    if items > declared:
        raise SchemaError(1, "benchmark.items", f"{declared}, but the records are of {items} items")
    tallies: dict[str, Counter] = {}
    for record in records:
        tallies.setdefault(record["lang"], Counter())[record["exposure"]] += 1
    summary = manifest["summary"]
    counted = {lang: {tag: found.get(tag, 0) for tag in TAGS} | {"total": sum(found.values())} for lang, found in tallies.items()}
    for lang in sorted(set(counted) | set(summary["languages"])):
        if summary["languages"].get(lang) != counted.get(lang):
            raise SchemaError(1, f"summary.languages.{lang}", f"{summary['languages'].get(lang)}, but the records give {counted.get(lang)}")
    item_tags = Counter({record["item_id"]: record["item_exposure"] for record in records}.values())
    if dict(item_tags) != summary["items"]:
        raise SchemaError(1, "summary.items", f"{summary['items']}, but the records give {dict(item_tags)}")


def check_benchmark(records: Iterable[JsonObject], items: Iterable[Item], declared: JsonObject) -> None:
    """The records against the benchmark they audit: the manifest's item count and languages
    are the benchmark's, every item and language exists, with the item's source language, and
    every variant in an audited language has its record.  The items are gone through once and
    only their languages kept, so items held packed stay packed."""
    shapes = _shapes(items)
    if declared["items"] != len(shapes):
        raise SchemaError(1, "benchmark.items", f"{declared['items']}, but the benchmark has {len(shapes)} items")
    audited: set[str] = set()
    present: set[tuple[str, str]] = set()
    for index, record in enumerate(records):
        _check_record(index + FIRST_RECORD_LINE, record, shapes.get(record["item_id"]))
        audited.add(record["lang"])
        present.add((record["item_id"], record["lang"]))
    languages = {lang for _, langs in shapes.values() for lang in langs}
    if set(declared["languages"]) != languages:
        raise SchemaError(1, "benchmark.languages", f"{', '.join(sorted(set(declared['languages'])))}, but the benchmark's are {', '.join(sorted(languages))}")
    missing = [f"{item_id}/{lang}" for item_id, (_, langs) in shapes.items() for lang in langs if lang in audited and (item_id, lang) not in present]
    if missing:
        shown = ", ".join(missing[:SHOWN_MISSING]) + (f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else "")
        raise SchemaError(None, None, f"no record for {len(missing)} variant(s) of the benchmark in the audited languages (item/language): {shown}")


# An item as `check_benchmark` needs it: its source language and its languages in order.
Shape = tuple[str, tuple[str, ...]]


def _shapes(items: Iterable[Item]) -> dict[str, Shape]:
    """Each item's shape by id, the many items of one shape sharing one tuple."""
    shared: dict[Shape, Shape] = {}
    shapes: dict[str, Shape] = {}
    for item in items:
        shape = (item.source_lang, tuple(item.variants))
        shapes[item.item_id] = shared.setdefault(shape, shape)
    return shapes


def _check_record(number: int, record: JsonObject, shape: Shape | None) -> None:
    item_id = record["item_id"]
    if shape is None:
        raise SchemaError(number, "item_id", f"{item_id!r} is not an item of the benchmark")
    source_lang, langs = shape
    if record["lang"] not in langs:
        raise SchemaError(number, "lang", f"{record['lang']!r} is not a language of item {item_id!r} (it has {', '.join(sorted(langs))})")
    if record["source_lang"] != source_lang:
        raise SchemaError(number, "source_lang", f"{record['source_lang']!r}, but item {item_id!r}'s source language is {source_lang!r}")
    if record.get("asked_in") is not None and record["asked_in"] != sorted(langs):
        raise SchemaError(number, "asked_in", f"{record['asked_in']!r}, but item {item_id!r} is asked in {sorted(langs)!r}")


def finite_float(text: str) -> float:
    """JSON numbers too large for a float are refused, not read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def no_constant(name: str) -> None:
    """NaN and Infinity are not JSON, though Python's parser takes them."""
    raise ValueError(f"{name} is not a JSON value")


def surrogate_field(value: Json, path: str = "") -> str | None:
    """The first field holding a lone surrogate (`"\\ud800"` is valid JSON, not text), if any."""
    if isinstance(value, str):
        return (path or "(value)") if any("\ud800" <= char <= "\udfff" for char in value) else None
    children: Iterable[tuple[str, Json]] = ()
    if isinstance(value, dict):
        children = [(f"{path}.{key}" if path else str(key), part) for key, item in value.items() for part in (key, item)]
    elif isinstance(value, list):
        children = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    return next((found for where, item in children if (found := surrogate_field(item, where))), None)


def bounded_int(text: str) -> int:
    """Whole numbers beyond 64 bits are no count or figure this tool writes."""
    if len(text.lstrip("-")) > 19 or abs(value := int(text)) >= 2**63:
        raise ValueError(f"number {text[:40]}{'...' if len(text) > 40 else ''} is out of range")
    return value
