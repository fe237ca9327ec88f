"""Calibrating membership scores against known membership, per language and per script.

An audit with the membership signal holds each text's scores under the probe model.  The truth
is what the corpus says (a variant `seen` in the model's pretraining corpus is a member, an
`unseen` one is not, an `unknown` one is left out) or, for a model whose training text is known,
a truth file.  For every group of texts (a language, a script; each field apart) and every
score, it reports how well the score tells members from the rest (AUROC), what share of members
it catches at 1% and 5% false positives, and the threshold that keeps false positives at or
below a chosen rate.  A threshold is only as fine as the group is large: with n non-members the
false-positive rate moves in steps of 1/n, so each figure comes with its counts and the rate
actually reached.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

from audit.errors import AuditError
from audit.langcodes import usual_script
from audit.memberscore import MEMBER_SCORES_HIGHER, Score
from audit.probes.membership import auroc
from audit.signals import membership_spec

SIGNAL = membership_spec.NAME
READ_FIELDS = frozenset(membership_spec.READ_FIELDS)
REPORTED_FPRS = (0.01, 0.05)


class CalibrationError(AuditError):
    """A truth file or an audit that cannot be calibrated on; the message names the file, line and field."""


class Grouping(StrEnum):
    LANGUAGE = "language"
    SCRIPT = "script"


@dataclass(frozen=True)
class ScoredText:
    item_id: str
    lang: str
    field: str
    member: bool
    figures: Mapping[Score, float]


@dataclass(frozen=True)
class ScoreFigures:
    """One score on one group: higher or lower for members, AUROC, TPR at the reported FPRs, and
    the threshold for the chosen FPR with the FPR and TPR it reaches."""

    member_scores_higher: bool
    auroc: float | None
    tpr_at_fpr: dict[str, float | None]
    threshold: float | None
    fpr_reached: float | None
    tpr_reached: float | None


@dataclass(frozen=True)
class GroupFigures:
    grouping: Grouping
    group: str
    field: str
    members: int
    non_members: int
    scores: dict[str, ScoreFigures] = field(default_factory=dict)


def read_truth(path: Path) -> dict[tuple[str, str], bool]:
    """A truth file: JSON Lines of `{"item_id": ..., "lang": ..., "member": true|false}`."""
    truth: dict[tuple[str, str], bool] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise CalibrationError(f"{path}: cannot read the truth file ({error})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as error:
            raise CalibrationError(f"{path}, line {number}: not JSON ({error})") from None
        if not isinstance(row, dict):
            raise CalibrationError(f"{path}, line {number}: expected an object with item_id, lang and member")
        for name, kind in (("item_id", str), ("lang", str), ("member", bool)):
            if not isinstance(row.get(name), kind):
                raise CalibrationError(f"{path}, line {number}, field '{name}': expected {kind.__name__}, got {row.get(name)!r}")
        key = (row["item_id"], row["lang"])
        if key in truth:
            raise CalibrationError(f"{path}, line {number}: item {key[0]!r} in {key[1]!r} is given twice")
        truth[key] = row["member"]
    if not truth:
        raise CalibrationError(f"{path}: the truth file names no text")
    return truth


def scored_texts(records: Iterable[Mapping[str, object]], truth: Mapping[tuple[str, str], bool] | None) -> list[ScoredText]:
    """Every membership score of the audit with its truth: the truth file's, else the record's
    exposure (`seen` a member, `unseen` not, anything else left out)."""
    found = []
    for record in records:
        key = (str(record.get("item_id")), str(record.get("lang")))
        member = truth.get(key) if truth is not None else {"seen": True, "unseen": False}.get(str(record.get("exposure")))
        if member is None:
            continue
        for evidence in record.get("evidence") or []:  # type: ignore[union-attr]
            if not isinstance(evidence, dict) or evidence.get("signal") != SIGNAL or evidence.get("status") != "ok" or evidence.get("field") not in READ_FIELDS:
                continue
            figures = evidence.get("figures") or {}
            values = {score: float(figures[score]) for score in Score if isinstance(figures.get(score), int | float)}
            if values:
                found.append(ScoredText(key[0], key[1], str(evidence.get("field")), member, values))
    return found


def _threshold(others: list[float], higher: bool, fpr: float) -> float:
    """The least extreme score that calls at most `fpr` of the non-members members."""
    ordered = sorted(others, reverse=higher)
    edge = ordered[min(len(ordered) - 1, math.floor(fpr * len(ordered)))]
    return math.nextafter(edge, math.inf if higher else -math.inf)


def _called(values: list[float], threshold: float, higher: bool) -> float:
    return sum((v >= threshold) if higher else (v <= threshold) for v in values) / len(values)


def score_figures(members: list[float], others: list[float], score: Score, fpr: float) -> ScoreFigures:
    higher = MEMBER_SCORES_HIGHER[score]
    if not members or not others:
        return ScoreFigures(higher, None, {f"{rate:g}": None for rate in REPORTED_FPRS}, None, None, None)
    tprs = {f"{rate:g}": round(_called(members, _threshold(others, higher, rate), higher), 4) for rate in REPORTED_FPRS}
    threshold = _threshold(others, higher, fpr)
    return ScoreFigures(higher, round(auroc(members, others, higher) or 0.0, 4), tprs, threshold,
                        round(_called(others, threshold, higher), 4), round(_called(members, threshold, higher), 4))


def calibrate(texts: list[ScoredText], fpr: float) -> list[GroupFigures]:
    """Figures per (grouping, group, field), languages and scripts in name order."""
    groups: dict[tuple[Grouping, str, str], list[ScoredText]] = {}
    for text in texts:
        groups.setdefault((Grouping.LANGUAGE, text.lang, text.field), []).append(text)
        groups.setdefault((Grouping.SCRIPT, usual_script(text.lang) or "unknown", text.field), []).append(text)
    result = []
    for (grouping, group, name), members_and_not in sorted(groups.items()):
        members = [t for t in members_and_not if t.member]
        others = [t for t in members_and_not if not t.member]
        figures = GroupFigures(grouping, group, name, len(members), len(others))
        for score in Score:
            mine, theirs = [t.figures[score] for t in members if score in t.figures], [t.figures[score] for t in others if score in t.figures]
            if mine or theirs:
                figures.scores[score] = score_figures(mine, theirs, score, fpr)
        result.append(figures)
    return result


def as_json(groups: list[GroupFigures], fpr: float, truth: str) -> dict[str, object]:
    return {"fpr": fpr, "truth": truth, "reported_fprs": list(REPORTED_FPRS), "groups": [asdict(group) for group in groups]}


def markdown(groups: list[GroupFigures], fpr: float) -> str:
    """A table per field: each group's AUROC per score, TPR at 1% and 5% FPR and the threshold
    for the chosen FPR of its best score."""
    lines = [f"# Membership calibration (threshold at {fpr:g} FPR)", ""]
    for name in sorted({group.field for group in groups}):
        lines += [f"## {name}", "", "| grouping | group | members | non-members | " + " | ".join(f"{s} AUROC" for s in Score) + " | best | TPR@1% | TPR@5% | threshold |",
                  "|---|---|---:|---:|" + "---:|" * len(Score) + "---|---:|---:|---:|"]
        for group in (g for g in groups if g.field == name):
            aurocs = {s: group.scores[s].auroc for s in Score if s in group.scores and group.scores[s].auroc is not None}
            best = best_score(group)
            chosen = group.scores[best] if best else None
            cells = " | ".join(f"{aurocs[s]:.3f}" if s in aurocs else "–" for s in Score)
            tail = f"{best} | {chosen.tpr_at_fpr['0.01']} | {chosen.tpr_at_fpr['0.05']} | {chosen.threshold:.6g}" if chosen and chosen.threshold is not None else "– | – | – | –"
            lines.append(f"| {group.grouping} | {_cell(group.group)} | {group.members} | {group.non_members} | {cells} | {tail} |")
        lines.append("")
    return "\n".join(lines)


def best_score(group: GroupFigures) -> Score | None:
    """The group's score with the highest AUROC and a threshold (the first in `Score`'s order on a tie)."""
    usable = [s for s in Score if s in group.scores and group.scores[s].auroc is not None and group.scores[s].threshold is not None]
    return max(usable, key=lambda s: group.scores[s].auroc or 0.0) if usable else None


def thresholds_toml(groups: list[GroupFigures], fpr: float, truth: str) -> str:
    """A policy file of `[membership.thresholds.FIELD.GROUP]` tables: per field and language
    (and per script, which a language without its own threshold falls back on), the best score's
    threshold at the chosen FPR.  Pass it to `audit check --policy` (or merge it into yours)."""
    lines = [f"# Membership thresholds from `audit calibrate` at {fpr:g} false-positive rate, truth: {_toml_comment(truth)}.",
             "# A language's own threshold is used before its script's.  Merge into a policy, or pass as `audit check --policy`.", ""]
    for group in groups:
        score = best_score(group)
        if score is None or (group.grouping is Grouping.SCRIPT and group.group == "unknown"):
            continue
        chosen = group.scores[score]
        name = group.group if group.grouping is Grouping.LANGUAGE else f"{membership_spec.SCRIPT_SCOPE}{group.group}"
        lines += [f"[membership.thresholds.{group.field}.{json.dumps(name)}]  # {group.members} members, {group.non_members} non-members",
                  f"score = {json.dumps(str(score))}", f"value = {chosen.threshold!r}", f"fpr = {chosen.fpr_reached!r}", f"auroc = {chosen.auroc!r}", ""]
    return "\n".join(lines)


def _toml_comment(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    """A language or script name in a Markdown cell: no markup, no column break."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
