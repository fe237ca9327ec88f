"""Registry entries (`[corpora.NAME]`, `[links.NAME]`, `[models.NAME]` of a registry file) read
through pydantic models, as the policy is, so that every entry is checked alike: the backend
chooses the model, unknown keys are refused, each value's type is checked, and a problem is
reported with the registry file, the entry and the key (`corpora.toml: corpora.x.url: ...`)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from audit.errors import PlacedError

# What a value of the wrong type should have been, by pydantic's error type.
_EXPECTED = {
    "int_type": "a whole number", "float_type": "a number", "string_type": "a string",
    "bool_type": "true or false", "dict_type": "a table", "list_type": "an array",
}


class EntryModel(BaseModel):
    """The keys of one kind of registry entry.  Strict, since TOML gives values with their
    types: `batch_size = "8"` is refused, not converted.  `required` and `expected` say, per key,
    what a missing or a bad value is told; `unknown()` what is said of keys the model lacks."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    required: ClassVar[Mapping[str, str]] = {}
    expected: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def unknown(cls, keys: list[str]) -> str:
        return f"unknown key(s) {', '.join(keys)}"


Model = TypeVar("Model", bound=EntryModel)
Placed = TypeVar("Placed", bound=PlacedError)


@dataclass(frozen=True)
class EntryPlace:
    """Where an entry is: its registry file, its section (`corpora`) and its name."""

    path: Path
    section: str
    name: str

    def __str__(self) -> str:
        return f"{self.path}: {self.section}.{self.name}"

    def error(self, kind: type[Placed], key: str | None, message: str) -> Placed:
        """`kind` with the message placed: `path: section.name.key: message`, or with a space
        for a message that reads on from the key (`... .path is required ...`)."""
        if key is None:
            return kind(f"{self}: {message}", path=str(self.path), field=f"{self.section}.{self.name}")
        join = " " if message.startswith(("is ", "must be ")) else ": "
        return kind(f"{self}.{key}{join}{message}", path=str(self.path), field=f"{self.section}.{self.name}.{key}")


def validate_entry(kinds: Mapping[str, type[Model]], table: object, place: EntryPlace, error: type[PlacedError]) -> Model:
    """The entry `table` as the model its `backend` names, or `error` placed at the first
    problem (all unknown keys at once)."""
    if not isinstance(table, dict):
        raise place.error(error, None, "must be a table")
    backend = table.get("backend")
    model = kinds.get(backend) if isinstance(backend, str) else None
    if model is None:
        raise place.error(error, "backend", f"{backend!r} is not one of {', '.join(kinds)}")
    try:
        return model.model_validate(table)
    except ValidationError as problem:
        raise _placed(model, problem.errors(include_url=False), place, error) from None


def _placed(model: type[EntryModel], problems: list[ErrorDetails], place: EntryPlace, error: type[PlacedError]) -> PlacedError:
    unknown = [str(problem["loc"][0]) for problem in problems if problem["type"] == "extra_forbidden"]
    if unknown:
        return place.error(error, None, model.unknown(sorted(unknown)))
    problem = problems[0]
    key = str(problem["loc"][0]) if problem["loc"] else None
    if problem["type"] == "missing":
        return place.error(error, key, model.required.get(key or "", "is required"))
    if key in model.expected:
        return place.error(error, key, model.expected[key])
    if problem["type"] == "value_error":
        return place.error(error, key, problem["msg"].removeprefix("Value error, "))
    kinds = {other["type"] for other in problems if other["loc"][:1] == problem["loc"][:1]}
    kind = "float_type" if "float_type" in kinds else problem["type"]  # int | float: a number
    if kind in _EXPECTED:
        return place.error(error, key, f"{problem['input']!r} is not {_EXPECTED[kind]}")
    return place.error(error, key, problem["msg"])
