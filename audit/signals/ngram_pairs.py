"""The n-gram signal's pair checks: an answer near a distinctive piece of its question (or near
the title, or the subject's name), and all the options of a multiple-choice item near each
other, counted in documents of the variant's language (`ngram_language`).

Co-occurrence within a window is WIMBD's "paired" contamination: the relation seen without
either text verbatim.  An anchor must be distinctive: one the corpus holds more than
`anchor_max_count` times (a phrase such as "what is the") is set aside, since an answer stands
near it somewhere by chance.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from audit import forms
from audit.corpora.base import Corpus, LanguageBy, Occurrence
from audit.evidence import Evidence, Json
from audit.forms import Form
from audit.index.doclangs import UNKNOWN
from audit.signals.ngram_language import Scope, languages_of_entries
from audit.signals.ngram_match import FieldMatch
from audit.signals.ngram_spec import NAME, NgramConfig
from audit.text import dominant_script, normalize, unit_count

SORTED_HITS = 10


class Occurrences:
    """Each string's count and first occurrences, asked once per variant: the pair checks of
    several answer forms share their anchors."""

    def __init__(self, corpus: Corpus, limit: int) -> None:
        self.corpus, self.limit = corpus, limit
        self.found: dict[str, tuple[int, Sequence[Occurrence]]] = {}

    def __call__(self, text: str) -> tuple[int, Sequence[Occurrence]]:
        if text not in self.found:
            self.found[text] = self.corpus.occurrences(text, self.limit)
        return self.found[text]


def _near(corpus: Corpus, rare: str, rare_hits: Sequence[Occurrence], others: Sequence[str], window: int) -> list[Occurrence]:
    """Occurrences of `rare` that have every one of `others` within `window` bytes in the same
    document."""
    needles = [other.encode("utf-8") for other in others]
    width = len(rare.encode("utf-8"))
    reach = window + max(map(len, needles))
    many = getattr(corpus, "surroundings", None)
    texts = many(rare_hits, reach, width + reach) if many is not None else [corpus.surrounding(o, reach, width + reach) for o in rare_hits]
    return [rare_hits[i] for i, text in enumerate(texts) if all(needle in text for needle in needles)]


@dataclass(frozen=True)
class Nearby:
    """Documents where a group of strings stand near each other: found from the occurrences
    of the rarest, which is `exhaustive` when all of them were examined."""

    counts: tuple[int, ...]
    documents: dict[int, tuple[Occurrence, str]]
    exhaustive: bool


def nearby(corpus: Corpus, occurrences: Occurrences, strings: Sequence[str], window: int) -> Nearby:
    """The documents where `strings` stand within `window` bytes of each other: from one query
    where the corpus answers it (`near_documents`, the infini-gram API's CNF queries), else
    from the documents of the rarest string's occurrences."""
    counts = tuple(occurrences(text)[0] for text in strings)
    if not all(counts):
        return Nearby(counts, {}, True)
    joint = getattr(corpus, "near_documents", None)
    found = joint(strings, counts, window, occurrences.limit) if joint is not None else None
    if found is not None:
        return Nearby(counts, *found)
    rarest = min(range(len(strings)), key=counts.__getitem__)
    rare, hits = strings[rarest], occurrences(strings[rarest])[1]
    near = _near(corpus, rare, hits, [text for i, text in enumerate(strings) if i != rarest], window)
    if len(hits) <= SORTED_HITS:
        # Every hit was read: in document order, as a local index gives a few hits.
        near.sort(key=lambda o: (o.document, o.offset))
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
    candidates = [span for span in spans if unit_count(span) >= min(size, unit_count(question.text))]
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


@dataclass
class Lookups:
    """The occurrences a variant's pair checks ask, once per corpus: every document, and (where
    the corpus can restrict itself) the field language's documents only."""

    scope: Scope
    everywhere: Occurrences
    mine: Occurrences | None

    @classmethod
    def of(cls, scope: Scope, limit: int) -> Lookups:
        return cls(scope, Occurrences(scope.corpus, limit), Occurrences(scope.view, limit) if scope.restricted else None)


def _entry(scope: Scope, corpus: Corpus, occurrence: Occurrence, rare: str, config: NgramConfig) -> dict[str, Json]:
    hit = corpus.document_hit(occurrence, len(rare.encode("utf-8")), config.snippet_chars)
    entry = {
        "document": hit.document, "metadata": hit.metadata, "offset": hit.offset, "length": hit.length,
        "snippet": hit.snippet, "snippet_match": [hit.snippet_match_start, hit.snippet_match_end],
    }
    return scope.label(entry)


def counted(lookups: Lookups, everywhere: dict[int, tuple[Occurrence, str]], mine: dict[int, tuple[Occurrence, str]] | None, config: NgramConfig) -> tuple[dict[str, Json], list[dict[str, Json]]]:
    """The pair's documents of the field's language, and the same over every document: from the
    table where the corpus has one, else from each document's metadata (a document recording
    none is of unknown language).  A pair is names and a short answer, so the page's language
    decides, not the script of the names (a Russian page giving a name's Greek spelling says
    nothing of Greek text); the provenance entries still name a quoted window's language.
    Provenance shows this language's documents first."""
    scope = lookups.scope
    if mine is not None:
        languages = scope.languages_of([*everywhere, *mine])
        allowed = set(mine)
        unknown = sum(1 for d in allowed if scope.document_language(d, {})[0] == UNKNOWN)
        shown = [(d, hit) for d, hit in mine.items()][: config.provenance_docs]
        others = [(d, hit) for d, hit in everywhere.items() if d not in allowed][: max(0, config.provenance_docs - len(shown))]
        entries = [_entry(scope, scope.corpus, o, rare, config) for _, (o, rare) in shown + others]
        by = LanguageBy.TABLE
    else:
        entries = [_entry(scope, scope.corpus, o, rare, config) for o, rare in everywhere.values()]
        pages = {e["document"]: scope.document_language(e["document"], e["metadata"] or {})[0] for e in entries}
        languages = languages_of_entries([{"document": d, "language": language} for d, language in pages.items()])
        entries.sort(key=lambda e: not scope.counts(pages[e["document"]]))
        allowed = {d for d, language in pages.items() if scope.counts(language)}
        unknown = sum(1 for d in allowed if pages[d] == UNKNOWN)
        entries = entries[: config.provenance_docs]
        by = LanguageBy.METADATA
    total = len(set(everywhere) | allowed)
    figures = {
        "documents": len(allowed), "documents_in_language": len(allowed), "documents_other_language": total - len(allowed),
        "any_language": {"documents": total, "documents_in_language": total}, "languages": languages, "language": scope.figure(unknown, by),
    }
    return figures, entries


def _pair_documents(lookups: Lookups, strings: Sequence[str], window: int) -> tuple[Nearby, Nearby | None]:
    everywhere = nearby(lookups.scope.corpus, lookups.everywhere, strings, window)
    mine = nearby(lookups.scope.view, lookups.mine, strings, window) if lookups.mine is not None else None
    return everywhere, mine


def cooccurrence_evidence(lookups: Lookups, field: str, answer: Form, anchors: Sequence[str], set_aside: Sequence[str], config: NgramConfig) -> Evidence:
    """Does the answer occur near an anchor (a distinctive piece of the question, the title, the
    subject's name) in one document of this language, and in one of any language?"""
    corpus = lookups.scope.corpus
    answer_count = lookups.everywhere(answer.text)[0] if anchors else corpus.count(answer.text)
    figures: dict[str, Json] = {
        "form": answer.label,
        "answer": answer.text,
        "answer_count": answer_count,
        "window_bytes": config.cooccurrence_window_bytes,
        "anchors": [],
        "anchors_shared_with_source": list(set_aside),
    }
    everywhere: dict[int, tuple[Occurrence, str]] = {}
    mine: dict[int, tuple[Occurrence, str]] | None = {} if lookups.mine is not None else None
    exhaustive = True
    for anchor in anchors:
        if lookups.everywhere(anchor)[0] > config.anchor_max_count:
            figures["anchors"].append({"text": anchor, "count": lookups.everywhere(anchor)[0], "common": True})
            continue
        found, found_mine = _pair_documents(lookups, (anchor, answer.text), config.cooccurrence_window_bytes)
        figures["anchors"].append({"text": anchor, "count": found.counts[0], "documents": len(found.documents), "exhaustive": found.exhaustive})
        exhaustive = exhaustive and found.exhaustive and (found_mine is None or found_mine.exhaustive)
        for document, hit in found.documents.items():
            everywhere.setdefault(document, hit)
        if found_mine is not None and mine is not None:
            for document, hit in found_mine.documents.items():
                mine.setdefault(document, hit)
    numbers, provenance = counted(lookups, everywhere, mine, config)
    figures.update(numbers, exhaustive=exhaustive)
    return Evidence(signal=NAME, source=corpus.info.name, field=field, figures=figures, provenance=provenance)


def options_evidence(lookups: Lookups, options: Sequence[Form], shared: Sequence[str], config: NgramConfig) -> Evidence:
    """Do all the options of a multiple-choice item stand near each other in one document (a
    copy of the item's choices, whatever their order)?  Options the source language shares
    whole say nothing about this language, so they are not looked up."""
    corpus = lookups.scope.corpus
    texts = list(dict.fromkeys(form.text for form in options))
    figures: dict[str, Json] = {"options": len(texts), "window_bytes": config.cooccurrence_window_bytes}
    if all(_shared(text, shared) for text in texts):
        numbers, _ = counted(lookups, {}, {} if lookups.mine is not None else None, config)
        figures.update(numbers, shared_with_source=True, exhaustive=True)
        return Evidence(signal=NAME, source=corpus.info.name, field=forms.OPTIONS, figures=figures)
    found, found_mine = _pair_documents(lookups, texts, config.cooccurrence_window_bytes)
    numbers, provenance = counted(lookups, found.documents, found_mine.documents if found_mine is not None else None, config)
    exhaustive = found.exhaustive and (found_mine is None or found_mine.exhaustive)
    figures.update(option_counts=list(found.counts), **numbers, exhaustive=exhaustive)
    return Evidence(signal=NAME, source=corpus.info.name, field=forms.OPTIONS, figures=figures, provenance=provenance)
