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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from audit.auditfile import AuditFile
from audit.evaluate.judge import FOUND, JudgeConfig, JudgeRequest, Progress
from audit.evaluate.judge import OK as JUDGE_OK
from audit.evaluate.judge import judge as run_judge
from audit.evaluate.metrics import Estimator, PairScores, too_many_draws
from audit.evaluate.pairs import EvaluationError, PairRow, Score, Summary, summary_dict
from audit.evaluate.predictions import Prediction, PredictionSet, load_predictions
from audit.evaluate.strata import audit_exposure, label_rows, split_by_exposure
from audit.evaluate.string_metric import eclektic_recall, robust_recall
from audit.items import Item
from audit.langcodes import ISO_639_1
from audit.records import JsonObject

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
    strata: JsonObject
    rows: list[PairRow]
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> JsonObject:
        return {
            "method": self.method,
            "method_notes": self.method_notes,
            "questions": self.questions,
            "languages": self.languages,
            "source_languages": self.source_languages,
            "total": summary_dict(self.total),
            "per_target": {lang: summary_dict(s) for lang, s in self.per_target.items()},
            "per_source": {lang: summary_dict(s) for lang, s in self.per_source.items()},
            "pairs": [{"source": source, "target": target, **summary_dict(s)} for source, target, s in self.pairs],
            "strata": self.strata,
            "rows": [row.to_dict() for row in self.rows],
            "problems": self.problems,
        }



def evaluate(
    items: Sequence[Item],
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
    draws = _check_options(items, method, bootstrap, permutations)
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
    exposure = audit_exposure(audit)
    if exposure is not None:
        problems += exposure.notes + label_rows(rows, exposure)
    scored = [row for row in rows if row.scored]
    if not scored:
        raise EvaluationError(f"{bound.path}: no pair could be scored:" + "".join(f"\n  {p}" for p in problems[:5]))
    table = _table(scored)
    if too_many := too_many_draws(draws, table.n_questions, table.size):
        raise EvaluationError(too_many)
    estimator = Estimator(table, draws=bootstrap, permutations=bootstrap if permutations is None else permutations, seed=seed)
    evaluation = _summarise(estimator, table, method, len({lang for item in items for lang in item.variants}) - 1, judge, rows, problems)
    if exposure is not None:
        evaluation.strata = split_by_exposure(estimator, scored, exposure)
    return evaluation


def _check_options(items: Sequence[Item], method: str, bootstrap: int, permutations: int | None) -> int:
    """Refuse what cannot be evaluated before anything is read; the number of draws."""
    if method not in METHODS:
        raise EvaluationError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if bootstrap < 0 or (permutations is not None and permutations < 0):
        raise EvaluationError("bootstrap and permutations must be 0 or more")
    draws = bootstrap if permutations is None else max(bootstrap, permutations)
    if too_many := too_many_draws(draws, 0, 0):
        raise EvaluationError(too_many)
    if not items:
        raise EvaluationError("no benchmark items to evaluate")
    return draws


def _summarise(estimator: Estimator, table: PairScores, method: str, targets: int, judge: JudgeConfig | None, rows: list[PairRow], problems: list[str]) -> Evaluation:
    """The figures in total, per target and source language and per language pair."""
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
        strata={},
        rows=rows,
        problems=problems,
    )


# Pairs and scores -----------------------------------------------------------------------


def _pairs(items: Sequence[Item], predictions: PredictionSet) -> list[tuple[Item, Prediction | None, Prediction]]:
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
    items: Sequence[Item],
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
