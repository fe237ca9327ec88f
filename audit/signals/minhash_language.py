"""Near-duplicate evidence per language: which documents count for a field, and how their
languages are reported.

A field of a variant in language L counts only documents of L (the index's per-document table,
`LocalIndex.languages`), plus documents of unknown language when `[minhash] unknown_language`
is "count" (the default; they are counted and flagged in `figures.language.unknown_documents`).
Documents of other languages are kept apart: `figures.any_language` has the figures over every
document, `figures.languages` the languages of the documents that reach the threshold.
Languages compare on their primary subtag, so `zh-Hans` counts `zh` documents.
"""
from __future__ import annotations

import contextlib
import functools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from audit.corpora.base import UnknownLanguage
from audit.corpora.local import LocalIndex
from audit.evidence import Json
from audit.index.doclangs import UNKNOWN, DocumentLanguages, How
from audit.langcodes import normalise_lang
from audit.neardup import Match
from audit.quotes import quoted_language

HOW_NAMES = {How.NONE: "unknown", How.METADATA: "metadata", How.SOURCE: "source", How.IDENTIFIED: "identified"}


@functools.lru_cache(maxsize=1024)
def primary(lang: str) -> str:
    """The primary subtag of a language, normalised where it can be."""
    with contextlib.suppress(ValueError):
        lang = normalise_lang(lang)
    return lang.split("-", 1)[0].lower()


@dataclass
class DocumentFilter:
    """Which documents count for a field written in `lang`."""

    lang: str
    table: DocumentLanguages | None
    unknown: UnknownLanguage
    quoting: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, corpus: LocalIndex, lang: str, unknown: UnknownLanguage) -> DocumentFilter:
        return cls(lang, getattr(corpus, "languages", None), unknown)

    def language(self, document: int) -> str:
        return self.table.language(document) if self.table is not None else UNKNOWN

    def known_by(self, document: int) -> str:
        return HOW_NAMES[self.table.known_by(document)] if self.table is not None else HOW_NAMES[How.NONE]

    def counts(self, document: int) -> bool:
        """Whether a match in this document counts for the field's language."""
        language = self.language(document)
        if language == UNKNOWN:
            return self.unknown is UnknownLanguage.COUNT or self.table is None
        return primary(language) == primary(self.lang)

    __call__ = counts

    def many(self, documents: np.ndarray) -> np.ndarray:
        """`counts` of each of an array of documents, through the table's per-language flags
        (worked out once per field language), as a near-duplicate query asks them."""
        if self.table is None:
            return np.ones(len(documents), dtype=bool)
        own, count_unknown = primary(self.lang), self.unknown is UnknownLanguage.COUNT
        flags = self.table.flags(("minhash", own, count_unknown), lambda name: count_unknown if name == UNKNOWN else primary(name) == own)
        return flags[self.table.codes[documents]]

    def describe(self, counted: list[Match]) -> dict[str, Json]:
        """`figures.language`: how documents were put in languages, and how many of those that
        counted were of unknown language."""
        return {
            "lang": self.lang,
            "by": "table" if self.table is not None else "unavailable",
            "unknown_language": str(self.unknown),
            "unknown_documents": sum(1 for m in counted if self.language(m.document) == UNKNOWN),
        }

    def languages(self, reaching: list[Match]) -> dict[str, int]:
        """`figures.languages`: the documents that reach the threshold, by language."""
        return dict(sorted(Counter(self.lang if m.document in self.quoting else self.language(m.document) for m in reaching).items()))

    def provenance_language(self, document: int) -> dict[str, str]:
        if document in self.quoting:
            return {"language": self.lang, "language_by": "window"}
        return {"language": self.language(document), "language_by": self.known_by(document)}

    def quotes(self, document: int, window: str) -> bool:
        """Whether a document of another language holds the field's text as a quotation in
        the field's language (`audit.quotes`): its match then counts, labelled `window`."""
        language = self.language(document)
        if self.table is None or language == UNKNOWN or primary(language) == primary(self.lang):
            return False
        found = quoted_language(window, language)
        if found is None or primary(found) != primary(self.lang):
            return False
        self.quoting.add(document)
        return True
