"""Common shingles: those the corpus holds so often that finding one says nothing of a copy.

"What is a molecule?" has two shingles, and "what is a" is in every encyclopaedia; short
Chinese and Japanese questions were `seen` through one 3-character shingle such as `受精卵`
that a thousand pages hold.  A shingle the corpus holds more than a rate per million bytes of
its text (and more than a least count, so a small corpus does not call everything common)
still counts among the field's shingles but is never matched, and does not count towards the
floor a field must reach to decide.  So the cut can only lower a containment: leaving common
shingles out of the field altogether raised a Japanese question's to 0.5 when its unmatched
katakana shingles were the common ones.  A plain cut, not a weight, so containment stays a
share of shingles a reader can count.  The counts come from the corpus's own suffix array (its `counts`, a field's at once), one binary
search per spelling of the shingle: as written in the field, lower-cased, and capitalised (a
sentence's first words).  Spellings with other punctuation between the tokens are not
counted, so a shingle can only look rarer than it is, never more common.
"""
from __future__ import annotations

from audit.neardup.source import Texts

CACHED = 1 << 16


class CommonShingles:
    """Which of a field's shingles the corpus holds more than `limit` times."""

    def __init__(self, corpus: Texts, per_million_bytes: float, at_least: int) -> None:
        self.corpus = corpus
        self.limit = max(at_least, per_million_bytes * (corpus.info.bytes or 0) / 1e6)
        self._counts: dict[str, int] = {}
        self._totals: dict[str, int] = {}

    def _counted(self, spellings: list[str]) -> dict[str, int]:
        """The counts of `spellings`, those not kept from earlier fields asked in one call."""
        found = {spelling: self._counts.get(spelling) for spelling in spellings}
        missing = [spelling for spelling, count in found.items() if count is None]
        if missing:
            counted = dict(zip(missing, self.corpus.counts(missing), strict=True))
            found.update(counted)
            if len(self._counts) + len(counted) > CACHED:
                self._counts.clear()
            self._counts.update(counted)
        return {spelling: int(count or 0) for spelling, count in found.items()}

    def __call__(self, shingles: dict[str, str]) -> set[str]:
        """Of `shingles` (text: surface form in the field), those that occur more than `limit`
        times in their casings together (as written, lower-cased, capitalised).  Each surface
        form's total is kept, so a form met in an earlier field costs a lookup."""
        totals = self._totals
        surfaces = list(dict.fromkeys(shingles.values()))
        if len(totals) + len(surfaces) > CACHED:
            totals.clear()
        new = [surface for surface in surfaces if surface not in totals]
        if new:
            casings = {surface: dict.fromkeys((surface, surface.lower(), surface[:1].upper() + surface[1:].lower())) for surface in new}
            counts = self._counted(list(dict.fromkeys(spelling for spellings in casings.values() for spelling in spellings)))
            totals.update((surface, sum(counts[spelling] for spelling in spellings)) for surface, spellings in casings.items())
        return {text for text, surface in shingles.items() if totals[surface] > self.limit}
