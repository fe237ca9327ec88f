"""The membership signal as the policy knows it (its code is `audit.signals.membership`): the
`[membership]` table.  Its evidence is the model's membership-inference scores of each text
(`audit.probes.membership`): what the model's own probabilities say about having been trained
on that text, in that language.  The scores are recorded and left to calibration against known
membership (`audit calibrate`); no rule turns them into exposure or knowledge."""
from __future__ import annotations

from audit.forms import CONTEXT, QUESTION, STATEMENT
from audit.items import Item, ItemKind
from audit.rules import Count, Fraction, Table
from audit.signals.spec import Asks, Signal

NAME = "membership"
FIGURES = ("loss", "zlib", "min_k", "min_k_plus")
# The texts read, per kind of item: the question (a cloze item's statement, its answer filled
# in) and the passage.  An answer alone is too short to score.
FIELDS: dict[ItemKind, tuple[str, ...]] = {ItemKind.OPEN: (QUESTION, CONTEXT), ItemKind.CLOZE: (STATEMENT, CONTEXT), ItemKind.MULTIPLE_CHOICE: (QUESTION, CONTEXT)}


class MembershipConfig(Table):
    """The signal's parameters (the policy's `[membership]` table)."""

    # The share of least likely tokens Min-K% and Min-K%++ average; tokens read per text.
    k: Fraction = 0.2
    max_tokens: Count = 256


class Rules(Table):
    """The policy's `[rules.membership]`: none; membership scores decide nothing until calibrated."""


def fields_for(item: Item) -> tuple[str, ...]:
    return FIELDS[item.kind]


SIGNAL = Signal(
    name=NAME,
    description="membership-inference scores of each text under the probe model (loss, zlib ratio, Min-K%, Min-K%++), one forward pass per text, recorded for calibration",
    config=MembershipConfig,
    rules=Rules,
    fields=fields_for,
    implementation="audit.signals.membership",
    asks=Asks.MODEL,
    decides=False,
)
