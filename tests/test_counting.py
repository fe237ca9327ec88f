"""Longest matches and coverage derived from count queries alone (`audit.corpora.counting`),
with a real index of real multilingual text answering the counts: every bound holds the exact
figure the index computes directly, every decision agrees with it, and the statistics are
checked by exact enumeration, not by sampling."""
from __future__ import annotations

import math
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from audit.corpora import counting
from audit.corpora.base import Budget, OutOfBudget
from audit.corpora.local import LocalIndex
from audit.text import normalize, windows


def serial(function, items):
    return [function(item) for item in items]


def asker(text: str, index: LocalIndex, budget: Budget | None = None, limit: int = 10_000, boundary=None, run_all=serial) -> counting.Asker:
    geometry = counting.Geometry.of(len(text), boundary or (lambda i: True), [len(text)] * len(text))
    return counting.Asker(text, lambda piece: index.count(piece) > 0, counting.Known(geometry), budget or Budget(), limit, run_all)


def word_boundary(text: str):
    return lambda i: i in (0, len(text)) or not (text[i - 1].isalnum() and text[i].isalnum())


def edited(text: str, every: int) -> str:
    """Every `every`-th character replaced, so matches break at known places."""
    return "".join("#" if i % every == every - 1 else c for i, c in enumerate(text))


@pytest.fixture(scope="module")
def index(wiki_index) -> LocalIndex:
    return LocalIndex(wiki_index)


@pytest.fixture(scope="module")
def texts(wiki_docs) -> list[str]:
    """Passages the index holds, copies edited at several rates, and text it lacks, in five scripts."""
    picked = []
    for lang in ("en", "zh", "hi", "ja", "he"):
        passage = normalize(wiki_docs[lang][4]["text"])[:300]
        picked += [passage, edited(passage, 23), edited(passage, 61), f"zq {passage[100:200]} qz"]
    return [*picked, "xq " + " ".join(f"zz{k}q" for k in range(30))]


def exact(index: LocalIndex, text: str) -> list[int]:
    return index.match_lengths(text).lengths


def test_the_full_scan_equals_the_index_at_every_position(index, texts):
    for text in texts:
        ask = asker(text, index)
        counting.scan(ask)
        found = ask.known.lengths()
        assert found.lengths == exact(index, text) and found.highest is None, text[:40]


def test_bounds_hold_the_exact_lengths_whatever_was_asked(index, texts):
    """Any subset of answers gives bounds that hold the truth: here, random spans."""
    rng = random.Random(7)
    for text in texts:
        ask = asker(text, index)
        for _ in range(40):
            a = rng.randrange(len(text))
            ask(a, rng.randrange(a + 1, len(text) + 1))
        found, truth = ask.known.lengths(), exact(index, text)
        assert all(low <= t <= high for low, t, high in zip(found.lengths, truth, found.upper(), strict=True))


@pytest.mark.parametrize("threshold", [20, 50, 150])
def test_seed_and_extend_decides_whether_the_longest_match_reaches_a_length(index, texts, threshold):
    for text in texts:
        ask = asker(text, index)
        counting.reach(ask, [threshold], chunk_cap=120)
        found, truth = ask.known.lengths(), max(exact(index, text))
        low, high = max(found.lengths), max(found.upper())
        assert low <= truth <= high
        assert low >= threshold or high < threshold, (text[:40], low, high, truth)
        assert (low >= threshold) == (truth >= threshold)


def test_seed_and_extend_asks_far_fewer_queries_than_the_full_scan(index, texts):
    seeded, scanned = 0, 0
    for text in texts:
        ask = asker(text, index)
        counting.reach(ask, [150], chunk_cap=120)
        seeded += ask.budget.asked
        full = asker(text, index)
        counting.scan(full)
        scanned += full.budget.asked
    assert seeded * 3 < scanned


def test_every_long_enough_match_holds_a_whole_chunk(texts):
    """The containment `reach` relies on, checked on every span of real text, at character and
    at word cuts."""
    for text in texts[:8]:
        for boundary, spare in ((lambda i: True, 1), (word_boundary(text), 0)):
            geometry = counting.Geometry.of(len(text), boundary, [len(text)] * len(text))
            for size in (3, 10, 40):
                pieces = counting.chunks(geometry, size)
                for s in geometry.cuts:
                    for e in geometry.cuts:
                        if e - s >= 2 * size - spare:
                            assert any(s <= a and b <= e for a, b in pieces), (size, s, e)


def test_word_cuts_give_the_lengths_of_matches_that_start_and_end_on_words(index, texts):
    """On a token-level index queries start and end at word boundaries only: the derived
    lengths are those of the longest match between boundaries, inside a word the boundary's."""
    text = texts[0][:160]
    boundary = word_boundary(text)
    cuts = [e for e in range(len(text) + 1) if boundary(e)]
    ask = asker(text, index, boundary=boundary)
    counting.scan(ask)
    found = ask.known.lengths()
    truth = []
    for s in range(len(text)):
        start = max(c for c in cuts if c <= s)
        reach = max((e for e in cuts if e > start and index.count(text[start:e]) > 0), default=start)
        truth.append(max(reach - s, 0))
    assert found.lengths == truth and found.highest is None


def test_sampled_coverage_interval_holds_the_exact_coverage_and_decides(index, texts):
    for text in texts:
        spans = windows(text, 3)
        truth = sum(1 for a, b in spans if index.count(text[a:b]) > 0) / len(spans)
        for threshold in (0.2, 0.5, 0.8):
            ask = asker(text, index)
            sample = counting.sample_coverage(ask, spans, [threshold], seed=counting.sample_seed(0, text))
            if sample is None:
                continue
            low, high = sample.interval
            assert low <= round(truth, 4) <= high
            assert low >= threshold or high < threshold or sample.sampled == len(spans) - sample.settled_found - sample.settled_absent
            # Windows of the same text are asked once.
            assert ask.budget.asked <= sample.sampled <= len(spans)


def test_the_sample_and_its_seed_are_reproducible(index, texts):
    text = texts[1]
    spans = windows(text, 3)
    runs = []
    for _ in range(2):
        ask = asker(text, index)
        runs.append(counting.sample_coverage(ask, spans, [0.5], seed=counting.sample_seed(3, text)))
    assert runs[0] == runs[1] and runs[0].seed == counting.sample_seed(3, text) != counting.sample_seed(4, text)


def hypergeometric_pmf(population: int, found_total: int, sampled: int, found: int) -> float:
    return math.comb(found_total, found) * math.comb(population - found_total, sampled - found) / math.comb(population, sampled)


@pytest.mark.parametrize(("population", "sampled"), [(12, 4), (30, 8), (60, 20)])
def test_the_hypergeometric_interval_covers_the_truth_at_its_level(population, sampled):
    """For every possible number found in the population, the chance that the interval drawn
    from a sample misses it is at most 1 - confidence: exact enumeration of every outcome."""
    confidence = 0.9
    for truth in range(population + 1):
        missed = 0.0
        for found in range(max(0, sampled - (population - truth)), min(sampled, truth) + 1):
            low, high = counting.hypergeometric_interval(population, sampled, found, confidence)
            if not low <= truth <= high:
                missed += hypergeometric_pmf(population, truth, sampled, found)
        assert missed <= 1 - confidence + 1e-9, (truth, missed)
    assert counting.hypergeometric_interval(population, population, 5) == (5, 5)


def test_a_spent_budget_stops_asking_and_leaves_honest_bounds(index, texts):
    text = texts[2]
    budget = Budget()
    ask = asker(text, index, budget=budget, limit=5)
    lengths, spent = counting.derive(ask, [150], windows(text, 3), [0.5], seed=1, chunk_cap=120)
    assert spent and budget.asked == 5
    truth = exact(index, text)
    assert all(low <= t <= high for low, t, high in zip(lengths.lengths, truth, lengths.upper(), strict=True))
    with pytest.raises(OutOfBudget):
        ask(0, len(text))


def test_answers_asked_side_by_side_are_the_same(index, texts):
    with ThreadPoolExecutor(4) as pool:

        def parallel(function, items):
            return list(pool.map(function, items))

        for text in texts[:6]:
            one, many = asker(text, index), asker(text, index, run_all=parallel)
            for ask in (one, many):
                counting.derive(ask, [50], windows(text, 3), [0.5], seed=2, chunk_cap=120)
            assert one.known.lengths() == many.known.lengths() and one.budget.asked == many.budget.asked
