"""The scored pairs split by exposure: by the tags of target and source, by each signal and
each source judged alone, by the set of signals that saw the target, and by what a probed
model knew and by what its calibrated membership scores say; with the differences between
strata and their tests."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from audit.auditfile import AuditFile
from audit.evaluate.metrics import Estimator
from audit.evaluate.pairs import EvaluationError, PairRow, summary_dict
from audit.evaluate.stratify import KNOWLEDGE_STRATA, KNOWN, MEMBER, MEMBERSHIP_STRATA, NON_MEMBER, NOT_KNOWN, STRATA, Exposure, ExposureError, read_exposure
from audit.exposure import SEEN, UNSEEN
from audit.records import JsonObject


def audit_exposure(audit: AuditFile | None) -> Exposure | None:
    if audit is None:
        return None
    try:
        return read_exposure(audit)
    except ExposureError as exc:
        raise EvaluationError(str(exc)) from None


def label_rows(rows: list[PairRow], exposure: Exposure) -> list[str]:
    """Set each row's exposure labels; the audit must cover at least some of the pairs."""
    missing = 0
    for row in rows:
        row.source_exposure = exposure.label(row.item_id, row.source)
        row.target_exposure = exposure.label(row.item_id, row.target)
        row.target_combination = exposure.combination(row.item_id, row.target) if exposure.judged else None
        if exposure.knowledge is not None:
            row.source_knowledge = exposure.knowledge_label(row.item_id, row.source)
            row.target_knowledge = exposure.knowledge_label(row.item_id, row.target)
        if exposure.membership is not None:
            row.source_membership = exposure.membership_label(row.item_id, row.source)
            row.target_membership = exposure.membership_label(row.item_id, row.target)
        missing += (row.item_id, row.target) not in exposure.overall
    if missing == len(rows):
        raise EvaluationError("the audit file has no record for any evaluated pair: is it the audit of this benchmark?")
    if missing:
        return [f"audit: {missing} of {len(rows)} pairs have no audit record for their target language; they are 'unknown'"]
    return []


def split_by_exposure(estimator: Estimator, rows: list[PairRow], exposure: Exposure) -> JsonObject:
    """The scored pairs split by target and source exposure, by each signal and each source
    judged alone and by the set of signals that saw the target, with tests between strata;
    and, when a model was probed, by what it knew of the target and of the source."""
    target = np.array([row.target_exposure for row in rows], dtype=object)
    source = np.array([row.source_exposure for row in rows], dtype=object)
    by_signal = {
        signal: np.array([exposure.signal_label(signal, row.item_id, row.target) for row in rows], dtype=object)
        for signal in exposure.by_signal
    }
    by_source = {
        source: np.array([exposure.source_label(source, row.item_id, row.target) for row in rows], dtype=object)
        for source in exposure.by_source
    }
    combination = np.array([row.target_combination for row in rows], dtype=object)
    clean = np.array([exposure.clean(row.item_id, row.target) for row in rows], dtype=bool)
    knowledge = _model_labels(rows, "knowledge") if exposure.knowledge is not None else {}
    membership = _model_labels(rows, "membership") if exposure.membership is not None else {}

    def split(labels: np.ndarray, strata: Iterable[str] = STRATA) -> dict[str, JsonObject]:
        return {label: summary_dict(estimator.summary(labels == label)) for label in strata}

    tests = [("target_exposure", None, target == UNSEEN, target == SEEN, UNSEEN, SEEN),
             ("source_exposure", None, source == UNSEEN, source == SEEN, UNSEEN, SEEN)]
    tests += [("by_signal", signal, labels == UNSEEN, labels == SEEN, UNSEEN, SEEN) for signal, labels in by_signal.items()]
    tests.append(("clean_transfer", None, clean, target == SEEN, "clean", SEEN))
    # After the others, so their permutation draws (and p-values) stay as they were.
    tests += [("by_source", source, labels == UNSEEN, labels == SEEN, UNSEEN, SEEN) for source, labels in by_source.items()]
    tests += [(name, None, labels == NOT_KNOWN, labels == KNOWN, NOT_KNOWN, KNOWN) for name, labels in knowledge.items()]
    tests += [(name, None, labels == NON_MEMBER, labels == MEMBER, NON_MEMBER, MEMBER) for name, labels in membership.items()]
    differences = _differences(estimator, tests)
    strata: JsonObject = {
        "signals": exposure.signals,
        "target_exposure": split(target),
        "source_exposure": split(source),
        "by_signal": {signal: split(labels) for signal, labels in by_signal.items()},
        "sources": exposure.sources,
        "by_source": {source: split(labels) for source, labels in by_source.items()},
        "signal_combination": {"signals": exposure.judged, "strata": split(combination, exposure.combinations())},
        "clean_transfer": summary_dict(estimator.summary(clean)),
        "differences": differences,
    }
    if knowledge:
        strata |= {name: split(labels, KNOWLEDGE_STRATA) for name, labels in knowledge.items()}
        strata["unknown_to_model"] = _unknown_to_model(estimator, rows, knowledge["target_knowledge"] == NOT_KNOWN)
    if membership:
        strata |= {name: split(labels, MEMBERSHIP_STRATA) for name, labels in membership.items()}
    if knowledge or membership:
        strata["all_evidence"] = _all_evidence(estimator, target, knowledge.get("target_knowledge"), membership.get("target_membership"))
    return strata


def _model_labels(rows: list[PairRow], verdict: str) -> dict[str, np.ndarray]:
    """`target_VERDICT` and `source_VERDICT` (knowledge or membership) of every row."""
    return {f"{side}_{verdict}": np.array([getattr(row, f"{side}_{verdict}") for row in rows], dtype=object) for side in ("target", "source")}


def _differences(estimator: Estimator, tests: list[tuple[str, str | None, np.ndarray, np.ndarray, str, str]]) -> list[JsonObject]:
    """Each split's difference between its two strata, per metric, with its interval and test."""
    differences = []
    for name, scope, mask_a, mask_b, a, b in tests:
        for metric, result in estimator.difference(mask_a, mask_b).items():
            entry: JsonObject = {"split": name, "a": a, "b": b, "metric": metric}
            if scope is not None:
                entry["source" if name == "by_source" else "signal"] = scope
            entry |= {"difference": result.difference, "ci": list(result.ci) if result.ci else None, "p_value": result.p_value, "test": result.test}
            differences.append(entry)
    return differences


def _all_evidence(estimator: Estimator, target: np.ndarray, knowledge: np.ndarray | None, membership: np.ndarray | None) -> JsonObject:
    """The target's corpus exposure, what the model knew and its membership verdict together:
    one stratum per combination met ("unseen · not_known · non_member"), in name order, and
    `clean`: unseen in the corpus, not known to the model and no member by its scores, the
    pairs whose transfer no evidence explains away."""
    named = {"exposure": target, "knowledge": knowledge, "membership": membership}
    parts = [labels for labels in named.values() if labels is not None]
    combined = np.array([" · ".join(map(str, row)) for row in zip(*parts, strict=True)], dtype=object)
    clean = target == UNSEEN
    if knowledge is not None:
        clean &= knowledge == NOT_KNOWN
    if membership is not None:
        clean &= membership == NON_MEMBER
    return {
        "parts": [name for name, labels in named.items() if labels is not None],
        "strata": {label: summary_dict(estimator.summary(combined == label)) for label in sorted(set(combined))},
        "clean": summary_dict(estimator.summary(clean)),
    }


def _unknown_to_model(estimator: Estimator, rows: list[PairRow], unknown: np.ndarray) -> JsonObject:
    """LiveCLKTBench's filter: the figures over the pairs whose target the model did not know,
    in total and per target language, so what transfers cannot have been known beforehand."""
    languages = np.array([row.target for row in rows], dtype=object)
    return {
        "total": summary_dict(estimator.summary(unknown)),
        "per_target": {lang: summary_dict(estimator.summary(unknown & (languages == lang))) for lang in sorted(set(languages))},
    }
