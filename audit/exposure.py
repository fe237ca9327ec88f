"""The exposure policy: from evidence to `seen` / `unseen` / `unknown`, per (item, language)
and per item, always with the evidence that decided.

Rules are keyed by signal, field and figure (`[rules.ngram.context] coverage = 0.5`), apply to
evidence from every source unless a table scoped to one overrides them
(`[rules.ngram.context."source:olmo"]`), and are judged on each piece of evidence on its own, so
two signals or two corpora reporting on one field never replace each other.  Any rule that
fires makes the variant `seen`; else any failed source or undecided (bounded) figure makes it
`unknown`; else it is `unseen`.  `unknown` is never silently `unseen`.

A model's evidence (the probe signal) is judged by the same rules into a separate verdict,
`knowledge`: `known` where a rule fires, `undetermined` where a probe failed, was offline or
its judge's reply could not be parsed, else `not_known`.  It never moves `exposure`: what a
model knows is not what its corpus contains.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from audit.errors import UnreadableFile, read_toml_file
from audit.evidence import ABSENT, FAILED, Evidence, Status
from audit.rules import SOURCE_SCOPE, FieldRules, Outcome, judge
from audit.signals import KNOWLEDGE_SIGNALS, PolicyFile


class Exposure(StrEnum):
    SEEN = "seen"
    UNSEEN = "unseen"
    UNKNOWN = "unknown"


class Knowledge(StrEnum):
    """What the model itself showed it knows, per (item, language)."""

    KNOWN = "known"
    NOT_KNOWN = "not_known"
    UNDETERMINED = "undetermined"


class ItemExposure(StrEnum):
    """Where an item's fact was seen, relative to its source language."""

    SOURCE_ONLY = "seen_in_source_only"
    TARGET_SEEN = "seen_in_target"
    UNSEEN_EVERYWHERE = "unseen_everywhere"
    UNKNOWN = "unknown"


SEEN, UNSEEN, UNKNOWN = Exposure.SEEN, Exposure.UNSEEN, Exposure.UNKNOWN
SOURCE_ONLY, TARGET_SEEN, UNSEEN_EVERYWHERE = ItemExposure.SOURCE_ONLY, ItemExposure.TARGET_SEEN, ItemExposure.UNSEEN_EVERYWHERE
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
Model = TypeVar("Model", bound=BaseModel)


class PolicyError(Exception):
    """The policy file is unusable; the message names the file and key."""


@dataclass(frozen=True)
class Policy:
    name: str
    source: str
    settings: dict[str, Any]

    @property
    def rules(self) -> dict[str, dict[str, FieldRules]]:
        """signal → field → its rules."""
        return {
            signal: {name: FieldRules.from_settings(table) for name, table in fields.items() if isinstance(table, dict)}
            for signal, fields in self.settings.get("rules", {}).items()
            if isinstance(fields, dict)
        }

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.settings, sort_keys=True).encode()).hexdigest()[:16]

    def section(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.settings.get(name, {}))


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A table's keys as they are spelt in the file (aliases, like `question+answer`)."""
    return {info.alias or name: info for name, info in model.model_fields.items()}


def _table(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _number(value: float) -> str:
    return f"{value:g}"


def _range(constraints: list[Any]) -> str:
    """" ≥ 1", " in (0, 1]": the bounds a value must keep, from its Field constraints."""
    lower = next((c for c in constraints if isinstance(c, Ge | Gt)), None)
    upper = next((c for c in constraints if isinstance(c, Le | Lt)), None)
    if lower and upper:
        left = f"[{_number(lower.ge)}" if isinstance(lower, Ge) else f"({_number(lower.gt)}"
        right = f"{_number(upper.le)}]" if isinstance(upper, Le) else f"{_number(upper.lt)})"
        return f" in {left}, {right}"
    if lower:
        return f" ≥ {_number(lower.ge)}" if isinstance(lower, Ge) else f" > {_number(lower.gt)}"
    if upper:
        return f" ≤ {_number(upper.le)}" if isinstance(upper, Le) else f" < {_number(upper.lt)}"
    return ""


def _constraints(metadata: list[Any]) -> list[Any]:
    """Constraints and descriptions, whether given bare or inside a `Field(...)`."""
    flat = []
    for item in metadata:
        flat.extend([item, *item.metadata] if isinstance(item, FieldInfo) else [item])
    return flat


def _kind(annotation: Any, metadata: list[Any]) -> str:
    """One allowed kind of value in words; a type that describes itself (`Field(description=...)`)
    is named by its description."""
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        return _kind(base, [*metadata, *extra])
    metadata = _constraints(metadata)
    described = next((m.description for m in metadata if isinstance(m, FieldInfo) and m.description), None)
    if described:
        return described
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(json.dumps(choice) for choice in get_args(annotation))
    if (table := _table(annotation)) is not None:
        return f"a table with keys {', '.join(sorted(_fields(table)))}"
    names = {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation))) + _range(metadata)


def _expected(info: FieldInfo) -> str:
    """What a key accepts, in words: "a number in (0, 1] or false"."""
    if info.description:
        return info.description
    options = get_args(info.annotation) if get_origin(info.annotation) in (Union, UnionType) else (info.annotation,)
    return " or ".join(_kind(option, list(info.metadata)) for option in options if option is not NoneType)


def _dotted(path: list[str]) -> str:
    return ".".join(part if _BARE_KEY.fullmatch(part) else json.dumps(part) for part in path)


def _shown(value: Any) -> str:
    """A value as it looks in TOML (`true`, `"0.8"`), or what it is for a table or an array."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return json.dumps(value, ensure_ascii=False, default=str)


def _explain(schema: type[BaseModel], problem: ErrorDetails, prefix: tuple[str, ...] = ()) -> tuple[str, str]:
    """(dotted key, what is wrong) for one pydantic error, read against the schema; the
    location's tail below a leaf (pydantic's union member tags) is dropped."""
    model, path = schema, list(prefix)
    for depth, part in enumerate(problem["loc"], start=1):
        fields = _fields(model)
        path.append(str(part))
        if part not in fields:
            return _dotted(path), f"unknown; expected one of {', '.join(sorted(fields))}"
        info = fields[part]
        if problem["type"] == "missing" and depth == len(problem["loc"]):
            return _dotted(path), f"missing; must be {_expected(info)}"
        model = _table(info.annotation)
        if model is None:
            return _dotted(path), f"must be {_expected(info)}, got {_shown(problem['input'])}"
    if problem["type"] == "value_error":
        return _dotted(path), problem["msg"].removeprefix("Value error, ")
    return _dotted(path), f"must be {_kind(model, [])}, got {_shown(problem['input'])}"


def _problems(schema: type[BaseModel], error: ValidationError, prefix: tuple[str, ...] = ()) -> str:
    """Every bad key once, joined by "; ": `key 'a.b': ...; key 'c': ...`."""
    found: dict[str, str] = {}
    for problem in error.errors():
        key, text = _explain(schema, problem, prefix)
        found.setdefault(key, text)
    return "; ".join(f"key '{key}': {text}" for key, text in found.items())


def schema_keys(schema: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(dotted key, what it accepts) for every leaf key of a schema, as the README lists them."""
    keys = []
    for name, info in _fields(schema).items():
        table = _table(info.annotation)
        keys += schema_keys(table, (*prefix, name)) if table else [(_dotted([*prefix, name]), _expected(info))]
    return keys


def _read(path: Path) -> dict[str, Any]:
    try:
        return read_toml_file(path, "policy file")
    except UnreadableFile as error:
        raise PolicyError(str(error)) from None


def load_policy(path: Path | None = None, schema: type[BaseModel] = PolicyFile) -> Policy:
    """The built-in policy, with the user's file (if any) merged over it key by key, and the
    result validated against `schema` (by default the one `audit.signals` assembles from every
    signal's rules and parameters).  `settings` holds the validated values."""
    defaults = tomllib.loads(resources.files("audit").joinpath("data/policy.toml").read_text(encoding="utf-8"))
    source = "built-in" if path is None else str(path)
    merged = defaults if path is None else _merge(defaults, _read(Path(path)))
    _refuse_field_keyed_rules(schema, merged, source)
    unscoped, scoped = _split_scoped(merged)
    settings = build_config(schema, unscoped, source).model_dump(by_alias=True, exclude_unset=True)
    for (signal, field_name, scope), table in scoped.items():
        model = _field_model(schema, signal, field_name)
        where = ("rules", signal, field_name, scope)
        validated = build_config(model, table, source, where) if isinstance(table, dict) else _not_a_table(model, where, table, source)
        settings["rules"][signal][field_name][scope] = validated.model_dump(by_alias=True, exclude_unset=True)
    return Policy(name=settings["name"], source=source, settings=settings)


def _refuse_field_keyed_rules(schema: type[BaseModel], settings: dict[str, Any], source: str) -> None:
    """A policy written for the first release keyed rules by field alone (`[rules.question]`);
    say how to write it now rather than only that the key is unknown."""
    rules = settings.get("rules")
    signals = _fields(_table(_fields(schema)["rules"].annotation))
    if not isinstance(rules, dict):
        return
    for key in rules:
        if key not in signals and any(key in _fields(_table(info.annotation)) for info in signals.values()):
            raise PolicyError(f"{source}: key 'rules.{key}': rules are keyed by signal now: write [rules.ngram.{key}] for the n-gram signal's rules on {key}")


def _split_scoped(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[tuple[str, str, str], Any]]:
    """The settings without their source-scoped rule tables, and those tables by (signal,
    field, `source:NAME`): scoped tables have names the schema cannot list, so each is checked
    against its field's own table on its own."""
    rules = settings.get("rules")
    if not isinstance(rules, dict):
        return settings, {}
    scoped, kept = {}, {}
    for signal, fields in rules.items():
        if not isinstance(fields, dict):
            kept[signal] = fields
            continue
        kept[signal] = {}
        for name, table in fields.items():
            if isinstance(table, dict):
                kept[signal][name] = {k: v for k, v in table.items() if not k.startswith(SOURCE_SCOPE)}
                scoped.update({(signal, name, k): v for k, v in table.items() if k.startswith(SOURCE_SCOPE)})
            else:
                kept[signal][name] = table
    return {**settings, "rules": kept}, scoped


def _field_model(schema: type[BaseModel], signal: str, field_name: str) -> type[BaseModel]:
    rules = _table(_fields(schema)["rules"].annotation)
    return _table(_fields(_table(_fields(rules)[signal].annotation))[field_name].annotation)


def _not_a_table(model: type[BaseModel], where: tuple[str, ...], value: Any, source: str) -> BaseModel:
    raise PolicyError(f"{source}: key '{_dotted(list(where))}': must be {_kind(model, [])}, got {_shown(value)}")


def build_config(cls: type[Model], section: dict[str, Any], where: str, prefix: tuple[str, ...] = ()) -> Model:
    """A model (a signal's config, or a whole policy file) from its settings; every bad key
    is named in one PolicyError that begins with `where`."""
    try:
        return cls.model_validate(section)
    except ValidationError as error:
        raise PolicyError(f"{where}: {_problems(cls, error, prefix)}") from None


@dataclass
class Decision:
    exposure: Exposure
    decided_by: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class KnowledgeDecision:
    knowledge: Knowledge
    decided_by: list[dict[str, Any]] = field(default_factory=list)


_KNOWLEDGE = {SEEN: Knowledge.KNOWN, UNSEEN: Knowledge.NOT_KNOWN, UNKNOWN: Knowledge.UNDETERMINED}


def decide(policy: Policy, evidence: list[Evidence]) -> Decision:
    """Exposure: the rules on the corpus signals' evidence (a model's evidence is left to
    `decide_knowledge`)."""
    return _decide(policy, [found for found in evidence if found.signal not in KNOWLEDGE_SIGNALS])


def decide_knowledge(policy: Policy, evidence: list[Evidence]) -> KnowledgeDecision | None:
    """Knowledge: the rules on the model signals' evidence; None when no model was probed."""
    probed = [found for found in evidence if found.signal in KNOWLEDGE_SIGNALS]
    if not probed:
        return None
    decision = _decide(policy, probed)
    return KnowledgeDecision(_KNOWLEDGE[decision.exposure], decision.decided_by)


def _decide(policy: Policy, evidence: list[Evidence]) -> Decision:
    """Apply every rule to each piece of evidence of one language variant, on its own.

    `decided_by` names, for each check, the signal, source, field (and its form, for a field
    checked in several), figure, operator, value and threshold: for `seen` the rules that fired, for `unseen` every check made, for `unknown` the
    failed sources and the rules a bounded figure left undecided (`"status": "bounded"`)."""
    rules = policy.rules
    fired, passed, undecided = [], [], []
    for found in evidence:
        table = rules.get(found.signal, {}).get(found.field)
        applicable = table.for_source(found.source) if table else []
        if not applicable or found.status == ABSENT:
            continue
        where = {"signal": found.signal, "source": found.source, "field": found.field}
        if "form" in found.figures:
            where["form"] = found.figures["form"]
        if found.status in (FAILED, Status.UNKNOWN):
            undecided.append({**where, "status": found.status, "error": found.error})
            continue
        bounds = found.figures.get("bounds", {})
        for rule in applicable:
            value = found.figures.get(rule.figure)
            if value is None:
                continue
            check = {**where, "figure": rule.figure, "op": rule.op.value, "value": value, "threshold": rule.value}
            outcome = judge(rule, value, tuple(bounds[rule.figure]) if rule.figure in bounds else None)
            if outcome is Outcome.FIRED:
                fired.append(check)
            elif outcome is Outcome.PASSED:
                passed.append(check)
            else:
                undecided.append({**check, "status": outcome.value, "bounds": list(bounds[rule.figure])})
    if fired:
        return Decision(SEEN, fired)
    if undecided:
        return Decision(UNKNOWN, undecided)
    if not passed:
        return Decision(UNKNOWN, [{"reason": "no text that any rule applies to"}])
    return Decision(UNSEEN, passed)


def item_exposure(source_lang: str, tags: dict[str, str]) -> ItemExposure:
    """One word for the item: where its fact was seen, relative to its source language."""
    targets = {lang: tag for lang, tag in tags.items() if lang != source_lang}
    if any(tag == SEEN for tag in targets.values()):
        return TARGET_SEEN
    if any(tag == UNKNOWN for tag in tags.values()):
        return ItemExposure.UNKNOWN
    if tags.get(source_lang) == SEEN:
        return SOURCE_ONLY
    return UNSEEN_EVERYWHERE
