"""Which documents an n-gram figure counts: those of the field's language.

A variant in language L is judged on matches in documents of L (and of unknown language when
`[ngram] unknown_language = "count"`, flagged); the same figures over every document are kept
beside them (`any_language`), with the languages of the documents that hold the field's
matches (`languages`): for cross-lingual transfer "seen in English only" is the premise.

A corpus with a per-document language table answers restricted queries itself (`table`).  One
without (an API corpus, an index built before tables) answers every document: its text
figures are flagged `unavailable`, and its pair checks put each matched document in the
language its metadata records (`metadata`).

Each provenance entry names its document's language and how it was known.  A Wikipedia page
quotes other languages, so where the match's script is not one the document's language is
written in, the window around the match is identified instead (`window`): a Portuguese page
quoting a Russian sentence holds it for Russian, and a text field's figures count it so.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import cast

import numpy as np

from audit.corpora.base import Corpus, LanguageBy, Sampled, UnknownLanguage, document_language, in_language
from audit.corpora.inlanguage import LanguageView
from audit.evidence import Json
from audit.index.doclangs import UNKNOWN
from audit.langid import identify
from audit.quotes import written_in
from audit.text import dominant_script

# Documents of another language whose window around a match too short to identify is read, per
# field, and the characters either side of the match read for it.
MAX_WINDOWS = 20
WINDOW_CHARS = 80
# The views with a match's quoting documents let in, kept per base view (by language, match and
# sample): a benchmark built from templates meets the same match item after item, and each
# time read and identified the same windows.
QUOTES_KEPT = 4096
# The figures a rule may name, as `any_language` repeats them over every document.
RULE_FIGURES = ("exact_count", "coverage", "longest_match_chars", "longest_match_fraction", "documents", "documents_in_language")
def same_language(document: str, lang: str) -> bool:
    return document.split("-")[0] == lang.split("-")[0]


@dataclass(frozen=True)
class Scope:
    """One field's language and the corpus seen through it: `view` counts only documents of
    `lang` where the corpus can restrict itself (`by` = table), else it is `corpus` itself."""

    lang: str
    corpus: Corpus
    view: Corpus
    by: LanguageBy
    unknown: UnknownLanguage

    @classmethod
    def of(cls, corpus: Corpus, lang: str, unknown: UnknownLanguage) -> Scope:
        view, by = in_language(corpus, frozenset({lang}), unknown)
        return cls(lang, corpus, view, by, unknown)

    @property
    def restricted(self) -> bool:
        return self.by is LanguageBy.TABLE

    def document_language(self, document: int, metadata: dict[str, Json]) -> tuple[str, str]:
        """(language, how known) of a matched document: the table's, else its metadata's."""
        if self.restricted:
            return self.view.document_language(document)
        found = document_language(metadata)
        return (found, "metadata") if found else (UNKNOWN, "unknown")

    def counts(self, language: str) -> bool:
        """Whether a document of `language` counts for this field."""
        return same_language(language, self.lang) or (language == UNKNOWN and self.unknown is UnknownLanguage.COUNT)

    def figure(self, unknown_documents: int, by: LanguageBy | None = None) -> dict[str, Json]:
        return {"lang": self.lang, "by": str(by or self.by), "unknown_language": str(self.unknown), "unknown_documents": unknown_documents}

    def label(self, entry: dict[str, Json]) -> dict[str, Json]:
        """A provenance entry with its document's language and how it was known."""
        language, how = self.document_language(entry["document"], entry.get("metadata") or {})
        if entry["document"] in getattr(self.view, "let_in", frozenset()):
            entry.update(language=self.lang, language_by="window")
            return entry
        start, end = entry.get("snippet_match", (0, 0))
        match = entry.get("snippet", "")[start:end]
        expected = written_in(language) if language != UNKNOWN else None
        if expected and dominant_script(match) not in expected | {"other"}:
            found = _identify(match) or _identify(entry.get("snippet", ""))
            if found is not None:
                language, how = found, "window"
        entry.update(language=language, language_by=how)
        return entry

    def languages_of(self, documents: Iterable[int] | np.ndarray) -> dict[str, int]:
        """Documents by language, from the table (a corpus without one knows only the
        documents it has fetched: see `languages_of_entries`); a document let in by its
        window counts as this language."""
        if not self.restricted:
            return {}
        view = cast(LanguageView, self.view)
        distinct = set(documents.tolist() if isinstance(documents, np.ndarray) else documents)
        names, codes, let_in = view.table.languages, view.table.codes, view.let_in
        # A field's sample is a few documents, asked of every field: counted in a dict, since
        # a Counter and a sorted fancy index took twice as long (4.5 against 2.6 µs a call).
        found: dict[str, int] = {}
        if let_in:
            for document in distinct:
                name = self.lang if document in let_in else names[codes[document]]
                found[name] = found.get(name, 0) + 1
        else:
            for code in codes[np.fromiter(distinct, dtype=np.int64, count=len(distinct))].tolist():
                found[names[code]] = found.get(names[code], 0) + 1
        return dict(sorted(found.items()))

    def sample(self, text: str, limit: int) -> Sampled:
        """Up to `limit` places `text` occurs in any document, spread evenly (a restricted
        scope's index answers as arrays)."""
        return cast(LanguageView, self.view).index.occurrence_arrays(text, limit)[1] if text else Sampled.none()

    def quoting(self, text: str, occurrences: Sampled) -> Scope:
        """This scope with the documents of another language that quote `text` in this one let
        in: where the match's script is not one the document's language is written in (a
        Russian sentence in a Portuguese page) and the window around it is identified as this
        language (the match itself when it is long enough to identify, else the window around
        it, read in at most `MAX_WINDOWS` documents)."""
        script, mine = dominant_script(text), written_in(self.lang)
        if not self.restricted or script == "other" or (mine is not None and script not in mine):
            return self
        view = cast(LanguageView, self.view)
        documents = occurrences.documents
        foreign = view.table.flags(("quoting", self.lang, script), partial(_foreign, lang=self.lang, script=script))
        # The sample is in document order: each document once, the lowest first.
        candidates = list(dict.fromkeys(documents[foreign[view.table.codes[documents]]].tolist()))
        if not candidates:
            return self
        # Only a match some foreign page holds is kept: the rest cost less to work out than to keep.
        key = (self.lang, text, MAX_WINDOWS, _digest(occurrences))
        kept = view.quoted.get(key)
        if kept is None:
            if len(view.quoted) >= QUOTES_KEPT:
                view.quoted.clear()
            found = self._quoting_documents(text, occurrences, candidates)
            kept = view.quoted[key] = view.with_documents(found) if found else view
        return self if kept is view else replace(self, view=kept)

    def _quoting_documents(self, text: str, occurrences: Sampled, candidates: list[int]) -> frozenset[int]:
        """The candidate documents (of other languages, in the sample) whose use of `text` reads as this language."""
        identified = _identify(text)
        if identified is not None:
            return frozenset(candidates) if same_language(identified, self.lang) else frozenset()
        return frozenset(document for document in candidates[:MAX_WINDOWS] if self._window_is_mine(text, occurrences, document))

    def _window_is_mine(self, text: str, occurrences: Sampled, document: int) -> bool:
        """Whether the window around `text`'s first occurrence in `document` reads as this language."""
        hit = self.corpus.document_hit(occurrences.first_in(document), len(text.encode("utf-8")), WINDOW_CHARS)
        identified = _identify(hit.snippet)
        return identified is not None and same_language(identified, self.lang)


def _digest(occurrences: Sampled) -> bytes:
    """A sample's places in 16 bytes: a key that holds the sample itself would keep up to
    `max_occurrences` places per match in every worker (36 MB more on BMLAMA-17)."""
    digest = hashlib.blake2b(np.asarray(occurrences.documents, dtype=np.int64).tobytes(), digest_size=16)
    digest.update(np.asarray(occurrences.offsets, dtype=np.int64).tobytes())
    return digest.digest()


def _foreign(language: str, lang: str, script: str) -> bool:
    """Whether a document of `language` holding text in `script` may be quoting `lang`:
    another language, not written in that script."""
    expected = written_in(language) if language != UNKNOWN else None
    return not same_language(language, lang) and bool(expected) and script not in expected


def languages_of_entries(entries: list[dict[str, Json]]) -> dict[str, int]:
    seen = {entry["document"]: entry.get("language") or UNKNOWN for entry in entries}
    return dict(sorted(Counter(seen.values()).items()))


@lru_cache(maxsize=1 << 14)
def _identify(text: str) -> str | None:
    """The language of a window, by `audit.langid` (its model is loaded only when a page
    quoting another script is first met).  Kept: a short benchmark's fields share their
    matches (a name, a date), and each was identified again for every field."""
    found = identify(text)
    return found.lang if found is not None else None


def any_language(figures: dict[str, Json]) -> dict[str, Json]:
    """The rule figures of evidence counted over every document, with their bounds."""
    kept = {name: figures[name] for name in RULE_FIGURES if name in figures}
    bounds = {name: value for name, value in figures.get("bounds", {}).items() if name in RULE_FIGURES}
    if bounds:
        kept["bounds"] = bounds
    return kept
