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

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

SOURCE_SCOPE = "source:"


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


def _one_bound(table: Any) -> Any:
    if (table.at_least is None) == (table.at_most is None):
        raise ValueError('give exactly one of ">=" and "<="')
    return table


def threshold(kind: Any, name: str) -> Any:
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


def verdict(*words: str) -> Any:
    """What a rule on a categorical figure accepts: true, one of `words`, or false."""
    true = Annotated[bool, AfterValidator(_true_only), Field(description="true")]
    if not words:
        return true | Off | None
    return true | Annotated[str, Field(description="one of " + ", ".join(words)), AfterValidator(_one_of(words))] | Off | None


def _one_of(words: tuple[str, ...]) -> Any:
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
    value: float | bool | str


def parse_rule(figure: str, setting: Any) -> Rule | None:
    """A validated setting as a rule; None for a rule switched off."""
    if setting is None or setting is False:
        return None
    if isinstance(setting, dict):
        (op, value), = setting.items()
        return Rule(figure, Op(op), value)
    if isinstance(setting, bool | str):
        return Rule(figure, Op.EQUALS, setting)
    return Rule(figure, Op.AT_LEAST, setting)


def judge(rule: Rule, value: Any, bounds: tuple[Any, Any] | None = None) -> Outcome:
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
    """The rules on one signal's evidence for one field: those for every source, and the
    overrides a policy scoped to one source (`[rules.ngram.context."source:olmo"]`)."""

    rules: dict[str, Any]
    scoped: dict[str, dict[str, Any]]

    @classmethod
    def from_settings(cls, table: dict[str, Any]) -> FieldRules:
        generic = {k: v for k, v in table.items() if not k.startswith(SOURCE_SCOPE)}
        scoped = {k.removeprefix(SOURCE_SCOPE): v for k, v in table.items() if k.startswith(SOURCE_SCOPE)}
        return cls(generic, scoped)

    def for_source(self, source: str) -> list[Rule]:
        merged = {**self.rules, **self.scoped.get(source, {})}
        return [rule for figure, setting in merged.items() if (rule := parse_rule(figure, setting)) is not None]
