"""A corpus served from a local byte-level infini-gram index on disk, memory-mapped and searched
by `audit._suffix`: answers merged from its shard groups (`audit.corpora.shardgroup`), each
opened after the checks of `audit.corpora.shards`."""
from __future__ import annotations

import bisect
import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audit.corpora.base import CorpusInfo, DocumentHit, MatchLengths, MatchQuestions, Occurrence, Sampled, cut_snippet
from audit.corpora.inlanguage import LanguageView
from audit.corpora.shardgroup import ShardGroup, share_out
from audit.corpora.shardread import TEXTS_PER_CALL, char_count, char_lengths
from audit.corpora.shards import IndexOpenError, index_layout
from audit.index.doclangs import DocumentLanguages, LanguageTableError, read_table, summary

# Occurrence samples a local index keeps in each process (`occurrence_arrays`): about 8 KB each.
SAMPLES_KEPT = 512
# Language views a local index keeps (`in_language`): one or two per language of a benchmark.
VIEWS_KEPT = 256


class LocalIndex:
    """A corpus served from a local index directory.  `neardup_redis` is where its
    near-duplicate bands are served from when not from its own files (a registry entry's
    `minhash_redis`).

    Every answer is merged here from the shard groups' (`ask`): counts summed, longest matches
    maxed per position, occurrences sampled in proportion to each shard's range, documents by
    global number.  A subclass that puts its groups elsewhere changes `ask` and nothing else,
    so its answers are this class's answers."""

    # Its runners can be sent to other processes: it re-opens there from its path.
    ships_to_workers = True
    # The same question always gets the same answer (no budget of queries, no network), so a
    # signal may keep an answer for a field it meets again.
    answers_repeat = True
    # Its longest matches are searched, not derived from counts: a policy's questions change nothing.
    exact_lengths = True

    def __init__(self, path: Path, name: str | None = None, neardup_redis: str | None = None) -> None:
        self.path = Path(path)
        self.neardup_redis = neardup_redis
        self.layout = index_layout(self.path)
        self.groups = self._open_groups()
        manifest = self.layout.manifest
        self.info = CorpusInfo(
            name=name or self.path.name,
            backend="local",
            location=str(self.path.resolve()),
            fingerprint=manifest.fingerprint if manifest else self._fingerprint_files(),
            documents=self.layout.first_documents[-1] + (self.path / f"offset.{self.layout.numbers[-1]}").stat().st_size // 8,
            bytes=sum(self.layout.shard_bytes),
            details={
                "shards": len(self.layout.numbers),
                "token_dtype": "u8",
                "normalization": manifest.normalization if manifest else "unknown",
                "built_by": manifest.tool if manifest else "unknown",
            },
        )
        self.languages = self._read_languages()
        if self.languages is not None:
            self.info.details["languages"] = summary(self.languages)

    def _read_languages(self) -> DocumentLanguages | None:
        """Each document's language (`audit.index.doclangs`); None for an index built
        before the table was written, whose documents' languages are unknown."""
        try:
            return read_table(self.path, self.info.documents)
        except LanguageTableError as error:
            raise IndexOpenError(f"{error}; write it anew with `audit index languages {self.path} --force`", str(error)) from None

    @functools.cached_property
    def language_counts(self) -> dict[str, int]:
        """Documents per language in the table (empty without one), counted once."""
        return self.languages.counts() if self.languages is not None else {}

    def in_language(self, languages: frozenset[str], unknown: bool) -> LanguageView | None:
        """This index counting only documents of `languages` (and of unknown language when
        `unknown`); None for an index without a language table.  The views are kept: every
        field of every variant asks for its language's."""
        return None if self.languages is None else self._views(languages, unknown)

    @functools.cached_property
    def _views(self) -> Callable[[frozenset[str], bool], LanguageView]:
        return functools.lru_cache(maxsize=VIEWS_KEPT)(lambda languages, unknown: LanguageView(self, languages, unknown))

    def count_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[int, int]:
        """(fewest, most) occurrences of `pattern` in the allowed documents (`inlanguage`)."""
        answers = self.ask("count_in", pattern, allowed, extra)
        return sum(a[0] for a in answers), sum(a[1] for a in answers)

    def longest_in(self, query: bytes, allowed: np.ndarray, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lowest, highest) restricted longest match in bytes at each character start of `query`."""
        low = np.zeros(char_count(query), dtype=np.int64)
        high = low.copy()
        for found_low, found_high in self.ask("longest_in", query, allowed, extra):
            np.maximum(low, found_low, out=low)
            np.maximum(high, found_high, out=high)
        return low, high

    def occurrences_in(self, pattern: bytes, allowed: np.ndarray, extra: np.ndarray, limit: int) -> tuple[int, Sampled]:
        """Allowed occurrences (the most there may be) and each group's sample of them, ordered
        by (document, offset)."""
        answers = self.ask("occurrences_in", pattern, allowed, extra, limit)
        documents = np.concatenate([answer[2].documents for answer in answers])
        offsets = np.concatenate([answer[2].offsets for answer in answers])
        order = np.lexsort((offsets, documents))
        return sum(a[0] for a in answers), Sampled.kept(documents[order], offsets[order])

    def _open_groups(self) -> list[Any]:
        """The shard groups, in shard order; `group_starts` holds each one's first document."""
        self.group_starts = [0]
        return [ShardGroup(self.path, self.layout.numbers, self.layout.first_documents)]

    def ask(self, method: str, *args: object) -> list[Any]:
        """Each group's answer to one call, in shard order."""
        return [getattr(group, method)(*args) for group in self.groups]

    def _owner(self, document: int) -> int:
        """The position of the group holding a document (groups are contiguous runs of shards)."""
        return bisect.bisect_right(self.group_starts, document) - 1

    def ask_owner(self, document: int, method: str, *args: object) -> Any:
        return self._ask_group(self._owner(document), method, *args)

    def _ask_group(self, group: int, method: str, *args: object) -> Any:
        """The answer of the group at position `group` to one call."""
        return getattr(self.groups[group], method)(*args)

    def __reduce__(self) -> tuple[type[LocalIndex], tuple[Path, str, str | None]]:
        return (type(self), (self.path, self.info.name, self.neardup_redis))

    def _fingerprint_files(self) -> str:
        """For indexes built elsewhere: sizes plus the head of every table, cheap and stable."""
        digest = hashlib.blake2b(digest_size=16)
        for n, size in zip(self.layout.numbers, self.layout.shard_bytes, strict=True):
            digest.update(size.to_bytes(8, "little"))
            with open(self.path / f"table.{n}", "rb") as table:
                digest.update(table.read(1 << 20))
        return digest.hexdigest()

    def count_bytes(self, pattern: bytes) -> int:
        return sum(self.ask("count_bytes", pattern))

    def longest_match_bytes(self, query: bytes) -> np.ndarray:
        """Per byte position, the longest prefix of query[l:] found: infini-gram's `creativity`
        (which reports l plus this length)."""
        best = np.zeros(len(query), dtype=np.int64)
        for found in self.ask("longest_match_bytes", query):
            np.maximum(best, found, out=best)
        return best

    def longest_char_bytes(self, query: bytes) -> np.ndarray:
        """`longest_match_bytes` at each character start of `query` (`char_starts`) only."""
        best = np.zeros(char_count(query), dtype=np.int64)
        for found in self.ask("longest_char_bytes", query):
            np.maximum(best, found, out=best)
        return best

    def count(self, text: str) -> int:
        return self.count_bytes(text.encode("utf-8"))

    def casing_counts(self, texts: Sequence[str]) -> list[int]:
        """Occurrences of each text as written, lower-cased and capitalised together (each
        distinct spelling once), asked of each group in one call: the casing work and the
        sums in C, since a field asks this of hundreds of shingles."""
        if not texts:
            return []
        return sum(np.asarray(found) for found in self.ask("casing_counts", list(texts))).tolist()

    def count_range(self, text: str) -> tuple[int, int]:
        found = self.count(text)
        return found, found

    def match_lengths(self, text: str, questions: MatchQuestions | None = None) -> MatchLengths:
        encoded = text.encode("utf-8")
        if not encoded:
            return MatchLengths([])
        return MatchLengths(char_lengths(encoded, self.longest_char_bytes(encoded)))

    def occurrences(self, text: str, limit: int) -> tuple[int, Sampled]:
        """Up to `limit` occurrences spread evenly over the suffix-array range (a sample of
        the whole range, not its lexicographically first entries)."""
        return self.occurrence_arrays(text, limit)

    def occurrence_arrays(self, text: str, limit: int) -> tuple[int, Sampled]:
        """`occurrences` as arrays, ordered by (document, offset).  The last `SAMPLES_KEPT`
        answers are kept (read-only): a benchmark's variants of one item ask for the same
        names and dates in language after language."""
        return self._kept_samples(text, limit)

    @functools.cached_property
    def _kept_samples(self) -> Callable[[str, int], tuple[int, Sampled]]:
        return functools.lru_cache(maxsize=SAMPLES_KEPT)(self._occurrence_arrays)

    def _occurrence_arrays(self, text: str, limit: int) -> tuple[int, Sampled]:
        per_group = self.ask("ranges", text.encode("utf-8"))
        picks = share_out([span for spans in per_group for span in spans], limit)
        total = sum(hi - lo for lo, hi, _ in picks)
        if not any(count for _, _, count in picks):
            return total, Sampled.none()
        mine, at = [], 0
        for spans in per_group:
            mine.append(picks[at : at + len(spans)])
            at += len(spans)
        answers = self._ask_each("sample", mine)
        documents = np.concatenate([documents for documents, _ in answers])
        offsets = np.concatenate([offsets for _, offsets in answers])
        order = np.lexsort((offsets, documents))[:limit]
        return total, Sampled.kept(documents[order], offsets[order])

    def _ask_each(self, method: str, arguments: list[object]) -> list[Any]:
        """Each group's answer to the call with its own argument."""
        return [getattr(group, method)(argument) for group, argument in zip(self.groups, arguments, strict=True)]

    def metadata(self, document: int) -> dict:
        return self.ask_owner(document, "metadata", document)

    def documents(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(document number, stored text) for documents `start` to `stop` - 1, in order: what an
        index built over this one's text (the near-duplicate index) reads."""
        stop = self.info.documents if stop is None else stop
        while start < stop:
            group = self._owner(start)
            group_end = self.group_starts[group + 1] if group + 1 < len(self.group_starts) else self.info.documents
            end = min(stop, group_end, start + TEXTS_PER_CALL)
            for offset, text in enumerate(self.ask_owner(start, "texts", start, end)):
                yield start + offset, text
            start = end

    def surrounding(self, occurrence: Occurrence, before: int, after: int) -> bytes:
        return self.ask_owner(occurrence.document, "surrounding", occurrence, before, after)

    def surroundings(self, places: Sequence[Occurrence], before: int, after: int) -> list[bytes]:
        """`surrounding` of each place, each group asked once for all of its own."""
        documents, offsets = _arrays(places)
        owners = np.searchsorted(np.asarray(self.group_starts, dtype=np.int64), documents, side="right") - 1
        found: list[bytes] = [b""] * len(documents)
        for group in np.unique(owners).tolist():
            at = np.flatnonzero(owners == group)
            for position, text in zip(at.tolist(), self._ask_group(group, "surroundings", documents[at], offsets[at], before, after), strict=True):
                found[position] = text
        return found

    def text_spans(self, spans: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """Bytes `start` to `end` of each (document, start, end)'s text, cut at its end: each
        group asked once for all of its spans (`ShardGroup.spans`), since the near-duplicate
        check reads a few dozen stretches a field and a remote group answers each call over the wire."""
        if not spans:
            return []
        documents, starts, ends = np.array(spans, dtype=np.int64).reshape(-1, 3).T
        owners = np.searchsorted(np.asarray(self.group_starts, dtype=np.int64), documents, side="right") - 1
        found: list[bytes] = [b""] * len(documents)
        for group in np.unique(owners).tolist():
            at = np.flatnonzero(owners == group)
            for position, text in zip(at.tolist(), self._ask_group(group, "spans", documents[at], starts[at], ends[at]), strict=True):
                found[position] = text
        return found

    def document_hit(self, occurrence: Occurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        reach = 4 * context_chars
        window, metadata = self.ask_owner(occurrence.document, "excerpt", occurrence, reach, length_bytes + reach)
        snippet, start, end = cut_snippet(window, min(occurrence.offset, reach), length_bytes, context_chars)
        return DocumentHit(occurrence.document, metadata, occurrence.offset, length_bytes, snippet, start, end)


def _arrays(places: Sequence[Occurrence]) -> tuple[np.ndarray, np.ndarray]:
    """The documents and offsets of `places` as arrays (a sample already holds them)."""
    if isinstance(places, Sampled):
        return places.documents, places.offsets
    return np.array([o.document for o in places], dtype=np.int64), np.array([o.offset for o in places], dtype=np.int64)
