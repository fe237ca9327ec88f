"""The language of a policy's rules, shared by every signal: what a rule's value may be in the
policy file, and how a figure is judged against it.

A rule names a figure of one signal's evidence for one field and says when it fires:
- a number: the figure is at least that (`coverage = 0.5`);
- `{ "<=" = n }` or `{ ">=" = n }`: at most / at least `n` (a perplexity-style score fires low);
- `true` or a word: the figure equals it, for categorical verdicts (`article_exists = true`);
- `false`: the rule is off.

A figure a backend could only bound (`[lowest, highest]`) fires when the whole range satisfies the
rule, passes when none of it does, and is otherwise undecided: the variant is then `unknown`,
never `unseen`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Protocol, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

SOURCE_SCOPE = "source:"
# A type expression, as pydantic reads a field's annotation (PEP 747 would call it TypeForm).
TypeForm: TypeAlias = object
# A rule's value as validated: a number, `{ ">=" = n }` / `{ "<=" = n }`, a verdict, or off.
Setting: TypeAlias = float | bool | str | dict[str, float] | None
Value: TypeAlias = float | bool | str


class Table(BaseModel):
    """A policy table: unknown keys and loose types (a bool or a string for a number) are errors,
    so a typo cannot silently leave a default in force."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _false_only(value: bool) -> bool:
    if value:
        raise ValueError("only false switches a rule off")
    return value


def _true_only(value: bool) -> bool:
    if not value:
        raise ValueError("false switches a rule off; to fire on false write { \"==\" = false }")
    return value


Count = Annotated[int, Field(ge=1)]
Fraction = Annotated[float, Field(gt=0, le=1)]
# `false` switches a rule off; a strict bool, since Literal[False] would also take 0.
Off = Annotated[bool, AfterValidator(_false_only), Field(description="false")]


class _Bound(Protocol):
    at_least: float | None
    at_most: float | None


def _one_bound(table: _Bound) -> _Bound:
    if (table.at_least is None) == (table.at_most is None):
        raise ValueError('give exactly one of ">=" and "<="')
    return table


def threshold(kind: TypeForm, name: str) -> TypeForm:
    """What a rule on a numeric figure accepts: a number of `kind` (at least), a table with one
    of `>=` or `<=` and such a number, or false."""
    bound = create_model(
        f"{name}Bound",
        __base__=Table,
        __validators__={"one_bound": model_validator(mode="after")(_one_bound)},
        at_least=(kind | None, Field(None, alias=">=")),
        at_most=(kind | None, Field(None, alias="<=")),
    )
    described = Annotated[bound, Field(description='{ ">=" = n } or { "<=" = n }')]
    return kind | described | Off | None


def verdict(*words: str) -> TypeForm:
    """What a rule on a categorical figure accepts: true, one of `words`, or false."""
    true = Annotated[bool, AfterValidator(_true_only), Field(description="true")]
    if not words:
        return true | Off | None
    return true | Annotated[str, Field(description="one of " + ", ".join(words)), AfterValidator(_one_of(words))] | Off | None


def _one_of(words: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in words:
            raise ValueError(f"expected one of {', '.join(words)}")
        return value

    return check


class Op(StrEnum):
    AT_LEAST = ">="
    AT_MOST = "<="
    EQUALS = "=="


class Outcome(StrEnum):
    FIRED = "fired"
    PASSED = "passed"
    UNDECIDED = "bounded"


@dataclass(frozen=True)
class Rule:
    figure: str
    op: Op
    value: Value


def parse_rule(figure: str, setting: Setting) -> Rule | None:
    """A validated setting as a rule; None for a rule switched off."""
    if setting is None or setting is False:
        return None
    if isinstance(setting, dict):
        (op, value), = setting.items()
        return Rule(figure, Op(op), value)
    if isinstance(setting, bool | str):
        return Rule(figure, Op.EQUALS, setting)
    return Rule(figure, Op.AT_LEAST, setting)


def judge(rule: Rule, value: Value, bounds: tuple[float, float] | None = None) -> Outcome:
    """Whether `value` (or the whole range `bounds`, where the backend gave only bounds)
    satisfies the rule."""
    if rule.op is Op.EQUALS:
        return Outcome.FIRED if value == rule.value else Outcome.PASSED
    lowest, highest = bounds if bounds is not None else (value, value)
    if rule.op is Op.AT_MOST:
        lowest, highest = -highest, -lowest
        limit = -rule.value
    else:
        limit = rule.value
    if lowest >= limit:
        return Outcome.FIRED
    if highest < limit:
        return Outcome.PASSED
    return Outcome.UNDECIDED


@dataclass(frozen=True)
class FieldRules:
    """The rules on one signal's evidence for one field, compiled once from the policy: those
    for every source, and for each source a policy scoped a table to
    (`[rules.ngram.context."source:olmo"]`) the rules that apply there, its overrides merged
    over the others by figure (so `false` there switches one off)."""

    generic: tuple[Rule, ...]
    scoped: Mapping[str, tuple[Rule, ...]]

    @classmethod
    def compile(cls, table: Mapping[str, Setting | Mapping[str, Setting]]) -> FieldRules:
        generic = {figure: setting for figure, setting in table.items() if not figure.startswith(SOURCE_SCOPE)}
        scoped = {key.removeprefix(SOURCE_SCOPE): over for key, over in table.items() if key.startswith(SOURCE_SCOPE) and isinstance(over, Mapping)}
        return cls(_parsed(generic), {source: _parsed({**generic, **over}) for source, over in scoped.items()})

    def for_source(self, source: str) -> list[Rule]:
        return list(self.scoped.get(source, self.generic))

    @property
    def on(self) -> bool:
        """Whether any rule is switched on, for any source."""
        return bool(self.generic) or any(self.scoped.values())


def _parsed(settings: Mapping[str, Setting]) -> tuple[Rule, ...]:
    return tuple(rule for figure, setting in settings.items() if (rule := parse_rule(figure, setting)) is not None)
