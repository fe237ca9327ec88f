"""How the near-duplicate signal folds a text and writes its shingles, stated in plain Python:
the reference its compiled passes (`audit/_neardup*.c`) are compared with."""
from __future__ import annotations

import unicodedata

import numpy as np

from audit.neardup.tokens import Tokens


def folded(text: str) -> str:
    """The text with each character of a word, or of a script whose characters are tokens by
    themselves, replaced by its case fold where that is one code point (simple folding: the
    text keeps its length, so token offsets stay valid); separators are kept as they are."""
    return "".join(map(_folded_char, text))


def _folded_char(char: str) -> str:
    category = unicodedata.category(char)
    if category[0] in "PSZ" or category == "Cc":
        return char
    fold = char.casefold()
    return fold if len(fold) == 1 else char


def shingle_strings(fold: str, tokens: Tokens, sizes: np.ndarray, at: np.ndarray) -> list[str]:
    """The text of the shingles starting at tokens `at` of a text whose `folded` form is
    `fold`: their tokens, case-folded, one space between them (what verification compares)."""
    starts, ends, scripts = tokens.starts.tolist(), tokens.ends.tolist(), tokens.scripts.tolist()
    return [" ".join(fold[starts[j] : ends[j]] for j in range(i, i + int(sizes[scripts[i]]))) for i in np.asarray(at).tolist()]
