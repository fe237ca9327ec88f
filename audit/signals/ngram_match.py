"""The longest-match pass over one field and the figures built on it: window coverage, the
longest match, what is shared with the source language, and the bounds a backend that could
only bound some lengths leaves on them.

A window of units is in the corpus exactly when the match starting at its first character
reaches its end, so coverage of every window costs no query beyond the one longest-match pass.
"""
from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from audit import _figures
from audit.corpora.base import Budget, Corpus, CoverageSample, MatchLengths, MatchQuestions
from audit.evidence import Json
from audit.rules import Op, Rule
from audit.text import dominant_script, windows


@dataclass
class FieldMatch:
    """The longest-match pass over one normalised field, reused by every figure: `lengths` at
    their lowest, `highest` where a backend could only bound them."""

    text: str
    lengths: list[int]
    highest: list[int] | None = None
    coverage: CoverageSample | None = None

    @classmethod
    def of(cls, text: str, found: MatchLengths) -> FieldMatch:
        return cls(text, found.lengths, found.highest, found.coverage)

    def longest_possible(self) -> int:
        return max(self.highest, default=0) if self.highest is not None else self.longest[1]

    def most(self, position: int) -> int:
        return self.lengths[position] if self.highest is None else self.highest[position]

    @functools.cached_property
    def longest(self) -> tuple[int, int]:
        """(start, length) of the longest match, the earliest on ties (kept: the figures and
        their bounds both ask it of a long field)."""
        if not self.lengths:
            return 0, 0
        length = max(self.lengths)
        return self.lengths.index(length), length

    def maximal_spans(self, min_chars: int) -> list[tuple[int, int]]:
        """Matched spans not contained in an earlier one, longest first (the earliest on ties):
        a span counts where it reaches past every earlier one's end.  In C
        (`_figures.maximal_spans`), since every field asks it of every character."""
        return _figures.maximal_spans(self.lengths, min_chars)


class HeldLengths:
    """The exact longest matches one variant's fields found, per corpus (or language view)
    asked.  A field standing inside an earlier one (BMLAMA-17's prompt and answer in its
    statement) takes its lengths from it: its match at each character is the container's at
    the same place, cut at the field's end, since every prefix of a held string is held.  A
    container whose lengths were only bounded lends none, so the lengths lent are the exact
    ones a search of the field would find.  Exact lengths fall by at most one a character (a
    held string's suffix is held), so the matches the field's end cuts are its last ones."""

    def __init__(self) -> None:
        self._found: list[tuple[Corpus, str, list[int]]] = []

    def match_lengths(self, corpus: Corpus, text: str) -> MatchLengths:
        """`corpus.match_lengths(text)`, from a held container where one holds `text`."""
        for asked, held, lengths in self._found:
            at = held.find(text) if asked is corpus else -1
            if at >= 0:
                end = cut = at + len(text)
                while cut > at and lengths[cut - 1] > end - cut + 1:
                    cut -= 1
                return MatchLengths(lengths[at:cut] + list(range(end - cut, 0, -1)))
        found = corpus.match_lengths(text)
        if found.highest is None and found.coverage is None:
            self._found.append((corpus, text, found.lengths))
        return found


@dataclass(frozen=True)
class SharedText:
    """Where a target-language field repeats its source-language text (untranslated names,
    titles, lists): windows of the field that occur verbatim in a source field.  A corpus match
    of such text says nothing about the target language, so every figure sets it aside."""

    windows: frozenset[tuple[int, int]]
    chars: tuple[bool, ...]
    # A byte per window of the field (`text.windows`), 1 where it is shared.
    mask: bytes

    @classmethod
    def find(cls, text: str, size: int, sources: Sequence[str]) -> SharedText | None:
        """The shared windows of `text`, or None.  The last few answers are kept: a field is
        measured over every document and then in its language, with the same sources."""
        return _shared_text(text, size, tuple(sources)) if sources else None

    @classmethod
    def _search(cls, text: str, size: int, sources: tuple[str, ...]) -> SharedText | None:
        # Joined by a character the field lacks, the sources are searched at once: a window
        # cannot reach across that character, so it is found exactly where one source holds it.
        joined = "\x00".join(sources) if "\x00" not in text else None
        every = windows(text, size)
        mask = bytes(text[start:end] in joined if joined is not None else any(text[start:end] in source for source in sources) for start, end in every)
        if not any(mask):
            return None
        spans = frozenset(span for span, shared in zip(every, mask, strict=True) if shared)
        chars = [False] * len(text)
        for start, end in spans:
            chars[start:end] = [True] * (end - start)
        return cls(spans, tuple(chars), mask)

    def unshared(self, start: int, length: int) -> int:
        """Characters of text[start:start+length] that are not shared with the source."""
        return length - sum(self.chars[start : start + length])

    def unshared_all(self, lengths: list[int]) -> list[int]:
        """`unshared` at every position at once, `lengths[i]` characters from position i."""
        before = np.concatenate(([0], np.cumsum(self.chars, dtype=np.int64)))
        counts = np.asarray(lengths, dtype=np.int64)
        at = np.arange(len(counts))
        return (counts - (before[np.minimum(at + counts, len(self.chars))] - before[at])).tolist()

    def intervals(self) -> list[list[int]]:
        merged: list[list[int]] = []
        for start, end in sorted(self.windows):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return merged


_shared_text = functools.lru_cache(maxsize=16)(SharedText._search)


@dataclass(frozen=True)
class FieldText:
    """One normalised field as its figures see it: its name, text and language, its script and
    window size, and the source texts only through what it shares with them (`shared`, and
    `whole` when a source holds all of it).  Worked out once per field, for its measure over
    every document and in its language; one runner gives equal evidence for equal FieldTexts."""

    name: str
    text: str
    lang: str | None
    script: str
    size: int
    shared: SharedText | None
    whole: bool

    @classmethod
    def of(cls, name: str, text: str, lang: str | None, sources: Sequence[str], window_for: Callable[[str], int]) -> FieldText:
        script = dominant_script(text)
        size = window_for(script)
        return cls(name, text, lang, script, size, SharedText.find(text, size, sources), any(text in source for source in sources))


def without_shared(match: FieldMatch, shared: SharedText) -> FieldMatch:
    """The match with every length counting only characters not shared with the source, so the
    longest match is the longest run of target-language evidence."""
    lengths = shared.unshared_all(match.lengths)
    highest = shared.unshared_all(match.highest) if match.highest is not None else None
    return FieldMatch(match.text, lengths, highest, match.coverage)


def window_figures(match: FieldMatch, size: int, shared: SharedText | None = None) -> tuple[dict[str, Json], int, tuple[float, float]]:
    """Coverage figures, how many windows are undecided (a bounded start that falls short),
    and the range the coverage lies in: the windows settled either way, narrowed by a sampled
    estimate where the backend drew one.  The coverage figure is that range's lowest.  Windows
    shared with the source are left out of both sides; a sample drawn over all windows still
    narrows the range once the shared windows' possible share is taken off it."""
    every = windows(match.text, size)
    counted, found = _figures.window_found(match.lengths, every, *([shared.mask] if shared is not None else []))
    # Only a bounded backend leaves a window undecided (exact lengths settle every one), and
    # only it draws a sample: it alone needs the windows counted listed.
    bounded = match.highest is not None or match.coverage is not None
    spans = [span for span in every if shared is None or span not in shared.windows] if bounded else []
    undecided = sum(1 for start, end in spans if match.lengths[start] < end - start <= match.most(start)) if match.highest is not None else 0
    low, high = _ratio(found, counted), _ratio(found + undecided, counted)
    figures: dict[str, Json] = {"windows": counted, "windows_found": found}
    if match.coverage is not None and counted:
        sample = match.coverage
        set_aside = [span for span in every if span not in spans]
        shared_least = sum(1 for start, end in set_aside if match.lengths[start] >= end - start)
        shared_most = sum(1 for start, end in set_aside if match.most(start) >= end - start)
        low = max(low, round((sample.interval[0] * len(every) - shared_most) / len(spans), 4))
        high = min(high, round((sample.interval[1] * len(every) - shared_least) / len(spans), 4))
        figures["coverage_sample"] = {
            "seed": sample.seed,
            "settled_found": sample.settled_found,
            "settled_absent": sample.settled_absent,
            "sampled": sample.sampled,
            "sampled_found": sample.sampled_found,
            "confidence": sample.confidence,
        }
    figures["coverage"] = low
    return figures, undecided, (low, high)


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def figure_bounds(match: FieldMatch, figures: dict[str, Json], counts: tuple[int, int], undecided_windows: int, coverage: tuple[float, float]) -> dict[str, list[float]]:
    """[lowest, highest] for each figure a bounded backend left inexact; the figure itself is
    the lowest.  Empty when every figure is exact."""
    bounds: dict[str, list[float]] = {}
    if counts[0] != counts[1]:
        bounds["exact_count"] = list(counts)
    possible = match.longest_possible()
    if possible > figures["longest_match_chars"]:
        bounds["longest_match_chars"] = [figures["longest_match_chars"], possible]
        bounds["longest_match_fraction"] = [figures["longest_match_fraction"], _ratio(possible, len(match.text))]
    if undecided_windows:
        bounds["windows_found"] = [figures["windows_found"], figures["windows_found"] + undecided_windows]
    if coverage[0] < coverage[1]:
        bounds["coverage"] = list(coverage)
    return bounds


def questions_for(rules: Sequence[Rule], text: str, size: int, budget: Budget) -> MatchQuestions:
    """What a field's rules ask of its matches, for a backend that must derive them from
    counts: the lengths the longest match is compared with (a fraction of the field becomes
    the shortest length that reaches it), and the coverage thresholds with the windows."""
    longest: set[int] = set()
    coverage: set[float] = set()
    for rule in rules:
        if rule.op is Op.EQUALS:
            continue
        step = 1 if rule.op is Op.AT_MOST else 0
        if rule.figure == "longest_match_chars":
            longest.add(int(rule.value) + step)
        elif rule.figure == "longest_match_fraction":
            # The shortest length whose fraction (as figures round it) reaches the value: the
            # rounded fraction only grows with the length, so a binary search finds it.
            reaching = bisect.bisect_left(range(len(text) + 1), True, key=lambda k: _ratio(k, len(text)) >= float(rule.value))
            if reaching <= len(text):
                longest.add(reaching + step)
        elif rule.figure == "coverage":
            coverage.add(float(rule.value) + (1e-4 if step else 0.0))
    spans = windows(text, size) if coverage else ()
    return MatchQuestions(tuple(sorted(longest)), spans, tuple(sorted(coverage)), budget)
