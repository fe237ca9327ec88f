"""The n-gram signal as the policy knows it (its code is `audit.signals.ngram`): `NgramConfig`
is the `[ngram]` table, `Rules` the fields and figures `[rules.ngram]` may name, each with the
range a value must keep."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from audit import forms
from audit.corpora.base import UnknownLanguage
from audit.items import Item
from audit.rules import Count, Fraction, Table, threshold
from audit.signals.spec import Signal

NAME = "ngram"


class WindowSizes(Table):
    """Window size per script, in words for space-separated scripts and characters for the
    unsegmented ones; a script left unset, and text with no letters, use `default`."""

    default: Count
    arabic: Count | None = None
    cyrillic: Count | None = None
    devanagari: Count | None = None
    greek: Count | None = None
    hangul: Count | None = 6
    hebrew: Count | None = None
    latin: Count | None = None
    han: Count | None = 12
    kana: Count | None = 12
    thai: Count | None = 20
    lao: Count | None = 20
    khmer: Count | None = 20
    myanmar: Count | None = 20
    tibetan: Count | None = 20

    def size(self, script: str) -> int:
        value = getattr(self, script) if script in type(self).model_fields else None
        return value or self.default


class CoverageFloors(Table):
    """Fewest windows a field must have for its coverage to decide, per script (a script left
    unset uses `default`).  A field of one or two windows is a short sentence: its coverage is
    whether the whole of it (or nearly) occurs, which `exact_count` and the longest match
    already judge, while one common window ("what is a", a clause of five characters) would
    carry the figure alone."""

    default: Count = 3
    han: Count | None = None
    kana: Count | None = None
    hangul: Count | None = None
    thai: Count | None = None

    def needed(self, script: str) -> int:
        value = getattr(self, script) if script in type(self).model_fields else None
        return value or self.default


class NgramConfig(Table):
    """The signal's parameters (the policy's `[ngram]` table).  Every count is at least 1: a
    zero would silently drop evidence (no spans, no provenance, no anchors) rather than fail."""

    window: WindowSizes = Field(default_factory=lambda: WindowSizes(default=8))
    span_min_chars: int = Field(20, ge=1)
    max_spans: int = Field(10, ge=1)
    provenance_docs: int = Field(3, ge=1)
    snippet_chars: int = Field(80, ge=0)
    cooccurrence_window_bytes: int = Field(2000, ge=1)
    anchor_min_chars: int = Field(12, ge=1)
    max_anchors: int = Field(3, ge=1)
    max_occurrences: int = Field(500, ge=1)
    max_forms: int = Field(8, ge=1)
    anchor_max_count: int = Field(10000, ge=1)
    unknown_language: Literal["count", "ignore"] = "count"
    coverage_floor: CoverageFloors = Field(default_factory=CoverageFloors)

    @property
    def unknown(self) -> UnknownLanguage:
        """Whether documents of unknown language count for every language (flagged) or none."""
        return UnknownLanguage(self.unknown_language)

    def window_for(self, script: str) -> int:
        return self.window.size(script)


class TextRules(Table):
    """Thresholds on the figures `field_evidence` reports for one text field: those that say
    how much of the text the corpus holds.  The others describe the text or the query (its
    length, script, window size, where the longest match starts), so no rule may name them."""

    exact_count: threshold(Count, "ExactCount") = None
    coverage: threshold(Fraction, "Coverage") = None
    longest_match_chars: threshold(Count, "LongestMatchChars") = None
    longest_match_fraction: threshold(Fraction, "LongestMatchFraction") = None


class CooccurrenceRules(Table):
    """Thresholds on the figures the pair checks report: the documents of the variant's
    language holding the two (or all the) strings near each other.  `documents_in_language`
    is the same figure under its older name, kept so policies that name it still read.  A
    string's own count is not a rule's business."""

    documents: threshold(Count, "Documents") = None
    documents_in_language: threshold(Count, "DocumentsInLanguage") = None


class Rules(Table):
    """The policy's `[rules.ngram]`: for each field this signal reports, the figures a rule may
    name."""

    question: TextRules = Field(default_factory=TextRules)
    answer: TextRules = Field(default_factory=TextRules)
    context: TextRules = Field(default_factory=TextRules)
    statement: TextRules = Field(default_factory=TextRules)
    prompt: TextRules = Field(default_factory=TextRules)
    question_correct: TextRules = Field(default_factory=TextRules, alias="question+correct")
    question_distractor: TextRules = Field(default_factory=TextRules, alias="question+distractor")
    question_answer: CooccurrenceRules = Field(default_factory=CooccurrenceRules, alias="question+answer")
    subject_answer: CooccurrenceRules = Field(default_factory=CooccurrenceRules, alias="subject+answer")
    options: CooccurrenceRules = Field(default_factory=CooccurrenceRules)


def fields_for(item: Item) -> tuple[str, ...]:
    return (*forms.TEXT_FIELDS[item.kind], forms.PAIR_FIELD[item.kind])


SIGNAL = Signal(
    name=NAME,
    description="exact counts, longest matches and window coverage of each checked text and form; question-answer, subject-answer and options co-occurrence",
    config=NgramConfig,
    rules=Rules,
    fields=fields_for,
    implementation="audit.signals.ngram",
)
