"""ECLeKTic's two scores over (question, target language) pairs, with confidence intervals.

Each scored pair has a source score `s` (the question in its source language) and a target
score `t`, both in [0, 1]: 0/1 for judged correctness, word recall for the string metrics.
Over any set of pairs

    overall success = sum(s * t) / number of pairs
    transfer score  = sum(s * t) / sum(s)

which for 0/1 scores are ECLeKTic's definitions: the share of pairs answered correctly in both
languages, and among pairs whose source was answered correctly, the share whose target was
too. For the published string metric they are its formulas, with recall in place of 0/1.
(The authors' notebook, as reproduced in stanford-crfm/helm
`src/helm/benchmark/metrics/eclektic_metrics.py`, computes the judged transfer over every row
of a source-correct question, the source row itself included, which lifts it towards 1; here,
as in the paper, only target languages count.)

Two intervals are given for every figure:
- `ci_bootstrap`: percentile interval from resampling questions with replacement (a question's
  pairs share its source answer, so pairs are not independent). All figures of one evaluation
  use the same resamples, so a difference of two figures gets its interval from the same draws.
- `ci_normal`: the normal approximation ECLeKTic's published code reports, p +- 1.96 *
  sqrt(p(1-p)/n) with n the effective number of pairs (sum w)^2 / sum w^2 (w = 1 for overall
  success, w = s for transfer); it treats pairs as independent, so it is the narrower one. It
  is clipped to [0, 1].

`Estimator.difference` tests two disjoint sets of pairs against each other by permutation:
when every question's pairs fall in one set, question labels are shuffled between questions;
otherwise labels are shuffled among each question's own pairs, which keeps each question's
difficulty out of the comparison.
"""
from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from audit.records import JsonObject

OVERALL, TRANSFER = "overall_success", "transfer_score"
METRICS = (OVERALL, TRANSFER)
OVER_QUESTIONS, WITHIN_QUESTIONS = "permutation over questions", "permutation within questions"
_Z = NormalDist().inv_cdf(0.975)
_TIE = 1e-12


@dataclass(frozen=True)
class Stat:
    """One figure: its value, the pairs and questions behind it, and two 95% intervals."""

    value: float | None
    n: int
    questions: int
    ci_bootstrap: tuple[float, float] | None
    ci_normal: tuple[float, float] | None

    def to_dict(self) -> JsonObject:
        return {
            "value": self.value,
            "n": self.n,
            "questions": self.questions,
            "ci_bootstrap": list(self.ci_bootstrap) if self.ci_bootstrap else None,
            "ci_normal": list(self.ci_normal) if self.ci_normal else None,
        }


@dataclass(frozen=True)
class PairScores:
    """Scored pairs as parallel arrays; `question` numbers questions from 0 to `n_questions` - 1."""

    question: np.ndarray
    source: np.ndarray
    target: np.ndarray
    s: np.ndarray
    t: np.ndarray
    n_questions: int

    @property
    def size(self) -> int:
        return len(self.question)

    def where(self, **labels: str) -> np.ndarray:
        """A mask of the pairs with these source and/or target languages."""
        mask = np.ones(self.size, dtype=bool)
        for name, value in labels.items():
            mask &= getattr(self, name) == value
        return mask


@dataclass(frozen=True)
class Difference:
    """Figure of set `a` minus figure of set `b`, with a bootstrap interval and a permutation p."""

    metric: str
    difference: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    test: str


# Resamples and permutations are matrices of draws x questions (or pairs): bounded so a typo
# cannot ask for more memory than a laptop has (about 32 bytes a cell at the peak).
MAX_DRAWS = 100_000
MAX_DRAW_CELLS = 2**26


def too_many_draws(draws: int, questions: int, pairs: int) -> str | None:
    """Why `draws` resamples of this table are refused before any is drawn, or None."""
    if draws > MAX_DRAWS:
        return f"--bootstrap {draws}: at most {MAX_DRAWS:,} resamples"
    width = max(questions, pairs, 1)
    if draws * width <= MAX_DRAW_CELLS:
        return None
    return (
        f"--bootstrap {draws}: {draws:,} resamples of {questions:,} questions ({pairs:,} pairs) need about "
        f"{draws * width * 32 / 2**30:.1f} GiB; at most {MAX_DRAW_CELLS // width:,} for these predictions"
    )


class Estimator:
    """Figures, intervals and tests over subsets of one table of scored pairs."""

    def __init__(self, pairs: PairScores, *, draws: int, permutations: int, seed: int) -> None:
        self.pairs = pairs
        self.permutations = permutations
        self._rng = np.random.default_rng(seed)
        q = pairs.n_questions
        self._weights = (
            self._rng.multinomial(q, np.full(q, 1 / q), size=draws).astype(np.float64)
            if draws > 0 and q > 0 else np.zeros((0, q))
        )
        self._st = pairs.s * pairs.t
        self._source_of = np.zeros(q)
        self._source_of[pairs.question] = pairs.s

    def summary(self, mask: np.ndarray, *, targets_per_question: int | None = None) -> dict[str, Stat]:
        """Both figures for the masked pairs.

        `targets_per_question` switches the transfer denominator to the published
        `sum over questions of s * number of target languages`, used for ECLeKTic's total.
        """
        per_q = self._per_question(mask)
        n_pairs, questions = int(mask.sum()), int((per_q["count"] > 0).sum())
        if targets_per_question is None:
            transfer_den = per_q["s"]
            normal_weights = self.pairs.s[mask]
            n_transfer = int((self.pairs.s[mask] > 0).sum())
        else:
            transfer_den = targets_per_question * self._source_of * (per_q["count"] > 0)
            normal_weights = np.repeat(self._source_of[per_q["count"] > 0], targets_per_question)
            n_transfer = int((normal_weights > 0).sum())
        overall = self._stat(per_q["st"], per_q["count"], np.ones(n_pairs), n_pairs, questions)
        transfer_questions = int((transfer_den > 0).sum())
        transfer = self._stat(per_q["st"], transfer_den, normal_weights, n_transfer, transfer_questions)
        return {OVERALL: overall, TRANSFER: transfer}

    def difference(self, mask_a: np.ndarray, mask_b: np.ndarray) -> dict[str, Difference]:
        """Both figures of `a` minus those of `b` (disjoint masks), tested by permutation."""
        a, b = self._per_question(mask_a), self._per_question(mask_b)
        observed = {
            OVERALL: _ratio(a["st"].sum(), a["count"].sum()) - _ratio(b["st"].sum(), b["count"].sum()),
            TRANSFER: _ratio(a["st"].sum(), a["s"].sum()) - _ratio(b["st"].sum(), b["s"].sum()),
        }
        boot = {
            OVERALL: self._boot(a["st"], a["count"]) - self._boot(b["st"], b["count"]),
            TRANSFER: self._boot(a["st"], a["s"]) - self._boot(b["st"], b["s"]),
        }
        p_values, test = self._permutation(mask_a, mask_b, observed)
        return {
            metric: Difference(
                metric,
                None if np.isnan(observed[metric]) else float(observed[metric]),
                None if np.isnan(observed[metric]) else _percentiles(boot[metric]),
                p_values[metric],
                test,
            )
            for metric in METRICS
        }

    def _per_question(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        q, size = self.pairs.question[mask], self.pairs.n_questions
        return {
            "st": np.bincount(q, weights=self._st[mask], minlength=size),
            "s": np.bincount(q, weights=self.pairs.s[mask], minlength=size),
            "count": np.bincount(q, minlength=size).astype(np.float64),
        }

    def _boot(self, numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
        den = self._weights @ denominator
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, (self._weights @ numerator) / np.where(den > 0, den, 1), np.nan)

    def _stat(self, numerator: np.ndarray, denominator: np.ndarray, weights: np.ndarray, n: int, questions: int) -> Stat:
        total = float(denominator.sum())
        if total <= 0:
            return Stat(None, n, questions, None, None)
        value = float(numerator.sum()) / total
        return Stat(value, n, questions, _percentiles(self._boot(numerator, denominator)), _normal(value, weights))

    def _permutation(
        self, mask_a: np.ndarray, mask_b: np.ndarray, observed: dict[str, float]
    ) -> tuple[dict[str, float | None], str]:
        both = mask_a | mask_b
        questions = self.pairs.question[both]
        label = mask_a[both]
        dense = np.unique(questions, return_inverse=True)[1]
        per_q_a = np.bincount(dense, weights=label)
        question_level = bool(np.all((per_q_a == 0) | (per_q_a == np.bincount(dense))))
        test = OVER_QUESTIONS if question_level else WITHIN_QUESTIONS
        if self.permutations <= 0 or all(np.isnan(v) for v in observed.values()):
            return dict.fromkeys(METRICS), test
        st, s = self._st[both], self.pairs.s[both]
        draws = self.permutations
        if question_level:
            first = np.zeros(dense.max() + 1, dtype=bool)
            first[dense] = label
            order = np.argsort(self._rng.random((draws, len(first))), axis=1)
            shuffled = first[order][:, dense]
        else:
            order = np.argsort(dense, kind="stable")
            dense, label, st, s = dense[order], label[order], st[order], s[order]
            shuffled = label[np.argsort(dense + self._rng.random((draws, len(dense))), axis=1)]
        lab = shuffled.astype(np.float64)
        in_a = {"st": lab @ st, "s": lab @ s, "count": lab.sum(axis=1)}
        totals = {"st": st.sum(), "s": s.sum(), "count": float(len(st))}
        in_b = {key: totals[key] - value for key, value in in_a.items()}
        with np.errstate(invalid="ignore", divide="ignore"):
            permuted = {
                OVERALL: in_a["st"] / in_a["count"] - in_b["st"] / in_b["count"],
                TRANSFER: in_a["st"] / in_a["s"] - in_b["st"] / in_b["s"],
            }
        p_values: dict[str, float | None] = {}
        for metric in METRICS:
            values = permuted[metric][np.isfinite(permuted[metric])]
            if np.isnan(observed[metric]) or not len(values):
                p_values[metric] = None
                continue
            extreme = int((np.abs(values) >= abs(observed[metric]) - _TIE).sum())
            p_values[metric] = (1 + extreme) / (1 + len(values))
        return p_values, test


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else float("nan")


def _percentiles(values: np.ndarray) -> tuple[float, float] | None:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


def _normal(value: float, weights: np.ndarray) -> tuple[float, float] | None:
    """ECLeKTic's margin: z * sqrt(p(1-p)/n), n = (sum w)^2 / sum w^2."""
    square = float((weights**2).sum())
    if square <= 0:
        return None
    n = float(weights.sum()) ** 2 / square
    margin = _Z * (value * (1 - value) / n) ** 0.5
    return max(0.0, value - margin), min(1.0, value + margin)
