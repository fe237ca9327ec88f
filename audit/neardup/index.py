"""Opening and querying a near-duplicate index: the LSH bands (memory-mapped, or in Redis)
propose candidate windows, signatures rank them, and the best are verified on their text
(`audit.neardup.verify`), read from the corpus the caller hands in (`audit.neardup.source`)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from audit import _neardup
from audit.index.format import read_manifest
from audit.neardup.bands import BandStore, MappedBands
from audit.neardup.family import Family, band_keys
from audit.neardup.redis_bands import RedisBands
from audit.neardup.source import Texts
from audit.neardup.store import (
    MANIFEST_NAME,
    NEARDUP_DIR,
    WINDOW_DTYPE,
    Expected,
    NearDupError,
    NearDupManifest,
    ProgressHook,
    check_expected,
    check_files,
    damaged,
    load_manifest,
    manifest_digest,
    map_array,
)
from audit.neardup.tokens import NearDupParams, Shingled, shingle_keys, tokenize
from audit.neardup.verify import Match, SetAside, counts_of, field_shingles, ranked, sorted_distinct, verify

C = TypeVar("C", bound=Texts)

# LSH candidates of a query compared signature by signature, the most band collisions first.
ESTIMATED = 256


@runtime_checkable
class DocumentSet(Protocol):
    """Which documents count for a query, asked of one document or of an array of them at
    once (`many`): a query ranks a few hundred windows' documents before it verifies any."""

    def __call__(self, document: int) -> bool: ...

    def many(self, documents: np.ndarray) -> np.ndarray: ...


@dataclass
class QueryResult:
    """What a query found: the field's distinct shingles kept as evidence and those set aside
    as shared with the source text, how many of the kept ones are common in the corpus
    (counted, never matched), its shingle positions (the length of the span it is compared
    with), the chunks it was cut into, the LSH candidates and how many were verified.  `matches`: the best documents among the allowed ones (all, when the query
    allowed every document); `any_matches`: the best of every document; `reaching`: every
    verified document whose span holds at least the `reach` asked for."""

    shingles: int
    shared_with_source: int
    positions: int
    chunks: int
    candidates: int
    verified: int
    common: int = 0
    matches: list[Match] = field(default_factory=list)
    any_matches: list[Match] = field(default_factory=list)
    reaching: list[Match] = field(default_factory=list)

    @property
    def best(self) -> Match | None:
        return self.matches[0] if self.matches else None



@dataclass(frozen=True)
class _Files:
    """An index's near-duplicate files, checked and mapped, before any corpus is involved."""

    directory: Path
    manifest: NearDupManifest
    params: NearDupParams
    windows: np.ndarray
    signatures: np.ndarray
    bands: MappedBands

    @classmethod
    def open(cls, directory: Path) -> _Files:
        """After the cheap checks (sizes, shapes, the source index's fingerprint), or
        NearDupError naming the file at fault."""
        manifest = load_manifest(directory)
        params = check_files(directory, manifest, read_manifest(directory))
        folder = directory / NEARDUP_DIR
        windows = np.asarray(map_array(folder / "windows.npy", directory))
        signatures = np.asarray(map_array(folder / "signatures.npy", directory))
        count = len(windows)
        if windows.dtype != WINDOW_DTYPE or windows.ndim != 1:
            raise damaged(folder / "windows.npy", f"does not hold the {WINDOW_DTYPE.descr} array the manifest implies", directory)
        if signatures.shape != (count, params.num_perm) or signatures.dtype != np.uint32:
            raise damaged(folder / "signatures.npy", f"does not hold the uint32 ({count}, {params.num_perm}) array the manifest implies", directory)
        bands = MappedBands(folder, directory, params, count)
        if count != manifest.windows:
            raise damaged(folder / "windows.npy", f"{count:,} windows, but the manifest records {manifest.windows:,}", directory)
        return cls(directory, manifest, params, windows, signatures, bands)


class NearDuplicateIndex(Generic[C]):
    """An index's near-duplicate index, memory-mapped, its bands asked in memory or in Redis,
    verified against the text of `corpus`."""

    def __init__(self, files: _Files, corpus: C, redis: RedisBands | None) -> None:
        self.directory = files.directory
        self.corpus = corpus
        self.manifest = files.manifest
        self.params = files.params
        try:
            self.family = Family(files.params, files.manifest.hash_family.get("permutations"))
        except (NearDupError, TypeError, ValueError) as error:
            raise damaged(self.directory / NEARDUP_DIR / MANIFEST_NAME, f"its hash family is unreadable ({error})", self.directory) from None
        self._check_family()
        self.windows = files.windows
        self.signatures = files.signatures
        self._redis = redis
        self.store: BandStore = redis or files.bands
        self._tables = self.family.params.shingle.table()
        # The source variant's shingles, asked for by each of an item's languages in turn.
        self._distinct: dict[tuple[str, ...], SetAside] = {}

    @classmethod
    def open(cls, directory: Path, *, corpus: C, redis: str | None = None, expect: Expected | None = None) -> NearDuplicateIndex[C]:
        """Open after the cheap checks (sizes, shapes, the fingerprint of the index it was
        built from, the hash family), or raise NearDupError naming the file or
        parameter at fault.  With `redis`, candidates come from the bands loaded there by
        `audit index minhash DIR --redis URL`."""
        directory = Path(directory)
        files = _Files.open(directory)
        if expect:
            check_expected(directory, files.params, expect)
        bands = RedisBands(redis, manifest_digest(directory), files.params.bands) if redis else None
        index = cls(files, corpus, bands)
        if bands is not None:
            bands.require_loaded(directory, len(index.windows))
        return index

    def __reduce__(self) -> tuple[Callable[[Path, Texts, str | None], NearDuplicateIndex[Texts]], tuple[Path, C, str | None]]:
        return (_reopened, (self.directory, self.corpus, self._redis.url if self._redis else None))

    def _check_family(self) -> None:
        recorded, running = self.manifest.hash_family, self.family.describe()
        for key in ("sketcher", "algorithm", "seed", "num_perm"):
            if recorded.get(key) != running.get(key):
                raise NearDupError(
                    f"{self.directory / NEARDUP_DIR}: signatures are {recorded.get('sketcher')} {recorded.get('algorithm')}, "
                    f"but this installation computes {running.get('sketcher')} {running.get('algorithm')} ({key} differs); "
                    f"rebuild it (`audit index minhash {self.directory} --force`)"
                )

    def shingle(self, text: str) -> Shingled:
        tokens = tokenize(text)
        keys, valid = shingle_keys(tokens, self._tables)
        return Shingled(tokens, (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32), valid, keys)

    def lsh_candidates(self, chunks: np.ndarray) -> np.ndarray:
        """Windows sharing at least one band with at least one chunk."""
        return self.lsh_collisions(chunks)[0]

    def lsh_collisions(self, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The LSH candidates, sorted, and in how many bands each met some chunk: a free first
        ranking, so that only the likeliest candidates are compared signature by signature."""
        return self.store.collisions(band_keys(chunks, self.params))

    def estimate(self, candidates: np.ndarray, chunks: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate window, the estimated Jaccard with its most similar chunk (the first
        of equals), and the containment of that chunk in it that the estimate implies.  The
        equal positions are counted in C (`audit._neardup.agreement`), only where they agree."""
        candidates = np.ascontiguousarray(candidates, dtype=np.int64)
        if not len(chunks):
            return np.zeros(len(candidates)), np.zeros(len(candidates))
        rows = np.ascontiguousarray(chunks, dtype=np.uint32)
        equal, pick = (np.frombuffer(part, dtype=np.int64) for part in _neardup.agreement(self.signatures, candidates, rows, self.params.num_perm))
        best = equal / self.params.num_perm
        query_size = np.maximum(sizes, 1).astype(float)[pick]
        window_size = self.windows["shingles"][candidates].astype(float)
        # Never below 0 (no term is); above 1 where the window is larger than the chunk.
        containment = np.minimum(best * (query_size + window_size) / ((1 + best) * query_size), 1.0)
        return best, containment

    def distinct_shingles(self, texts: Sequence[str]) -> SetAside:
        """The distinct shingles of some texts together (a source-language variant's)."""
        if not texts:
            return SetAside()
        key = tuple(texts)
        if key not in self._distinct:
            if len(self._distinct) >= 64:
                self._distinct.pop(next(iter(self._distinct)))
            found = [field_shingles(t, self._tables, SetAside(), None) for t in texts]
            self._distinct[key] = SetAside(frozenset().union(*(f.texts for f in found)), sorted_distinct(np.concatenate([f.keys for f in found])))
        return self._distinct[key]

    def query(
        self,
        text: str,
        *,
        exclude: Sequence[str] | SetAside = (),
        candidates: int = 50,
        limit: int = 3,
        allowed: Callable[[int], bool] | DocumentSet | None = None,
        reach: float | None = None,
        common: Callable[[list[str]], set[str]] | None = None,
    ) -> QueryResult:
        """The documents holding most of `text`: LSH candidates ranked by the bands they share
        with it, the likeliest `ESTIMATED` then ranked by estimated Jaccard, the best
        `candidates` of those verified on their text, one match per document, best first.
        Shingles that also occur in an `exclude` text (the source-language variant; or their
        `distinct_shingles`, computed once) are not evidence and are left out of the figures;
        those `common` names count in the field but never match.  `allowed` says which documents count for `matches`; `reach`
        is the containment a document must reach to be listed in `reaching`."""
        shared = exclude if isinstance(exclude, SetAside) else self.distinct_shingles(exclude)
        mine = field_shingles(text, self._tables, shared, common)
        shingled = mine.shingled
        result = QueryResult(shingles=len(mine.texts), shared_with_source=mine.shared, positions=mine.positions, chunks=0, candidates=0, verified=0, common=mine.common)
        if not mine.positions:
            return result
        chunks, sizes = self.family.chunks(shingled.hashes, shingled.valid)
        result.chunks = len(chunks)
        found, collisions = self.lsh_collisions(chunks)
        result.candidates = len(found)
        if not len(found) or not mine.rare:
            return result
        likeliest = np.lexsort((found, -collisions))[:ESTIMATED]
        found = found[likeliest]
        estimated, implied = self.estimate(found, chunks, sizes)
        order = self._to_verify(found, np.lexsort((found, -estimated)), candidates, allowed)
        result.verified = len(order)
        windows, rows = found[order], self.windows[found[order]]
        least = mine.reach(reach)
        best = verify(self.corpus, rows, self._tables, mine, len(text.encode("utf-8")), limit, allowed, least)
        for document, match in best.items():
            here = rows["document"] == document
            pick = int(np.argmax(estimated[order][here]))
            match.estimated_jaccard = round(float(estimated[order][here][pick]), 4)
            match.estimated_containment = round(float(implied[order][here][pick]), 4)
            match.window = int(windows[here][pick])
        every = ranked(best)
        result.any_matches = every[:limit]
        result.matches = [m for m in every if allowed is None or allowed(m.document)][:limit]
        result.reaching = [m for m in every if m.shingles >= least]
        return result

    def _to_verify(self, found: np.ndarray, ranked: np.ndarray, candidates: int, allowed: Callable[[int], bool] | DocumentSet | None) -> np.ndarray:
        """The best `candidates` of the ranked windows, and, when only some documents count,
        the best `candidates` of those too: copies in the field's own language are verified
        even when windows in other languages outrank them.  A `DocumentSet` is asked of all
        their documents at once."""
        pick = np.zeros(len(ranked), dtype=bool)
        pick[:candidates] = True
        if allowed is not None:
            counts = counts_of(allowed, self.windows["document"][found[ranked]])
            pick[np.flatnonzero(counts)[:candidates]] = True
        return ranked[pick]


# Near-duplicate indexes re-opened in this process for runners sent from another (a cluster's).
_REOPENED: dict[tuple[str, str | None, str], NearDuplicateIndex[Texts]] = {}


def _reopened(directory: Path, corpus: Texts, redis: str | None) -> NearDuplicateIndex[Texts]:
    """The index where a runner was sent, opened and checked once per process."""
    key = (str(directory), redis, corpus.info.fingerprint)
    if key not in _REOPENED:
        _REOPENED[key] = NearDuplicateIndex.open(directory, corpus=corpus, redis=redis)
    return _REOPENED[key]


def load_redis(directory: Path, url: str, progress: ProgressHook | None = None) -> int:
    """Load an index's near-duplicate bands into Redis at `url`; the number of windows."""
    directory = Path(directory)
    files = _Files.open(directory)
    RedisBands(url, manifest_digest(directory), files.params.bands).load(files.bands, progress)
    return len(files.windows)
