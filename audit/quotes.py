"""Quotations: text of one language inside a document of another (a Wikipedia page quoting a
Russian sentence).  A document's language comes from its table entry; where a match's script
is not one that language is written in, the match is a quotation and its own language is what
counts, so the window around it is identified.
"""
from __future__ import annotations

from functools import cache

from audit.langcodes import SUPPRESS_SCRIPT
from audit.langid import identify
from audit.text import dominant_script

# `audit.text` script names of the ISO 15924 scripts a language is usually written in.
_SCRIPT_NAMES = {
    "Latn": ("latin",), "Cyrl": ("cyrillic",), "Arab": ("arabic",), "Deva": ("devanagari",), "Hebr": ("hebrew",),
    "Hang": ("hangul", "han"), "Kore": ("hangul", "han"), "Jpan": ("kana", "han"), "Grek": ("greek",), "Thai": ("thai",),
    "Laoo": ("lao",), "Khmr": ("khmer",), "Mymr": ("myanmar",), "Tibt": ("tibetan",),
}
_HAN = {"zh": ("han",), "yue": ("han",), "wuu": ("han",)}


@cache
def written_in(lang: str) -> frozenset[str] | None:
    """The scripts (as `audit.text.script_of` names them) a language is written in; None when
    not known here, and then no window is identified.  Asked for every document a match is
    in, so kept per language."""
    primary = lang.split("-")[0]
    names = _HAN.get(primary) or tuple(name for code in SUPPRESS_SCRIPT.get(primary, ()) for name in _SCRIPT_NAMES.get(code, ()))
    return frozenset(names) or None


def quoted_language(text: str, document_lang: str) -> str | None:
    """The language of `text` (a match and the window around it) found in a document of
    `document_lang`, when its script is not one that language is written in; None when it is,
    when the document's scripts are not known, or when the window cannot be identified."""
    expected = written_in(document_lang)
    if not expected or dominant_script(text) in expected | {"other"}:
        return None
    found = identify(text)
    return found.lang if found else None
