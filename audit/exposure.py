"""The exposure policy: from evidence to `seen` / `unseen` / `unknown`, per (item, language)
and per item, always with the evidence that decided.

Rules are keyed by signal, field and figure (`[rules.ngram.context] coverage = 0.5`), apply to
evidence from every source unless a table scoped to one overrides them
(`[rules.ngram.context."source:olmo"]`), and are judged on each piece of evidence on its own, so
two signals or two corpora reporting on one field never replace each other.  Any rule that
fires makes the variant `seen`; else any failed source or undecided (bounded) figure makes it
`unknown`; else it is `unseen`.  `unknown` is never silently `unseen`.

A model's evidence (the probe signal) is judged by the same rules into a separate verdict,
`knowledge`: `known` where a rule fires, `undetermined` where a probe failed, was offline or
its judge's reply could not be parsed, else `not_known`.  It never moves `exposure`: what a
model knows is not what its corpus contains.  The membership signal's scores are judged apart
again, by the calibrated thresholds of `[membership.thresholds]`, into `membership`.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

from audit.evidence import ABSENT, FAILED, Evidence, Figures, Json, Status
from audit.langcodes import usual_script
from audit.memberscore import MEMBER_SCORES_HIGHER, Score
from audit.policyfile import Policy
from audit.rules import Outcome, Rule, judge
from audit.signals import KNOWLEDGE_SIGNALS, MODEL_SIGNALS, membership_spec


class Exposure(StrEnum):
    SEEN = "seen"
    UNSEEN = "unseen"
    UNKNOWN = "unknown"


class Knowledge(StrEnum):
    """What the model itself showed it knows, per (item, language)."""

    KNOWN = "known"
    NOT_KNOWN = "not_known"
    UNDETERMINED = "undetermined"


class Membership(StrEnum):
    """What the model's membership scores say of a variant's text, once calibrated."""

    MEMBER = "member"
    NON_MEMBER = "non_member"
    UNDETERMINED = "undetermined"


class ItemExposure(StrEnum):
    """Where an item's fact was seen, relative to its source language."""

    SOURCE_ONLY = "seen_in_source_only"
    TARGET_SEEN = "seen_in_target"
    UNSEEN_EVERYWHERE = "unseen_everywhere"
    UNKNOWN = "unknown"


# One check behind a decision, as `decided_by` lists it: signal, source, field, figure, op,
# value, threshold (or the failed source's status and error).
Check: TypeAlias = dict[str, Json]

SEEN, UNSEEN, UNKNOWN = Exposure.SEEN, Exposure.UNSEEN, Exposure.UNKNOWN
SOURCE_ONLY, TARGET_SEEN, UNSEEN_EVERYWHERE = ItemExposure.SOURCE_ONLY, ItemExposure.TARGET_SEEN, ItemExposure.UNSEEN_EVERYWHERE


@dataclass
class Decision:
    """A variant's tag and the checks behind it; `seen_in_languages`: the languages whose
    documents hold its text or fact (its own when its own rules fired, and those in which the
    same rules fire when documents of every language count); `said`: what each piece of the
    evidence it was decided from says alone (`said_alone`), in its order, None for a model's."""

    exposure: Exposure
    decided_by: list[Check] = field(default_factory=list)
    seen_in_languages: list[str] = field(default_factory=list)
    said: list[Outcome | None] = field(default_factory=list)


@dataclass
class KnowledgeDecision:
    knowledge: Knowledge
    decided_by: list[Check] = field(default_factory=list)


@dataclass
class MembershipDecision:
    membership: Membership
    decided_by: list[Check] = field(default_factory=list)


_KNOWLEDGE = {SEEN: Knowledge.KNOWN, UNSEEN: Knowledge.NOT_KNOWN, UNKNOWN: Knowledge.UNDETERMINED}
BELOW_FLOOR = "below_floor"
UNDETERMINED_LANGUAGE = "und"


def decide(policy: Policy, evidence: list[Evidence], lang: str | None = None) -> Decision:
    """Exposure: the rules on the corpus signals' evidence (a model's evidence is left to
    `decide_knowledge`); `lang` is the variant's language, named in `seen_in_languages` when
    its own rules fire on evidence that does not name one."""
    decision = _decide(policy, [found for found in evidence if found.signal not in MODEL_SIGNALS], lang)
    judged = iter(decision.said)
    decision.said = [None if found.signal in MODEL_SIGNALS else next(judged) for found in evidence]
    return decision


def decide_knowledge(policy: Policy, evidence: list[Evidence]) -> KnowledgeDecision | None:
    """Knowledge: the rules on the model signals' evidence; None when no model was probed."""
    probed = [found for found in evidence if found.signal in KNOWLEDGE_SIGNALS]
    if not probed:
        return None
    decision = _decide(policy, probed, None)
    return KnowledgeDecision(_KNOWLEDGE[decision.exposure], decision.decided_by)


def decide_membership(policy: Policy, evidence: list[Evidence], lang: str) -> MembershipDecision | None:
    """Membership: each field's score against its calibrated threshold for the variant's
    language (else its script).  `member` when any field's score is past its threshold;
    `undetermined` when none is and a field with a threshold could not be read, or no field
    has one for this language; else `non_member`.  None when the signal did not run."""
    read = [found for found in evidence if found.signal == membership_spec.NAME]
    if not read:
        return None
    config = policy.configs[membership_spec.NAME]
    assert isinstance(config, membership_spec.MembershipConfig)
    fired, passed, undecided = [], [], []
    script = usual_script(lang)
    for found in read:
        chosen = config.threshold(found.field, lang, script)
        if chosen is None or found.status == ABSENT:
            continue
        group, threshold = chosen
        where: Check = {"signal": found.signal, "source": found.source, "field": found.field, "group": group}
        value = found.figures.get(threshold.score)
        if found.status != Status.OK or not isinstance(value, int | float):
            undecided.append({**where, "status": found.status, "error": found.error or f"no {threshold.score} figure"})
            continue
        higher = MEMBER_SCORES_HIGHER[Score(threshold.score)]
        check = {**where, "figure": threshold.score, "op": (">=" if higher else "<="), "value": value, "threshold": threshold.value}
        (fired if (value >= threshold.value if higher else value <= threshold.value) else passed).append(check)
    if fired:
        return MembershipDecision(Membership.MEMBER, fired)
    if undecided:
        return MembershipDecision(Membership.UNDETERMINED, undecided)
    if not passed:
        return MembershipDecision(Membership.UNDETERMINED, [{"reason": f"no calibrated threshold for {lang} (or its script) on a field that was read"}])
    return MembershipDecision(Membership.NON_MEMBER, passed)


def _below_floor(found: Evidence, rule: Rule) -> bool:
    """The field is too short for this figure to carry a decision (the signal says so)."""
    listed = found.figures.get(BELOW_FLOOR)
    return isinstance(listed, list) and rule.figure in listed


def _floor_check(found: Evidence, rule: Rule, check: Check) -> Check:
    floor = found.figures.get("floor")
    detail = floor.get(rule.figure) if isinstance(floor, dict) else None
    return {**check, "status": BELOW_FLOOR, **({"floor": detail} if isinstance(detail, dict) else {})}


def _fires(rule: Rule, figures: Figures) -> bool:
    value = figures.get(rule.figure)
    if value is None:
        return False
    bounds = figures.get("bounds", {})
    return judge(rule, value, tuple(bounds[rule.figure]) if rule.figure in bounds else None) is Outcome.FIRED


def _languages_seen(found: Evidence, rules: list[Rule], own_fired: bool, lang: str | None) -> set[str]:
    """Where this evidence shows the text: its own language when its rules fired there, and
    the documents' languages (`figures.languages`) when the same rules fire on the figures
    counted over every language.  Figures below the field's floor decide nothing here either."""
    figures = found.figures
    seen: set[str] = set()
    language = figures.get("language")
    own = language.get("lang") if isinstance(language, dict) and isinstance(language.get("lang"), str) else lang
    if own_fired and own:
        seen.add(own)
    every = figures.get("any_language")
    if isinstance(every, dict) and any(_fires(rule, every) for rule in rules if not _below_floor(found, rule)):
        found_in = figures.get("languages")
        if isinstance(found_in, dict):
            seen |= {str(name) for name, count in found_in.items() if name != UNDETERMINED_LANGUAGE and count}
    return seen


def _applicable(policy: Policy, found: Evidence) -> list[Rule]:
    """The rules that judge this piece of evidence: none when it is absent."""
    table = policy.rules.get(found.signal, {}).get(found.field)
    return table.for_source(found.source) if table and found.status != ABSENT else []


def _judged(found: Evidence, rules: list[Rule]) -> Iterator[tuple[Rule, Json, Outcome, bool]]:
    """Each rule whose figure this evidence has: the figure, the rule's outcome, and whether
    the field is too short for the figure (then it passes: it cannot carry a decision)."""
    figures = found.figures
    bounds = figures.get("bounds", {})
    for rule in rules:
        value = figures.get(rule.figure)
        if value is None:
            continue
        if _below_floor(found, rule):
            yield rule, value, Outcome.PASSED, True
        else:
            yield rule, value, judge(rule, value, tuple(bounds[rule.figure]) if rule.figure in bounds else None), False


def said_alone(policy: Policy, found: Evidence) -> Outcome | None:
    """What one piece of corpus evidence says by itself, as `decide` weighs it: FIRED when a
    rule fires on it; else UNDECIDED when its source failed or a bounded figure left a rule
    undecided; else PASSED when a check was made; None when no rule applies.  The report
    judges every signal and every source of every variant alone: this gives `decide`'s tag
    (by `exposure_of`) without building the checks that tell why."""
    applicable = _applicable(policy, found)
    if not applicable:
        return None
    if found.status in (FAILED, Status.UNKNOWN):
        return Outcome.UNDECIDED
    return _strongest([outcome for _, _, outcome, _ in _judged(found, applicable)])


def _strongest(outcomes: list[Outcome]) -> Outcome | None:
    """What a piece's checks say together: FIRED over UNDECIDED over PASSED; None for no check."""
    for outcome in (Outcome.FIRED, Outcome.UNDECIDED, Outcome.PASSED):
        if outcome in outcomes:
            return outcome
    return None


def exposure_of(said: Iterable[Outcome | None]) -> Exposure:
    """The tag of a variant whose pieces of evidence said `said` (`said_alone`): any rule that
    fired makes it `seen`, anything undecided (or nothing judged at all) `unknown`."""
    outcomes = set(said)
    if Outcome.FIRED in outcomes:
        return SEEN
    if Outcome.UNDECIDED in outcomes or Outcome.PASSED not in outcomes:
        return UNKNOWN
    return UNSEEN


def _decide(policy: Policy, evidence: list[Evidence], lang: str | None) -> Decision:
    """Apply every rule to each piece of evidence of one language variant, on its own.

    `decided_by` names, for each check, the signal, source, field (and its form, for a field
    checked in several), figure, operator, value and threshold: for `seen` the rules that
    fired, for `unseen` every check made (a figure the field is too short to carry passes,
    with `"status": "below_floor"`), for `unknown` the failed sources and the rules a bounded
    figure left undecided (`"status": "bounded"`)."""
    fired, passed, undecided = [], [], []
    seen_in: set[str] = set()
    said: list[Outcome | None] = []
    for found in evidence:
        applicable = _applicable(policy, found)
        if not applicable:
            said.append(None)
            continue
        where = {"signal": found.signal, "source": found.source, "field": found.field}
        if "form" in found.figures:
            where["form"] = found.figures["form"]
        if found.status in (FAILED, Status.UNKNOWN):
            said.append(Outcome.UNDECIDED)
            undecided.append({**where, "status": found.status, "error": found.error})
            continue
        before, outcomes = len(fired), []
        for rule, value, outcome, floored in _judged(found, applicable):
            outcomes.append(outcome)
            check = {**where, "figure": rule.figure, "op": rule.op.value, "value": value, "threshold": rule.value}
            if floored:
                passed.append(_floor_check(found, rule, check))
            elif outcome is Outcome.FIRED:
                fired.append(check)
            elif outcome is Outcome.PASSED:
                passed.append(check)
            else:
                undecided.append({**check, "status": outcome.value, "bounds": list(found.figures["bounds"][rule.figure])})
        said.append(_strongest(outcomes))
        seen_in |= _languages_seen(found, applicable, len(fired) > before, lang)
    languages = sorted(seen_in)
    if fired:
        return Decision(SEEN, fired, languages, said)
    if undecided:
        return Decision(UNKNOWN, undecided, languages, said)
    if not passed:
        return Decision(UNKNOWN, [{"reason": "no text that any rule applies to"}], languages, said)
    return Decision(UNSEEN, passed, languages, said)


def seen_in(languages: list[list[str] | None]) -> list[str] | None:
    """An item's `seen_in`: the union of its variants' `seen_in_languages`; None when any
    variant's was not recorded (an older audit), since a part is not the whole."""
    if any(found is None for found in languages):
        return None
    return sorted({lang for found in languages for lang in found or []})


def item_exposure(source_lang: str, tags: dict[str, str]) -> ItemExposure:
    """One word for the item: where its fact was seen, relative to its source language."""
    targets = {lang: tag for lang, tag in tags.items() if lang != source_lang}
    if any(tag == SEEN for tag in targets.values()):
        return TARGET_SEEN
    if any(tag == UNKNOWN for tag in tags.values()):
        return ItemExposure.UNKNOWN
    if tags.get(source_lang) == SEEN:
        return SOURCE_ONLY
    return UNSEEN_EVERYWHERE
