"""Oren et al.'s exchangeability test (2023): was the benchmark read in its own order?

A benchmark's items are exchangeable: any order of them is as likely as the published one,
unless the model was trained on the published file, in which case the order it read them in is
likelier than a shuffle.  Per language, the items (in file order) are cut into contiguous
shards; each shard is read by the model once in its own order and `permutations` times shuffled
(seeded, uniformly over every order, its own included, which keeps the p-value exact), all in one text, and the statistic of a shard is its own order's log-likelihood minus
the mean of the shuffles'.  Across shards a one-sided t-test asks whether the published order
is likelier on average (their sharded test); each shard also has its exact permutation p-value,
(1 + shuffles at least as likely) / (1 + shuffles).

An item is written as it would stand in a file: a cloze item's statement (its answer in the
mask), else its question and, on the next line, its answer; items are separated by a blank
line.  The test says nothing of an item alone, and nothing of a benchmark the model read in
another order or format: a small p-value is evidence of contamination, a large one is not
evidence of its absence.
"""
from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from audit.errors import AuditError
from audit.forms import STATEMENT
from audit.items import Item, ItemKind
from audit.probes.membership import TokenScores
from audit.signals.membership import field_text

# Reads texts, each up to a number of tokens: the model's `token_scores`.
Read = Callable[[list[str], int], list[TokenScores | str]]
SEPARATOR = "\n\n"


class ExchangeabilityError(AuditError):
    """The test cannot be run as asked (too few items, a text the model could not read)."""


@dataclass(frozen=True)
class ShardResult:
    items: int
    tokens: int
    own_order: float
    shuffled_mean: float
    shuffled_std: float
    permutation_p: float


@dataclass(frozen=True)
class LanguageResult:
    """One language: its shards, the mean difference (own order minus shuffles, in nats), the
    t statistic across shards and its one-sided p-value (None with fewer than two shards or no
    spread)."""

    lang: str
    items: int
    shards: list[ShardResult] = field(default_factory=list)
    difference: float = 0.0
    t: float | None = None
    p_value: float | None = None


def item_text(item: Item, lang: str) -> str | None:
    """The item as a line of the benchmark file would give it, in that language."""
    if item.kind is ItemKind.CLOZE:
        return field_text(item, lang, STATEMENT)
    variant = item.variants[lang]
    question, answer = (variant.question or "").strip(), (variant.answer or "").strip()
    return f"{question}\n{answer}" if question and answer else None


def shards_of(texts: Sequence[str], shards: int) -> list[list[str]]:
    """The texts in order, cut into `shards` contiguous runs as even as can be."""
    bounds = np.linspace(0, len(texts), shards + 1).round().astype(int)
    return [list(texts[a:b]) for a, b in itertools.pairwise(bounds) if b > a]


def _total(reading: TokenScores | str, max_tokens: int, lang: str) -> tuple[float, int]:
    if isinstance(reading, str):
        raise ExchangeabilityError(f"{lang}: the model could not read a shard: {reading}")
    if reading.tokens >= max_tokens - 1:
        raise ExchangeabilityError(f"{lang}: a shard is {reading.tokens}+ tokens, past what is read ({max_tokens}); use more shards")
    return float(reading.logprobs.sum()), reading.tokens


def order_test(lang: str, texts: Sequence[str], read: Read, *, shards: int, permutations: int, seed: int, max_tokens: int) -> LanguageResult:
    """The sharded test on one language's texts (in the benchmark's order).  Texts are read up
    to their length in bytes (a token is at least a byte), at most `max_tokens`: a model keeps
    every position's logits while it reads, so the bound sets the memory."""
    cut = shards_of(texts, shards)
    if len(cut) < 2 or any(len(shard) < 2 for shard in cut):
        raise ExchangeabilityError(f"{lang}: {len(texts)} items make no {shards} shards of two or more; use fewer shards")
    rng = random.Random(f"{seed}:{lang}")
    asked: list[str] = []
    for shard in cut:
        asked.append(SEPARATOR.join(shard))
        for _ in range(permutations):
            shuffled = list(shard)
            rng.shuffle(shuffled)
            asked.append(SEPARATOR.join(shuffled))
    bound = min(max_tokens, max(len(text.encode("utf-8")) for text in asked) + 2)
    totals = [_total(reading, bound, lang) for reading in read(asked, bound)]
    results = []
    for index, shard in enumerate(cut):
        (own, tokens), *others = totals[index * (permutations + 1):(index + 1) * (permutations + 1)]
        shuffled = np.array([total for total, _ in others])
        p = (1 + int((shuffled >= own).sum())) / (1 + permutations)
        results.append(ShardResult(len(shard), tokens, round(own, 6), round(float(shuffled.mean()), 6), round(float(shuffled.std()), 6), round(p, 6)))
    return _summed(lang, len(texts), results)


def _summed(lang: str, items: int, shards: list[ShardResult]) -> LanguageResult:
    from scipy import stats

    differences = np.array([shard.own_order - shard.shuffled_mean for shard in shards])
    mean = float(differences.mean())
    spread = float(differences.std(ddof=1)) if len(differences) > 1 else 0.0
    if spread == 0.0:
        return LanguageResult(lang, items, shards, round(mean, 6))
    t = mean / (spread / np.sqrt(len(differences)))
    return LanguageResult(lang, items, shards, round(mean, 6), round(float(t), 6), float(stats.t.sf(t, len(differences) - 1)))


def texts_by_language(items: Sequence[Item], langs: Sequence[str] | None) -> dict[str, list[str]]:
    """Per language, in the benchmark's order, the text of every item that has one there."""
    found: dict[str, list[str]] = {}
    for item in items:
        for lang in item.variants:
            if (langs is None or lang in langs) and (text := item_text(item, lang)):
                found.setdefault(lang, []).append(text)
    return found
