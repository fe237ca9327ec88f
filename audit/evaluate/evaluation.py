"""`evaluate`: a benchmark, a model's predictions and (optionally) an audit file, in; ECLeKTic's
overall success and transfer score out, per language, per language pair, in total and per
exposure stratum.

A pair is (item, target language), the target being any answered language other than the
item's source language, as in ECLeKTic. Every pair is kept in `rows` with its scores and
labels; pairs that cannot be scored (no source answer, an unscorable gold answer, a judge
output that could not be read) stay there with `None` and are listed in `problems`, never
counted as wrong.

With an audit whose model was probed, pairs are also split by what the model knew, and
transfer is given over the targets the model did not know (LiveCLKTBench's filter: what it
answers there cannot have been known in that language beforehand).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audit.auditfile import AuditFile
from audit.errors import AuditError
from audit.evaluate.judge import FOUND, JudgeConfig, JudgeRequest, Progress
from audit.evaluate.judge import OK as JUDGE_OK
from audit.evaluate.judge import judge as run_judge
from audit.evaluate.metrics import METRICS, Estimator, PairScores, Stat, too_many_draws
from audit.evaluate.predictions import Prediction, PredictionSet, load_predictions
from audit.evaluate.stratify import KNOWLEDGE_STRATA, KNOWN, NOT_KNOWN, STRATA, Exposure, ExposureError, read_exposure
from audit.evaluate.string_metric import eclektic_recall, robust_recall
from audit.exposure import SEEN, UNSEEN
from audit.items import Item
from audit.langcodes import ISO_639_1

GIVEN, ECLEKTIC, ROBUST, JUDGE = "given", "eclektic", "robust", "judge"
METHODS = (GIVEN, ECLEKTIC, ROBUST, JUDGE)
_EXAMPLES = 3

_CI_NOTE = (
    " Intervals: ci_bootstrap resamples questions (percentile, 95%); ci_normal is the paper's"
    " p +- 1.96 sqrt(p(1-p)/n_eff) over pairs, clipped to [0, 1]."
)
METHOD_NOTES = {
    GIVEN: (
        "Correctness as judged in the predictions file ('correct'). overall_success = pairs"
        " correct in both the source and the target language / all pairs; transfer_score ="
        " pairs correct in both / pairs correct in the source language." + _CI_NOTE
    ),
    ECLEKTIC: (
        "ECLeKTic's published string metric: score = share of the gold answer's words found as"
        " substrings of the prediction (zh and ja split into single Han characters), case- and"
        " punctuation-sensitive, 0 for an empty gold answer. A pair scores target recall x"
        " source recall; overall_success = mean over pairs; the total transfer_score = sum of"
        " pair scores / (sum of source recalls x the benchmark's number of target languages, {targets}),"
        " as published; per-language and per-stratum transfer divide by the source recalls of"
        " the pairs present. Unlike the published code, pairs without a source answer are left"
        " out and reported rather than scored 0. 'correct' means recall 1." + _CI_NOTE
    ),
    ROBUST: (
        "Robust string recall: NFKC, case folding, punctuation and symbols ignored, digit groups"
        " joined, per-script units (a character in Han, kana, Thai and other unsegmented"
        " scripts, else a word), whole-unit matching (Korean particles and Hebrew proclitics"
        " allowed). A pair scores target recall x source recall; overall_success = mean over"
        " pairs; transfer_score = sum of pair scores / sum of their source recalls, so the"
        " number of target languages comes from the data. An empty gold answer is left out."
        " 'correct' means recall 1." + _CI_NOTE
    ),
    JUDGE: (
        "LLM-as-judge ({model}) through an OpenAI-compatible endpoint, shown the question, the"
        " gold answer and the context in the language asked, answering YES or NO; raw outputs"
        " and parse status are kept per row. overall_success and transfer_score as for judged"
        " correctness; answers whose judgment could not be read are left out." + _CI_NOTE
    ),
}


class EvaluationError(AuditError):
    """Inputs that cannot be evaluated together; the message says which and why."""


@dataclass(frozen=True)
class Score:
    """One answer scored: `value` in [0, 1] (None if unscorable), `correct` as a yes/no."""

    value: float | None
    correct: bool | None
    judge: dict[str, Any] | None = None


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

    @property
    def scored(self) -> bool:
        return self.source_score is not None and self.source_score.value is not None and self.target_score.value is not None

    def values(self) -> tuple[float, float]:
        """(source score, target score) of a scored pair."""
        if self.source_score is None or self.source_score.value is None or self.target_score.value is None:
            raise ValueError(f"pair '{self.item_id}'/{self.target} is not scored")
        return self.source_score.value, self.target_score.value

    def to_dict(self) -> dict[str, Any]:
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
            "judge": {"source": source.judge, "target": self.target_score.judge} if judged else None,
        }


Summary = dict[str, Stat]


@dataclass
class Evaluation:
    method: str
    method_notes: str
    questions: int
    languages: list[str]
    source_languages: list[str]
    total: Summary
    per_target: dict[str, Summary]
    per_source: dict[str, Summary]
    pairs: list[tuple[str, str, Summary]]
    strata: dict[str, Any]
    rows: list[PairRow]
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "method_notes": self.method_notes,
            "questions": self.questions,
            "languages": self.languages,
            "source_languages": self.source_languages,
            "total": _summary_dict(self.total),
            "per_target": {lang: _summary_dict(s) for lang, s in self.per_target.items()},
            "per_source": {lang: _summary_dict(s) for lang, s in self.per_source.items()},
            "pairs": [{"source": source, "target": target, **_summary_dict(s)} for source, target, s in self.pairs],
            "strata": self.strata,
            "rows": [row.to_dict() for row in self.rows],
            "problems": self.problems,
        }


def _summary_dict(summary: Summary) -> dict[str, Any]:
    return {metric: summary[metric].to_dict() for metric in METRICS}


def evaluate(
    items: list[Item],
    predictions: PredictionSet | str | os.PathLike[str],
    audit: AuditFile | None,
    method: str,
    *,
    judge: JudgeConfig | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    progress: Progress | None = None,
    permutations: int | None = None,
) -> Evaluation:
    """Score every pair with `method` (one of METHODS) and summarise.

    `bootstrap` resamples (0 for none) and `permutations` (default: as many) drive the
    intervals and the strata tests, both seeded by `seed`. `progress(done, total)` is called
    as judgments arrive (method `judge` only).
    """
    if method not in METHODS:
        raise EvaluationError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if bootstrap < 0 or (permutations is not None and permutations < 0):
        raise EvaluationError("bootstrap and permutations must be 0 or more")
    draws = bootstrap if permutations is None else max(bootstrap, permutations)
    if too_many := too_many_draws(draws, 0, 0):
        raise EvaluationError(too_many)
    if not items:
        raise EvaluationError("no benchmark items to evaluate")
    bound = predictions if isinstance(predictions, PredictionSet) else load_predictions(predictions, items)
    if not bound.bound:
        bound = bound.bind(items)
    problems = list(bound.problems)
    rows_wanted = _pairs(items, bound)
    if not rows_wanted:
        raise EvaluationError(f"{bound.path}: no answers in a target language (one other than the item's source language)")
    scores, score_problems = _score_all(method, items, bound, rows_wanted, judge, progress)
    problems += score_problems
    rows = [
        PairRow(item.item_id, item.source_lang, target.lang,
                scores.get((item.item_id, item.source_lang)) if source else None,
                scores[(item.item_id, target.lang)], method)
        for item, source, target in rows_wanted
    ]
    problems += _unscored(bound.path, rows)
    exposure = _exposure(audit)
    if exposure is not None:
        problems += exposure.notes + _label(rows, exposure)
    scored = [row for row in rows if row.scored]
    if not scored:
        raise EvaluationError(f"{bound.path}: no pair could be scored:" + "".join(f"\n  {p}" for p in problems[:5]))
    table = _table(scored)
    if too_many := too_many_draws(draws, table.n_questions, table.size):
        raise EvaluationError(too_many)
    estimator = Estimator(table, draws=bootstrap, permutations=bootstrap if permutations is None else permutations, seed=seed)
    targets = len({lang for item in items for lang in item.variants}) - 1
    everything = np.ones(table.size, dtype=bool)
    sources, target_langs = sorted(set(table.source)), sorted(set(table.target))
    config = (judge or JudgeConfig()).resolve() if method == JUDGE else None
    return Evaluation(
        method=method,
        method_notes=METHOD_NOTES[method].format(targets=targets, model=config.model if config else ""),
        questions=table.n_questions,
        languages=sorted(set(sources) | set(target_langs)),
        source_languages=sources,
        total=estimator.summary(everything, targets_per_question=targets if method == ECLEKTIC else None),
        per_target={lang: estimator.summary(table.where(target=lang)) for lang in target_langs},
        per_source={lang: estimator.summary(table.where(source=lang)) for lang in sources},
        pairs=[(s, t, estimator.summary(table.where(source=s, target=t)))
               for s, t in sorted(set(zip(table.source, table.target, strict=True)))],
        strata=_strata(estimator, scored, exposure) if exposure is not None else {},
        rows=rows,
        problems=problems,
    )


# Pairs and scores -----------------------------------------------------------------------


def _pairs(items: list[Item], predictions: PredictionSet) -> list[tuple[Item, Prediction | None, Prediction]]:
    """(item, its source answer or None, a target answer), in benchmark order."""
    pairs = []
    for item in items:
        source = predictions.get(item.item_id, item.source_lang)
        for lang in item.variants:
            target = predictions.get(item.item_id, lang)
            if lang != item.source_lang and target is not None:
                pairs.append((item, source, target))
    return pairs


def _score_all(
    method: str,
    items: list[Item],
    predictions: PredictionSet,
    pairs: list[tuple[Item, Prediction | None, Prediction]],
    config: JudgeConfig | None,
    progress: Progress | None,
) -> tuple[dict[tuple[str, str], Score], list[str]]:
    """A score for every answer that takes part in a pair."""
    by_id = {item.item_id: item for item in items}
    answers = list({(p.item_id, p.lang): p for _, source, target in pairs for p in (source, target) if p is not None}.values())
    if method == GIVEN:
        _require(predictions.path, answers, lambda p: p.correct is None, "a judgment ('correct')")
        return {(p.item_id, p.lang): Score(float(bool(p.correct)), p.correct) for p in answers}, []
    _require(predictions.path, answers, lambda p: p.text is None, "the model's answer text ('prediction')")
    if method == JUDGE:
        return _judged(by_id, answers, config or JudgeConfig(), progress, predictions.path)
    scores: dict[tuple[str, str], Score] = {}
    empty: list[Prediction] = []
    for p in answers:
        gold = by_id[p.item_id].variants[p.lang].answer
        value = eclektic_recall(gold, p.text or "", p.lang) if method == ECLEKTIC else robust_recall(gold, p.text or "")
        if not gold or value is None:
            empty.append(p)
        scores[(p.item_id, p.lang)] = Score(value, None if value is None else value >= 1.0)
    problems = []
    if empty:
        outcome = "the published metric scores them 0" if method == ECLEKTIC else "they are left out"
        problems.append(f"{predictions.path}: {len(empty)} answer(s) have no usable gold answer in the benchmark; {outcome} ({_lines(empty)})")
    return scores, problems


def _judged(
    by_id: dict[str, Item], answers: list[Prediction], config: JudgeConfig, progress: Progress | None, path: str
) -> tuple[dict[tuple[str, str], Score], list[str]]:
    requests = []
    for p in answers:
        item = by_id[p.item_id]
        variant, source = item.variants[p.lang], item.variants[item.source_lang]
        requests.append(JudgeRequest(
            language=ISO_639_1.get(p.lang.split("-")[0], p.lang),
            question=variant.question,
            gold=variant.answer,
            context=variant.context or source.context,
            prediction=p.text or "",
        ))
    results = run_judge(requests, config, progress)
    scores, failed = {}, {}
    for p, result in zip(answers, results, strict=True):
        scores[(p.item_id, p.lang)] = Score(None if result.verdict is None else float(result.verdict), result.verdict, result.to_dict())
        if result.status not in (JUDGE_OK, FOUND):
            failed.setdefault(result.status, []).append(p)
    problems = [
        f"{path}: {len(rows)} judgment(s) {status}, left out ({_lines(rows)})" for status, rows in failed.items()
    ]
    return scores, problems


def _require(path: str, answers: list[Prediction], missing: Callable[[Prediction], bool], what: str) -> None:
    lacking = [p for p in answers if missing(p)]
    if lacking:
        raise EvaluationError(f"{path}:{lacking[0].line}: this method needs {what} on every answer; {len(lacking)} have none ({_lines(lacking)})")


def _lines(predictions: list[Prediction]) -> str:
    shown = ", ".join(f"line {p.line}" for p in predictions[:_EXAMPLES])
    return shown + (", ..." if len(predictions) > _EXAMPLES else "")


def _unscored(path: str, rows: list[PairRow]) -> list[str]:
    left = [row for row in rows if not row.scored]
    if not left:
        return []
    shown = ", ".join(f"'{row.item_id}'/{row.target}" for row in left[:_EXAMPLES])
    return [f"{path}: {len(left)} of {len(rows)} pairs could not be scored and are left out of every figure ({shown}{', ...' if len(left) > _EXAMPLES else ''})"]


def _table(rows: list[PairRow]) -> PairScores:
    """Scored rows as arrays, questions numbered in order of appearance."""
    index: dict[str, int] = {}
    question = np.array([index.setdefault(row.item_id, len(index)) for row in rows], dtype=np.int64)
    values = np.array([row.values() for row in rows], dtype=np.float64).reshape(-1, 2)
    return PairScores(
        question=question,
        source=np.array([row.source for row in rows], dtype=object),
        target=np.array([row.target for row in rows], dtype=object),
        s=values[:, 0],
        t=values[:, 1],
        n_questions=len(index),
    )


# Strata ---------------------------------------------------------------------------------


def _exposure(audit: AuditFile | None) -> Exposure | None:
    if audit is None:
        return None
    try:
        return read_exposure(audit)
    except ExposureError as exc:
        raise EvaluationError(str(exc)) from None


def _label(rows: list[PairRow], exposure: Exposure) -> list[str]:
    """Set each row's exposure labels; the audit must cover at least some of the pairs."""
    missing = 0
    for row in rows:
        row.source_exposure = exposure.label(row.item_id, row.source)
        row.target_exposure = exposure.label(row.item_id, row.target)
        row.target_combination = exposure.combination(row.item_id, row.target) if exposure.judged else None
        if exposure.knowledge is not None:
            row.source_knowledge = exposure.knowledge_label(row.item_id, row.source)
            row.target_knowledge = exposure.knowledge_label(row.item_id, row.target)
        missing += (row.item_id, row.target) not in exposure.overall
    if missing == len(rows):
        raise EvaluationError("the audit file has no record for any evaluated pair: is it the audit of this benchmark?")
    if missing:
        return [f"audit: {missing} of {len(rows)} pairs have no audit record for their target language; they are 'unknown'"]
    return []


def _strata(estimator: Estimator, rows: list[PairRow], exposure: Exposure) -> dict[str, Any]:
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
    knowledge = {
        "target_knowledge": np.array([row.target_knowledge for row in rows], dtype=object),
        "source_knowledge": np.array([row.source_knowledge for row in rows], dtype=object),
    } if exposure.knowledge is not None else {}

    def split(labels: np.ndarray, strata: Iterable[str] = STRATA) -> dict[str, dict[str, Any]]:
        return {label: _summary_dict(estimator.summary(labels == label)) for label in strata}

    tests = [("target_exposure", None, target == UNSEEN, target == SEEN, UNSEEN, SEEN),
             ("source_exposure", None, source == UNSEEN, source == SEEN, UNSEEN, SEEN)]
    tests += [("by_signal", signal, labels == UNSEEN, labels == SEEN, UNSEEN, SEEN) for signal, labels in by_signal.items()]
    tests.append(("clean_transfer", None, clean, target == SEEN, "clean", SEEN))
    # After the others, so their permutation draws (and p-values) stay as they were.
    tests += [("by_source", source, labels == UNSEEN, labels == SEEN, UNSEEN, SEEN) for source, labels in by_source.items()]
    tests += [(name, None, labels == NOT_KNOWN, labels == KNOWN, NOT_KNOWN, KNOWN) for name, labels in knowledge.items()]
    differences = []
    for name, scope, mask_a, mask_b, a, b in tests:
        for metric, result in estimator.difference(mask_a, mask_b).items():
            entry: dict[str, Any] = {"split": name, "a": a, "b": b, "metric": metric}
            if scope is not None:
                entry["source" if name == "by_source" else "signal"] = scope
            entry |= {
                "difference": result.difference,
                "ci": list(result.ci) if result.ci else None,
                "p_value": result.p_value,
                "test": result.test,
            }
            differences.append(entry)
    strata: dict[str, Any] = {
        "signals": exposure.signals,
        "target_exposure": split(target),
        "source_exposure": split(source),
        "by_signal": {signal: split(labels) for signal, labels in by_signal.items()},
        "sources": exposure.sources,
        "by_source": {source: split(labels) for source, labels in by_source.items()},
        "signal_combination": {"signals": exposure.judged, "strata": split(combination, exposure.combinations())},
        "clean_transfer": _summary_dict(estimator.summary(clean)),
        "differences": differences,
    }
    if knowledge:
        strata |= {name: split(labels, KNOWLEDGE_STRATA) for name, labels in knowledge.items()}
        strata["unknown_to_model"] = _unknown_to_model(estimator, rows, knowledge["target_knowledge"] == NOT_KNOWN)
    return strata


def _unknown_to_model(estimator: Estimator, rows: list[PairRow], unknown: np.ndarray) -> dict[str, Any]:
    """LiveCLKTBench's filter: the figures over the pairs whose target the model did not know,
    in total and per target language, so what transfers cannot have been known beforehand."""
    languages = np.array([row.target for row in rows], dtype=object)
    return {
        "total": _summary_dict(estimator.summary(unknown)),
        "per_target": {lang: _summary_dict(estimator.summary(unknown & (languages == lang))) for lang in sorted(set(languages))},
    }
