"""Longest matches and window coverage from count queries alone, for servers that answer
`count` but have no longest-match query (the public infini-gram API, infini-gram mini).

Every strategy asks one question, "does text[i:e] occur?", and `Known` keeps the answers:
- found (i, e): every start s in [i, e) has a match reaching e at least (a suffix of a match
  is a match);
- absent (i, e): no start s <= i has a match reaching e (it would contain text[i:e]).
The lowest and highest end of the longest match at each start follow from the answers alone,
so the strategies' answers add up, and whatever no answer settles stays a bound that the
policy reads as undecided, never as absent.

- `scan` (profile `full`): the longest match at every position, left to right, extending each
  match by galloping and binary search and skipping runs of starts whose match ends at the
  same place.
- `reach` (a rule `longest_match_chars >= L`, or a fraction of the field): a match of at least
  L characters contains one of the field's aligned chunks of about L/2 characters (proof at
  `chunks`), so those chunks are counted and only the ones that occur are extended (seed and
  extend).  If none occurs, no match reaches L.
- `sample_coverage` (a rule `coverage >= t`): windows no answer settled are drawn at random
  (seeded, the seed recorded) and asked, a batch at a time, until an exact hypergeometric
  confidence interval for the share found lies wholly on one side of every threshold, or every
  window is asked, or the budget is spent.

On a token-level index a query can start and end only at a word boundary (or either side of
a character of an unsegmented script), so queries are made there only, and a position inside
a word has the match of the boundary before it, cut short.
"""
from __future__ import annotations

import bisect
import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from audit.corpora.base import Budget, CoverageSample, MatchLengths, OutOfBudget

CONFIDENCE = 0.99
FIRST_SAMPLE = 8
FIRST_CHUNKS = 4


@dataclass(frozen=True)
class Geometry:
    """Where queries about one text may start and end, and how far one query reaches."""

    length: int
    cuts: list[int]
    reach: list[int]

    @classmethod
    def of(cls, length: int, boundary: Callable[[int], bool], reach: list[int]) -> Geometry:
        return cls(length, [e for e in range(length + 1) if boundary(e)], reach)

    def is_cut(self, position: int) -> bool:
        at = bisect.bisect_left(self.cuts, position)
        return at < len(self.cuts) and self.cuts[at] == position

    def next_cut(self, position: int) -> int | None:
        at = bisect.bisect_right(self.cuts, position)
        return self.cuts[at] if at < len(self.cuts) else None

    def cut_at_or_before(self, position: int) -> int:
        return self.cuts[bisect.bisect_right(self.cuts, position) - 1]

    def cuts_between(self, low: int, high: int) -> list[int]:
        """Cuts e with low < e <= high."""
        return self.cuts[bisect.bisect_right(self.cuts, low) : bisect.bisect_right(self.cuts, high)]


class Known:
    """Answers about one text, and the lowest and highest end of the longest match at each
    start that they imply."""

    def __init__(self, geometry: Geometry) -> None:
        self.geometry = geometry
        n = geometry.length
        self._found_end = np.zeros(n, dtype=np.int64)
        self._absent_end = np.full(n, n + 1, dtype=np.int64)
        self.answers: dict[tuple[int, int], bool] = {}

    def record(self, start: int, end: int, found: bool) -> None:
        self.answers[start, end] = found
        if found:
            self._found_end[start] = max(self._found_end[start], end)
        else:
            self._absent_end[start] = min(self._absent_end[start], end)

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(lowest, highest) end of the longest match starting at each position."""
        n = self.geometry.length
        positions = np.arange(n)
        lowest = np.maximum(np.maximum.accumulate(self._found_end), positions)
        nearest_absent = np.minimum.accumulate(self._absent_end[::-1])[::-1]
        cuts = np.asarray(self.geometry.cuts, dtype=np.int64)
        # A match ends on a cut: below an absent end, the cut before it.
        before_absent = cuts[np.maximum(np.searchsorted(cuts, nearest_absent, side="left") - 1, 0)]
        highest = np.where(nearest_absent > n, n, before_absent)
        highest = np.maximum(highest, lowest)
        starts = np.zeros(n + 1, dtype=bool)
        starts[cuts] = True
        if not starts[:n].all():
            # Inside a word, the match of the boundary before it, cut short.
            previous = np.maximum.accumulate(np.where(starts[:n], positions, 0))
            lowest = np.maximum(lowest[previous], positions)
            highest = np.maximum(highest[previous], positions)
        return lowest, highest

    def lengths(self, coverage: CoverageSample | None = None) -> MatchLengths:
        lowest, highest = self.ends()
        positions = np.arange(self.geometry.length)
        low, high = (lowest - positions).tolist(), (highest - positions).tolist()
        return MatchLengths(low, None if low == high else high, coverage)


class Asker:
    """Count queries about one text, each asked once, charged to a variant's budget."""

    def __init__(self, text: str, occurs: Callable[[str], bool], known: Known, budget: Budget, limit: int, run_all: Callable[[Callable[[str], bool], list[str]], list[bool]]) -> None:
        self.text = text
        self.occurs = occurs
        self.known = known
        self.budget = budget
        self.limit = limit
        self.run_all = run_all
        self._by_text: dict[str, bool] = {}

    def __call__(self, start: int, end: int) -> bool:
        return self.many([(start, end)])[0]

    def many(self, spans: Sequence[tuple[int, int]]) -> list[bool]:
        """Answers for every span, the unasked ones side by side; if the budget runs out, the
        spans it paid for are still asked and recorded before OutOfBudget is raised."""
        wanted = [self.text[a:b] for a, b in spans]
        new = [piece for piece in dict.fromkeys(wanted) if piece not in self._by_text and piece]
        paid, short = [], False
        for piece in new:
            try:
                self.budget.take(self.limit)
            except OutOfBudget:
                short = True
                break
            paid.append(piece)
        for piece, found in zip(paid, self.run_all(self.occurs, paid), strict=True):
            self._by_text[piece] = found
        answers = []
        for (a, b), piece in zip(spans, wanted, strict=True):
            if b <= a:
                answers.append(True)
            elif piece in self._by_text:
                self.known.record(a, b, self._by_text[piece])
                answers.append(self._by_text[piece])
        if short:
            raise OutOfBudget
        return answers


def _last_found(found: Callable[[int], bool], count: int) -> int | None:
    """The last index i < count with found(i), for a predicate true up to some index and false
    after it: galloping, then binary search; None when found(0) is false."""
    if not count or not found(0):
        return None
    low, high, step = 0, count - 1, 1
    while low < high:
        probe = min(high, low + step)
        if found(probe):
            low, step = probe, step * 2
        else:
            high = probe - 1
            break
    while low < high:
        middle = (low + high + 1) // 2
        if found(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _extend(found: Callable[[int, int], bool], start: int, end: int, stops: list[int]) -> int:
    """The furthest stop e with text[start:e] found, given text[start:end] is and `stops` are
    the admissible ends past `end` in increasing order."""
    last = _last_found(lambda k: found(start, stops[k]), len(stops))
    return end if last is None else stops[last]


def scan(ask: Asker, start: int = 0, stop: int | None = None, end: int = 0) -> int:
    """The longest match of every start in [start, stop), given text[start:end] occurs; returns
    the end of the last.  Runs of starts whose match ends where the previous one does are
    skipped in doubling steps, one query each."""
    geometry = ask.known.geometry
    n = geometry.length
    stop = n if stop is None else stop
    i = start
    while i < stop:
        end = max(end, i)
        if not geometry.is_cut(i):
            i += 1
            continue
        end = _extend(ask, i, end, geometry.cuts_between(end, geometry.reach[i]))
        last, step = i, 1
        while last + step < min(stop, end):
            j, beyond = last + step, geometry.next_cut(end)
            if not geometry.is_cut(j) or beyond is None or beyond > geometry.reach[j] or ask(j, beyond):
                break
            last, step = j, step * 2
        i = last + 1
    return end


def chunks(geometry: Geometry, size: int) -> list[tuple[int, int]]:
    """Consecutive pieces of the text such that every match of at least `2 * size` characters
    (`2 * size - 1` where any position is a cut) holds one whole.

    Where every position is a cut, pieces of exactly `size` start at multiples of it: the first
    piece starting at or after a match's start s starts before s + size, so it ends by
    s + 2 * size - 1.  At word cuts, each piece runs to the furthest cut within `size` of its
    start (or is one word longer than that): the first piece starting at or after s (a cut,
    since matches start on cuts) starts less than `size` after it, unless s falls inside a long
    single-word piece, which a match cannot do; that piece then ends within `size` more, or is
    one long word that the match, ending on a cut past its start, holds whole."""
    n = geometry.length
    if len(geometry.cuts) == n + 1:
        return [(k, k + size) for k in range(0, n - size + 1, size)]
    pieces, start = [], geometry.cuts[0] if geometry.cuts else n
    while start < n:
        within = geometry.cuts_between(start, start + size)
        end = within[-1] if within else geometry.next_cut(start)
        if end is None:
            break
        pieces.append((start, end))
        start = end
    return pieces


def reach(ask: Asker, lengths: Sequence[int], chunk_cap: int, whole: bool = False) -> None:
    """Enough answers to say whether the longest match reaches each of `lengths` (characters):
    the chunks of the shortest are counted, and each chunk found is extended to every maximal
    match holding it, stopping once a match reaches the longest of `lengths`.  Chunks are asked
    in batches doubling from `FIRST_CHUNKS`, so a text that matches at length stops after few
    (an absent text's chunks are all asked, in as many requests as at once).  With `whole`,
    the whole text is asked in the same batch as the chunks (a server answering several
    questions in one request then settles an absent text's chunks and the text together)."""
    geometry = ask.known.geometry
    shortest, longest = min(lengths), max(lengths)
    if shortest > geometry.length:
        return
    every_cut = len(geometry.cuts) == geometry.length + 1
    size = max(1, min((shortest + 1) // 2 if every_cut else shortest // 2, chunk_cap))
    pieces = [(a, b) for a, b in chunks(geometry, size) if b <= geometry.reach[a]]
    first = [(0, geometry.length)] if whole else []
    scanned, at, batch = -1, 0, FIRST_CHUNKS
    while at < len(pieces) or first:
        answers = ask.many(first + pieces[at : at + batch])
        if first and answers[0]:
            return
        for (a, b), found in zip(pieces[at : at + batch], answers[len(first) :], strict=True):
            if not found or a <= scanned:
                continue
            if _reaches_longest(ask, longest):
                return
            start = _leftmost_start(ask, a, b, scanned + 1)
            scan(ask, start, a + 1, b)
            scanned = a
        if _reaches_longest(ask, longest):
            return
        first, at, batch = [], at + batch, batch * 2


def _reaches_longest(ask: Asker, longest: int) -> bool:
    lowest, _ = ask.known.ends()
    return int((lowest - np.arange(ask.known.geometry.length)).max(initial=0)) >= longest


def _leftmost_start(ask: Asker, start: int, end: int, floor: int) -> int:
    """The first cut s >= floor with text[s:end] found (text[start:end] is), searching left
    from `start` within one query's reach."""
    geometry = ask.known.geometry
    candidates = [c for c in geometry.cuts_between(floor - 1, start - 1) if geometry.reach[c] >= end]
    candidates.reverse()
    last = _last_found(lambda k: ask(candidates[k], end), len(candidates))
    return start if last is None else candidates[last]


def sample_seed(base: int, text: str) -> int:
    """A field's sampling seed: the same text draws the same windows in every audit."""
    digest = hashlib.blake2b(f"{base}\n{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def hypergeometric_interval(population: int, sampled: int, found: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """The exact two-sided interval for how many of `population` items are found, having
    found `found` in a sample of `sampled` drawn without replacement: every count M whose
    chance of a sample at least as extreme (each tail) exceeds (1 - confidence) / 2."""
    if sampled >= population:
        return found, found
    alpha = (1 - confidence) / 2
    log_factorial = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, population + 1)))))
    counts = np.arange(population + 1)[:, None]
    draws = np.arange(sampled + 1)[None, :]
    possible = (draws <= counts) & (sampled - draws <= population - counts)

    def log_choose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(a, b)
        safe = possible & (b >= 0) & (b <= a)
        return np.where(safe, log_factorial[np.where(safe, a, 0)] - log_factorial[np.where(safe, b, 0)] - log_factorial[np.where(safe, a - b, 0)], -np.inf)

    log_pmf = log_choose(counts, draws) + log_choose(population - counts, sampled - draws) - (log_factorial[population] - log_factorial[sampled] - log_factorial[population - sampled])
    pmf = np.where(possible, np.exp(log_pmf), 0.0)
    at_least = pmf[:, found:].sum(axis=1)
    at_most = pmf[:, : found + 1].sum(axis=1)
    plausible = np.flatnonzero((at_least > alpha) & (at_most > alpha))
    return int(plausible.min()), int(plausible.max())


def _decided(interval: tuple[float, float], thresholds: Sequence[float]) -> bool:
    low, high = interval
    return all(low >= t or high < t for t in thresholds)


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def sample_coverage(ask: Asker, windows: Sequence[tuple[int, int]], thresholds: Sequence[float], seed: int, confidence: float = CONFIDENCE) -> CoverageSample | None:
    """The share of `windows` found, as an interval narrow enough for every threshold, from the
    answers already known plus a random sample of the windows they leave open; None when the
    answers already known decide it."""
    total = len(windows)
    if not total or not thresholds:
        return None
    lowest, highest = ask.known.ends()
    settled_found = sum(1 for a, b in windows if lowest[a] >= b)
    settled_absent = sum(1 for a, b in windows if highest[a] < b)
    open_windows = [w for w in windows if lowest[w[0]] < w[1] <= highest[w[0]]]
    if _decided((_ratio(settled_found, total), _ratio(settled_found + len(open_windows), total)), thresholds):
        return None
    # A window is asked from the cut at or before its start (on a token-level index, the space
    # before its first word), where the answer counts for its start too.
    geometry = ask.known.geometry
    order = [(geometry.cut_at_or_before(a), b) for a, b in random.Random(seed).sample(open_windows, len(open_windows))]
    asked: list[bool] = []
    batch = FIRST_SAMPLE
    interval = (_ratio(settled_found, total), _ratio(settled_found + len(open_windows), total))
    try:
        while len(asked) < len(order):
            asked += ask.many(order[len(asked) : len(asked) + batch])
            low, high = hypergeometric_interval(len(order), len(asked), sum(asked), confidence)
            interval = (_ratio(settled_found + low, total), _ratio(settled_found + high, total))
            if _decided(interval, thresholds):
                break
            batch *= 2
    except OutOfBudget:
        asked = [ask.known.answers[w] for w in order if w in ask.known.answers]
        if asked:
            low, high = hypergeometric_interval(len(order), len(asked), sum(asked), confidence)
            interval = (_ratio(settled_found + low, total), _ratio(settled_found + high, total))
        raise _Spent(_sample(seed, total, settled_found, settled_absent, asked, confidence, interval)) from None
    return _sample(seed, total, settled_found, settled_absent, asked, confidence, interval)


def _sample(seed: int, total: int, settled_found: int, settled_absent: int, asked: list[bool], confidence: float, interval: tuple[float, float]) -> CoverageSample:
    return CoverageSample(seed, total, settled_found, settled_absent, len(asked), sum(asked), confidence, interval)


class _Spent(OutOfBudget):
    """The budget ran out while sampling; carries the sample drawn so far."""

    def __init__(self, sample: CoverageSample) -> None:
        super().__init__()
        self.sample = sample


def derive(ask: Asker, longest: Sequence[int], windows: Sequence[tuple[int, int]], coverage: Sequence[float], seed: int, chunk_cap: int, whole: bool = False) -> tuple[MatchLengths, bool]:
    """What the policy asks of one field (`longest`: lengths a rule compares the longest match
    with; `coverage`: thresholds on the share of `windows` found), within the budget: the
    lengths and sample that follow, and whether the budget ran out.  With `whole`, the whole
    text is asked too, first (with the first chunks where lengths are asked)."""
    sample = None
    try:
        if longest:
            reach(ask, longest, chunk_cap, whole)
        elif whole:
            ask(0, ask.known.geometry.length)
        sample = sample_coverage(ask, windows, coverage, seed)
    except _Spent as spent:
        return ask.known.lengths(spent.sample), True
    except OutOfBudget:
        return ask.known.lengths(), True
    return ask.known.lengths(sample), False
