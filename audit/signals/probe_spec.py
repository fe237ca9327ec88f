"""The probe signal as the policy knows it (its code is `audit.signals.probe`): the `[probe]`
table and the `[rules.probe]` rules on its four tasks.  A model's evidence says what the model
knows, not what its corpus holds: the policy judges it into `knowledge`."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from audit.items import Item
from audit.rules import Count, Fraction, Off, Table, threshold, verdict
from audit.signals.spec import Asks, Signal

NAME = "probe"
SUMMARY, DIRECT, CLOZE, PREFIX = "summary", "direct", "cloze", "prefix"
FIELDS = (SUMMARY, DIRECT, CLOZE, PREFIX)
ProbeTask = Literal["summary", "direct", "cloze", "prefix"]


class MaxTokens(Table):
    """New tokens allowed per answer, per task (and for the judge's verdict)."""

    summary: Count = 128
    judge: Count = 48
    direct: Count = 32
    cloze: Count = 16
    prefix: Count = 96


class ProbeConfig(Table):
    """The signal's parameters (the policy's `[probe]` table)."""

    tasks: Annotated[list[ProbeTask], Field(min_length=1, description='an array of "summary", "direct", "cloze", "prefix"')] = Field(default_factory=lambda: list(FIELDS))
    samples: Count = 1
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    top_p: Fraction = 1.0
    seed: Annotated[int, Field(ge=0)] = 0
    judge: bool = True
    passage_chars: Count = 600
    title_threshold: Fraction = 0.85
    name_threshold: Fraction = 0.9
    max_tokens: MaxTokens = Field(default_factory=MaxTokens)

    @model_validator(mode="after")
    def _sound(self) -> ProbeConfig:
        if len(set(self.tasks)) < len(self.tasks):
            raise ValueError("tasks: a task is named twice")
        if self.samples > 1 and self.temperature == 0:
            raise ValueError("samples above 1 need a temperature above 0: greedy samples are all the same")
        return self


class SummaryRules(Table):
    judge: Annotated[Literal["known"], Field(description='"known"')] | Off | None = None
    answer_recall: threshold(Fraction, "AnswerRecall") = None
    chrf: threshold(Fraction, "SummaryChrf") = None


class MatchRules(Table):
    matched: verdict() = None
    similarity: threshold(Fraction, "MatchSimilarity") = None


class PrefixRules(Table):
    similarity: threshold(Fraction, "PrefixSimilarity") = None
    chrf: threshold(Fraction, "PrefixChrf") = None


class Rules(Table):
    """The policy's `[rules.probe]`: one table per task."""

    summary: SummaryRules = Field(default_factory=SummaryRules)
    direct: MatchRules = Field(default_factory=MatchRules)
    cloze: MatchRules = Field(default_factory=MatchRules)
    prefix: PrefixRules = Field(default_factory=PrefixRules)


def fields_for(item: Item) -> tuple[str, ...]:
    return FIELDS


SIGNAL = Signal(
    name=NAME,
    description="what the model itself knows: a self-summary of the item's entity judged against its passage and answer, and OWL's direct, name-cloze and prefix memorisation probes, in each language",
    config=ProbeConfig,
    rules=Rules,
    fields=fields_for,
    implementation="audit.signals.probe",
    asks=Asks.MODEL,
)
