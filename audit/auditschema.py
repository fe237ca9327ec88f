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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from enum import StrEnum

from audit.errors import AuditError
from audit.evidence import Status
from audit.exposure import BELOW_FLOOR, Exposure, ItemExposure, Knowledge, Membership
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
