"""The stretches verification reads, shingled in one compiled call
(`audit.neardup.tokens.shingle_regions`), against the steps it replaced, written here in plain
Python and numpy: each stretch decoded from its first whole character, the stretches joined by
newlines, tokenised, shingled with no shingle reaching into the next stretch, every shingle
whose key is a field shingle's compared with the field's texts, and the distinct field
shingles per stretch counted.  On real passages of the ECLeKTic sample in many scripts, cut at
arbitrary bytes, with invalid UTF-8, empty stretches and shingle keys that collide."""
from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import ECLEKTIC_CSV
from shingle_reference import folded, shingle_strings

from audit.neardup.tokens import ShingleSizes, shingle_keys, shingle_regions, tokenize
from audit.neardup.verify import SetAside, field_shingles
from audit.readers import load_benchmark

SIZES = ShingleSizes().table()


def reference(raws: list[bytes], keys: np.ndarray, texts: list[str]) -> tuple:
    """What `shingle_regions` returns, step by step as verification used to take them."""
    skips = [next((i for i, b in enumerate(raw) if b & 0xC0 != 0x80), len(raw)) for raw in raws]
    decoded = [raw[skip:].decode("utf-8", "ignore") for raw, skip in zip(raws, skips, strict=True)]
    lengths = np.array([len(t) for t in decoded], dtype=np.int64)
    char_start = np.cumsum(lengths + 1) - (lengths + 1)
    joined = "\n".join(decoded)
    tokens = tokenize(joined)
    first = np.append(np.searchsorted(tokens.starts, char_start, "left"), len(tokens)).astype(np.int64)
    owner = np.repeat(np.arange(len(raws)), np.diff(first))
    found_keys, valid = shingle_keys(tokens, SIZES, first[1:][owner])
    proposed = np.flatnonzero(valid & np.isin(found_keys, keys))
    wanted = {text: number for number, text in enumerate(texts)}
    ids = np.full(len(tokens), -1, dtype=np.int64)
    ids[proposed] = [wanted.get(s, -1) for s in shingle_strings(folded(joined), tokens, SIZES, proposed)]
    bounds = [len({int(i) for i in ids[first[r] : first[r + 1]] if i >= 0}) for r in range(len(raws))]
    return decoded, skips, char_start.tolist(), first.tolist(), tokens, found_keys, valid, ids, bounds


def compare(raws: list[bytes], keys: np.ndarray, texts: list[str]) -> list[int]:
    got = shingle_regions(raws, SIZES, keys, texts)
    want = reference(raws, keys, texts)
    decoded, skips, char_start, first, starts, ends, hashes, scripts, found_keys, valid, ids, bounds = got
    as64 = lambda b: np.frombuffer(b, dtype=np.int64).tolist()  # noqa: E731
    assert decoded == want[0] and as64(skips) == want[1] and as64(char_start) == want[2] and as64(first) == want[3]
    tokens = want[4]
    assert as64(starts) == tokens.starts.tolist() and as64(ends) == tokens.ends.tolist()
    assert np.frombuffer(hashes, dtype=np.uint64).tolist() == tokens.hashes.tolist() and bytes(scripts) == tokens.scripts.tobytes()
    assert np.frombuffer(found_keys, dtype=np.uint64).tolist() == want[5].tolist() and bytes(valid) == want[6].tobytes()
    assert as64(ids) == want[7].tolist() and as64(bounds) == want[8]
    return as64(bounds)


@pytest.fixture(scope="module")
def passages() -> list[str]:
    items = load_benchmark(ECLEKTIC_CSV).items[:20]
    return [v.context for item in items for v in item.variants.values() if v.context]


def field_of(text: str):
    """A field's rare shingles: their texts and, aligned, their keys."""
    found = field_shingles(text, SIZES, SetAside(), None)
    return found.rare_keys, found.texts[: found.rare]


def test_stretches_of_real_passages_cut_anywhere_are_shingled_as_the_steps_did(passages):
    rng = random.Random(3)
    matched = 0
    for passage in passages[:60]:
        keys, texts = field_of(passage[: rng.randrange(40, 400)])
        raws = []
        for source in [*rng.sample(passages, 6), passage]:
            data = source.encode("utf-8")
            start = rng.randrange(len(data))
            raws.append(data[start : start + rng.randrange(0, 900)])
        matched += sum(compare(raws, keys, texts))
    assert matched > 100  # stretches of the field's own passage hold its shingles


def test_damaged_bytes_empty_stretches_and_no_field_shingles(passages):
    data = passages[3].encode("utf-8")
    keys, texts = field_of(passages[3])
    hostile = [b"", b"\x80\x80\xbf", data[1:200], data[:199] + b"\xe4\xb8", b"\xff\xfe" + data[:100], data[:50] + b"\xed\xa0\x80" + data[50:120],
               b"\xc0\x80abc def ghi", "\n\r\t \u2028".encode(), data, b"x"]  # fmt: skip
    assert compare(hostile, keys, texts)[-2] == len(texts)
    compare([], keys, texts)
    compare(hostile, np.zeros(0, dtype=np.uint64), [])


def test_a_key_shared_by_two_texts_matches_only_the_text_that_is_there(passages):
    """Keys only propose: a field text given another's key is never taken for it."""
    keys, texts = field_of(passages[5])
    assert len(texts) > 2
    spaced = next(text for text in texts if " " in text)
    forged_keys = np.concatenate([keys, keys[:1], keys[texts.index(spaced) : texts.index(spaced) + 1]])
    forged_texts = [*texts, "a shingle that is not there", spaced.replace(" ", "_")]
    compare([passages[5].encode("utf-8")], forged_keys, forged_texts)
    reordered = np.concatenate([keys[:1], keys])
    compare([passages[5].encode("utf-8")], reordered, ["nothing here at all", *texts])


def test_characters_never_seen_before_are_learned_and_cut(passages):
    unseen = "".join(chr(c) for c in range(0x1E900, 0x1E920)) + " 𞤀𞤁 𞤂"  # Adlam, in no other test text
    keys, texts = field_of(unseen)
    compare([unseen.encode("utf-8"), passages[0].encode("utf-8")[:300]], keys, texts)


def test_bad_arguments_are_refused():
    keys = np.zeros(2, dtype=np.uint64)
    with pytest.raises(ValueError, match="a uint64 key per shingle text"):
        shingle_regions([b"abc"], SIZES, keys, ["one"])
    with pytest.raises(TypeError, match="stretch 1 is not bytes"):
        shingle_regions([b"abc", "abc"], SIZES, keys, ["one", "two"])
    with pytest.raises(TypeError, match="shingle text 0 is not str"):
        shingle_regions([b"abc"], SIZES, keys, [b"one", "two"])
    with pytest.raises(ValueError, match="no shingle size"):
        shingle_regions([b"abc def ghi"], SIZES[:1], keys, ["one", "two"])
