"""Evaluation: ECLeKTic's overall success and transfer score, stratified by measured exposure.

`load_predictions` reads a model's answers, `evaluate` scores them (given judgments, the
ECLeKTic string metric, a robust string metric, or an LLM judge) and summarises them per
language, per language pair, in total and per exposure stratum of an audit file.
"""
from audit.evaluate.evaluation import (
    ECLEKTIC,
    GIVEN,
    JUDGE,
    METHODS,
    ROBUST,
    Evaluation,
    evaluate,
)
from audit.evaluate.judge import JudgeConfig, JudgeError, JudgeResult
from audit.evaluate.metrics import Stat
from audit.evaluate.pairs import EvaluationError, PairRow, Score
from audit.evaluate.predictions import (
    Prediction,
    PredictionsError,
    PredictionSet,
    load_predictions,
)

__all__ = [
    "ECLEKTIC", "GIVEN", "JUDGE", "METHODS", "ROBUST",
    "Evaluation", "EvaluationError", "JudgeConfig", "JudgeError", "JudgeResult", "PairRow",
    "Prediction", "PredictionSet", "PredictionsError", "Score", "Stat", "evaluate", "load_predictions",
]
