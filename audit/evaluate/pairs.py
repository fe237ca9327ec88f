"""The records an evaluation is made of: one scored answer (`Score`), one (item, target
language) pair with its scores and exposure labels (`PairRow`), and a summary's figures."""
from __future__ import annotations

from dataclasses import dataclass

from audit.errors import AuditError
from audit.evaluate.metrics import METRICS, Stat
from audit.records import JsonObject


class EvaluationError(AuditError):
    """Inputs that cannot be evaluated together; the message says which and why."""


@dataclass(frozen=True)
class Score:
    """One answer scored: `value` in [0, 1] (None if unscorable), `correct` as a yes/no."""

    value: float | None
    correct: bool | None
    judge: JsonObject | None = None


@dataclass
class PairRow:
    item_id: str
    source: str
    target: str
    source_score: Score | None
    target_score: Score
    method: str
    source_exposure: str | None = None
    target_exposure: str | None = None
    target_combination: str | None = None
    source_knowledge: str | None = None
    target_knowledge: str | None = None
    source_membership: str | None = None
    target_membership: str | None = None

    @property
    def scored(self) -> bool:
        return self.source_score is not None and self.source_score.value is not None and self.target_score.value is not None

    def values(self) -> tuple[float, float]:
        """(source score, target score) of a scored pair."""
        if self.source_score is None or self.source_score.value is None or self.target_score.value is None:
            raise ValueError(f"pair '{self.item_id}'/{self.target} is not scored")
        return self.source_score.value, self.target_score.value

    def to_dict(self) -> JsonObject:
        source = self.source_score or Score(None, None)
        judged = source.judge is not None or self.target_score.judge is not None
        return {
            "item_id": self.item_id,
            "source": self.source,
            "target": self.target,
            "source_correct": source.correct,
            "target_correct": self.target_score.correct,
            "source_score": source.value,
            "target_score": self.target_score.value,
            "method": self.method,
            "source_exposure": self.source_exposure,
            "target_exposure": self.target_exposure,
            "target_combination": self.target_combination,
            "source_knowledge": self.source_knowledge,
            "target_knowledge": self.target_knowledge,
            "source_membership": self.source_membership,
            "target_membership": self.target_membership,
            "judge": {"source": source.judge, "target": self.target_score.judge} if judged else None,
        }


Summary = dict[str, Stat]


def summary_dict(summary: Summary) -> JsonObject:
    return {metric: summary[metric].to_dict() for metric in METRICS}

