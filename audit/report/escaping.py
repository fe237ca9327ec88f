"""Values from an audit as HTML text, for the parts of a page written in Python.

The result is byte for byte what markupsafe's `escape` (the templates' autoescaping) gives:
the same five characters replaced by the same entities.  It costs a fraction as much: a page
of BMLAMA-17 escapes some two thousand values, most of them the same few names (languages,
signals, fields, sources, tags) over and over, and `escape` builds a `Markup` through two
Python calls for each.  Short strings are kept once escaped; long ones (snippets, texts)
rarely repeat and are escaped each time.
"""
from __future__ import annotations

from functools import lru_cache

from markupsafe import escape

from audit.records import Json

# Strings up to this long are kept once escaped, in a cache of at most NAMES of them: the names
# a page repeats fit; a cache of 16,384 strings up to 100 long held 10 MiB more across a
# BMLAMA-17 report's processes and rendered no faster.
SHORT = 40
NAMES = 1024


def _replaced(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;").replace('"', "&#34;")


_name = lru_cache(maxsize=NAMES)(_replaced)


def html_text(value: Json) -> str:
    """`value` as `{{ value }}` shows it in an autoescaped template."""
    kind = type(value)
    if kind is str:
        return _name(value) if len(value) <= SHORT else _replaced(value)
    if kind is int:
        return str(value)
    return escape(value)
