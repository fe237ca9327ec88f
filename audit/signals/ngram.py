"""The n-gram signal: exact counts, longest matches, window coverage and question-answer
co-occurrence of an item's text in a corpus, with the documents behind the strongest matches.

Everything is derived from two corpus operations: `match_lengths` (the longest match starting
at each character, infini-gram's "creativity") and `occurrences`.  A window of units is in the
corpus exactly when the match starting at its first character reaches its end, so coverage of
every window costs no query beyond the one longest-match pass.

A backend that can only bound some lengths or counts (a remote API out of requests, or with
capped queries) makes the figures built on them inexact: each figure is then reported at its
lowest, and `figures.bounds` gives its [lowest, highest], so a rule can fire on the lowest or
stay undecided, never read a bound as absence.

The signal declares its part of the policy file: `NgramConfig` is the `[ngram]` table, `Rules`
the fields and figures `[rules.ngram]` may name, each with the range a value must keep.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from audit.corpora.base import Budget, Corpus, CoverageSample, MatchLengths, MatchQuestions, Occurrence
from audit.evidence import ABSENT, FAILED, Evidence
from audit.items import Item
from audit.rules import Count, Fraction, Op, Rule, Table, threshold
from audit.text import UNSEGMENTED_SCRIPTS, dominant_script, normalize, units, windows

NAME = "ngram"
TEXT_FIELDS = ("question", "answer", "context")


class WindowSizes(Table):
    """Window size per script, in words for space-separated scripts and characters for the
    unsegmented ones; a script left unset, and text with no letters, use `default`."""

    default: Count
    arabic: Count | None = None
    cyrillic: Count | None = None
    devanagari: Count | None = None
    greek: Count | None = None
    hangul: Count | None = 6
    hebrew: Count | None = None
    latin: Count | None = None
    han: Count | None = 12
    kana: Count | None = 12
    thai: Count | None = 20
    lao: Count | None = 20
    khmer: Count | None = 20
    myanmar: Count | None = 20
    tibetan: Count | None = 20

    def size(self, script: str) -> int:
        value = getattr(self, script) if script in type(self).model_fields else None
        return value or self.default


class NgramConfig(Table):
    """The signal's parameters (the policy's `[ngram]` table).  Every count is at least 1: a
    zero would silently drop evidence (no spans, no provenance, no anchors) rather than fail."""

    window: WindowSizes = Field(default_factory=lambda: WindowSizes(default=8))
    span_min_chars: int = Field(20, ge=1)
    max_spans: int = Field(10, ge=1)
    provenance_docs: int = Field(3, ge=1)
    snippet_chars: int = Field(80, ge=0)
    cooccurrence_window_bytes: int = Field(2000, ge=1)
    anchor_min_chars: int = Field(12, ge=1)
    max_anchors: int = Field(3, ge=1)
    max_occurrences: int = Field(500, ge=1)

    def window_for(self, script: str) -> int:
        return self.window.size(script)


class TextRules(Table):
    """Thresholds on the figures `field_evidence` reports for one text field: those that say
    how much of the text the corpus holds.  The others describe the text or the query (its
    length, script, window size, where the longest match starts), so no rule may name them."""

    exact_count: threshold(Count, "ExactCount") = None
    coverage: threshold(Fraction, "Coverage") = None
    longest_match_chars: threshold(Count, "LongestMatchChars") = None
    longest_match_fraction: threshold(Fraction, "LongestMatchFraction") = None


class CooccurrenceRules(Table):
    """Thresholds on the figures `cooccurrence_evidence` reports: the documents holding the
    answer near the question.  The answer's own count is the `answer` field's `exact_count`."""

    documents: threshold(Count, "Documents") = None


class Rules(Table):
    """The policy's `[rules.ngram]`: for each field this signal reports, the figures a rule may
    name."""

    question: TextRules = Field(default_factory=TextRules)
    answer: TextRules = Field(default_factory=TextRules)
    context: TextRules = Field(default_factory=TextRules)
    question_answer: CooccurrenceRules = Field(default_factory=CooccurrenceRules, alias="question+answer")


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

    @property
    def longest(self) -> tuple[int, int]:
        """(start, length) of the longest match, the earliest on ties."""
        if not self.lengths:
            return 0, 0
        length = max(self.lengths)
        return self.lengths.index(length), length

    def maximal_spans(self, min_chars: int) -> list[tuple[int, int]]:
        """Matched spans not contained in an earlier one, longest first."""
        spans, reach = [], 0
        for start, length in enumerate(self.lengths):
            end = start + length
            if end > reach:
                if length >= min_chars:
                    spans.append((start, end))
                reach = end
        return sorted(spans, key=lambda s: (s[0] - s[1], s[0]))


@dataclass(frozen=True)
class SharedText:
    """Where a target-language field repeats its source-language text (untranslated names,
    titles, lists): windows of the field that occur verbatim in a source field.  A corpus match
    of such text says nothing about the target language, so every figure sets it aside."""

    windows: frozenset[tuple[int, int]]
    chars: tuple[bool, ...]

    @classmethod
    def find(cls, text: str, size: int, sources: Sequence[str]) -> SharedText | None:
        if not sources:
            return None
        spans = frozenset(span for span in windows(text, size) if any(text[span[0] : span[1]] in source for source in sources))
        if not spans:
            return None
        chars = [False] * len(text)
        for start, end in spans:
            chars[start:end] = [True] * (end - start)
        return cls(spans, tuple(chars))

    def unshared(self, start: int, length: int) -> int:
        """Characters of text[start:start+length] that are not shared with the source."""
        return length - sum(self.chars[start : start + length])

    def intervals(self) -> list[list[int]]:
        merged: list[list[int]] = []
        for start, end in sorted(self.windows):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return merged


def without_shared(match: FieldMatch, shared: SharedText) -> FieldMatch:
    """The match with every length counting only characters not shared with the source, so the
    longest match is the longest run of target-language evidence."""
    lengths = [shared.unshared(i, n) for i, n in enumerate(match.lengths)]
    highest = [shared.unshared(i, n) for i, n in enumerate(match.highest)] if match.highest is not None else None
    return FieldMatch(match.text, lengths, highest, match.coverage)


def window_figures(match: FieldMatch, size: int, shared: SharedText | None = None) -> tuple[dict[str, Any], int, tuple[float, float]]:
    """Coverage figures, how many windows are undecided (a bounded start that falls short),
    and the range the coverage lies in: the windows settled either way, narrowed by a sampled
    estimate where the backend drew one.  The coverage figure is that range's lowest.  Windows
    shared with the source are left out of both sides; a sample drawn over all windows still
    narrows the range once the shared windows' possible share is taken off it."""
    every = windows(match.text, size)
    spans = [span for span in every if shared is None or span not in shared.windows]
    found = sum(1 for start, end in spans if match.lengths[start] >= end - start)
    undecided = sum(1 for start, end in spans if match.lengths[start] < end - start <= match.most(start))
    low, high = _ratio(found, len(spans)), _ratio(found + undecided, len(spans))
    figures: dict[str, Any] = {"windows": len(spans), "windows_found": found}
    if match.coverage is not None and spans:
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


def figure_bounds(match: FieldMatch, figures: dict[str, Any], counts: tuple[int, int], undecided_windows: int, coverage: tuple[float, float]) -> dict[str, list[float]]:
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


def provenance(corpus: Corpus, span_text: str, span: tuple[int, int], config: NgramConfig) -> tuple[int, list[dict[str, Any]]]:
    total, found = corpus.occurrences(span_text, config.provenance_docs)
    length = len(span_text.encode("utf-8"))
    hits = []
    for occurrence in found:
        hit = corpus.document_hit(occurrence, length, config.snippet_chars)
        hits.append(
            {
                "document": hit.document,
                "metadata": hit.metadata,
                "offset": hit.offset,
                "length": hit.length,
                "span": list(span),
                "snippet": hit.snippet,
                "snippet_match": [hit.snippet_match_start, hit.snippet_match_end],
            }
        )
    return total, hits


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
            reaching = next((k for k in range(len(text) + 1) if _ratio(k, len(text)) >= float(rule.value)), None)
            if reaching is not None:
                longest.add(reaching + step)
        elif rule.figure == "coverage":
            coverage.add(float(rule.value) + (1e-4 if step else 0.0))
    spans = tuple(windows(text, size)) if coverage else ()
    return MatchQuestions(tuple(sorted(longest)), spans, tuple(sorted(coverage)), budget)


def field_evidence(
    corpus: Corpus, name: str, raw: str, config: NgramConfig, rules: Sequence[Rule] = (), budget: Budget | None = None, sources: Sequence[str] = ()
) -> tuple[Evidence, FieldMatch]:
    """One field's figures.  `rules` (this field's, for this corpus) and the variant's `budget`
    reach a backend that derives matches from counts, so it asks only what decides them.
    `sources` are the source-language texts of a target variant: what the field shares with
    them is set aside from every figure and listed as `shared_with_source`."""
    text = normalize(raw)
    script = dominant_script(text)
    unit = "char" if script in UNSEGMENTED_SCRIPTS else "word"
    size = config.window_for(script)
    budget = budget or Budget()
    asked_before = budget.asked
    found = FieldMatch.of(text, corpus.match_lengths(text, questions_for(rules, text, size, budget)))
    shared = SharedText.find(text, size, sources)
    match = found if shared is None else without_shared(found, shared)
    start, length = match.longest
    whole_shared = any(text in source for source in sources)
    counts = (0, 0) if whole_shared else corpus.count_range(text)
    coverage, undecided_windows, coverage_range = window_figures(found, size, shared)
    figures: dict[str, Any] = {
        "chars": len(text),
        "units": len(units(text)),
        "script": script,
        "exact_count": counts[0],
        "longest_match_chars": length,
        "longest_match_fraction": _ratio(length, len(text)),
        "longest_match_start": start,
        "window_unit": unit,
        "window_size": size,
        **coverage,
        "spans": [list(s) for s in found.maximal_spans(config.span_min_chars) if shared is None or shared.unshared(s[0], s[1] - s[0])][: config.max_spans],
    }
    if shared is not None:
        figures["shared_with_source"] = shared.intervals()
        figures["shared_chars"] = sum(shared.chars)
    if whole_shared:
        figures["exact_count_set_aside"] = True
    if budget.asked > asked_before:
        figures["count_queries"] = budget.asked - asked_before
    bounds = figure_bounds(match, figures, counts, undecided_windows, coverage_range)
    if bounds:
        figures["bounds"] = bounds
    evidence = Evidence(signal=NAME, source=corpus.info.name, field=name, figures=figures)
    if length >= config.span_min_chars or (length and length == len(text)):
        span = (start, start + found.lengths[start])
        figures["longest_match_count"], evidence.provenance = provenance(corpus, text[span[0] : span[1]], span, config)
    return evidence, found


def _near(corpus: Corpus, rare: str, rare_hits: list[Occurrence], other: str, window: int) -> list[Occurrence]:
    """Occurrences of `rare` that have `other` within `window` bytes in the same document."""
    needle = other.encode("utf-8")
    width = len(rare.encode("utf-8"))
    reach = window + len(needle)
    return [o for o in rare_hits if needle in corpus.surrounding(o, reach, width + reach)]


def anchors_for(question: FieldMatch, title: str | None, answer: str, shared: list[str], config: NgramConfig) -> tuple[list[str], list[str]]:
    """Distinctive pieces of the question to look for near the answer: matched spans covering a
    whole window of units, plus the title.  Pieces that also stand in the source-language text
    (names, quoted titles, numbers) say nothing about *this* language, so they are set aside."""
    size = config.window_for(dominant_script(question.text))
    spans = [question.text[s:e] for s, e in question.maximal_spans(config.anchor_min_chars)]
    candidates = [span for span in spans if len(units(span)) >= min(size, len(units(question.text)))]
    if title:
        candidates.append(normalize(title))
    candidates = [a for a in dict.fromkeys(candidates) if answer not in a]
    kept = [a for a in candidates if not any(a in text for text in shared)]
    limit = config.max_anchors + (1 if title else 0)
    return kept[:limit], [a for a in candidates if a not in kept]


def cooccurrence_evidence(
    corpus: Corpus, question: FieldMatch, title: str | None, answer: str, shared: list[str], config: NgramConfig
) -> Evidence:
    """Does the answer occur near a distinctive piece of the question (or the item's title) in one
    document?  Co-occurrence within a window is WIMBD's "paired" contamination; the question's
    longest matched spans stand in for it since generated questions rarely occur verbatim."""
    answer_text = normalize(answer)
    anchors, set_aside = anchors_for(question, title, answer_text, shared, config)
    evidence = Evidence(signal=NAME, source=corpus.info.name, field="question+answer")
    if anchors:
        answer_count, answer_hits = corpus.occurrences(answer_text, config.max_occurrences)
    else:
        answer_count, answer_hits = corpus.count(answer_text), []
    figures: dict[str, Any] = {
        "answer_count": answer_count,
        "window_bytes": config.cooccurrence_window_bytes,
        "anchors": [],
        "anchors_shared_with_source": set_aside,
    }
    documents: dict[int, tuple[Occurrence, str]] = {}
    for anchor in anchors:
        anchor_count, anchor_hits = corpus.occurrences(anchor, config.max_occurrences)
        record = {"text": anchor, "count": anchor_count, "documents": 0, "exhaustive": True}
        if anchor_count and answer_count:
            if anchor_count <= answer_count:
                rare, hits, other, exhaustive = anchor, anchor_hits, answer_text, anchor_count <= config.max_occurrences
            else:
                rare, hits, other, exhaustive = answer_text, answer_hits, anchor, answer_count <= config.max_occurrences
            near = _near(corpus, rare, hits, other, config.cooccurrence_window_bytes)
            record["documents"] = len({o.document for o in near})
            record["exhaustive"] = exhaustive
            for occurrence in near:
                documents.setdefault(occurrence.document, (occurrence, rare))
        figures["anchors"].append(record)
    figures["documents"] = len(documents)
    figures["exhaustive"] = all(a["exhaustive"] for a in figures["anchors"])
    for occurrence, rare in list(documents.values())[: config.provenance_docs]:
        hit = corpus.document_hit(occurrence, len(rare.encode("utf-8")), config.snippet_chars)
        evidence.provenance.append(
            {"document": hit.document, "metadata": hit.metadata, "offset": hit.offset, "length": hit.length, "snippet": hit.snippet, "snippet_match": [hit.snippet_match_start, hit.snippet_match_end]}
        )
    evidence.figures = figures
    return evidence


def source_texts(item: Item, lang: str) -> list[str]:
    """The source-language text a target variant is compared against ([] for the source itself)."""
    source = item.variants.get(item.source_lang)
    if lang == item.source_lang or source is None:
        return []
    return [normalize(t) for t in (source.question, source.answer, source.context, source.title) if t]


def run(corpus: Corpus, item: Item, lang: str, config: NgramConfig, rules: Mapping[str, Sequence[Rule]] | None = None) -> list[Evidence]:
    """All n-gram evidence for one language variant of an item; a field the variant lacks is
    recorded as absent, and a corpus failure as failed, never as "not found".  `rules` are the
    policy's rules on this signal's fields for this corpus; the variant's fields share one
    budget of count queries where the corpus must derive matches from counts."""
    variant = item.variants[lang]
    results: list[Evidence] = []
    matches: dict[str, FieldMatch] = {}
    budget = Budget()
    shared = source_texts(item, lang)
    for name in TEXT_FIELDS:
        raw = variant.text(name)
        if raw is None or not normalize(raw):
            results.append(Evidence(signal=NAME, source=corpus.info.name, field=name, status=ABSENT))
            continue
        try:
            evidence, matches[name] = field_evidence(corpus, name, raw, config, (rules or {}).get(name, ()), budget, shared)
        except (OSError, RuntimeError, ValueError) as error:
            evidence = Evidence(signal=NAME, source=corpus.info.name, field=name, status=FAILED, error=str(error))
        results.append(evidence)
    answer = variant.text("answer")
    if "question" in matches and answer and normalize(answer):
        try:
            results.append(cooccurrence_evidence(corpus, matches["question"], variant.text("title"), answer, shared, config))
        except (OSError, RuntimeError, ValueError) as error:
            results.append(Evidence(signal=NAME, source=corpus.info.name, field="question+answer", status=FAILED, error=str(error)))
    else:
        results.append(Evidence(signal=NAME, source=corpus.info.name, field="question+answer", status=ABSENT))
    return results
