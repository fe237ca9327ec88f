"""Membership scores (`audit.probes.membership`): the figures on hand-made token probabilities,
AUROC against a direct count, and both local runtimes reading the same text of the random-weight
GGUF fixture to the same scores."""
from __future__ import annotations

import itertools
import math
import zlib

import numpy as np
import pytest
from conftest import FIXTURES

from audit.memberscore import MEMBER_SCORES_HIGHER, Score
from audit.probes.membership import TokenScores, auroc, from_logits, scores

TINY = FIXTURES / "models" / "llama-2-tiny-random.gguf"
TEXTS = ["The quick brown fox jumps over the lazy dog.", "東京は日本の首都です。", "Bremerhaven liegt an der Wesermündung.", "x"]


def test_from_logits_is_the_log_softmax_of_each_next_token():
    logits = np.array([[0.0, math.log(3.0)], [math.log(2.0), math.log(2.0)], [5.0, 1.0]])
    read = from_logits(logits, [0, 1, 0, 1])
    assert read.tokens == 3
    assert read.logprobs == pytest.approx([math.log(3 / 4), math.log(1 / 2), math.log(math.e / (math.e**5 + math.e))])
    # Row 2 of a uniform pair: mean log p = log 1/2, no spread.
    assert read.means[1] == pytest.approx(math.log(0.5)) and read.stds[1] == pytest.approx(0.0, abs=1e-9)
    p = np.array([0.25, 0.75])
    mean = float((p * np.log(p)).sum())
    assert read.means[0] == pytest.approx(mean) and read.stds[0] == pytest.approx(math.sqrt(float((p * np.log(p) ** 2).sum()) - mean**2))


def test_each_score_on_known_probabilities():
    logprobs = np.log(np.array([0.5, 0.25, 0.125, 0.5, 0.9]))
    read = TokenScores(logprobs, np.full(5, -1.0), np.full(5, 0.5))
    text = "abcde" * 4
    found = scores(text, read, k=0.4)
    loss = float(-logprobs.mean())
    assert found[Score.LOSS] == pytest.approx(loss)
    assert found[Score.ZLIB] == pytest.approx(loss / len(zlib.compress(text.encode())))
    # k = 40% of 5 tokens: the 2 least likely, 0.125 and 0.25.
    assert found[Score.MIN_K] == pytest.approx((math.log(0.125) + math.log(0.25)) / 2)
    assert found[Score.MIN_K_PLUS] == pytest.approx(((math.log(0.125) + 1) / 0.5 + (math.log(0.25) + 1) / 0.5) / 2)
    assert Score.LOSS_MINUS_REFERENCE not in found
    reference = TokenScores(np.log(np.array([0.1, 0.1])), np.zeros(2), np.ones(2))
    assert scores(text, read, 0.4, reference)[Score.LOSS_MINUS_REFERENCE] == pytest.approx(loss - (-math.log(0.1)))
    assert scores("", TokenScores(np.array([]), np.array([]), np.array([]))) is None
    # Bytes, not characters: the same loss on a three-byte script gives a smaller zlib figure.
    assert scores("ab" * 30, read)[Score.ZLIB] > scores("日本" * 30, read)[Score.ZLIB]


def test_auroc_counts_pairs():
    rng = np.random.default_rng(1)
    members, others = list(rng.normal(1, 1, 15).round(1)), list(rng.normal(0, 1, 12).round(1))
    pairs = list(itertools.product(members, others))
    direct = sum((m > o) + 0.5 * (m == o) for m, o in pairs) / len(pairs)
    assert auroc(members, others, True) == pytest.approx(direct)
    assert auroc(members, others, False) == pytest.approx(1 - direct)
    assert auroc([], others, True) is None
    assert MEMBER_SCORES_HIGHER[Score.MIN_K_PLUS] and not MEMBER_SCORES_HIGHER[Score.LOSS]


def test_both_runtimes_read_a_text_to_the_same_scores():
    pytest.importorskip("llama_cpp")
    pytest.importorskip("transformers")
    from audit.probes.llamacpp import LlamaCppModel
    from audit.probes.local import LocalModel

    ours = LlamaCppModel.load(TINY, model_id="tiny+llama.cpp").token_scores(TEXTS, 64)
    theirs = LocalModel.load(TINY.parent, gguf_file=TINY.name).token_scores(TEXTS, 64)
    for text, mine, other in zip(TEXTS, ours, theirs, strict=True):
        assert isinstance(mine, TokenScores) and isinstance(other, TokenScores) and mine.tokens == other.tokens
        assert mine.logprobs == pytest.approx(other.logprobs, abs=2e-3)
        assert scores(text, mine) == pytest.approx(scores(text, other), abs=2e-3)
    capped = LlamaCppModel.load(TINY, model_id="tiny+llama.cpp").token_scores([TEXTS[0] * 20], 16)[0]
    assert capped.tokens == 16
