"""The membership-inference scores by name, and which way a member leans on each: what the
policy's calibrated thresholds name and the decision reads, kept apart from the code that
computes them (`audit.probes.membership`) so that reading a policy loads no model code."""
from __future__ import annotations

from enum import StrEnum


class Score(StrEnum):
    LOSS = "loss"
    ZLIB = "zlib"
    MIN_K = "min_k"
    MIN_K_PLUS = "min_k_plus"
    LOSS_MINUS_REFERENCE = "loss_minus_reference"


# Whether a member scores higher (else lower) than a text the model never saw.
MEMBER_SCORES_HIGHER: dict[Score, bool] = {Score.LOSS: False, Score.ZLIB: False, Score.MIN_K: True, Score.MIN_K_PLUS: True, Score.LOSS_MINUS_REFERENCE: False}
