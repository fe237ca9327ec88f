"""The near-duplicate signal as the policy knows it (its code is `audit.signals.minhash`):
`MinhashConfig` is the `[minhash]` table (its query-time parameters, and the build parameters
the index must have if the policy names them), `Rules` the fields and figures
`[rules.minhash]` may name."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from audit import forms
from audit.items import Item, ItemKind
from audit.neardup import NearDupParams, ShingleSizes
from audit.rules import Count, Fraction, Table, threshold
from audit.signals.spec import Signal

NAME = "minhash"
# The fields worth shingling, by kind.  A cloze's filled statement is not among them: a
# sentence is a handful of shingles, most of them the prompt's, so a copied prompt without its
# answer would look like a near-duplicate of the fact; the n-gram signal checks it exactly.
# A question with an option is left to the n-gram signal for the same reason.
TEXT_FIELDS: dict[ItemKind, tuple[str, ...]] = {
    ItemKind.OPEN: (forms.QUESTION, forms.CONTEXT),
    ItemKind.CLOZE: (forms.CONTEXT,),
    ItemKind.MULTIPLE_CHOICE: (forms.QUESTION, forms.CONTEXT),
}


class ExpectedIndex(Table):
    """Build parameters the near-duplicate index must have; unset ones are not checked.  An
    index built otherwise is refused, since its figures would not mean what the thresholds
    were set for.  `audit index build/minhash --policy FILE` builds with them (unset ones at
    their defaults), so an index and the policy that reads it never disagree."""

    sketcher: Literal["datasketch", "rensa"] | None = None
    num_perm: Count | None = None
    bands: Count | None = None
    rows: Count | None = None
    seed: int | None = Field(None, ge=0)
    window: Count | None = None
    stride: Count | None = None
    shingle: ShingleSizes = Field(default_factory=ShingleSizes)

    def build_params(self, **overrides: int | str | None) -> NearDupParams:
        """The parameters to build an index with: these, the rest at their defaults; a
        ValidationError when they do not fit together (more bands x rows than permutations)."""
        return NearDupParams.model_validate({**self.model_dump(exclude_none=True), **{k: v for k, v in overrides.items() if v is not None}})


class Floors(Table):
    """Distinct shingles a field must have, not counting those shared with the source variant
    or common in the corpus, before its containment and Jaccard may decide, by the field's
    script; a script left unset uses `default`.  Below it the figures are still reported, and
    listed in `below_floor`."""

    default: Count = 4
    arabic: Count | None = 3
    cyrillic: Count | None = None
    devanagari: Count | None = None
    greek: Count | None = None
    hangul: Count | None = 3
    hebrew: Count | None = 3
    latin: Count | None = None
    han: Count | None = 9
    kana: Count | None = 9
    thai: Count | None = None
    lao: Count | None = None
    khmer: Count | None = None
    myanmar: Count | None = None
    tibetan: Count | None = None

    def needed(self, script: str) -> int:
        value = getattr(self, script) if script in type(self).model_fields else None
        return value or self.default


class Common(Table):
    """When a shingle is too common in the corpus to be evidence (`audit.neardup.rarity`): held
    more than `per_million_bytes` times per million bytes of the corpus's text, and more than
    `at_least` times."""

    per_million_bytes: float = Field(1.0, gt=0)
    at_least: Count = 20


class MinhashConfig(Table):
    """The signal's parameters (the policy's `[minhash]` table)."""

    candidates: int = Field(50, ge=1)
    provenance_docs: int = Field(3, ge=1)
    snippet_chars: int = Field(80, ge=0)
    unknown_language: Literal["count", "ignore"] = "count"
    floor: Floors = Field(default_factory=Floors)
    min_matched: int = Field(3, ge=1)
    common: Common = Field(default_factory=Common)
    index: ExpectedIndex = Field(default_factory=ExpectedIndex)


class FieldRules(Table):
    """Thresholds on the exact figures of one field; the estimates and counts describe the
    query, so no rule may name them."""

    containment: threshold(Fraction, "Containment") = None
    jaccard: threshold(Fraction, "Jaccard") = None


class Rules(Table):
    """The policy's `[rules.minhash]`: the fields this signal reports.  Answers are not among
    them: one or two words are shorter than a shingle."""

    question: FieldRules = Field(default_factory=FieldRules)
    context: FieldRules = Field(default_factory=FieldRules)


def fields_for(item: Item) -> tuple[str, ...]:
    return TEXT_FIELDS[item.kind]


SIGNAL = Signal(
    name=NAME,
    description="near-duplicates: containment and Jaccard of a field's shingles in one span of a document, after MinHash LSH",
    config=MinhashConfig,
    rules=Rules,
    fields=fields_for,
    implementation="audit.signals.minhash",
)
