"""The report's membership section: what the probed model's calibrated membership scores say
per language, against what the corpus signals found, and how well each score tells the
variants the corpus holds from those it does not, per language (the corpus's exposure as the
truth, as `audit calibrate` takes it by default).  Kept beside exposure and knowledge, never
folded into either."""
from __future__ import annotations

from collections import Counter

from audit.evaluate.membership import Grouping, ScoredText, calibrate, scored_texts
from audit.evaluate.stratify import MEMBER, MEMBERSHIP_STRATA, Exposure
from audit.exposure import Membership
from audit.records import JsonObject
from audit.signals import membership_spec

# The false-positive rate the report's per-language thresholds are shown at.
REPORT_FPR = 0.05


class MembershipScores:
    """The membership scores of every record, with its exposure as the truth, gathered in the
    report's one pass over the records (a few numbers per text)."""

    def __init__(self) -> None:
        self.texts: list[ScoredText] = []

    def add(self, record: JsonObject) -> None:
        self.texts.extend(scored_texts([record], None))

    def section(self, manifest: JsonObject, labels: Exposure, languages: list[str]) -> JsonObject | None:
        """None when the membership signal did not run (the manifest's `signals` say which ran)."""
        if membership_spec.NAME not in (manifest.get("signals") or []) and labels.membership is None:
            return None
        verdicts = labels.everywhere(labels.membership, MEMBERSHIP_STRATA, Membership.UNDETERMINED.value)
        settings = ((manifest.get("policy") or {}).get("settings") or {}).get(membership_spec.NAME) or {}
        return {
            "languages": languages,
            "thresholds": settings.get("thresholds") or {},
            "per_language": {lang: _counts(verdicts.counts(lang)) for lang in languages},
            "total": _counts(verdicts.counts()),
            "crosstab": {"languages": {lang: labels.crosstab(verdicts, MEMBERSHIP_STRATA, lang) for lang in languages}, "total": labels.crosstab(verdicts, MEMBERSHIP_STRATA, None)},
            "calibration": self._calibration(),
        }

    def _calibration(self) -> JsonObject:
        """Per field and language: members and non-members by the corpus, and each score's AUROC."""
        found: JsonObject = {"fpr": REPORT_FPR, "fields": {}}
        for group in calibrate(self.texts, REPORT_FPR):
            if group.grouping is Grouping.LANGUAGE:
                found["fields"].setdefault(group.field, {})[group.group] = {
                    "members": group.members, "non_members": group.non_members,
                    "auroc": {str(score): figures.auroc for score, figures in group.scores.items()},
                }
        return found


def _counts(counts: Counter[str]) -> JsonObject:
    total = sum(counts.values())
    return {tag: counts.get(tag, 0) for tag in MEMBERSHIP_STRATA} | {"total": total, "member_rate": counts.get(MEMBER, 0) / total if total else 0.0}
