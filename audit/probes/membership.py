"""Membership-inference scores of a text under a model, from one forward pass: what the model's
per-token probabilities say about whether the text was in its training data.

Each text is read once by the model (`TokenScores`: every token's log-probability given the
tokens before it, and the mean and standard deviation of the log-probability over the model's
whole next-token distribution there).  From these:
- `loss`: the mean negative log-likelihood per token (Yeom et al.); lower for members;
- `zlib`: `loss` over the text's zlib-compressed length in bytes (Carlini et al.); lower for
  members.  It divides by bytes, so it depends on the script: a character of Hindi or Japanese
  is three UTF-8 bytes, of English one, which is why its thresholds are set per language;
- `min_k`: the mean log-probability of the k% least likely tokens (Shi et al.'s Min-K%);
  higher for members;
- `min_k_plus`: the same over each token's log-probability standardised by the distribution
  it was drawn from, (log p(x) - mean) / std (Zhang et al.'s Min-K%++); higher for members.
With a reference model, `reference_loss` and `loss_minus_reference` (Carlini et al.'s
reference calibration; lower for members).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from audit.memberscore import Score

DEFAULT_K = 0.2


@dataclass(frozen=True)
class TokenScores:
    """One text as the model read it: per predicted token (every token but the first, which
    has nothing before it unless the model adds a BOS), its log-probability, and the mean and
    standard deviation of log p over the next-token distribution at that position."""

    logprobs: np.ndarray
    means: np.ndarray
    stds: np.ndarray

    @property
    def tokens(self) -> int:
        return len(self.logprobs)


def from_logits(logits: np.ndarray, tokens: list[int]) -> TokenScores:
    """TokenScores from the logits at every position (rows: positions 0..n-1) and the tokens
    (n of them): row i predicts token i+1."""
    rows = np.asarray(logits[: len(tokens) - 1], dtype=np.float64)
    shifted = rows - rows.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    p = np.exp(logp)
    means = (p * logp).sum(axis=1)
    variances = np.maximum((p * logp * logp).sum(axis=1) - means * means, 0.0)
    chosen = logp[np.arange(len(rows)), np.asarray(tokens[1:], dtype=np.int64)]
    return TokenScores(chosen, means, np.sqrt(variances))


def _lowest_mean(values: np.ndarray, k: float) -> float:
    count = max(1, int(np.ceil(k * len(values))))
    return float(np.sort(values)[:count].mean())


def scores(text: str, read: TokenScores, k: float = DEFAULT_K, reference: TokenScores | None = None) -> dict[Score, float] | None:
    """Every score of one text (None when the model predicted no token of it)."""
    if read.tokens == 0:
        return None
    loss = float(-read.logprobs.mean())
    standardised = (read.logprobs - read.means) / np.maximum(read.stds, 1e-12)
    found = {
        Score.LOSS: loss,
        Score.ZLIB: loss / len(zlib.compress(text.encode("utf-8"))),
        Score.MIN_K: _lowest_mean(read.logprobs, k),
        Score.MIN_K_PLUS: _lowest_mean(standardised, k),
    }
    if reference is not None and reference.tokens:
        found[Score.LOSS_MINUS_REFERENCE] = loss - float(-reference.logprobs.mean())
    return found


def auroc(members: list[float], others: list[float], member_higher: bool) -> float | None:
    """The chance that a member outscores a non-member in the member's direction (ties count
    half); None without both kinds."""
    if not members or not others:
        return None
    ours = np.asarray(members if member_higher else [-v for v in members], dtype=np.float64)
    theirs = np.sort(np.asarray(others if member_higher else [-v for v in others], dtype=np.float64))
    below = np.searchsorted(theirs, ours, side="left")
    ties = np.searchsorted(theirs, ours, side="right") - below
    return float((below + 0.5 * ties).sum() / (len(ours) * len(theirs)))
