"""The n-gram signal: exact counts, longest matches, window coverage and question-answer
co-occurrence of an item's text in a corpus, with the documents behind the strongest matches.

Everything is derived from two corpus operations: `match_lengths` (the longest match starting
at each character, infini-gram's "creativity") and `occurrences` (`ngram_match`), asked of the
documents of the field's language (`ngram_language`); the pair checks are in `ngram_pairs`.

A backend that can only bound some lengths or counts (a remote API out of requests, or with
capped queries) makes the figures built on them inexact: each figure is then reported at its
lowest, and `figures.bounds` gives its [lowest, highest], so a rule can fire on the lowest or
stay undecided, never read a bound as absence.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from audit import forms
from audit.corpora.base import Budget, Corpus, UnknownLanguage
from audit.evidence import ABSENT, FAILED, Evidence, Json
from audit.forms import Checked, Form
from audit.index.doclangs import UNKNOWN
from audit.items import Item, ItemKind, Variant
from audit.rules import Rule
from audit.signals.ngram_language import Scope, any_language, languages_of_entries
from audit.signals.ngram_match import FieldMatch, FieldText, HeldLengths, _ratio, figure_bounds, questions_for, window_figures, without_shared
from audit.signals.ngram_memo import FieldMemo
from audit.signals.ngram_pairs import Lookups, cooccurrence_evidence, options_evidence, question_anchors, subject_anchors
from audit.signals.ngram_spec import NAME, CooccurrenceRules, CoverageFloors, NgramConfig, Rules, TextRules, WindowSizes, fields_for
from audit.signals.spec import Opening, Runner
from audit.text import UNSEGMENTED_SCRIPTS, normalize, unit_count

__all__ = ["NAME", "CooccurrenceRules", "CoverageFloors", "NgramConfig", "Rules", "TextRules", "WindowSizes", "field_evidence", "fields_for", "open_runner", "run"]


def provenance(corpus: Corpus, span_text: str, span: tuple[int, int], config: NgramConfig) -> tuple[int, list[dict[str, Json]]]:
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


def _floor(figures: dict[str, Json], config: NgramConfig) -> None:
    """Mark coverage as unable to decide when the field has too few windows to carry it."""
    needed = config.coverage_floor.needed(figures["script"])
    if figures["windows"] < needed:
        figures["below_floor"] = ["coverage"]
        figures["floor"] = {"coverage": {"needed": needed, "had": figures["windows"], "unit": "windows"}}


def _never_whole(found: FieldMatch) -> bool:
    """Whether a searched longest match shows that the whole field occurs nowhere: the longest
    match from its first character, at its highest, falls short of the field, so its count is 0
    without a search.  Most fields of a benchmark never occur whole; on BMLAMA-17 counting them
    was an eighth of the signal's time, twice that in a language, where a count reads documents."""
    return bool(found.lengths) and found.most(0) < len(found.text)


def measure(
    corpus: Corpus, field: FieldText, config: NgramConfig, rules: Sequence[Rule], budget: Budget, sourced: bool = True, held: HeldLengths | None = None
) -> tuple[Evidence, FieldMatch]:
    """One normalised field's figures over whatever documents `corpus` answers for; without
    the documents behind the longest match and the matched spans unless `sourced` (figures
    that only stand beside another count's, as `any_language`, need neither).  `held` lends
    the lengths of a field this one stands in, where `corpus` searches them exactly."""
    text, script, size, shared = field.text, field.script, field.size, field.shared
    asked_before = budget.asked
    # A backend that searches its longest matches (`exact_lengths`) has no use for the questions.
    exact = getattr(corpus, "exact_lengths", False)
    if exact:
        found = FieldMatch.of(text, held.match_lengths(corpus, text) if held is not None else corpus.match_lengths(text))
    else:
        found = FieldMatch.of(text, corpus.match_lengths(text, questions_for(rules, text, size, budget)))
    match = found if shared is None else without_shared(found, shared)
    start, length = match.longest
    counts = (0, 0) if field.whole or (exact and _never_whole(found)) else corpus.count_range(text)
    coverage, undecided_windows, coverage_range = window_figures(found, size, shared)
    figures: dict[str, Json] = {
        "chars": len(text),
        "units": unit_count(text),
        "script": script,
        "exact_count": counts[0],
        "longest_match_chars": length,
        "longest_match_fraction": _ratio(length, len(text)),
        "longest_match_start": start,
        "window_unit": "char" if script in UNSEGMENTED_SCRIPTS else "word",
        "window_size": size,
        **coverage,
    }
    if sourced:
        figures["spans"] = [list(s) for s in found.maximal_spans(config.span_min_chars) if shared is None or shared.unshared(s[0], s[1] - s[0])][: config.max_spans]
    if shared is not None:
        figures["shared_with_source"] = shared.intervals()
        figures["shared_chars"] = sum(shared.chars)
    if field.whole:
        figures["exact_count_set_aside"] = True
    if budget.asked > asked_before:
        figures["count_queries"] = budget.asked - asked_before
    bounds = figure_bounds(match, figures, counts, undecided_windows, coverage_range)
    if bounds:
        figures["bounds"] = bounds
    _floor(figures, config)
    evidence = Evidence(signal=NAME, source=corpus.info.name, field=field.name, figures=figures)
    if sourced and (length >= config.span_min_chars or (length and length == len(text))):
        span = (start, start + found.lengths[start])
        figures["longest_match_count"], evidence.provenance = provenance(corpus, text[span[0] : span[1]], span, config)
    return evidence, found


def field_evidence(
    corpus: Corpus, name: str, raw: str, config: NgramConfig, rules: Sequence[Rule] = (), budget: Budget | None = None, sources: Sequence[str] = (), lang: str | None = None
) -> tuple[Evidence, FieldMatch]:
    """One field's figures, counted in documents of `lang` (the field's language), with the
    same figures over every document in `any_language` and the languages holding its longest
    match in `languages`.  `rules` (this field's, for this corpus) and the variant's `budget`
    reach a backend that derives matches from counts, so it asks only what decides them.
    `sources` are the source-language texts of a target variant: what the field shares with
    them is set aside from every figure and listed as `shared_with_source`.  Returns the match
    over every document: the pair checks' anchors are taken from it."""
    return measured_field(corpus, FieldText.of(name, normalize(raw), lang, sources, config.window_for), config, rules, budget or Budget())


def measured_field(
    corpus: Corpus, field: FieldText, config: NgramConfig, rules: Sequence[Rule], budget: Budget, held: HeldLengths | None = None
) -> tuple[Evidence, FieldMatch]:
    """`field_evidence` of a field whose text, language and sharing are worked out; `held`
    lends the lengths of the variant's fields measured before (`HeldLengths`)."""
    text, lang = field.text, field.lang
    scope = Scope.of(corpus, lang, config.unknown) if lang is not None else None
    everywhere, found = measure(corpus, field, config, rules, budget, sourced=scope is None or not scope.restricted, held=held)
    if scope is None:
        return everywhere, found
    start = everywhere.figures["longest_match_start"]
    longest = text[start : start + found.lengths[start]] if everywhere.figures["longest_match_chars"] else ""
    if scope.restricted:
        sampled = scope.sample(longest, config.max_occurrences)
        scope = scope.quoting(longest, sampled)
        languages = scope.languages_of(sampled.documents)
        evidence = measure(scope.view, field, config, rules, budget, held=held)[0]
        evidence.provenance = [scope.label(entry) for entry in evidence.provenance]
    else:
        evidence = everywhere
        evidence.provenance = [scope.label(entry) for entry in evidence.provenance]
        languages = languages_of_entries(evidence.provenance)
    evidence.figures.update(
        any_language=any_language(everywhere.figures),
        languages=languages,
        language=scope.figure(languages.get(UNKNOWN, 0) if config.unknown is UnknownLanguage.COUNT else 0),
    )
    return evidence, found


_CORPUS_ERRORS = (OSError, RuntimeError, ValueError)


def _failed(corpus: Corpus, field: str, error: Exception, form: Form | None = None) -> Evidence:
    figures = {"form": form.label} if form is not None else {}
    return Evidence(signal=NAME, source=corpus.info.name, field=field, status=FAILED, figures=figures, error=str(error))


def field_language(variant: Variant, field: str, lang: str) -> str:
    """The language a field (or a pair of fields, `question+answer`) is written in: the
    variant's, unless the benchmark gives every part of it another one."""
    found = {variant.language_of(part, lang) for part in field.split("+")}
    return found.pop() if len(found) == 1 else lang


def text_evidence(
    corpus: Corpus,
    checked: Checked,
    config: NgramConfig,
    rules: Sequence[Rule],
    budget: Budget,
    shared: Sequence[str],
    lang: str,
    memo: FieldMemo | None = None,
    held: HeldLengths | None = None,
) -> tuple[list[Evidence], FieldMatch | None]:
    """Evidence for each form of one field (up to `max_forms`), and the first form's match.  A
    field checked in several forms names each form and carries its text.  With a `memo`, a
    form measured before is copied from it; `held` lends the lengths of the variant's fields."""
    if not checked.forms:
        return [Evidence(signal=NAME, source=corpus.info.name, field=checked.field, status=ABSENT)], None
    results, first = [], None
    labelled = checked.field in forms.FORM_FIELDS
    for form in checked.forms[: config.max_forms]:
        try:
            field = FieldText.of(checked.field, normalize(form.text), lang, shared, config.window_for)
            measured = partial(measured_field, corpus, field, config, rules, budget, held)
            evidence, match = measured() if memo is None else memo.measured(field, budget, measured)
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
    lookups = Lookups.of(Scope.of(corpus, field_language(variant, field, lang), config.unknown), config.max_occurrences)
    answers = forms.answers(variant)[: config.max_forms]
    subjects = forms.subjects(variant)
    if item.kind is ItemKind.MULTIPLE_CHOICE:
        options = forms.option_forms(variant)
        if len(options) < 2:
            return [Evidence(signal=NAME, source=corpus.info.name, field=field, status=ABSENT)]
        try:
            return [options_evidence(lookups, options, shared, config)]
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
            results.append(cooccurrence_evidence(lookups, field, answer, anchors, set_aside, config))
        except _CORPUS_ERRORS as error:
            results.append(_failed(corpus, field, error, answer))
    return results


def run(corpus: Corpus, item: Item, lang: str, config: NgramConfig, rules: Mapping[str, Sequence[Rule]] | None = None, memo: FieldMemo | None = None) -> list[Evidence]:
    """All n-gram evidence for one language variant of an item, over the fields its kind checks,
    each counted in documents of its language; a field the variant lacks is recorded as absent,
    and a corpus failure as failed, never as "not found".  `rules` are the policy's rules on
    this signal's fields for this corpus; the variant's fields share one budget of count
    queries where the corpus must derive matches from counts.  `memo` keeps fields measured
    for earlier variants (only for a corpus whose answers depend on the question alone)."""
    results: list[Evidence] = []
    matches: dict[str, FieldMatch | None] = {}
    budget, held = Budget(), HeldLengths()
    shared = forms.source_texts(item, lang)
    variant = item.variants[lang]
    for checked in forms.text_fields(item, lang):
        rules_here = (rules or {}).get(checked.field, ())
        found, matches[checked.field] = text_evidence(corpus, checked, config, rules_here, budget, shared, field_language(variant, checked.field, lang), memo, held)
        results += found
    return results + pair_evidence(corpus, item, lang, matches.get(forms.QUESTION), shared, config)


def open_runner(corpus: Corpus, opening: Opening) -> Runner:
    """Every corpus can be asked for n-grams; the runner asks only what the policy's rules on
    this corpus's evidence need, and measures a repeated field once where the corpus answers
    every asking alike."""
    name = corpus.info.name
    rules = {field: table.for_source(name) for field, table in opening.rules.items()}
    memo = FieldMemo() if getattr(corpus, "answers_repeat", False) else None
    ask = partial(run, corpus, config=opening.config, rules=rules, memo=memo)
    return Runner(NAME, name, fields_for, ask, portable=getattr(corpus, "ships_to_workers", False))
