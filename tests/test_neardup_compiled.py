"""The compiled near-duplicate steps (`audit._neardup`) against plain numpy computed here: the
LSH band lookups, the signature agreement behind the estimates, and the tokens, on indexes
built from the demo corpus's real text and on the ECLeKTic sample's questions and passages;
and the fewest shingles a containment needs, against counting them up from one."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from conftest import ECLEKTIC_CSV, write_jsonl
from shingle_reference import folded

from audit import _neardup
from audit.corpora.local import LocalIndex
from audit.index import plants
from audit.index.build import build_index
from audit.neardup import NearDuplicateIndex, NearDupParams, add_neardup
from audit.neardup.family import band_keys
from audit.neardup.store import WINDOW_DTYPE
from audit.neardup.tokens import _MIX, _POWERS, _U32, SEPARATOR, WORD, ShingleSizes, _code_points, _fmix64, code_points, shingle_keys, tokenize
from audit.neardup.verify import FieldShingles, SetAside, field_shingles, sorted_distinct, stretches
from audit.ranges import merged
from audit.readers import load_benchmark

# Text in a script none of the indexed documents is written in: its chunks meet no window.
UNINDEXED = "ชายคนนั้นเดินไปที่ตลาดริมแม่น้ำทุกเช้าเพื่อซื้อผักและผลไม้สดจากชาวสวนที่อยู่ใกล้หมู่บ้าน"


def _build(root: Path, params: NearDupParams | None) -> NearDuplicateIndex:
    rows = plants.host_rows(6_000)
    passages = [v.context for item in load_benchmark(ECLEKTIC_CSV).items[:6] for v in item.variants.values() if v.context]
    rows += [{"id": f"copy-{n}", "lang": "en", "text": text} for n, text in enumerate(passages)]
    write_jsonl(root / "docs.jsonl", rows)
    build_index([root / "docs.jsonl"], root / "index")
    add_neardup(LocalIndex(root / "index"), params)
    return NearDuplicateIndex.open(root / "index", corpus=LocalIndex(root / "index"))


@pytest.fixture(scope="module", params=["one-row bands", "two-row bands"])
def index(request, tmp_path_factory) -> NearDuplicateIndex:
    """32-bit band keys (one row a band), and 64-bit ones (two rows packed) over fewer bands."""
    params = None if request.param == "one-row bands" else NearDupParams(bands=12, rows=2)
    return _build(tmp_path_factory.mktemp("compiled"), params)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    items = load_benchmark(ECLEKTIC_CSV).items
    return [t for item in items[:12] for v in item.variants.values() for t in (v.question, v.context) if t] + [UNINDEXED]


def chunks_of(index: NearDuplicateIndex, text: str) -> tuple[np.ndarray, np.ndarray]:
    shingled = index.shingle(text)
    return index.family.chunks(shingled.hashes, shingled.valid)


def reference_collisions(index: NearDuplicateIndex, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each band's distinct chunk keys searched with numpy, the windows gathered and counted."""
    keys, store = band_keys(chunks, index.params), index.store
    found = []
    for band in range(index.params.bands):
        wanted = np.unique(keys[:, band])
        lo, hi = np.searchsorted(store.keys[band], wanted, "left"), np.searchsorted(store.keys[band], wanted, "right")
        found += [store.windows[band][a:b] for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
    windows = np.concatenate(found).astype(np.int64) if found else np.zeros(0, dtype=np.int64)
    return np.unique(windows, return_counts=True)


def reference_estimate(index: NearDuplicateIndex, candidates: np.ndarray, chunks: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dense candidates x chunks x positions comparison."""
    rows = np.asarray(index.signatures[candidates])
    agreement = (rows[:, None, :] == chunks[None, :, :]).sum(axis=2) / index.params.num_perm
    pick = agreement.argmax(axis=1)
    best = agreement[np.arange(len(pick)), pick]
    query_size = np.maximum(sizes, 1).astype(float)[pick]
    window_size = index.windows["shingles"][candidates].astype(float)
    return best, np.clip(best * (query_size + window_size) / ((1 + best) * query_size), 0, 1)


def test_band_lookups_equal_numpy_on_real_fields(index, texts):
    seen = none = 0
    for text in texts:
        chunks, _ = chunks_of(index, text)
        windows, counts = index.lsh_collisions(chunks)
        expected_windows, expected_counts = reference_collisions(index, chunks)
        assert windows.dtype == np.int64 and counts.dtype == np.int64
        assert np.array_equal(windows, expected_windows) and np.array_equal(counts, expected_counts)
        assert np.array_equal(np.sort(index.store.members(band_keys(chunks, index.params))), np.repeat(expected_windows, expected_counts))
        seen += len(windows) > 0
        none += len(windows) == 0
    assert seen > 20 and none >= 1
    assert not len(index.lsh_candidates(chunks_of(index, UNINDEXED)[0]))


def test_band_lookups_of_no_chunks_and_odd_shapes(index, texts):
    store = index.store
    empty = np.zeros((0, index.params.num_perm), dtype=np.uint32)
    windows, counts = index.lsh_collisions(empty)
    assert windows.dtype == np.int64 and not len(windows) and not len(counts)
    # A key matrix viewed with a stride (every other chunk) is searched as its copy is.
    chunks, _ = chunks_of(index, max(texts, key=len))
    strided = np.concatenate([chunks, chunks])[::2]
    assert all(np.array_equal(a, b) for a, b in zip(index.lsh_collisions(strided), reference_collisions(index, strided), strict=True))
    with pytest.raises(ValueError, match="band keys must be chunks x"):
        store.collisions(np.zeros((3, index.params.bands + 1), dtype=store.keys.dtype))
    with pytest.raises(ValueError, match="must hold"):
        _neardup.collisions(store.keys, store.windows, store._fences, np.zeros(5, dtype=store.keys.dtype), index.params.bands, store.keys.shape[1], 2, 64)
    nothing = np.zeros((index.params.bands, 0), dtype=store.keys.dtype)
    found = _neardup.collisions(nothing, nothing.astype(np.uint32), nothing, band_keys(chunks, index.params), index.params.bands, 0, len(chunks), 64)
    assert found == (bytearray(), bytearray())


def test_every_window_finds_itself_in_every_band(index):
    """A window's own signature as the one chunk: it collides with itself in every band."""
    picks = np.linspace(0, len(index.windows) - 1, 25).astype(np.int64)
    for window in picks.tolist():
        row = np.asarray(index.signatures[window : window + 1])
        windows, counts = index.lsh_collisions(row)
        assert counts[np.searchsorted(windows, window)] == index.params.bands
        assert all(np.array_equal(a, b) for a, b in zip((windows, counts), reference_collisions(index, row), strict=True))


def test_estimates_equal_the_dense_comparison(index, texts):
    compared = 0
    for text in texts:
        chunks, sizes = chunks_of(index, text)
        found, _ = index.lsh_collisions(chunks)
        rng = np.random.default_rng(len(text))
        # The candidates a query ranks, then the same shuffled with repeats and some never colliding.
        for candidates in (found, rng.permutation(np.concatenate([found, found[:3], rng.integers(0, len(index.windows), 5)]))):
            best, containment = index.estimate(candidates, chunks, sizes)
            expected_best, expected_containment = reference_estimate(index, candidates, chunks, sizes)
            assert best.tobytes() == expected_best.tobytes() and containment.tobytes() == expected_containment.tobytes()
            compared += len(candidates)
    assert compared > 1000


def test_estimates_of_odd_shapes(index):
    chunks, sizes = chunks_of(index, UNINDEXED)
    none = np.zeros(0, dtype=np.int64)
    assert [len(a) for a in index.estimate(none, chunks, sizes)] == [0, 0]
    every = np.arange(len(index.windows), dtype=np.int64)[:: max(1, len(index.windows) // 300)]
    one = chunks[:1]
    for rows, size in ((one, sizes[:1]), (chunks[::-1], sizes[::-1]), (np.repeat(chunks[:2], 3, axis=0), np.repeat(sizes[:2], 3))):
        got, expected = index.estimate(every, rows, size), reference_estimate(index, every, rows, size)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, expected, strict=True))
    # Chunks made of two neighbouring windows' signatures, cut at every position in turn, with
    # each run of them repeated: partial agreements, ties between chunks and repeated values.
    signatures = np.asarray(index.signatures[:80])
    perm = index.params.num_perm
    mixed = np.array([np.where(np.arange(perm) < k % perm, signatures[k], signatures[k + 1]) for k in range(60)], dtype=np.uint32)
    mixed = np.repeat(mixed, [1 + k % 3 for k in range(60)], axis=0)
    mixed_sizes = np.arange(len(mixed)) % 40
    near = np.arange(80, dtype=np.int64)
    got, expected = index.estimate(near, mixed, mixed_sizes), reference_estimate(index, near, mixed, mixed_sizes)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, expected, strict=True))
    assert len(set(got[0].tolist())) > 10
    # A window compared with its own signature agrees everywhere.
    row = np.asarray(index.signatures[7:8])
    assert index.estimate(np.array([7]), row, np.array([32]))[0].tolist() == [1.0]
    with pytest.raises(IndexError, match="is not a window"):
        index.estimate(np.array([len(index.windows)]), chunks, sizes)
    with pytest.raises(ValueError, match="agreement needs"):
        _neardup.agreement(index.signatures, np.zeros(1, dtype=np.int64), np.zeros(5, dtype=np.uint32), index.params.num_perm)


def reference_tokens(text: str) -> tuple[np.ndarray, ...]:
    """Tokens cut with numpy: word runs and unsegmented characters, hashed by position."""
    table = _code_points()
    points = code_points(text)
    table.learn(points)
    kind = table.kind[points]
    word, own = kind == WORD, kind == 2
    first, last = own.copy(), own.copy()
    first[0:1] |= word[0:1]
    first[1:] |= word[1:] & ~word[:-1]
    last[-1:] |= word[-1:]
    last[:-1] |= word[:-1] & ~word[1:]
    starts, ends = np.flatnonzero(first), np.flatnonzero(last) + 1
    if not len(starts):
        return starts, ends, np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint8)
    position = np.arange(len(points)) - starts[np.maximum(np.cumsum(first) - 1, 0)]
    weights = _POWERS[np.clip(position, 0, len(_POWERS) - 1)]
    values = np.where(kind != SEPARATOR, (table.fold[points].astype(np.uint64) + np.uint64(1)) * weights, np.uint64(0))
    hashes = _fmix64(np.add.reduceat(values, starts) ^ ((ends - starts).astype(np.uint64) * _MIX))
    return starts, ends, hashes, table.script[points[starts]]


def test_tokens_equal_numpy(texts):
    corpus = [str(row["text"]) for row in plants.host_rows(40_000)]
    odd = ["", " ", "  ,.;  ", "a", "日", "x\udcff y", "ǄEMO ÀB-c 'quoted' ﬁne ΣΑΣ", "w" * 200 + " " + "Ω" * 70, "漢字かなカナ한국어ไทย mixed123", "\u0301\u0301abc"]
    cut = 0
    for text in [*corpus, *texts, *odd]:
        got = tokenize(text)
        for name, expected in zip(("starts", "ends", "hashes", "scripts"), reference_tokens(text), strict=True):
            value = getattr(got, name)
            assert value.dtype == expected.dtype and np.array_equal(value, expected), (name, text[:40])
        fold = folded(text)
        assert fold == _code_points().fold[code_points(text)].astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
        assert len(fold) == len(text)
        cut += len(got)
    assert cut > 5_000
    # Characters met for the first time (Deseret capitals, which fold to its small letters).
    deseret = "\U00010400\U00010401 \U00010402"
    assert folded(deseret) == "\U00010428\U00010429 \U0001042a" and len(tokenize(deseret)) == 2
    table = _code_points()
    with pytest.raises(ValueError, match="out of range"):
        _neardup.tokens(np.array([0x110000], dtype=np.uint32), table.kind, table.fold, table.script, _POWERS)
    # A code point whose kind is not learned yet is the caller's to learn: no tokens are guessed.
    unlearned = np.full_like(table.kind, 255)
    assert _neardup.tokens(code_points("abc"), unlearned, table.fold, table.script, _POWERS) is None


def reference_shingle_keys(text: str, sizes: np.ndarray, limits: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Each shingle's key combined one token at a time in Python integers."""
    tokens = tokenize(text)
    hashes, scripts, count = tokens.hashes.tolist(), tokens.scripts.tolist(), len(tokens)
    keys, valid = np.zeros(count, dtype=np.uint64), np.zeros(count, dtype=bool)
    for i in range(count):
        k = int(sizes[scripts[i]])
        if i + k <= (count if limits is None else int(limits[i])):
            combined = hashes[i]
            for step in range(1, k):
                combined = (combined * int(_MIX) + hashes[i + step]) % (1 << 64)
            keys[i], valid[i] = combined ^ k, True
    return _fmix64(keys), valid


def test_shingle_keys_equal_python(texts):
    sizes = ShingleSizes(default=2, han=4, thai=3).table()
    checked = 0
    spacing = ["one", "two words", "a  b   c", "x\u00a0y z", "Ä, B. c", "end with space ", "日本 語の文", "tab\tand\nnewline words"]
    for text in [*texts[:40], UNINDEXED, "", *spacing]:
        tokens = tokenize(text)
        # Documents of five tokens each, as an index's batch cuts them.
        limits = np.minimum((np.arange(len(tokens)) // 5 + 1) * 5, len(tokens))
        for bound in (None, limits):
            keys, valid = shingle_keys(tokens, sizes, bound)
            expected_keys, expected_valid = reference_shingle_keys(text, sizes, bound)
            assert np.array_equal(keys, expected_keys) and np.array_equal(valid, expected_valid)
            checked += int(valid.sum())
    assert checked > 2000
    with pytest.raises(ValueError, match="has no shingle size"):
        _neardup.shingle_keys(tokenize("abc").hashes, np.array([20], dtype=np.uint8), sizes, None)


def reference_field_shingles(text: str, sizes: np.ndarray, exclude: SetAside, common) -> tuple:
    """A field's distinct shingles sorted into rare, common and shared with plain dicts: texts
    in first-occurrence order, each asked about by its first occurrence's surface form."""
    tokens = tokenize(text)
    keys, valid = shingle_keys(tokens, sizes)
    fold, starts, ends = folded(text), tokens.starts.tolist(), tokens.ends.tolist()
    first: dict[str, tuple[int, str]] = {}
    for i in np.flatnonzero(valid).tolist():
        k = int(sizes[tokens.scripts[i]])
        string = " ".join(fold[starts[j] : ends[j]] for j in range(i, i + k))
        first.setdefault(string, (int(keys[i]), text[starts[i] : ends[i + k - 1]]))
    own = [string for string in first if string not in exclude.texts]
    frequent = common([first[s][1] for s in own]) if own else set()
    rare = [s for s in own if first[s][1] not in frequent]
    often = [s for s in own if first[s][1] in frequent]
    set_aside = sorted(set(exclude.keys.tolist()) | {first[s][0] for s in often})
    return rare + often, len(rare), sorted({first[s][0] for s in rare}), set_aside, len(first) - len(own), [first[s][0] for s in rare]


def same_shingled(found: FieldShingles, text: str, sizes: np.ndarray) -> bool:
    """The field's tokens, keys and hashes as `tokenize` and `shingle_keys` make them."""
    tokens = tokenize(text)
    keys, valid = shingle_keys(tokens, sizes)
    got = found.shingled
    same_tokens = all(np.array_equal(getattr(got.tokens, name), getattr(tokens, name)) for name in ("starts", "ends", "hashes", "scripts"))
    return same_tokens and np.array_equal(got.keys, keys) and np.array_equal(got.valid, valid) and np.array_equal(got.hashes, (keys & _U32).astype(np.uint32)) and found.positions == int(valid.sum())


def test_field_shingles_equal_python(texts):
    """The compiled field pass (`_neardup.field_shingles`) cuts a field and sorts its shingles
    as the separate steps and plain Python do, with a source's shingles excluded and some
    surface forms common; on text with lone surrogates, characters never met before, only
    separators, and nothing."""
    sizes = ShingleSizes(default=3, thai=2).table()
    common = lambda surfaces: {s for s in surfaces if len(s) % 3 == 0 or s[:1].isupper()}  # noqa: E731
    repeated = "The cat sat on the mat. the CAT sat on The Mat, and the cat sat on the mat again."
    unseen = "".join(chr(0xF0000 + n) for n in range(8)) + " and \ud800 lone \udfff surrogates in ไทยภาษา"
    # Tokens one space apart are written as one slice of the folded text, others joined.
    spacing = ["a  b   c d", "x\u00a0y z w", "Ä, B. c d", "tab\tand\nnewline words here", "end with space ", "日本 語の文"]
    odd = [unseen, " ,.;\t\n ", "one two", "one two three", "x", "ÄÖÜ äöü ÄÖÜ äöü ÄÖÜ", *spacing]
    cases = 0
    for text, source in zip([*texts[:40], repeated, "", *odd], [repeated, *texts[:40], "x", *odd[::-1]], strict=True):
        source_shingles = field_shingles(source, sizes, SetAside(), None)
        exclude = SetAside(frozenset(source_shingles.texts), source_shingles.keys)
        for cut in (None, common):
            found = field_shingles(text, sizes, exclude, cut)
            texts_, rare, keys, set_aside, shared, rare_keys = reference_field_shingles(text, sizes, exclude, cut or (lambda surfaces: set()))
            assert (found.texts, found.rare, found.keys.tolist(), found.set_aside_keys.tolist(), found.shared) == (texts_, rare, keys, set_aside, shared)
            assert found.rare_keys.tolist() == rare_keys and same_shingled(found, text, sizes)
            cases += bool(found.common) + bool(found.shared)
    assert cases > 20
    mat = field_shingles(repeated, sizes, SetAside(), common)
    assert mat.texts.count("the cat sat") == 1 and "the cat sat" not in mat.texts[: mat.rare], "its first surface form, 'The cat sat', is common"
    table = _code_points()
    with pytest.raises(TypeError, match="set or frozenset"):
        _neardup.field_shingles("a b c", table.kind, table.fold, table.script, _POWERS, sizes, ["a b c"])
    with pytest.raises(ValueError, match="has no shingle size"):
        _neardup.field_shingles("a b c", table.kind, table.fold, table.script, _POWERS, sizes[:1], frozenset())
    with pytest.raises(ValueError, match="per-code-point tables"):
        _neardup.field_shingles("a b c", table.kind[:5], table.fold, table.script, _POWERS, sizes, frozenset())


def test_sorted_distinct_keys_equal_numpys_unique(texts):
    """`sorted_distinct` answers as `np.unique`, with duplicates or without; and a field whose
    common shingles' keys are already set aside (as the source's) lists each key once."""
    rng = np.random.default_rng(7)
    for keys in (np.zeros(0, dtype=np.uint64), np.array([5], dtype=np.uint64), np.array([3, 3], dtype=np.uint64), rng.integers(0, 50, 300).astype(np.uint64), rng.integers(0, 2**63, 300).astype(np.uint64)):
        found = sorted_distinct(keys)
        assert found.dtype == np.uint64 and np.array_equal(found, np.unique(keys))
    sizes = ShingleSizes().table()
    every = field_shingles(texts[0], sizes, SetAside(), None)
    found = field_shingles(texts[0], sizes, SetAside(frozenset(), every.keys), lambda surfaces: set(surfaces))
    assert found.rare == 0 and np.array_equal(found.set_aside_keys, every.keys)


def test_chunk_minima_equal_numpy(index, texts):
    """A field's chunks: the minimum of every window of permuted hashes, as numpy slides it."""
    width = index.params.window
    for text in [*texts[:30], "a b c d e", " ".join(["word"] * width), " ".join(f"w{n}" for n in range(width + 1))]:
        shingled = index.shingle(text)
        values = index.family.permuted(shingled.hashes, shingled.valid)
        chunks, _ = index.family.chunks(shingled.hashes, shingled.valid)
        expected = values.min(axis=0, keepdims=True) if len(values) <= width else np.lib.stride_tricks.sliding_window_view(values, width, axis=0).min(axis=-1)
        assert np.array_equal(chunks, expected)
    rng = np.random.default_rng(5)
    for rows, perm, span in ((1, 1, 1), (7, 3, 7), (50, 4, 3), (64, 2, 16), (65, 5, 16), (100, 32, 1)):
        values = rng.integers(0, 1 << 32, (rows, perm), dtype=np.uint32)
        found = np.frombuffer(_neardup.sliding_min(values, rows, perm, span), dtype=np.uint32).reshape(rows - span + 1, perm)
        assert np.array_equal(found, np.lib.stride_tricks.sliding_window_view(values, span, axis=0).min(axis=-1))
    with pytest.raises(ValueError, match="sliding_min needs"):
        _neardup.sliding_min(np.zeros((3, 2), dtype=np.uint32), 3, 2, 4)


def _stretches_one_by_one(rows: np.ndarray, query_bytes: int) -> list[tuple[int, int, int]]:
    """Verification's stretches as a loop builds them: each window widened, a document's joined
    where they overlap or touch, documents in the order their first window comes."""
    pad = query_bytes + query_bytes // 4 + 64
    around: dict[int, list[tuple[int, int]]] = {}
    for document, offset, length in zip(rows["document"].tolist(), rows["offset"].tolist(), rows["length"].tolist(), strict=True):
        around.setdefault(document, []).append((offset - pad, offset + length + pad))
    return [(document, max(0, start), end) for document, ranges in around.items() for start, end in merged(ranges)]


@pytest.mark.parametrize("seed", range(6))
def test_stretches_equal_joining_them_one_by_one(seed):
    """The stretches verification reads are those joined window by window, document by document:
    windows overlapping, touching, apart, at a document's start, documents met again later."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 400))
    rows = np.zeros(count, dtype=WINDOW_DTYPE)
    rows["document"] = rng.integers(0, 1 + count // 8, count)
    rows["offset"] = rng.integers(0, 20_000, count) if seed % 2 else rng.integers(0, 40, count) * 50
    rows["length"] = rng.integers(0, 300, count)
    for query_bytes in (0, 37, 400):
        found = stretches(rows, query_bytes)
        assert found == _stretches_one_by_one(rows, query_bytes)
    assert stretches(rows[:0], 10) == []
    touching = np.zeros(3, dtype=WINDOW_DTYPE)
    touching["document"], touching["offset"], touching["length"] = [4, 4, 2], [128, 0, 500], [0, 0, 10]
    assert stretches(touching, 0) == [(4, 0, 192), (2, 436, 574)] == _stretches_one_by_one(touching, 0)


def _affine32(hashes: np.ndarray, valid: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """datasketch's affine32 values in numpy: a * fmix32(h) + b (mod 2^32), the maximum where not valid."""
    h = hashes ^ (hashes >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    h = h ^ (h >> np.uint32(16))
    values = h[:, None] * a[None, :] + b[None, :]
    values[~valid] = _U32
    return values


def test_permuted_values_equal_numpy(index, texts):
    """Each position's permuted hash values, computed in C, are numpy's affine32 values of the
    real shingles of indexed text and of random hashes (every bit pattern of the finaliser)."""
    family = index.family
    for text in texts[:30]:
        shingled = index.shingle(text)
        assert np.array_equal(family.permuted(shingled.hashes, shingled.valid), _affine32(shingled.hashes, shingled.valid, family._a, family._b))
    rng = np.random.default_rng(9)
    hashes, valid = rng.integers(0, 1 << 32, 500, dtype=np.uint32), rng.random(500) < 0.8
    a, b = rng.integers(0, 1 << 32, 7, dtype=np.uint32), rng.integers(0, 1 << 32, 7, dtype=np.uint32)
    found = np.frombuffer(_neardup.permuted(hashes, valid, a, b), dtype=np.uint32).reshape(500, 7)
    assert np.array_equal(found, _affine32(hashes, valid, a, b)) and (found == _U32).sum() >= (~valid).sum() * 7
    assert len(_neardup.permuted(hashes[:0], valid[:0], a, b)) == 0
    with pytest.raises(ValueError, match="permuted needs"):
        _neardup.permuted(hashes, valid[:-1], a, b)


@pytest.mark.parametrize("seed", range(4))
def test_the_fewest_shingles_reaching_a_containment_are_found_from_a_lower_bound(seed):
    """`FieldShingles.reach` starts its search near count x containment: the same answer as
    counting up from one shingle, for every count and for containments as rules and rounded
    figures give them."""
    rng = random.Random(seed)
    for _ in range(3000):
        count = rng.randint(1, 3000)
        containment = rng.choice([rng.random(), round(rng.random(), 4), round(rng.random(), 2), 0.0, 1.0, 1.2, rng.randint(1, count) / count])
        shingles = FieldShingles(None, ["s"] * count, count, None, None, 0, count)
        expected = next((n for n in range(1, count + 1) if round(n / count, 4) >= containment), count + 1)
        assert shingles.reach(containment) == expected, (count, containment)
    assert FieldShingles(None, [], 0, None, None, 0, 0).reach(0.5) == 1 and FieldShingles(None, ["s"], 1, None, None, 0, 1).reach(None) == 1


def test_stretches_read_at_once_equal_each_documents_text_sliced(tmp_path):
    """`LocalIndex.text_spans`, which verification reads its candidate stretches with, on an
    index of several shards: each span is its document's bytes from start to end, cut at the
    document's end, in the order asked (spans of several shards mixed, empty, past the end)."""
    write_jsonl(tmp_path / "docs.jsonl", plants.host_rows(40_000))
    build_index([tmp_path / "docs.jsonl"], tmp_path / "index", memory_bytes=1 << 16)
    assert len(list((tmp_path / "index").glob("table.*"))) > 4
    corpus = LocalIndex(tmp_path / "index")
    texts = dict(corpus.documents())
    rng = random.Random(7)
    spans = []
    for _ in range(500):
        document = rng.randrange(len(texts))
        start = rng.randrange(len(texts[document]) + 20)
        spans.append((document, start, start + rng.choice([0, 1, 7, 300, 5_000])))
    assert corpus.text_spans(spans) == [texts[document][start:end] for document, start, end in spans]
    assert corpus.text_spans([]) == []
