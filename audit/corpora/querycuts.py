"""Where a query about a text may start and end on an infini-gram index, and how far one query
reaches within the server's limits."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from audit.text import UNSEGMENTED_SCRIPTS, script_of


def query_cut(text: str, i: int, byte_level: bool) -> bool:
    """Where a token-level query can start or end: at a space (a query then starts with the
    space, as the word's first token does in the corpus, and ends before it), or either side of
    a character of a script written without spaces.  Not after a space, nor at punctuation
    inside a run of text: a tokenizer cuts such a piece differently from the same characters in
    context (a word after `(` gains the word-start marker), so its absence would say nothing
    about the longer strings holding it.  Anywhere on a byte-level index."""
    if byte_level or i == 0 or i == len(text):
        return True
    before, here = text[i - 1], text[i]
    if before.isspace():
        return False
    return here.isspace() or bool(UNSEGMENTED_SCRIPTS & {script_of(before), script_of(here)})


def query_reaches(text: str, max_bytes: int, max_chars: int) -> list[int]:
    """For each start, the furthest end a single query may reach (the query limits)."""
    widths = np.fromiter((len(c.encode("utf-8")) for c in text), dtype=np.int64, count=len(text))
    prefix = np.concatenate(([0], np.cumsum(widths)))
    by_bytes = np.searchsorted(prefix, prefix[:-1] + max_bytes, side="right") - 1
    by_chars = np.arange(len(text)) + max_chars
    return np.minimum(np.minimum(by_bytes, by_chars), len(text)).tolist()


def query_pieces(text: str, start: int, max_bytes: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """Consecutive (start, end) character ranges of text[start:], each within the limits."""
    while start < len(text):
        end, size = start, 0
        while end < len(text) and end - start < max_chars:
            width = len(text[end].encode("utf-8"))
            if size + width > max_bytes:
                break
            size += width
            end += 1
        yield start, max(end, start + 1)
        start = max(end, start + 1)
