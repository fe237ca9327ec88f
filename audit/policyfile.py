"""The policy file: the built-in policy with the user's file merged over it, validated against
the schema the signals assemble, every bad key named in one message, and compiled once into a
`Policy`: typed signal parameters and each field's rules, parsed.  A policy read back from an
audit file's manifest goes through the same validation (`compile_policy`).

Kept apart from `audit.exposure` (which applies a policy) so that reading and explaining a
policy file, and the README's key tables drawn from its schema, change on their own.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Literal, TypeVar, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from audit.errors import AuditError, UnreadableFile, read_toml_file
from audit.evidence import Json
from audit.rules import SOURCE_SCOPE, FieldRules, Table, TypeForm
from audit.signals import PolicyFile, configure

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
Model = TypeVar("Model", bound=BaseModel)


class PolicyError(AuditError):
    """The policy file is unusable; the message names the file and key."""


Settings = dict[str, Json]


@dataclass(frozen=True)
class Policy:
    """A validated policy, compiled: `settings` as the manifest records them, `rules` (signal →
    field → its rules, parsed) and `configs` (each signal's parameters, typed)."""

    name: str
    source: str
    settings: Settings
    rules: dict[str, dict[str, FieldRules]]
    configs: dict[str, Table]

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.settings, sort_keys=True).encode()).hexdigest()[:16]

    def section(self, name: str) -> Settings:
        return copy.deepcopy(self.settings.get(name, {}))

    def judges(self, signal: str) -> bool:
        """Whether any rule on the signal's figures is switched on, for any source."""
        return any(table.on for table in self.rules.get(signal, {}).values())


def _compiled_rules(settings: Settings) -> dict[str, dict[str, FieldRules]]:
    """signal → field → its rules, from validated settings."""
    rules = settings.get("rules")
    return {
        signal: {name: FieldRules.compile(table) for name, table in fields.items() if isinstance(table, dict)}
        for signal, fields in (rules.items() if isinstance(rules, dict) else ())
        if isinstance(fields, dict)
    }


def _merge(base: Settings, override: Settings) -> Settings:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A table's keys as they are spelt in the file (aliases, like `question+answer`)."""
    return {info.alias or name: info for name, info in model.model_fields.items()}


def _table(annotation: TypeForm) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _number(value: float) -> str:
    return f"{value:g}"


def _range(constraints: Sequence[object]) -> str:
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


def _constraints(metadata: Sequence[object]) -> list[object]:
    """Constraints and descriptions, whether given bare or inside a `Field(...)`."""
    flat = []
    for item in metadata:
        flat.extend([item, *item.metadata] if isinstance(item, FieldInfo) else [item])
    return flat


def _kind(annotation: TypeForm, metadata: Sequence[object]) -> str:
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


def _shown(value: Json) -> str:
    """A value as it looks in TOML (`true`, `"0.8"`), or what it is for a table or an array."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return json.dumps(value, ensure_ascii=False, default=str)


def _explain(schema: type[BaseModel], problem: ErrorDetails, prefix: tuple[str, ...] = ()) -> tuple[str, str]:
    """(dotted key, what is wrong) for one pydantic error, read against the schema; the
    location's tail below a leaf (pydantic's union member tags) is dropped.  A key of a table
    the user names (`[membership.thresholds.context.en]`) is walked like a schema key."""
    node: TypeForm = schema
    path = list(prefix)
    for depth, part in enumerate(problem["loc"], start=1):
        if part == "[key]":
            expected = problem.get("ctx", {}).get("expected") if problem["type"] == "literal_error" else None
            return _dotted(path), f"unknown; expected one of {expected}" if expected else problem["msg"].removeprefix("Value error, ")
        path.append(str(part))
        if (values := _mapping_values(node)) is not None:
            node = values
            continue
        fields = _fields(node)
        if part not in fields:
            return _dotted(path), f"unknown; expected one of {', '.join(sorted(fields))}"
        info = fields[part]
        if problem["type"] == "missing" and depth == len(problem["loc"]):
            return _dotted(path), f"missing; must be {_expected(info)}"
        if _table(info.annotation) is None and _mapping_values(info.annotation) is None:
            return _dotted(path), f"must be {_expected(info)}, got {_shown(problem['input'])}"
        node = _table(info.annotation) or info.annotation
    if problem["type"] == "value_error":
        return _dotted(path), problem["msg"].removeprefix("Value error, ")
    return _dotted(path), f"must be {_kind(node, [])}, got {_shown(problem['input'])}"


def _mapping_values(annotation: TypeForm) -> TypeForm | None:
    """The values' type of a `dict[str, X]` key (bare or Annotated), else None."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) is dict:
        values = get_args(annotation)[1]
        return _table(values) or values
    return None


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


def _read(path: Path) -> Settings:
    try:
        return read_toml_file(path, "policy file")
    except UnreadableFile as error:
        raise PolicyError(str(error)) from None


def load_policy(path: Path | None = None, schema: type[BaseModel] = PolicyFile) -> Policy:
    """The built-in policy, with the user's file (if any) merged over it key by key, validated
    against `schema` (by default the one `audit.signals` assembles from every signal's rules
    and parameters) and compiled."""
    defaults = tomllib.loads(resources.files("audit").joinpath("data/policy.toml").read_text(encoding="utf-8"))
    source = "built-in" if path is None else str(path)
    return compile_policy(defaults if path is None else _merge(defaults, _read(Path(path))), source, schema)


def compile_policy(merged: Settings, source: str, schema: type[BaseModel] = PolicyFile) -> Policy:
    """A whole policy's settings (a file merged over the built-in one, or a manifest's record of
    one) validated against `schema` and compiled; every bad key is named in one PolicyError
    that begins with `source`.  `settings` holds the validated values."""
    _refuse_field_keyed_rules(schema, merged, source)
    unscoped, scoped = _split_scoped(merged)
    settings = build_config(schema, unscoped, source).model_dump(by_alias=True, exclude_unset=True)
    for (signal, field_name, scope), table in scoped.items():
        model = _field_model(schema, signal, field_name)
        where = ("rules", signal, field_name, scope)
        validated = build_config(model, table, source, where) if isinstance(table, dict) else _not_a_table(model, where, table, source)
        settings["rules"][signal][field_name][scope] = validated.model_dump(by_alias=True, exclude_unset=True)
    return Policy(settings["name"], source, settings, _compiled_rules(settings), configure(settings))


def _refuse_field_keyed_rules(schema: type[BaseModel], settings: Settings, source: str) -> None:
    """A policy written for the first release keyed rules by field alone (`[rules.question]`);
    say how to write it now rather than only that the key is unknown."""
    rules = settings.get("rules")
    signals = _fields(_table(_fields(schema)["rules"].annotation))
    if not isinstance(rules, dict):
        return
    for key in rules:
        if key not in signals and any(key in _fields(_table(info.annotation)) for info in signals.values()):
            raise PolicyError(f"{source}: key 'rules.{key}': rules are keyed by signal now: write [rules.ngram.{key}] for the n-gram signal's rules on {key}")


def _split_scoped(settings: Settings) -> tuple[Settings, dict[tuple[str, str, str], Json]]:
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


def _not_a_table(model: type[BaseModel], where: tuple[str, ...], value: Json, source: str) -> BaseModel:
    raise PolicyError(f"{source}: key '{_dotted(list(where))}': must be {_kind(model, [])}, got {_shown(value)}")


def build_config(cls: type[Model], section: Mapping[str, Json], where: str, prefix: tuple[str, ...] = ()) -> Model:
    """A model (a signal's config, or a whole policy file) from its settings; every bad key
    is named in one PolicyError that begins with `where`."""
    try:
        return cls.model_validate(section)
    except ValidationError as error:
        raise PolicyError(f"{where}: {_problems(cls, error, prefix)}") from None
