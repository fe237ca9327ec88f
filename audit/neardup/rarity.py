"""Common shingles: those the corpus holds so often that finding one says nothing of a copy.

"What is a molecule?" has two shingles, and "what is a" is in every encyclopaedia; short
Chinese and Japanese questions were `seen` through one 3-character shingle such as `受精卵`
that a thousand pages hold.  A shingle the corpus holds more than a rate per million bytes of
its text (and more than a least count, so a small corpus does not call everything common)
still counts among the field's shingles but is never matched, and does not count towards the
floor a field must reach to decide.  So the cut can only lower a containment: leaving common
shingles out of the field altogether raised a Japanese question's to 0.5 when its unmatched
katakana shingles were the common ones.  A plain cut, not a weight, so containment stays a
share of shingles a reader can count.  The counts come from the corpus's own suffix array (its `casing_counts`, a field's at once), one
search per spelling of the shingle: as written in the field, lower-cased, and capitalised (a
sentence's first words).  Spellings with other punctuation between the tokens are not
counted, so a shingle can only look rarer than it is, never more common.
"""
from __future__ import annotations

from audit.neardup.source import Texts


class CommonShingles:
    """Which of a field's shingles the corpus holds more than `limit` times.  Nothing is kept
    from field to field: a field's surface forms had been met in an earlier field for 4.8% of
    them on ECLeKTic's published file, and looking every one up cost more than the counts it saved."""

    def __init__(self, corpus: Texts, per_million_bytes: float, at_least: int) -> None:
        self.corpus = corpus
        self.limit = max(at_least, per_million_bytes * (corpus.info.bytes or 0) / 1e6)

    def __call__(self, surfaces: list[str]) -> set[str]:
        """Of the `surfaces` (a field's shingles as written in it), those that occur more than
        `limit` times in their casings together (as written, lower-cased, capitalised; each
        distinct spelling once: the corpus's `casing_counts`)."""
        limit = self.limit
        return {surface for surface, total in zip(surfaces, self.corpus.casing_counts(surfaces), strict=True) if total > limit}
