"""infini-gram mini windows in bytes, over Chinese, Japanese, Hindi and Hebrew documents:
`audit serve`'s `/mini/` route answers as the public server does (held against a replay of
that server's code, tests/replay/mini.py), decode errors included; the client reads the
windows in bytes, retries the windows the server cannot decode (bounded, counted, said in
provenance), and its provenance snippets equal the documents' text exactly."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from replay.mini import MiniReplay
from test_server import Served, start_server

from audit.corpora.api import ApiOptions
from audit.corpora.base import Occurrence
from audit.corpora.cache import ResponseCache
from audit.corpora.client import ApiQueryError, ClientSettings, InfiniGramClient
from audit.corpora.local import LocalIndex
from audit.corpora.mini import DECODE_TRIES, MiniCorpus, MiniWindow
from audit.index.build import build_index

CORPUS = Path(__file__).resolve().parents[1] / "audit" / "data" / "demo" / "corpus"
SOURCES = {"zh": ("wiki-zh", 5), "ja": ("wiki-ja", 8), "hi": ("xquad-hi", 4), "he": ("iahltwiki-he", 2)}


@pytest.fixture(scope="module")
def scripts_index(tmp_path_factory) -> Path:
    """A byte-level index of a few documents in each script, from the demo corpus."""
    root = tmp_path_factory.mktemp("scripts")
    for lang, (name, count) in SOURCES.items():
        with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt", encoding="utf-8") as rows:
            kept = [json.loads(line) for _, line in zip(range(count), rows, strict=False)]
        (root / f"{lang}.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in kept), encoding="utf-8")
    out = tmp_path_factory.mktemp("indexes") / "scripts"
    build_index([root], out)
    return out


@pytest.fixture(scope="module")
def documents(scripts_index: Path) -> dict[str, tuple[str, bytes]]:
    """Each indexed document's text as the index holds it, by id, with its language."""
    local = LocalIndex(scripts_index)
    texts = {}
    for doc in range(local.info.documents):
        meta = local.metadata(doc)["metadata"]
        texts[meta["id"]] = (meta["lang"], local.surrounding(Occurrence(doc, 0), 0, 1 << 30))
    return texts


@pytest.fixture(scope="module")
def served(scripts_index: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server("--index", f"scripts={scripts_index}", "--jobs-dir", str(tmp_path_factory.mktemp("jobs")))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def replay(documents) -> Iterator[MiniReplay]:
    server = MiniReplay([data.decode("utf-8") for _, data in documents.values()], index="scripts")
    yield server
    server.stop()


def needles(documents, lang: str, width: int) -> list[str]:
    """Substrings from the middle of the language's documents, well past any small window."""
    texts = [data.decode("utf-8") for code, data in documents.values() if code == lang]
    return [" ".join(text.split())[len(text) // 3 :][:width].strip() or text[:width] for text in texts[:2]]


def corpus(url: str, max_ctx_len: int, cache: Path | None = None, offline: bool = False) -> MiniCorpus:
    client = InfiniGramClient(ClientSettings(url=url, index="scripts", backoff=0.01, max_backoff=0.05, offline=offline), ResponseCache(cache) if cache else None)
    return MiniCorpus(client, "scripts", ApiOptions(longest_match="count", max_ctx_len=max_ctx_len))


def _all_windows(url: str, query: str, context: int) -> Counter:
    """Every get_doc_by_rank answer for the query's matches, without what depends on the
    engine's own numbering (ranks, document numbers) or timing."""
    found = requests.post(url, json={"index": "scripts", "query_type": "find", "query": query}, timeout=30).json()
    answers: Counter = Counter()
    for s, (lo, hi) in enumerate(found["segment_by_shard"]):
        for rank in range(lo, hi):
            doc = requests.post(url, json={"index": "scripts", "query_type": "get_doc_by_rank", "query": query, "s": s, "rank": rank, "max_ctx_len": context}, timeout=30).json()
            doc.pop("latency")
            doc.pop("doc_ix", None), doc.pop("metadata", None)
            answers[json.dumps(doc, ensure_ascii=False, sort_keys=True)] += 1
    return answers


def test_the_route_answers_get_doc_by_rank_as_the_public_server_does(served: Served, replay: MiniReplay, documents):
    route = served.url + "mini/"
    refused = windows = 0
    for lang in SOURCES:
        for query in [n[:width] for n in needles(documents, lang, 6) for width in (1, 3)]:
            count = requests.post(route, json={"index": "scripts", "query_type": "count", "query": query}, timeout=30).json()
            assert count["count"] == replay.count(query)["count"] > 0 and count["latency"] >= 0
            if count["count"] > 40:
                continue
            for context in (1, 2, 3, 5, 40):
                mine, theirs = _all_windows(route, query, context), _all_windows(replay.url, query, context)
                assert mine == theirs, (lang, query, context)
                refused += sum(n for answer, n in mine.items() if "Failed to decode" in answer)
                windows += sum(mine.values())
    # Both outcomes were met: windows cut inside a character, and windows that decode.
    assert 0 < refused < windows


def _post(url: str, **payload) -> dict:
    return requests.post(url, json={"index": "scripts", **payload}, timeout=30).json()


def test_windows_are_counted_in_bytes_and_the_needle_in_characters(served: Served, documents):
    """Two Chinese characters (6 bytes) amid 3-byte characters: the public server reaches
    len(query) = 2 bytes past the match's start plus max_ctx_len, so with a 2-character query
    the window's two ends are never both on a character boundary whatever max_ctx_len; a
    3-character query string decodes at every third max_ctx_len."""
    route = served.url + "mini/"
    text = next(data for code, data in documents.values() if code == "zh").decode("utf-8")
    wide = [len(c.encode()) == 3 for c in text]
    at = next(i for i in range(len(text) // 2, len(text) - 10) if all(wide[i - 4 : i + 8]) and _post(route, query_type="count", query=text[i : i + 2])["count"] == 1)
    query = text[at : at + 2]
    s, (lo, _) = next((s, seg) for s, seg in enumerate(_post(route, query_type="find", query=query)["segment_by_shard"]) if seg[1] > seg[0])
    for context in range(1, 10):
        refused = _post(route, query_type="get_doc_by_rank", query=query, s=s, rank=lo, max_ctx_len=context)
        assert set(refused) == {"error", "latency"} and "Failed to decode document text with UTF-8" in refused["error"]
        answer = _post(route, query_type="get_doc_by_rank", query=query + " ", s=s, rank=lo, max_ctx_len=context)
        if context % 3:
            assert "Failed to decode" in answer["error"]
            continue
        shown = answer["text"].encode("utf-8")
        assert answer["disp_len"] == len(shown) == 2 * context + 3 and answer["needle_offset"] == context
        assert answer["text"] == text[at - context // 3 : at + 1 + context // 3] and answer["doc_len"] == len(text.encode("utf-8"))
        assert answer["spans"] == [[text[at - context // 3 : at + 1 + context // 3], None]]


@pytest.mark.parametrize("max_ctx_len", [1, 25, 301])
def test_provenance_snippets_equal_the_document_text(served: Served, documents, max_ctx_len: int):
    remote = corpus(served.url + "mini/", max_ctx_len)
    by_lang: Counter = Counter()
    for lang in SOURCES:
        for needle in needles(documents, lang, 5):
            total, hits = remote.occurrences(needle, 4)
            assert total >= 1 and hits
            for hit in hits:
                length = len(needle.encode("utf-8"))
                shown = remote.document_hit(hit, length, 40)
                window = hit.window()
                assert isinstance(window, MiniWindow)
                code, text = documents[shown.metadata["metadata"]["id"]]
                # The window's bytes are the document's own, at a place where the needle lies.
                starts = [i for i in range(len(text)) if text.startswith(window.data, i) and text[i + window.needle_at :].startswith(needle.encode())]
                assert starts, (lang, needle)
                if window.offset_exact:
                    assert starts == [0] and shown.offset == window.needle_at
                document = text.decode("utf-8")
                assert shown.snippet in document and shown.snippet[shown.snippet_match_start : shown.snippet_match_end] == needle
                expected_before = text[starts[0] : starts[0] + window.needle_at].decode("utf-8")[-40:]
                assert shown.snippet.startswith(expected_before) and shown.snippet_match_start == len(expected_before)
                retried = shown.metadata.get("infini_gram_mini", {}).get("decode_retries", 0)
                assert retried == window.decode_retries < DECODE_TRIES
                by_lang[code] += 1
    assert set(by_lang) == set(SOURCES)
    details = remote.details
    assert details["document_windows"] == "bytes" and details["decode_retries"] >= details["windows_decode_retried"]
    if max_ctx_len == 25:
        assert details["windows_decode_retried"] > 0


def test_decode_errors_are_retried_on_character_boundaries_and_counted(replay: MiniReplay, documents):
    remote = corpus(replay.url, 7)
    before = len(replay.requests)
    retried = 0
    for lang in SOURCES:
        for needle in needles(documents, lang, 4):
            asked = len(replay.requests)
            # Up to ten occurrences are sorted by document and offset: their windows are fetched at once.
            _, hits = remote.occurrences(needle, 3)
            windows = [hit.window() for hit in hits]
            made = [r for r in replay.requests[asked:] if r["query_type"] == "get_doc_by_rank"]
            assert len(made) == sum(1 + window.decode_retries for window in windows)
            for hit, window in zip(hits, windows, strict=True):
                mine = [(r["max_ctx_len"], len(r["query"])) for r in made if r["rank"] == hit.rank]
                assert len(mine) == len(set(mine)) == 1 + window.decode_retries and mine[-1] == (window.max_ctx_len, window.needle_len)
                retried += window.decode_retries > 0
    assert retried == remote.details["windows_decode_retried"] > 0
    assert remote.client.stats["requests"] == len(replay.requests) - before


def test_a_server_that_never_decodes_is_asked_a_bounded_number_of_times(documents):
    server = MiniReplay([data.decode("utf-8") for _, data in documents.values()], index="scripts", undecodable=True)
    try:
        remote = corpus(server.url, 100)
        needle = needles(documents, "he", 4)[0]
        with pytest.raises(ApiQueryError, match=f"no window the server could decode after {DECODE_TRIES} requests"):
            remote.occurrences(needle, 1)
        asked = [r for r in server.requests if r["query_type"] == "get_doc_by_rank"]
        assert len(asked) == DECODE_TRIES == len({(r["max_ctx_len"], len(r["query"])) for r in asked})
    finally:
        server.stop()


def test_an_offline_rerun_reads_retried_windows_from_the_cache(served: Served, documents, tmp_path: Path):
    cache = tmp_path / "cache.sqlite"
    online = corpus(served.url + "mini/", 13, cache)
    offline = corpus(served.url + "mini/", 13, cache, offline=True)
    for lang in SOURCES:
        needle = needles(documents, lang, 4)[0]
        first = [hit.window() for hit in online.occurrences(needle, 3)[1]]
        again = [hit.window() for hit in offline.occurrences(needle, 3)[1]]
        assert [(w.data, w.needle_at, w.decode_retries) for w in first] == [(w.data, w.needle_at, w.decode_retries) for w in again]
    assert online.details["windows_decode_retried"] > 0 and offline.client.stats["requests"] == 0


def test_the_replay_refuses_as_the_public_server_does(replay: MiniReplay):
    """The public server's own refusals (api/api_server.py), which the client must tell from a
    window it may ask again: none of them is a decode error."""
    for body, status, message in (
        ({"index": "scripts", "query_type": "count"}, 400, "[Flask] Missing required field: 'query'"),
        ({"index": "v2_cc_2025-05", "query_type": "count", "query": "a"}, 400, "[Flask] Invalid index: v2_cc_2025-05"),
        ({"index": "scripts", "query_type": "creativity", "query": "a"}, 400, "[Flask] Invalid query_type: creativity"),
        ({"index": "scripts", "query_type": "get_doc_by_rank", "query": "a", "s": 0, "rank": 0}, 500, "[Flask] Internal server error: "),
    ):
        answer = requests.post(replay.url, json=body, timeout=10)
        assert answer.status_code == status and answer.json()["error"].startswith(message), (body, answer.text)
    wrong = MiniCorpus(InfiniGramClient(ClientSettings(url=replay.url, index="nope", attempts=1)), "nope")
    with pytest.raises(ApiQueryError, match=r"\[Flask\] Invalid index: nope"):
        wrong.occurrences("שלום", 1)
    assert wrong.details["decode_retries"] == 0
