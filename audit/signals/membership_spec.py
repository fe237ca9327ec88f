"""The membership signal as the policy knows it (its code is `audit.signals.membership`): the
`[membership]` table.  Its evidence is the model's membership-inference scores of each text
(`audit.probes.membership`): what the model's own probabilities say about having been trained
on that text, in that language.  A score means nothing until it is calibrated against known
membership, and its scale differs by language and script (zlib divides by bytes), so no
exposure rule reads it: the policy's `[membership.thresholds.FIELD.GROUP]` tables, which
`audit calibrate` writes per language ("en") and per script ("script:Hebr"), turn it into the
record's separate `membership` verdict."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from audit.forms import CONTEXT, QUESTION, STATEMENT
from audit.items import Item, ItemKind
from audit.langcodes import normalise_lang
from audit.memberscore import Score
from audit.rules import Count, Fraction, Table
from audit.signals.spec import Asks, Signal

SCRIPT_SCOPE = "script:"

NAME = "membership"
FIGURES = ("loss", "zlib", "min_k", "min_k_plus")
# The texts read, per kind of item: the question (a cloze item's statement, its answer filled
# in) and the passage.  An answer alone is too short to score.
FIELDS: dict[ItemKind, tuple[str, ...]] = {ItemKind.OPEN: (QUESTION, CONTEXT), ItemKind.CLOZE: (STATEMENT, CONTEXT), ItemKind.MULTIPLE_CHOICE: (QUESTION, CONTEXT)}
READ_FIELDS = tuple(dict.fromkeys(name for names in FIELDS.values() for name in names))
ScoreName = Literal[tuple(score.value for score in Score)]  # type: ignore[valid-type]


class Threshold(Table):
    """One calibrated threshold: a text is a member when `score` is at least `value` (a score
    members have higher: min_k, min_k_plus) or at most it (loss, zlib, loss_minus_reference).
    `fpr`, `auroc`: what calibration measured for it, kept as a record, not read."""

    score: ScoreName
    value: float
    fpr: Annotated[float, Field(ge=0, le=1)] | None = None
    auroc: Annotated[float, Field(ge=0, le=1)] | None = None


def _check_group(group: str) -> str:
    """A language code as the tool spells it (`he`, not `iw`), or `script:Xxxx`."""
    if group.startswith(SCRIPT_SCOPE):
        script = group.removeprefix(SCRIPT_SCOPE)
        if len(script) != 4 or not script.isalpha() or script != script.title():
            raise ValueError("a script is four letters, title-cased (script:Hebr)")
        return group
    try:
        canonical = normalise_lang(group)
    except ValueError as error:
        raise ValueError(str(error)) from None
    if canonical != group:
        raise ValueError(f"write the language as {canonical}")
    return group


FieldName = Literal[READ_FIELDS]  # type: ignore[valid-type]
Group = Annotated[str, AfterValidator(_check_group)]
Thresholds = Annotated[
    dict[FieldName, dict[Group, Threshold]],
    Field(description='tables [membership.thresholds.FIELD.GROUP] (FIELD one of ' + ", ".join(READ_FIELDS)
          + '; GROUP a language code or "script:Xxxx") with score = a score name, value = a number'),
]


class MembershipConfig(Table):
    """The signal's parameters (the policy's `[membership]` table)."""

    # The share of least likely tokens Min-K% and Min-K%++ average; tokens read per text.
    k: Fraction = 0.2
    max_tokens: Count = 256
    # Per field, per language (or script, for languages not named): the calibrated threshold
    # that makes a text a member.  None by default: uncalibrated scores decide nothing.
    thresholds: Thresholds = Field(default_factory=dict)

    def threshold(self, name: str, lang: str, script: str | None) -> tuple[str, Threshold] | None:
        """(group, threshold) for a field of a variant: its language's, else its script's."""
        groups = self.thresholds.get(name, {})
        for group in (lang, f"{SCRIPT_SCOPE}{script}" if script else None):
            if group is not None and group in groups:
                return group, groups[group]
        return None


class Rules(Table):
    """The policy's `[rules.membership]`: none; the scores are judged by `[membership.thresholds]`,
    into the membership verdict, never into exposure."""


def fields_for(item: Item) -> tuple[str, ...]:
    return FIELDS[item.kind]


SIGNAL = Signal(
    name=NAME,
    description="membership-inference scores of each text under the probe model (loss, zlib ratio, Min-K%, Min-K%++), one forward pass per text; calibrated thresholds make the membership verdict",
    config=MembershipConfig,
    rules=Rules,
    fields=fields_for,
    implementation="audit.signals.membership",
    asks=Asks.MODEL,
    decides=False,
)
