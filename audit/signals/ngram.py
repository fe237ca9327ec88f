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

from audit import forms
from audit.corpora.base import Budget, Corpus, CoverageSample, DocumentHit, MatchLengths, MatchQuestions, Occurrence
from audit.evidence import ABSENT, FAILED, Evidence
from audit.forms import Checked, Form
from audit.items import Item, ItemKind
from audit.rules import Count, Fraction, Op, Rule, Table, threshold
from audit.text import UNSEGMENTED_SCRIPTS, dominant_script, normalize, units, windows

NAME = "ngram"


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
    max_forms: int = Field(8, ge=1)

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
    """Thresholds on the figures the pair checks report: the documents holding the two (or
    all the) strings near each other, and those of them not recorded as another language's.
    A string's own count is not a rule's business."""

    documents: threshold(Count, "Documents") = None
    documents_in_language: threshold(Count, "DocumentsInLanguage") = None


class Rules(Table):
    """The policy's `[rules.ngram]`: for each field this signal reports, the figures a rule may
    name."""

    question: TextRules = Field(default_factory=TextRules)
    answer: TextRules = Field(default_factory=TextRules)
    context: TextRules = Field(default_factory=TextRules)
    statement: TextRules = Field(default_factory=TextRules)
    prompt: TextRules = Field(default_factory=TextRules)
    question_correct: TextRules = Field(default_factory=TextRules, alias="question+correct")
    question_distractor: TextRules = Field(default_factory=TextRules, alias="question+distractor")
    question_answer: CooccurrenceRules = Field(default_factory=CooccurrenceRules, alias="question+answer")
    subject_answer: CooccurrenceRules = Field(default_factory=CooccurrenceRules, alias="subject+answer")
    options: CooccurrenceRules = Field(default_factory=CooccurrenceRules)


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


class Occurrences:
    """Each string's count and first occurrences, asked once per variant: the pair checks of
    several answer forms share their anchors."""

    def __init__(self, corpus: Corpus, limit: int) -> None:
        self.corpus, self.limit = corpus, limit
        self.found: dict[str, tuple[int, list[Occurrence]]] = {}

    def __call__(self, text: str) -> tuple[int, list[Occurrence]]:
        if text not in self.found:
            self.found[text] = self.corpus.occurrences(text, self.limit)
        return self.found[text]


def _near(corpus: Corpus, rare: str, rare_hits: list[Occurrence], others: Sequence[str], window: int) -> list[Occurrence]:
    """Occurrences of `rare` that have every one of `others` within `window` bytes in the same
    document."""
    needles = [other.encode("utf-8") for other in others]
    width = len(rare.encode("utf-8"))
    reach = window + max(map(len, needles))
    return [o for o in rare_hits if all(needle in corpus.surrounding(o, reach, width + reach) for needle in needles)]


@dataclass(frozen=True)
class Nearby:
    """Documents where a group of strings stand near each other: found from the occurrences
    of the rarest, which is `exhaustive` when all of them were examined."""

    counts: tuple[int, ...]
    documents: dict[int, tuple[Occurrence, str]]
    exhaustive: bool


def nearby(corpus: Corpus, occurrences: Occurrences, strings: Sequence[str], window: int) -> Nearby:
    counts = tuple(occurrences(text)[0] for text in strings)
    if not all(counts):
        return Nearby(counts, {}, True)
    rarest = min(range(len(strings)), key=counts.__getitem__)
    rare, hits = strings[rarest], occurrences(strings[rarest])[1]
    near = _near(corpus, rare, hits, [text for i, text in enumerate(strings) if i != rarest], window)
    documents: dict[int, tuple[Occurrence, str]] = {}
    for occurrence in near:
        documents.setdefault(occurrence.document, (occurrence, rare))
    return Nearby(counts, documents, counts[rarest] <= occurrences.limit)


def _shared(text: str, shared: Sequence[str]) -> bool:
    return any(text in source for source in shared)


def question_anchors(question: FieldMatch, title: str | None, answer: str, shared: Sequence[str], config: NgramConfig) -> tuple[list[str], list[str]]:
    """Distinctive pieces of the question to look for near the answer: matched spans covering a
    whole window of units, plus the title.  Pieces that also stand in the source-language text
    (names, quoted titles, numbers) say nothing about *this* language, so they are set aside."""
    size = config.window_for(dominant_script(question.text))
    spans = [question.text[s:e] for s, e in question.maximal_spans(config.anchor_min_chars)]
    candidates = [span for span in spans if len(units(span)) >= min(size, len(units(question.text)))]
    if title:
        candidates.append(normalize(title))
    candidates = [a for a in dict.fromkeys(candidates) if answer not in a]
    kept = [a for a in candidates if not _shared(a, shared)]
    limit = config.max_anchors + (1 if title else 0)
    return kept[:limit], [a for a in candidates if a not in kept]


def subject_anchors(subjects: Sequence[Form], answer: str, shared: Sequence[str], config: NgramConfig) -> tuple[list[str], list[str]]:
    """The subject's names to look for near the answer.  A name written as in the source
    language still counts when the answer is this language's own word (`David Coulthard` near
    `Écosse`); only a pair the source language shares whole says nothing about this language."""
    candidates = [form.text for form in subjects[: config.max_forms] if answer not in form.text]
    answer_shared = _shared(answer, shared)
    kept = [a for a in candidates if not (answer_shared and _shared(a, shared))]
    return kept, [a for a in candidates if a not in kept]


def _record(hit: DocumentHit) -> dict[str, Any]:
    return {
        "document": hit.document, "metadata": hit.metadata, "language": hit.language, "offset": hit.offset, "length": hit.length,
        "snippet": hit.snippet, "snippet_match": [hit.snippet_match_start, hit.snippet_match_end],
    }


def _same_language(document: str | None, lang: str) -> bool:
    return document is None or document.split("-")[0] == lang.split("-")[0]


def in_language(corpus: Corpus, documents: dict[int, tuple[Occurrence, str]], lang: str, config: NgramConfig) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Figures that put each document in its language: the same pair in a document of another
    language (a name spelt alike in French and English) is no evidence for this one.  A
    document whose metadata records no language counts for every language.  Provenance shows
    this language's documents first."""
    hits = [corpus.document_hit(occurrence, len(rare.encode("utf-8")), config.snippet_chars) for occurrence, rare in documents.values()]
    mine = [hit for hit in hits if _same_language(hit.language, lang)]
    others = [hit for hit in hits if not _same_language(hit.language, lang)]
    figures = {"documents": len(hits), "documents_in_language": len(mine), "documents_other_language": len(others)}
    return figures, [_record(hit) for hit in (mine + others)[: config.provenance_docs]]


def cooccurrence_evidence(
    corpus: Corpus, occurrences: Occurrences, field: str, lang: str, answer: Form, anchors: Sequence[str], set_aside: Sequence[str], config: NgramConfig
) -> Evidence:
    """Does the answer occur near an anchor (a distinctive piece of the question, the title, the
    subject's name) in one document, and in one of this language?  Co-occurrence within a
    window is WIMBD's "paired" contamination: the relation seen without either text verbatim."""
    answer_count = occurrences(answer.text)[0] if anchors else corpus.count(answer.text)
    figures: dict[str, Any] = {
        "form": answer.label,
        "answer": answer.text,
        "answer_count": answer_count,
        "window_bytes": config.cooccurrence_window_bytes,
        "anchors": [],
        "anchors_shared_with_source": list(set_aside),
    }
    documents: dict[int, tuple[Occurrence, str]] = {}
    for anchor in anchors:
        found = nearby(corpus, occurrences, (anchor, answer.text), config.cooccurrence_window_bytes)
        figures["anchors"].append({"text": anchor, "count": found.counts[0], "documents": len(found.documents), "exhaustive": found.exhaustive})
        for document, hit in found.documents.items():
            documents.setdefault(document, hit)
    counted, provenance = in_language(corpus, documents, lang, config)
    figures.update(counted, exhaustive=all(a["exhaustive"] for a in figures["anchors"]))
    return Evidence(signal=NAME, source=corpus.info.name, field=field, figures=figures, provenance=provenance)


def options_evidence(corpus: Corpus, occurrences: Occurrences, lang: str, options: Sequence[Form], shared: Sequence[str], config: NgramConfig) -> Evidence:
    """Do all the options of a multiple-choice item stand near each other in one document (a
    copy of the item's choices, whatever their order)?  Options the source language shares
    whole say nothing about this language, so they are not looked up."""
    texts = list(dict.fromkeys(form.text for form in options))
    figures: dict[str, Any] = {"options": len(texts), "window_bytes": config.cooccurrence_window_bytes}
    if all(_shared(text, shared) for text in texts):
        figures.update(documents=0, documents_in_language=0, documents_other_language=0, shared_with_source=True, exhaustive=True)
        return Evidence(signal=NAME, source=corpus.info.name, field=forms.OPTIONS, figures=figures)
    found = nearby(corpus, occurrences, texts, config.cooccurrence_window_bytes)
    counted, provenance = in_language(corpus, found.documents, lang, config)
    figures.update(option_counts=list(found.counts), **counted, exhaustive=found.exhaustive)
    return Evidence(signal=NAME, source=corpus.info.name, field=forms.OPTIONS, figures=figures, provenance=provenance)


_CORPUS_ERRORS = (OSError, RuntimeError, ValueError)


def _failed(corpus: Corpus, field: str, error: Exception, form: Form | None = None) -> Evidence:
    figures = {"form": form.label} if form is not None else {}
    return Evidence(signal=NAME, source=corpus.info.name, field=field, status=FAILED, figures=figures, error=str(error))


def text_evidence(
    corpus: Corpus, checked: Checked, config: NgramConfig, rules: Sequence[Rule], budget: Budget, shared: Sequence[str]
) -> tuple[list[Evidence], FieldMatch | None]:
    """Evidence for each form of one field (up to `max_forms`), and the first form's match.  A
    field checked in several forms names each form and carries its text."""
    if not checked.forms:
        return [Evidence(signal=NAME, source=corpus.info.name, field=checked.field, status=ABSENT)], None
    results, first = [], None
    labelled = checked.field in forms.FORM_FIELDS
    for form in checked.forms[: config.max_forms]:
        try:
            evidence, match = field_evidence(corpus, checked.field, form.text, config, rules, budget, shared)
        except _CORPUS_ERRORS as error:
            results.append(_failed(corpus, checked.field, error, form if labelled else None))
            continue
        if labelled:
            evidence.figures.update(form=form.label, text=form.text, forms=len(checked.forms))
            if len(checked.forms) > config.max_forms:
                evidence.figures["forms_unchecked"] = len(checked.forms) - config.max_forms
        first = first or match
        results.append(evidence)
    return results, first


def pair_evidence(corpus: Corpus, item: Item, lang: str, question: FieldMatch | None, shared: Sequence[str], config: NgramConfig) -> list[Evidence]:
    """The pair check of the item's kind: question and answer, subject and answer, or all the
    options; one evidence per answer form (up to `max_forms`)."""
    variant = item.variants[lang]
    field = forms.PAIR_FIELD[item.kind]
    occurrences = Occurrences(corpus, config.max_occurrences)
    answers = forms.answers(variant)[: config.max_forms]
    subjects = forms.subjects(variant)
    if item.kind is ItemKind.MULTIPLE_CHOICE:
        options = forms.option_forms(variant)
        if len(options) < 2:
            return [Evidence(signal=NAME, source=corpus.info.name, field=field, status=ABSENT)]
        try:
            return [options_evidence(corpus, occurrences, lang, options, shared, config)]
        except _CORPUS_ERRORS as error:
            return [_failed(corpus, field, error)]
    if not answers or (question is None if item.kind is ItemKind.OPEN else not subjects):
        return [Evidence(signal=NAME, source=corpus.info.name, field=field, status=ABSENT)]
    results = []
    for answer in answers:
        if item.kind is ItemKind.OPEN:
            anchors, set_aside = question_anchors(question, variant.text("title"), answer.text, shared, config)
        else:
            anchors, set_aside = subject_anchors(subjects, answer.text, shared, config)
        try:
            results.append(cooccurrence_evidence(corpus, occurrences, field, lang, answer, anchors, set_aside, config))
        except _CORPUS_ERRORS as error:
            results.append(_failed(corpus, field, error, answer))
    return results


def fields_for(item: Item) -> tuple[str, ...]:
    return (*forms.TEXT_FIELDS[item.kind], forms.PAIR_FIELD[item.kind])


def run(corpus: Corpus, item: Item, lang: str, config: NgramConfig, rules: Mapping[str, Sequence[Rule]] | None = None) -> list[Evidence]:
    """All n-gram evidence for one language variant of an item, over the fields its kind checks;
    a field the variant lacks is recorded as absent, and a corpus failure as failed, never as
    "not found".  `rules` are the policy's rules on this signal's fields for this corpus; the
    variant's fields share one budget of count queries where the corpus must derive matches
    from counts."""
    results: list[Evidence] = []
    matches: dict[str, FieldMatch | None] = {}
    budget = Budget()
    shared = forms.source_texts(item, lang)
    for checked in forms.text_fields(item, lang):
        found, matches[checked.field] = text_evidence(corpus, checked, config, (rules or {}).get(checked.field, ()), budget, shared)
        results += found
    return results + pair_evidence(corpus, item, lang, matches.get(forms.QUESTION), shared, config)
