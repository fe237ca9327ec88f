"""The lockstep longest-match searches of `audit._suffix` against plain Python over the corpus
bytes: a real index of the demo corpus's Chinese, Japanese, Hindi, Korean and Hebrew text (3-,
3-, 3-, 3- and 2-byte UTF-8) with a document of 4-byte characters, queried at every character
start and every byte, and the language-restricted search against the reading rules it follows,
with caps small enough that this index's ranges are sampled."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import write_jsonl

from audit import _chars, _suffix
from audit.corpora.inlanguage import SmallIndex
from audit.corpora.local import LocalIndex
from audit.corpora.shardread import char_count, char_starts
from audit.index.build import build_index

DEMO = Path(__file__).resolve().parent.parent / "audit" / "data" / "demo" / "corpus"
LANGS = ("zh", "ja", "hi", "ko")
# Real text of 4-byte characters (CJK Extension B, emoji) next to their 3-byte neighbours.
FOUR_BYTE = "𠮷野家の牛丼は𩸽の定食と並ぶ。𠀋𡈽𡌛 😀👍 は絵文字です。"


def demo_texts(name: str, limit: int) -> list[str]:
    with gzip.open(DEMO / name, "rt", encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines][:limit]


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    found = [{"text": text, "lang": lang} for lang in LANGS for text in demo_texts(f"pud-{lang}.jsonl.gz", 60)]
    found += [{"text": text, "lang": "he"} for text in demo_texts("iahltwiki-he.jsonl.gz", 14)]
    return [*found, {"text": FOUR_BYTE, "lang": "ja"}]


@pytest.fixture(scope="module")
def index(tmp_path_factory, rows) -> LocalIndex:
    root = tmp_path_factory.mktemp("chars")
    build_index([write_jsonl(root / "docs.jsonl", rows)], root / "index")
    return LocalIndex(root / "index")


@pytest.fixture(scope="module")
def shard(index):
    return index.groups[0].shards[0]


def brute_longest(data: bytes, query: bytes, positions: list[int]) -> list[int]:
    """The longest prefix of query[l:] that is a substring of the corpus bytes, tried length by
    length (a match at l less one byte is a match at l + 1, so each starts from there)."""
    found, previous, at = [], 0, 0
    for l in positions:
        length = max(0, previous - (l - at))
        while l + length < len(query) and query[l : l + length + 1] in data:
            length += 1
        found.append(length)
        previous, at = length, l
    return found


def queries(rows: list[dict]) -> list[bytes]:
    """Passages of the indexed text cut and joined across languages, so matches stop midway."""
    rng = random.Random(7)
    texts = [row["text"] for row in rows]
    picked = []
    for _ in range(24):
        a, b = rng.sample(texts, 2)
        cut = rng.randrange(1, max(2, len(a)))
        picked.append((a[cut : cut + 80] + "、" + b[: rng.randrange(1, 60)] + "ずれ").encode("utf-8"))
    return [*picked, FOUR_BYTE.encode(), ("字" * 40).encode(), ("𠮷" * 12).encode()]


def test_character_starts_match_the_corpus_bytes_at_every_start(shard, rows):
    data = bytes(shard.data)
    for query in queries(rows):
        starts = char_starts(query).tolist()
        got = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64).tolist()
        assert got == brute_longest(data, query, starts), query.decode()
        assert any(got), query.decode()


def test_every_byte_matches_the_corpus_bytes_and_the_character_pass(shard, rows):
    data = bytes(shard.data)
    for query in queries(rows)[:8]:
        every = np.frombuffer(_suffix.longest_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
        assert every.tolist() == brute_longest(data, query, list(range(len(query))))
        chars = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
        assert chars.tolist() == every[char_starts(query)].tolist()


def test_characters_are_counted_as_their_starts_are_found(rows):
    """`char_count` sizes a field's answers without making the array of starts: the same
    number for text in every script and for bytes that are not UTF-8 at all."""
    rng = random.Random(7)
    broken = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(500)]
    for query in [*queries(rows), *broken, b"", "\u00e9\u4e2d\U0001f600".encode()]:
        assert char_count(query) == len(char_starts(query))


def test_empty_query_has_no_lengths(shard, index):
    assert _suffix.longest_char_matches(shard.data, shard.table, shard.ratio, b"") == b""
    assert _suffix.longest_matches(shard.data, shard.table, shard.ratio, b"") == b""
    assert index.match_lengths("").lengths == []


def test_a_query_of_one_repeated_character_is_counted_in_characters(index):
    found = index.match_lengths("𠮷" * 12).lengths
    assert found == [1] * 12
    text = "野家の牛丼は" * 3
    lengths = index.match_lengths(text).lengths
    assert lengths[:6] == [6, 5, 4, 3, 2, 1] and lengths[6] == 6


def test_invalid_utf8_is_searched_at_every_non_continuation_byte(shard, rows):
    data = bytes(shard.data)
    valid = rows[0]["text"].encode()[:30]
    for query in (b"\x80\x80" + valid, valid + b"\xe4\xb8", b"\xff" + valid, valid[:4] + b"\xc0\xaf" + valid[4:], b"\x80"):
        starts = [i for i, byte in enumerate(query) if byte & 0xC0 != 0x80]
        got = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64).tolist()
        assert got == brute_longest(data, query, starts), query


def test_character_lengths_are_whole_characters_of_the_byte_matches(index, rows):
    for query in queries(rows)[:6]:
        text = query.decode()
        every = index.longest_match_bytes(query)
        want = [len(query[i : i + n].decode("utf-8", errors="ignore")) for i, n in zip(char_starts(query).tolist(), every[char_starts(query)].tolist(), strict=True)]
        assert index.match_lengths(text).lengths == want


def sampled_ranks(lo: int, hi: int, most: int) -> np.ndarray:
    """The ranks a range is read at, as numpy picks them."""
    if hi - lo <= most:
        return np.arange(lo, hi, dtype=np.int64)
    return np.unique(np.linspace(lo, hi - 1, num=most).round().astype(np.int64))


def documents_of(shard, ranks: np.ndarray) -> np.ndarray:
    return np.searchsorted(shard.offsets, shard.pointers(ranks), side="right") - 1


def test_any_allowed_reads_the_ranks_numpy_picks(shard):
    rng = np.random.default_rng(3)
    documents = len(shard.offsets)
    directory = _suffix.document_directory(shard.offsets, len(shard.data))
    for trial in range(300):
        lo = int(rng.integers(0, len(shard.data) - 2))
        hi = int(rng.integers(lo + 2, min(len(shard.data), lo + 5000) + 1))
        most = int(rng.integers(1, 400)) if trial >= 20 else 1 + trial % 2  # one rank is the range's first, as numpy has it
        picked = np.unique(documents_of(shard, sampled_ranks(lo, hi, most)))
        allowed = np.zeros(documents, dtype=bool)
        assert not _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, lo, hi, most)
        one = rng.choice(picked)
        allowed[one] = True
        assert _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, lo, hi, most)
        allowed = np.ones(documents, dtype=bool)
        allowed[picked] = False
        assert not _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, lo, hi, most)
        assert not _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, lo, hi, most, directory)
        assert not _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, lo, hi, most, directory, _suffix.block_verdicts(allowed, directory))
        allowed[one] = True
        assert _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, lo, hi, most, directory)
        assert _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, lo, hi, most, directory, _suffix.block_verdicts(allowed, directory))


def test_a_sample_of_ranks_is_numpys_linspace_read_in_the_shard(shard):
    """`sample_ranks` reads the ranks numpy's linspace picks (each once), their documents and
    offsets as searchsorted finds them; ranges of one rank, counts of one and more counts than
    ranks included; damaged arguments refused."""
    rng = np.random.default_rng(5)
    cases = [(0, 1, 1), (7, 8, 3), (10, 20, 1), (10, 20, 2), (10, 20, 10), (10, 20, 25), (0, len(shard.data), 100)]
    for _ in range(300):
        lo = int(rng.integers(0, len(shard.data) - 1))
        cases.append((lo, int(rng.integers(lo + 1, min(len(shard.data), lo + 5000) + 1)), int(rng.integers(1, 300))))
    for lo, hi, count in cases:
        ranks = np.unique(np.linspace(lo, hi - 1, num=count).round().astype(np.int64))
        pointers = shard.pointers(ranks)
        local = np.searchsorted(shard.offsets, pointers, side="right") - 1
        documents, offsets = (np.frombuffer(b, dtype=np.int64) for b in _suffix.sample_ranks(shard.table, shard.ratio, shard.offsets, lo, hi, count))
        assert documents.tolist() == local.tolist() and offsets.tolist() == (pointers - shard.offsets[local] - 1).tolist(), (lo, hi, count)
    for lo, hi, count in ((5, 5, 1), (-1, 3, 1), (0, len(shard.data) + 1, 1), (0, 3, 0)):
        with pytest.raises(ValueError, match="out of range"):
            _suffix.sample_ranks(shard.table, shard.ratio, shard.offsets, lo, hi, count)
    with pytest.raises(ValueError, match="out of range"):
        _suffix.sample_ranks(shard.table[:-1], shard.ratio, shard.offsets, 0, 3, 1)


def reference_holds(shard, mask: np.ndarray, pattern: bytes, caps: tuple[int, int]) -> bool | None:
    """Whether an allowed document holds the pattern, by the reading rules in plain Python,
    each length's range read afresh: whole up to `scan_cap` ranks (or `first_look`, where it is
    larger), else `first_look` then `scan_cap` ranks sampled (None: none found among them)."""
    first_look, scan_cap = caps
    lo, hi = _suffix.find_range(shard.data, shard.table, shard.ratio, pattern)
    if hi <= lo:
        return False
    if hi - lo <= max(first_look, scan_cap):
        return bool(mask[documents_of(shard, np.arange(lo, hi, dtype=np.int64))].any())
    if any(mask[documents_of(shard, sampled_ranks(lo, hi, most))].any() for most in (first_look, scan_cap)):
        return True
    return None


def reference_restricted(shard, mask, query: bytes, upper: list[int], caps, own: tuple[bytes, bytes] | None = None) -> tuple[list[int], list[int]]:
    """The restricted search by the reading rules; given the shard's own (lengths, ranks), a
    start whose own match is the upper length and whose rank lies in an allowed document is
    answered that length at once, exactly, where reading a sampled range may leave it open."""
    low, high, previous, at = [], [], 0, 0
    lengths, ranks = (np.frombuffer(found, dtype=np.int64).tolist() for found in own) if own else ([0] * len(upper), [-1] * len(upper))
    for k, (i, top) in enumerate(zip(char_starts(query).tolist(), upper, strict=True)):
        floor, length, open_ = max(0, min(previous - (i - at), top)), top, False
        ranked = top > floor and lengths[k] >= top > 0 and bool(mask[documents_of(shard, np.array([ranks[k]]))[0]])
        if top > floor and not ranked:
            first = reference_holds(shard, mask, query[i : i + top], caps)
            if not first:
                open_, lo, hi = first is None, floor, top - 1
                while lo < hi:
                    middle = (lo + hi + 1) >> 1
                    answer = reference_holds(shard, mask, query[i : i + middle], caps)
                    lo, hi = (middle, hi) if answer else (lo, middle - 1)
                    open_ = open_ or answer is None
                length = lo
        low.append(length)
        high.append(top if open_ else length)
        previous, at = length, i
    return low, high


def shard_tuple(shard, mask: np.ndarray, query: bytes, helped: bool) -> tuple:
    """A shard as `restricted_longest` reads it: bare, or with its document directory, its
    own lengths and ranks and its blocks' verdicts, whose answers must be the same."""
    if not helped:
        return (shard.data, shard.table, shard.ratio, shard.offsets, mask)
    lengths, ranks = _suffix.longest_char_ranks(shard.data, shard.table, shard.ratio, query)
    directory = _suffix.document_directory(shard.offsets, len(shard.data))
    return (shard.data, shard.table, shard.ratio, shard.offsets, mask, directory, lengths, ranks, _suffix.block_verdicts(mask, directory))


@pytest.mark.parametrize("helped", [False, True])
@pytest.mark.parametrize("caps", [(256, 1 << 16), (3, 9), (1, 4), (1, 2), (5, 2)])
@pytest.mark.parametrize("lang", ["ja", "hi", "he"])
def test_restricted_search_follows_the_reading_rules(index, shard, rows, caps, lang, helped):
    mask = np.array([row["lang"] == lang for row in rows])
    opened = settled = 0
    for query in queries(rows)[:10]:
        upper = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
        shard_as = shard_tuple(shard, mask, query, helped)
        low, high = _suffix.restricted_longest([shard_as], query, upper, caps)
        got = (np.frombuffer(low, dtype=np.int64).tolist(), np.frombuffer(high, dtype=np.int64).tolist())
        assert got == reference_restricted(shard, mask, query, upper.tolist(), caps, shard_as[6:8] if helped else None), (query.decode(), caps)
        opened += got[0] != got[1]
        settled += got != reference_restricted(shard, mask, query, upper.tolist(), caps)
    if caps[-1] < 16:
        assert opened, "the small caps must leave some lengths open"
    if helped and caps == (3, 9) and lang == "ja":
        assert settled, "a rank found in an allowed document must settle a start the sample left open"



def test_skipped_starts_are_not_searched_and_answer_nothing(shard, rows):
    """`longest_char_matches` and `longest_char_ranks` with a skip flag per character start: the
    others' answers are the full search's, a skipped one 0 (rank -1); all or none skipped too."""
    rng = np.random.default_rng(3)
    for query in [*queries(rows)[:12], FOUR_BYTE.encode()]:
        full = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
        full_ranks = np.frombuffer(_suffix.longest_char_ranks(shard.data, shard.table, shard.ratio, query)[1], dtype=np.int64)
        for skip in (rng.random(len(full)) < 0.6, np.ones(len(full), dtype=bool), np.zeros(len(full), dtype=bool)):
            got = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query, shard.keys, skip), dtype=np.int64)
            assert got.tolist() == np.where(skip, 0, full).tolist(), query.decode()
            lengths, ranks = _suffix.longest_char_ranks(shard.data, shard.table, shard.ratio, query, None, skip)
            assert lengths == got.tobytes()
            assert np.frombuffer(ranks, dtype=np.int64).tolist() == np.where(skip, -1, full_ranks).tolist()
    with pytest.raises(ValueError, match="skip has 2 bytes for 3 positions"):
        _suffix.longest_char_matches(shard.data, shard.table, shard.ratio, b"abc", None, b"\x00\x01")


def reference_held(shard, mask: np.ndarray, query: bytes, lengths: np.ndarray, ranks: np.ndarray) -> list[bool]:
    """`held_starts` of one shard written out: a start is held where nothing was found, where
    the previous start is held and this one's length is that one's less the bytes between them,
    or where the rank found lies in an allowed document."""
    starts, held = char_starts(query).tolist(), []
    for j, (length, rank) in enumerate(zip(lengths.tolist(), ranks.tolist(), strict=True)):
        follows = j > 0 and held[-1] and lengths[j - 1] - (starts[j] - starts[j - 1]) == length
        held.append(length == 0 or bool(follows) or bool(mask[documents_of(shard, np.array([rank]))[0]]))
    return held


@pytest.mark.parametrize("lang", ["ja", "hi", "he"])
def test_held_starts_are_those_whose_restricted_match_is_known(shard, rows, lang):
    """`held_starts` against its rule written out; at every held start the longest match in the
    allowed documents alone (brute force) is the unrestricted one.  A second, refusing copy of
    the shard changes nothing; a shard without its own answers is refused."""
    mask = np.array([row["lang"] == lang for row in rows])
    allowed = b"\xff".join(row["text"].encode() for row in rows if row["lang"] == lang)
    directory = _suffix.document_directory(shard.offsets, len(shard.data))
    held_total = starts_total = 0
    for query in queries(rows):
        lengths, ranks = _suffix.longest_char_ranks(shard.data, shard.table, shard.ratio, query)
        upper, at = np.frombuffer(lengths, dtype=np.int64), np.frombuffer(ranks, dtype=np.int64)
        own = (shard.data, shard.table, shard.ratio, shard.offsets, mask, directory, lengths, ranks)
        held = np.frombuffer(_suffix.held_starts([own], query, upper), dtype=bool)
        assert held.tolist() == reference_held(shard, mask, query, upper, at), query.decode()
        refusing = (shard.data, shard.table, shard.ratio, shard.offsets, np.zeros_like(mask), None, lengths, ranks)
        assert _suffix.held_starts([refusing, own], query, upper) == held.tobytes()
        want = np.array(brute_longest(allowed, query, char_starts(query).tolist()), dtype=np.int64)
        assert (want[held] == upper[held]).all(), query.decode()
        held_total, starts_total = held_total + int(held.sum()), starts_total + len(held)
    assert 0 < held_total < starts_total
    with pytest.raises(ValueError, match="own lengths and ranks"):
        _suffix.held_starts([(shard.data, shard.table, shard.ratio, shard.offsets, mask)], b"abc", np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="one int64 per character start"):
        _suffix.held_starts([own], b"abc", np.zeros(2, dtype=np.int64))


def test_each_rank_found_starts_with_its_match(shard, rows):
    """`longest_char_ranks`: the lengths of `longest_char_matches`, and at each character start
    a rank whose suffix starts with the match (-1 exactly where there is none)."""
    data = bytes(shard.data)
    for query in [*queries(rows)[:12], b"", "\U0001f47d no such text \u2603".encode()]:
        lengths, ranks = _suffix.longest_char_ranks(shard.data, shard.table, shard.ratio, query)
        assert lengths == _suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query)
        found, at = np.frombuffer(lengths, dtype=np.int64), np.frombuffer(ranks, dtype=np.int64)
        for i, length, rank in zip(char_starts(query).tolist(), found.tolist(), at.tolist(), strict=True):
            assert (rank == -1) == (length == 0), (query.decode(), i)
            if length:
                start = int(shard.pointers(np.array([rank]))[0])
                assert data[start : start + length] == query[i : i + length]


def test_a_document_directory_gives_every_pointer_its_document(shard, rows):
    """Every pointer of the shard looked up through `document_directory` lands in the document
    numpy's search of the offsets gives, at ranks read whole and sampled."""
    directory = _suffix.document_directory(shard.offsets, len(shard.data))
    words = np.frombuffer(directory, dtype=np.int64)
    assert words[0] >= 0 and len(words) == (len(shard.data) >> int(words[0])) + 3
    pointers = np.arange(len(shard.data), dtype=np.int64)
    ranks = np.argsort(shard.pointers(np.arange(len(shard.data), dtype=np.int64)))  # the rank of each pointer
    every = np.searchsorted(shard.offsets, pointers, side="right") - 1
    rng = np.random.default_rng(5)
    for document in rng.choice(len(shard.offsets), 40, replace=False).tolist():
        allowed = np.zeros(len(shard.offsets), dtype=bool)
        allowed[document] = True
        inside = ranks[every == document]
        for rank in rng.choice(inside, min(len(inside), 20), replace=False).tolist():
            assert _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, allowed, rank, rank + 1, 1, directory)
            assert not _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, ~allowed, rank, rank + 1, 1, directory)
    with pytest.raises(ValueError, match="directory"):
        _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, np.ones(len(shard.offsets), dtype=bool), 0, 1, 1, directory[8:])


def reference_verdicts(shard, mask: np.ndarray) -> list[int]:
    """Per directory block, by numpy: 1 or 0 when the documents a pointer in it can be in
    (those from the last starting at or before the block's start to the last starting at or
    before the next block's) all have that mask value, else 2; 2 before the first document."""
    shift = int(np.frombuffer(_suffix.document_directory(shard.offsets, len(shard.data)), dtype=np.int64)[0])
    starts = np.arange((len(shard.data) >> shift) + 2, dtype=np.int64) << shift
    last = np.searchsorted(shard.offsets, starts, side="right") - 1
    found = []
    for j in range(len(starts) - 1):
        values = set(mask[max(last[j], 0) : max(last[j + 1], 0) + 1].tolist())
        found.append(2 if last[j] < 0 or len(values) > 1 else int(values.pop()))
    return found


def test_block_verdicts_answer_for_every_pointer_of_their_block(shard, rows):
    """A block judged all allowed or none holds only pointers into documents of that mask
    value, for a language's documents (kept together: nearly every block judged), scattered
    documents, all and none; each verdict is numpy's over the block's documents."""
    directory = _suffix.document_directory(shard.offsets, len(shard.data))
    shift = int(np.frombuffer(directory, dtype=np.int64)[0])
    pointers = np.arange(len(shard.data), dtype=np.int64)
    documents = np.searchsorted(shard.offsets, pointers, side="right") - 1
    rng = np.random.default_rng(11)
    together = [np.array([row["lang"] == lang for row in rows]) for lang in ("ja", "he", "ko")]
    together += [np.ones(len(rows), dtype=bool), np.zeros(len(rows), dtype=bool)]
    scattered = rng.random(len(rows)) < 0.1
    for mask in [*together, scattered]:
        verdicts = np.frombuffer(_suffix.block_verdicts(mask, directory), dtype=np.uint8)
        assert verdicts.tolist() == reference_verdicts(shard, mask)
        judged = verdicts[pointers >> shift] != 2
        assert (mask[documents[judged]] == verdicts[pointers[judged] >> shift].astype(bool)).all()
        if mask is scattered:
            assert (verdicts == 2).any() and (verdicts != 2).any()
        else:
            assert (verdicts != 2).mean() > 0.9, "a language's documents lie together: nearly every block is judged"


def test_block_verdicts_must_be_their_directorys(shard, rows):
    directory = _suffix.document_directory(shard.offsets, len(shard.data))
    mask = np.array([row["lang"] == "ja" for row in rows])
    verdicts = _suffix.block_verdicts(mask, directory)
    with pytest.raises(ValueError, match="directory"):
        _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, mask, 0, 5, 5, None, verdicts)
    with pytest.raises(ValueError, match="verdicts"):
        _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, mask, 0, 5, 5, directory, verdicts[:-1])
    query = queries(rows)[0]
    upper = _suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query)
    with pytest.raises(ValueError, match="directory"):
        _suffix.restricted_longest([(shard.data, shard.table, shard.ratio, shard.offsets, mask, None, None, None, verdicts)], query, upper, (4, 8))
    with pytest.raises(ValueError, match="directory"):
        _suffix.block_verdicts(mask[:-2], directory)
    with pytest.raises(ValueError, match="directory"):
        _suffix.block_verdicts(mask, directory[:8])


@pytest.mark.parametrize("lang", ["zh", "ko", "he"])
def test_restricted_lengths_are_those_of_the_allowed_documents_alone(shard, rows, lang):
    mask = np.array([row["lang"] == lang for row in rows])
    allowed = b"\xff".join(row["text"].encode() for row in rows if row["lang"] == lang)
    for query in queries(rows)[:8]:
        upper = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
        low, high = _suffix.restricted_longest([(shard.data, shard.table, shard.ratio, shard.offsets, mask)], query, upper, (256, 1 << 16))
        want = brute_longest(allowed, query, char_starts(query).tolist())
        assert np.frombuffer(low, dtype=np.int64).tolist() == want == np.frombuffer(high, dtype=np.int64).tolist(), (lang, query.decode())


@pytest.mark.parametrize("lang", ["zh", "hi", "he"])
def test_a_documents_text_searched_as_text_answers_as_its_suffix_array(rows, lang):
    """`longest_in_text` (a let-in document's text, not sorted) against the lockstep search
    over that text's own suffix array (how a language's small index is asked)."""
    from audit.corpora.inlanguage import _sorted_suffixes, longest_in_text

    text = b"\xff".join(row["text"].encode() for row in rows if row["lang"] == lang)
    table = _sorted_suffixes(text)
    for query in [*queries(rows)[:12], b"", "𠮷".encode()]:
        want = np.frombuffer(_suffix.longest_char_matches(text, table, 4, query), dtype=np.int64).tolist()
        assert longest_in_text(text, query).tolist() == want, query.decode()
        assert longest_in_text(b"", query).tolist() == [0] * len(want)
    stray = b"\x80ab\xe4\xb8"  # a stray continuation byte, and a character cut short
    assert longest_in_text(b"zab\xe4\xb8\xadz", stray).tolist() == [4, 3, 2]



def reference_in_text(text: bytes, query: bytes, upper: list[int], held: list[bool]) -> list[int]:
    """`longest_in_text` under upper lengths and held starts, written out."""
    found, previous, at = [], 0, 0
    for k, i in enumerate(char_starts(query).tolist()):
        top = min(upper[k], len(query) - i)
        length = top if held[k] else min(max(0, previous - (i - at)), top)
        while length < top and query[i : i + length + 1] in text:
            length += 1
        found.append(length)
        previous, at = length, i
    return found


@pytest.mark.parametrize("lang", ["ja", "he"])
def test_a_text_searched_under_upper_lengths_and_held_starts(shard, rows, lang):
    """Upper lengths that bound the text's own (the whole shard's) change no answer; held starts
    are answered upper's length and floor the next start, as written out, so every answer lies
    between the text's own and upper's; arguments of the wrong size are refused."""
    from audit.corpora.inlanguage import longest_in_text

    text = b"\xff".join(row["text"].encode() for row in rows if row["lang"] == lang)
    rng = random.Random(5)
    for query in [*queries(rows)[:12], FOUR_BYTE.encode()]:
        own = longest_in_text(text, query)
        upper = np.frombuffer(_suffix.longest_char_matches(shard.data, shard.table, shard.ratio, query), dtype=np.int64)
        assert longest_in_text(text, query, upper, np.zeros(len(upper), dtype=bool)).tolist() == own.tolist()
        held = np.array([rng.random() < 0.3 for _ in upper])
        got = longest_in_text(text, query, upper, held)
        assert got.tolist() == reference_in_text(text, query, upper.tolist(), held.tolist()), query.decode()
        assert (own <= got).all() and (got <= upper).all() and (got[held] == upper[held]).all()
        low = np.minimum(upper, 1)
        assert longest_in_text(text, query, low).tolist() == np.minimum(own, low).tolist()
    with pytest.raises(ValueError, match="one int64 per character start"):
        longest_in_text(text, b"abc", np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="one byte per start"):
        longest_in_text(text, b"abc", np.zeros(3, dtype=np.int64), np.zeros(2, dtype=bool))


def test_bad_arguments_are_refused(shard):
    with pytest.raises(ValueError):
        _suffix.any_allowed(shard.table, shard.ratio, shard.offsets, np.zeros(3, dtype=bool), 0, 1, 1)
    with pytest.raises(ValueError):
        _suffix.restricted_longest([], b"abc", np.zeros(2, dtype=np.int64), (1, 1))
    mask = np.ones(len(shard.offsets), dtype=bool)
    upper = np.zeros(3, dtype=np.int64)
    bare = (shard.data, shard.table, shard.ratio, shard.offsets, mask)
    with pytest.raises(ValueError, match="go together"):
        _suffix.restricted_longest([(*bare, None, upper.tobytes(), None)], b"abc", upper, (1, 1))
    with pytest.raises(ValueError, match="one int64 per character start"):
        _suffix.restricted_longest([(*bare, None, upper[:2].tobytes(), upper[:2].tobytes())], b"abc", upper, (1, 1))
    with pytest.raises(ValueError, match="each rank in the shard"):
        _suffix.restricted_longest([(*bare, None, np.ones(3, dtype=np.int64).tobytes(), np.full(3, len(shard.data), dtype=np.int64).tobytes())], b"abc", upper, (1, 1))
    with pytest.raises(ValueError):
        _suffix.longest_char_matches(shard.data, b"\x00" * 3, shard.ratio, b"abc")


def occurrences(data: bytes, pattern: bytes) -> list[int]:
    found, at = [], data.find(pattern)
    while at >= 0:
        found.append(at)
        at = data.find(pattern, at + 1)
    return found


def test_find_range_holds_every_occurrence_and_no_other(shard, rows):
    data = bytes(shard.data)
    rng = random.Random(11)
    patterns = [b"", b"\xff", "の".encode(), "字字".encode(), b"\xe4"]
    for query in queries(rows):
        start = rng.randrange(len(query))
        patterns += [query[start : start + n] for n in (1, 2, 3, 7, 20)]
    for pattern in patterns:
        lo, hi = _suffix.find_range(shard.data, shard.table, shard.ratio, pattern)
        assert sorted(shard.pointers(np.arange(lo, hi, dtype=np.int64)).tolist()) == occurrences(data, pattern) if pattern else hi - lo == len(data), pattern


def plain_maximal_spans(lengths: list[int], min_chars: int) -> list[tuple[int, int]]:
    spans, reach = [], 0
    for start, length in enumerate(lengths):
        if start + length > reach:
            if length >= min_chars:
                spans.append((start, start + length))
            reach = start + length
    return sorted(spans, key=lambda s: (s[0] - s[1], s[0]))


def test_maximal_spans_of_real_matches_are_those_of_the_plain_loop(index, rows):
    from audit.signals.ngram_match import FieldMatch

    rng = random.Random(3)
    kept = 0
    for query in [*queries(rows), b""]:
        text = query.decode()
        lengths = index.match_lengths(text).lengths
        for given in (lengths, [rng.randrange(0, 6) for _ in text]):
            for min_chars in (0, 1, 3, 8):
                found = FieldMatch(text, given).maximal_spans(min_chars)
                assert found == plain_maximal_spans(given, min_chars), (text, min_chars)
                kept += len(found)
    assert kept


def test_windows_found_are_those_the_loop_counts(index, rows):
    """`_figures.window_found` against its definition: of the windows not set aside, those whose
    first character's match reaches their end; on real matches, sizes and random masks."""
    from audit import _figures
    from audit.text import windows

    rng = random.Random(4)
    found_some = 0
    for query in queries(rows):
        text = query.decode()
        lengths = index.match_lengths(text).lengths
        for size in (1, 2, 5):
            every = windows(text, size)
            for skip in (None, bytes(rng.randrange(2) for _ in every)):
                kept = [span for k, span in enumerate(every) if skip is None or not skip[k]]
                want = (len(kept), sum(1 for start, end in kept if lengths[start] >= end - start))
                assert _figures.window_found(lengths, every, *([skip] if skip is not None else [])) == want, (text, size)
                found_some += want[1]
    assert found_some
    with pytest.raises(ValueError, match="skip has 1 bytes for 2 windows"):
        _figures.window_found([3, 3, 3], ((0, 1), (1, 2)), b"\x00")
    with pytest.raises(IndexError, match="a window starts at 5"):
        _figures.window_found([3, 3, 3], ((5, 6),))


def test_shared_windows_are_those_some_source_holds(rows):
    from audit.signals.ngram_match import SharedText
    from audit.text import windows

    rng = random.Random(5)
    texts = [row["text"] for row in rows]
    shared = 0
    for _ in range(40):
        sources = rng.sample(texts, 3)
        piece = sources[0][: rng.randrange(5, 40)]
        ends = (sources[1][-10:], sources[2][:10])
        field = piece + " " + rng.choice(texts)[:60] + ends[0] + ends[1]
        for text in (field, field + "\x00" + piece):
            for size in (1, 3, 5):
                want = frozenset(span for span in windows(text, size) if any(text[span[0] : span[1]] in source for source in sources))
                found = SharedText.find(text, size, sources)
                assert (found.windows if found is not None else frozenset()) == want, (text, size)
                if found is not None:
                    assert found.mask == bytes(span in want for span in windows(text, size))
                shared += len(want)
                if found is not None:  # every position's unshared characters at once, as one by one
                    lengths = [rng.randrange(0, len(text) + 3) for _ in text]
                    assert found.unshared_all(lengths) == [found.unshared(i, n) for i, n in enumerate(lengths)]
    assert shared


def casing_reference(count, surface: str) -> int:
    """What the common-shingle cut sums, written as it was in Python: the surface as written,
    lower-cased and capitalised, each distinct spelling once."""
    lower, capital = surface.lower(), surface[:1].upper() + surface[1:].lower()
    return count(surface) + (count(lower) if lower != surface else 0) + (count(capital) if capital not in (surface, lower) else 0)


def test_surfaces_are_counted_in_their_casings_as_python_spells_them(index, shard, rows):
    """`casing_counts` makes each spelling with str's own methods (so dotted I, titlecase
    digraphs, final sigma and ligatures fold as Python folds them) and sums the distinct ones,
    shard by shard."""
    rng = random.Random(11)
    texts = [row["text"] for row in rows]
    picked = [text[at : at + rng.randint(1, 14)] for text in texts for at in rng.sample(range(max(1, len(text) - 14)), 2)]
    tricky = ["", "İstanbul", "ǅemal", "ΣΟΦΊΑΣ", "Straße", "ﬁne", "THE", "the", "The", "tHE", "1990", "𝄞x", "@Z[`a{", "zebra", "Z", "ÿes",
              "ßa", "\u0345", "日本\u0345", "ﬓ", "ა", "ᲐᲑ", "ꭰ", "𐐨𐐩", "ǈ", "日本語", "ไทย", "עברית", "한국어 a", "中文Ａ", "ǰ"]  # fmt: skip
    surfaces = picked + tricky + [t.upper() for t in picked[:20]] + [t.lower() for t in picked[:20]]
    count = lambda text: len(occurrences(bytes(shard.data), text.encode("utf-8"))) if text else len(shard.data)  # noqa: E731
    one = np.frombuffer(_suffix.casing_counts([(shard.data, shard.table, shard.ratio)], surfaces), dtype=np.int64).tolist()
    assert one == [casing_reference(count, surface) for surface in surfaces]
    assert all(n > 0 for n in one[: len(picked)]) and one[len(picked)] == len(shard.data)
    twice = np.frombuffer(_suffix.casing_counts([(shard.data, shard.table, shard.ratio)] * 2, surfaces), dtype=np.int64).tolist()
    assert twice == [2 * n for n in one]
    assert index.casing_counts(surfaces) == [casing_reference(index.count, surface) for surface in surfaces] and index.casing_counts([]) == []
    assert _suffix.casing_counts([(shard.data, shard.table, shard.ratio)], []) == b""
    with pytest.raises(TypeError, match="surface 1 is not str"):
        _suffix.casing_counts([(shard.data, shard.table, shard.ratio)], ["a", b"a"])
    with pytest.raises(TypeError, match="shard 0 is not a"):
        _suffix.casing_counts([[shard.data, shard.table, shard.ratio]], ["a"])
    with pytest.raises(ValueError, match="table has"):
        _suffix.casing_counts([(shard.data, shard.table[:-4], shard.ratio)], ["a"])


def test_cased_letters_beyond_ascii_are_counted_in_every_casing():
    """Surfaces of cased letters outside ASCII (Latin, Greek, Georgian, Cherokee, Deseret,
    titlecase digraphs, a combining mark with an upper case) are spelled with str's methods;
    caseless ones (Han, Thai, Hebrew, Hangul) are counted as written.  Text holding every
    spelling, so a casing left out changes a count."""
    text = ("straße STRASSE Strasse Ssa ßa İstanbul i̇stanbul σοφίας ΣΟΦΊΑΣ Σοφίας ა Ა ꭰ Ꭰ 𐐨𐐩 𐐀𐐩 "
            "ǅemal ǆemal Ǆemal ͅ Ι 日本語 ไทย עברית 한국어 中文Ａ 中文ａ").encode()  # fmt: skip
    index = SmallIndex.of(text)
    surfaces = ["STRAßE", "Straße", "ßa", "İstanbul", "ΣΟΦΊΑΣ", "σοφίας", "ა", "Ა", "ꭰ", "Ꭰ", "𐐨𐐩", "𐐀𐐩", "ǅemal", "ǆEMAL", "ͅ", "日本語", "ไทย", "עברית", "한국어", "中文Ａ"]
    count = lambda surface: len(occurrences(text, surface.encode("utf-8")))  # noqa: E731
    got = np.frombuffer(_suffix.casing_counts([(index.text, index.table, 4, index.keys)], surfaces), dtype=np.int64).tolist()
    want = [casing_reference(count, surface) for surface in surfaces]
    assert got == want
    assert want[surfaces.index("ΣΟΦΊΑΣ")] > count("ΣΟΦΊΑΣ") and want[surfaces.index("Ა")] > 1 and want[surfaces.index("ͅ")] == 2


@pytest.mark.parametrize("ratio", range(1, 9))
def test_pointers_read_as_words_or_bytes_are_the_little_endian_entries(ratio):
    from audit.corpora.shards import Shard

    rng = np.random.default_rng(ratio)
    entries = rng.integers(0, 1 << min(8 * ratio, 62), size=300, dtype=np.int64)
    table = b"".join(int(e).to_bytes(ratio, "little") for e in entries.tolist())
    shard = Shard(data=b"", table=table, ratio=ratio, offsets=np.zeros(1, dtype=np.int64), metadata=None, metaoff=None, first_document=0)
    ranks = rng.integers(0, len(entries), size=50)
    assert shard.pointers(ranks).tolist() == entries[ranks].tolist()


def test_byte_lengths_become_character_lengths_as_searchsorted_makes_them(rows):
    """`char_lengths` (C) against numpy's searchsorted over the character starts, on real text,
    stray continuation bytes and characters cut short, with every length from 0 past the end."""
    from audit.corpora.shardread import char_lengths, char_starts

    rng = random.Random(5)
    queries = [row["text"].encode()[:300] for row in rows[:20]] + [b"\x80ab\xe4\xb8", "𠮷a".encode()[:3], b"", b"abc"]
    for query in queries:
        starts = char_starts(query)
        lengths = np.array([rng.randint(0, len(query) - s + 2) for s in starts.tolist()], dtype=np.int64)
        bounds = np.append(starts, len(query))
        want = (np.searchsorted(bounds, starts + lengths, side="right") - 1 - np.arange(len(starts))).tolist()
        assert char_lengths(query, lengths) == want, query
    with pytest.raises(ValueError, match="one int64 per character start"):
        _chars.char_lengths(b"abc", np.zeros(2, dtype=np.int64))
