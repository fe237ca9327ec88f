"""A shard's sampled keys (`_suffix.shard_keys`): the searches that start from them give the
same answers as those that search the whole suffix array, on real text and on text built to
defeat them (runs of one byte, where the keys of many samples are equal as far as they reach,
suffixes shorter than a key, patterns sorting before and after every suffix, NUL and 0xff
bytes), and the keys are what they say: the first bytes of every step-th suffix, at a step
that keeps a large index's keys within their budget."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import write_jsonl

from audit import _suffix
from audit.corpora.inlanguage import SmallIndex
from audit.corpora.local import LocalIndex
from audit.corpora.shards import KEYS_BUDGET, LEAST_KEY_STEP, key_step
from audit.index.build import build_index

DEMO = Path(__file__).resolve().parent.parent / "audit" / "data" / "demo" / "corpus"
SEARCHES = ("longest_matches", "longest_char_matches", "longest_char_ranks")


def demo_texts(name: str, limit: int) -> list[str]:
    with gzip.open(DEMO / name, "rt", encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines][:limit]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    found = demo_texts("pud-en.jsonl.gz", 80) + demo_texts("pud-ja.jsonl.gz", 40) + demo_texts("iahltwiki-he.jsonl.gz", 6)
    # Repeats: many suffixes equal far past a key's 15 bytes, so samples must be compared in the text.
    return [*found, "a" * 3000, "ab" * 1500, found[0] * 4, "x"]


@pytest.fixture(scope="module")
def shard(tmp_path_factory, texts):
    root = tmp_path_factory.mktemp("keys")
    build_index([write_jsonl(root / "docs.jsonl", [{"text": text} for text in texts])], root / "index")
    found = LocalIndex(root / "index").groups[0].shards[0]
    assert len(found.data) > 100 * found.key_step
    return found


def patterns(texts: list[str]) -> list[bytes]:
    """Passages cut from the text and joined across documents (matches stop midway), every
    length from 0 to past a key, and bytes sorting before and after all the text."""
    rng = random.Random(5)
    encoded = [text.encode("utf-8") for text in texts]
    found = []
    for _ in range(200):
        a, b = rng.sample(encoded, 2)
        cut = rng.randrange(max(1, len(a)))
        found.append(a[cut : cut + rng.randrange(1, 120)] + b[: rng.randrange(0, 40)])
    short = [encoded[0][:n] for n in range(0, 20)] + [b"a" * n for n in (1, 14, 15, 16, 17, 2999, 3000, 3001, 4000)]
    edges = [b"\x00", b"\x00" * 20, b"\xff", b"\xff" * 20, b"\xff\xff\x00a", b"ab" * 800 + b"c", b"x", b"xy", bytes(range(256))]
    return found + short + edges


def keyed_and_plain(shard, name: str, query: bytes, keys: bytes):
    search = getattr(_suffix, name)
    return search(shard.data, shard.table, shard.ratio, query, keys), search(shard.data, shard.table, shard.ratio, query)


@pytest.mark.parametrize("name", SEARCHES)
def test_searches_from_the_keys_answer_as_searches_of_the_whole_array(shard, texts, name):
    keys = shard.keys
    for query in patterns(texts):
        keyed, plain = keyed_and_plain(shard, name, query, keys)
        assert keyed == plain, query[:40]
    assert keyed_and_plain(shard, name, b"", keys) == (keyed_and_plain(shard, name, b"", None)[0],) * 2


def test_casings_counted_from_the_keys_are_those_counted_without(shard, texts):
    rng = random.Random(9)
    picked = [text[at : at + rng.randint(1, 40)] for text in texts if len(text) > 45 for at in rng.sample(range(len(text) - 40), 3)]
    surfaces = [*picked, "", "a", "A" * 16, "a" * 3000, "A" * 3001, "Ab" * 20, "THE", "Straße", "\x00", "zzzz"]
    bare, keyed = (shard.data, shard.table, shard.ratio), (shard.data, shard.table, shard.ratio, shard.keys)
    assert _suffix.casing_counts([keyed], surfaces) == _suffix.casing_counts([bare], surfaces)
    counts = np.frombuffer(_suffix.casing_counts([keyed], surfaces), dtype=np.int64)
    assert counts[surfaces.index("a" * 3000)] == 1 and counts[surfaces.index("")] == len(shard.data) and (counts[: len(picked)] > 0).all()


def test_the_keys_are_the_first_bytes_of_every_sampled_suffix(shard):
    header, *rows = np.frombuffer(shard.keys, dtype=np.uint8).reshape(-1, _suffix.KEY_BYTES)
    keys = np.array(rows)
    step, width = shard.key_step, _suffix.KEY_BYTES - 1
    assert int.from_bytes(bytes(header[:8]), "little") == step == LEAST_KEY_STEP and not header[8:].any()
    assert len(keys) == -(-len(shard.data) // step)
    pointers = shard.pointers(np.arange(0, len(shard.data), step))
    data = bytes(shard.data)
    for key, pointer in zip(keys, pointers.tolist(), strict=True):
        head = data[pointer : pointer + width]
        assert key[-1] == len(head) and bytes(key[: len(head)]) == head and not key[len(head) : -1].any()
    assert [bytes(k[:width]) for k in keys] == sorted(bytes(k[:width]) for k in keys)


def test_a_shard_with_fewer_suffixes_than_a_step_has_one_key(texts):
    for text in (b"", b"z", texts[0].encode("utf-8")[:100], b"\xffab\xffabc"):
        index = SmallIndex.of(text)
        assert len(index.keys) == _suffix.KEY_BYTES * (2 if text else 1)
        for name in SEARCHES:
            for query in (b"", b"a", b"ab", b"abcd", b"\xff", text[3:40], text + b"!"):
                search = getattr(_suffix, name)
                assert search(text, index.table, 4, query, index.keys) == search(text, index.table, 4, query)


def test_a_sampled_suffix_shorter_than_its_key_sorts_before_the_patterns_it_begins():
    """The smallest suffix here, " ab" (rank 0, the only sample), is the last three bytes: a
    pattern going on past it sorts after it, and its longest match is further on."""
    index = SmallIndex.of(b"zzz abcd zzz ab")
    assert index.keys[-1] == 3
    for name in SEARCHES:
        search = getattr(_suffix, name)
        found = search(index.text, index.table, 4, b" abcd!", index.keys)
        assert np.frombuffer(found[0] if name == "longest_char_ranks" else found, dtype=np.int64)[0] == 5


@pytest.mark.parametrize("step", [1, 3, 1000, 10**6])
def test_any_step_gives_the_same_answers(shard, texts, step):
    keys = _suffix.shard_keys(shard.data, shard.table, shard.ratio, step)
    for query in patterns(texts)[::5]:
        assert keyed_and_plain(shard, "longest_char_ranks", query, keys)[0] == keyed_and_plain(shard, "longest_char_ranks", query, None)[1]
    surfaces = ["the", "The", "a" * 20, "日本", "zzzz"]
    assert _suffix.casing_counts([(shard.data, shard.table, shard.ratio, keys)], surfaces) == _suffix.casing_counts([(shard.data, shard.table, shard.ratio)], surfaces)


def test_a_large_index_samples_fewer_suffixes_within_the_budget():
    assert key_step(0) == key_step(10**6) == LEAST_KEY_STEP
    for suffixes in (10**9, 10**11, 2 * 10**12):
        step = key_step(suffixes)
        assert suffixes // step * _suffix.KEY_BYTES <= KEYS_BUDGET < suffixes // (step // 2) * _suffix.KEY_BYTES


def test_keys_of_another_size_are_refused(shard):
    with pytest.raises(ValueError, match="at least 1"):
        _suffix.shard_keys(shard.data, shard.table, shard.ratio, 0)
    other = _suffix.shard_keys(shard.data, shard.table, shard.ratio, 512)
    for wrong in (shard.keys[:-1], shard.keys + b"\x00" * _suffix.KEY_BYTES, b"", bytes(len(shard.keys)), other[:8] + shard.keys[8:]):
        with pytest.raises(ValueError, match="keys have"):
            _suffix.longest_char_matches(shard.data, shard.table, shard.ratio, b"abc", wrong)
        with pytest.raises(ValueError, match="keys have"):
            _suffix.casing_counts([(shard.data, shard.table, shard.ratio, wrong)], ["abc"])
    assert _suffix.longest_matches(shard.data, shard.table, shard.ratio, b"abc", None) == _suffix.longest_matches(shard.data, shard.table, shard.ratio, b"abc")
