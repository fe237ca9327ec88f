"""Verification: the figures a rule reads, from the corpus text of the candidate windows.

A shingle of the field counts in a document only when the same shingle text (its tokens,
case-folded, one space between them) is there.  The LSH proposes windows from 32-bit
hashes, and a 64-bit key of each shingle proposes which positions to compare, but neither
decides: two different shingles with one 32-bit hash are a certainty in a corpus of any size
(the birthday bound is reached at 65,000 shingles), and did make an Indonesian question "match"
Chinese text.  Comparing text costs one string per proposed position, a few hundred a field.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from audit import _spans
from audit.neardup.source import Texts
from audit.neardup.tokens import Shingled, Tokens, field_cut, shingle_regions
from audit.ranges import merged

# Shingle texts of a match kept for its provenance.
MATCHED_SHOWN = 5


@dataclass
class Match:
    """The best span of one document for a field: exact figures from its text (`shingles`:
    how many of the field's shingles the span holds, `matched`: the first few of them, as
    text), and the sketch's estimates for the candidate window that led to it."""

    document: int
    shingles: int
    offset: int
    length: int
    containment: float
    jaccard: float
    estimated_jaccard: float
    estimated_containment: float
    window: int
    matched: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SetAside:
    """Shingles that are not evidence for a field, as text (what decides) and as 64-bit keys
    (what the size of a span's shingle set is counted with)."""

    texts: frozenset[str] = frozenset()
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))


@dataclass(frozen=True)
class FieldShingles:
    """A field's distinct shingles as evidence: their texts, the `rare` ones first (a rare
    shingle's id is its place in `texts`; only they can match), the rare ones' keys (distinct
    and sorted; `rare_keys` has one per rare text, in its order), the keys of what was set
    aside (shared with the source variant: out of the figures; common in the corpus: in the
    field's count but never matched), and the field's shingle positions (the width of the
    span it is compared with)."""

    shingled: Shingled
    texts: list[str]
    rare: int
    keys: np.ndarray
    set_aside_keys: np.ndarray
    shared: int
    positions: int
    rare_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))

    @property
    def common(self) -> int:
        return len(self.texts) - self.rare

    def reach(self, containment: float | None) -> int:
        """The fewest shingles giving at least `containment` (as figures round it); 1 when none.
        Rounding to 4 places adds at most 0.00005, so no n below count * (containment - 0.0001)
        qualifies: the search starts there rather than at 1."""
        count = len(self.texts)
        if containment is None or not count:
            return 1
        start = max(1, int(count * (containment - 0.0001)))
        return next((n for n in range(start, count + 1) if round(n / count, 4) >= containment), count + 1)


def sorted_distinct(keys: np.ndarray) -> np.ndarray:
    """`np.unique` of keys that are almost always distinct already (one per distinct shingle
    text): a sort, and the duplicates dropped only when there are any; a fifth of its time on a
    field's few hundred keys."""
    ordered = np.sort(keys)
    if len(ordered) > 1 and (ordered[1:] == ordered[:-1]).any():
        return np.unique(ordered)
    return ordered


def field_shingles(text: str, sizes: np.ndarray, exclude: SetAside, common: Callable[[list[str]], set[str]] | None) -> FieldShingles:
    """The field's shingles, less those of the source variant (`exclude`, as text); those
    whose surface form in the field `common` says the corpus holds too often to mean anything
    stay in the field's count but cannot match, so setting them aside can only lower a
    containment, never raise it.  Equal shingle texts have equal keys; the surface form asked
    about is the first occurrence's, all made in one compiled pass (`tokens.field_cut`)."""
    cut = field_cut(text, sizes, exclude.texts)
    distinct, surfaces, distinct_keys, own = cut.distinct, cut.surfaces, cut.keys, cut.own
    frequent = common([surfaces[k] for k in own]) if common and own else set()
    rare = [k for k in own if surfaces[k] not in frequent] if frequent else own
    often = [k for k in own if surfaces[k] in frequent] if frequent else []
    return FieldShingles(
        shingled=cut.shingled,
        texts=[distinct[k] for k in rare + often],
        rare=len(rare),
        keys=sorted_distinct(distinct_keys[rare]),
        set_aside_keys=sorted_distinct(np.concatenate((exclude.keys, distinct_keys[often]))) if often else exclude.keys,
        shared=len(distinct) - len(own),
        positions=int(np.count_nonzero(cut.shingled.valid)),
        rare_keys=distinct_keys[rare],
    )


@dataclass(frozen=True)
class _Regions:
    """Stretches of documents shingled in one pass (`shingle_regions`): each one's text, from
    its first whole character (`skips` bytes in), the tokens and shingle keys of all of them
    joined by newlines, each stretch's first token (`first`, one more entry at the end) and
    first character in the joined text, per token the id of the field shingle it starts (-1:
    none, checked on text), and per stretch how many distinct field shingles it holds."""

    texts: list[str]
    skips: np.ndarray
    tokens: Tokens
    keys: np.ndarray
    valid: np.ndarray
    first: np.ndarray
    char_start: np.ndarray
    ids: np.ndarray
    bounds: np.ndarray


def _shingle_regions(raws: list[bytes], sizes: np.ndarray, shingles: FieldShingles) -> _Regions:
    """Shingles of every stretch, none reaching across from one into the next; positions whose
    key is a rare field shingle's are compared with its text (`tokens.shingle_regions`)."""
    texts, skips, char_start, first, starts, ends, hashes, scripts, keys, valid, ids, bounds = shingle_regions(raws, sizes, shingles.rare_keys, shingles.texts[: shingles.rare])
    int64 = np.dtype(np.int64)
    tokens = Tokens(np.frombuffer(starts, dtype=int64), np.frombuffer(ends, dtype=int64), np.frombuffer(hashes, dtype=np.uint64), np.frombuffer(scripts, dtype=np.uint8))
    return _Regions(
        texts, np.frombuffer(skips, dtype=int64), tokens, np.frombuffer(keys, dtype=np.uint64), np.frombuffer(valid, dtype=bool),
        np.frombuffer(first, dtype=int64), np.frombuffer(char_start, dtype=int64), np.frombuffer(ids, dtype=int64), np.frombuffer(bounds, dtype=int64),
    )  # fmt: skip


def stretches(rows: np.ndarray, query_bytes: int) -> list[tuple[int, int, int]]:
    """The stretches of text around candidate windows (`rows` of the window table) that
    verification reads, as (document, start, end): each window widened by the field's length
    and a quarter more, overlapping or touching ones of a document joined (`ranges.merged`),
    documents in the order their first window comes, each one's stretches in order."""
    pad = query_bytes + query_bytes // 4 + 64
    around: dict[int, list[tuple[int, int]]] = {}
    for document, offset, length in zip(rows["document"].tolist(), rows["offset"].tolist(), rows["length"].tolist(), strict=True):
        around.setdefault(document, []).append((offset - pad, offset + length + pad))
    return [(document, max(0, start), end) for document, ranges in around.items() for start, end in merged(ranges)]


def counts_of(allowed: Callable[[int], bool], documents: np.ndarray) -> np.ndarray:
    """Whether each of `documents` counts for `allowed`: asked of all at once where it can
    (a `DocumentSet`'s `many`: an isinstance test on that protocol costs 60 µs), else once per
    distinct document."""
    many = getattr(allowed, "many", None)
    if many is not None:
        return np.asarray(many(documents), dtype=bool)
    asked = {document: bool(allowed(document)) for document in dict.fromkeys(documents.tolist())}
    return np.array([asked[document] for document in documents.tolist()], dtype=bool)


def _floors(best: dict[int, Match], ok: dict[int, bool], limit: int) -> tuple[int, int]:
    """The count a stretch must beat to place its document among the `limit` best of all
    documents, and of the counted ones (-1 while fewer are held)."""
    every = sorted((m.shingles for m in best.values()), reverse=True)
    counted = sorted((m.shingles for d, m in best.items() if ok[d]), reverse=True)
    return (every[limit - 1] if len(every) >= limit else -1), (counted[limit - 1] if len(counted) >= limit else -1)


def verify(
    corpus: Texts,
    rows: np.ndarray,
    sizes: np.ndarray,
    shingles: FieldShingles,
    query_bytes: int,
    limit: int,
    allowed: Callable[[int], bool] | None = None,
    reach: int = 1,
) -> dict[int, Match]:
    """Per document, the span of its text around the candidate windows (`rows` of the window
    table) that holds the most of the field's shingles.  A stretch is searched while the
    distinct field shingles it holds (a bound on any span in it) could still place its
    document among the `limit` best of all documents, or of the `allowed` ones, or reach
    `reach` shingles; so those three lists are what searching every stretch gives.  Among
    equal spans of a document, the first searched is kept."""
    spans = stretches(rows, query_bytes)
    documents, starts = [span[0] for span in spans], [span[1] for span in spans]
    distinct = list(dict.fromkeys(documents))
    counted = counts_of(allowed, np.array(distinct, dtype=np.int64)).tolist() if allowed is not None else [True] * len(distinct)
    ok = dict(zip(distinct, counted, strict=True))
    shingled = _shingle_regions(corpus.text_spans(spans), sizes, shingles)
    bounds = shingled.bounds
    best: dict[int, Match] = {}
    floors = (-1, -1)
    for number in np.argsort(-bounds, kind="stable").tolist():
        bound, document = int(bounds[number]), documents[number]
        wanted_any, wanted_allowed = bound > floors[0], bound > floors[1]
        if not bound or (bound < reach and not wanted_any and not wanted_allowed):
            break
        if bound < reach and not wanted_any and not ok[document]:
            continue
        region = (document, starts[number] + int(shingled.skips[number]), shingled.texts[number])
        span = _best_span(shingled, number, region, shingles, sizes)
        held = best.get(document)
        if span is not None and (held is None or (span.containment, span.jaccard) > (held.containment, held.jaccard)):
            best[document] = span
            floors = _floors(best, ok, limit)
    return best


def _best_span(shingled: _Regions, number: int, region: tuple[int, int, str], shingles: FieldShingles, sizes: np.ndarray) -> Match | None:
    """The span of the field's width in one stretch holding the most distinct field shingles,
    with its Jaccard against the field (the span's shingles compared as text too), found in C
    (`audit._spans.best_span`).  The span's other shingles are only counted, by key: a
    collision among them would change the Jaccard's union by one, never which shingles match."""
    document, start, text = region
    tokens = shingled.tokens
    found = _spans.best_span(
        shingled.ids, shingled.keys, shingled.valid, tokens.starts, tokens.ends, tokens.scripts, sizes, shingles.set_aside_keys,
        int(shingled.first[number]), int(shingled.first[number + 1]), shingles.positions, len(shingles.texts), MATCHED_SHOWN,
    )  # fmt: skip
    if found is None:
        return None
    count, _, first, last, span_size, shown = found
    base = int(shingled.char_start[number])
    first_char, last_char = first - base, last - base
    kept = len(shingles.texts)
    return Match(
        document=document,
        shingles=count,
        offset=start + len(text[:first_char].encode("utf-8")),
        length=len(text[first_char:last_char].encode("utf-8")),
        containment=round(count / kept, 4),
        jaccard=round(count / (kept + span_size - count), 4),
        estimated_jaccard=0.0,
        estimated_containment=0.0,
        window=-1,
        matched=[shingles.texts[i] for i in shown],
    )


def ranked(found: dict[int, Match]) -> list[Match]:
    return sorted(found.values(), key=lambda m: (-m.containment, -m.jaccard, m.document))

