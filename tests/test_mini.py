"""The infini-gram mini backend against `audit serve`'s `/mini/` route over real indexes of real
multilingual text: counts, documents and provenance equal the local index's, the decisions
from counts agree with it, and the protocol's errors and the registry's names behave."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import requests
from conftest import checked_records
from test_server import SAMPLE, Served, start_server

from audit.corpora.api import ApiOptions
from audit.corpora.base import Occurrence, cut_snippet
from audit.corpora.client import ClientSettings, InfiniGramClient, OfflineMiss
from audit.corpora.demo import demo_index
from audit.corpora.local import LocalIndex
from audit.corpora.mini import MiniCorpus
from audit.corpora.registry import BUILTIN, MINI, CorpusError, cache_dir, open_corpus, read_registry
from audit.policyfile import build_config, load_policy
from audit.readers import load_benchmark
from audit.signals import ngram


@pytest.fixture(scope="module")
def demo_dir() -> Path:
    return demo_index(cache_dir())


@pytest.fixture(scope="module")
def served(wiki_index: Path, demo_dir: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server("--index", f"wiki={wiki_index}", "--index", f"demo={demo_dir}", "--jobs-dir", str(tmp_path_factory.mktemp("jobs")))
    yield server
    server.stop()


def mini(served: Served, index: str, **options) -> MiniCorpus:
    client = InfiniGramClient(ClientSettings(url=served.url + "mini/", index=index, backoff=0.01, max_backoff=0.05))
    return MiniCorpus(client, index, ApiOptions(**options))


def test_counts_and_derived_longest_matches_equal_the_local_index(served: Served, wiki_index: Path, wiki_docs):
    local, remote = LocalIndex(wiki_index), mini(served, "wiki")
    for lang in ("en", "zh", "hi", "ja"):
        passage = " ".join(wiki_docs[lang][6]["text"].split())[:200]
        for text in (passage, passage[20:80] + " zq", "東京都", "xyzzy plugh"):
            assert remote.count(text) == local.count(text)
            assert remote.match_lengths(text).lengths == local.match_lengths(text).lengths
    assert remote.details["tokenization"] == "characters" and remote.info.backend == MINI


def test_documents_and_provenance_equal_the_local_index(served: Served, wiki_index: Path):
    local, remote = LocalIndex(wiki_index), mini(served, "wiki", max_ctx_len=300)
    for text, limit in (("University", 3), ("東京", 3), ("नई", 2)):
        total, hits = remote.occurrences(text, limit)
        local_total, local_hits = local.occurrences(text, limit)
        assert total == local_total and [o.document for o in hits] == [o.document for o in local_hits]
        for hit, theirs_at in zip(hits, local_hits, strict=True):
            mine, theirs = remote.document_hit(hit, len(text.encode()), 40), local.document_hit(theirs_at, len(text.encode()), 40)
            assert (mine.snippet, mine.snippet_match_start, mine.snippet_match_end) == (theirs.snippet, theirs.snippet_match_start, theirs.snippet_match_end)
            if hit.window().offset_exact:
                # A window asked again after a decode error says so, beside the document's own metadata.
                retried = mine.metadata.pop("infini_gram_mini", {"decode_retries": 0})
                assert retried["decode_retries"] == hit.window().decode_retries
                assert hit.offset == theirs_at.offset and mine.metadata == theirs.metadata
            else:
                # Past `max_ctx_len` bytes into a document, the offset is a lower bound, and said so.
                assert hit.offset < theirs_at.offset and mine.metadata["infini_gram_api"]["offset_exact"] is False
    assert any(not hit.window().offset_exact for hit in remote.occurrences("University", 3)[1])


def test_the_route_speaks_the_documented_protocol(served: Served, wiki_docs):
    url = served.url + "mini/"
    word = "University"
    count = requests.post(url, json={"index": "wiki", "query_type": "count", "query": word}, timeout=10).json()
    found = requests.post(url, json={"index": "wiki", "query_type": "find", "query": word}, timeout=10).json()
    assert count["count"] == found["cnt"] > 0 and len(found["segment_by_shard"]) >= 1
    s = next(i for i, (lo, hi) in enumerate(found["segment_by_shard"]) if hi > lo)
    doc = requests.post(url, json={"index": "wiki", "query_type": "get_doc_by_rank", "query": word, "s": s, "rank": found["segment_by_shard"][s][0], "max_ctx_len": 20}, timeout=10).json()
    assert set(doc) >= {"doc_ix", "doc_len", "disp_len", "needle_offset", "text", "metadata"}
    # Offsets and lengths count bytes, as the public server's engine does.
    shown = doc["text"].encode("utf-8")
    assert shown[doc["needle_offset"] : doc["needle_offset"] + len(word)] == word.encode()
    assert doc["needle_offset"] <= 20 and len(shown) - doc["needle_offset"] - len(word) <= 20 and doc["disp_len"] == len(shown) <= doc["doc_len"]
    assert [word, "0"] in doc["spans"] and "".join(text for text, _ in doc["spans"]) == doc["text"] and doc["latency"] >= 0
    for body, message in (
        ({"index": "wiki", "query_type": "creativity", "query": "a"}, "Invalid query_type"),
        ({"index": "nope", "query_type": "count", "query": "a"}, "Invalid index"),
        ({"index": "wiki", "query_type": "count", "query": "a" * 1001}, "1000 characters"),
        ({"index": "wiki", "query_type": "get_doc_by_rank", "query": "a", "s": 0, "rank": 0, "max_ctx_len": 0}, "max_ctx_len"),
        ({"index": "wiki", "query_type": "count"}, "query"),
    ):
        answer = requests.post(url, json=body, timeout=10).json()
        assert message in answer["error"], (body, answer)


def test_decisions_from_counts_agree_with_the_local_index(served: Served, demo_dir: Path):
    items = load_benchmark(SAMPLE).items[:4]
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    rules = {name: table.for_source("demo") for name, table in policy.rules["ngram"].items()}
    local = checked_records(items, [partial(ngram.run, LocalIndex(demo_dir, name="demo"), config=config, rules=rules)], policy)
    remote = checked_records(items, [partial(ngram.run, mini(served, "demo"), config=config, rules=rules)], policy, workers=4)
    decided = [(a, b) for a, b in zip(remote, local, strict=True) if a["exposure"] != "unknown"]
    assert len(decided) >= 0.95 * len(remote) and all(a["exposure"] == b["exposure"] for a, b in decided)


def test_mini_corpora_by_name_and_their_registry_errors(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    assert BUILTIN["cc-2025-05"].backend == MINI and BUILTIN["cc-2025-05"].index == "v2_cc-2025-05" and BUILTIN["dclm-mini"].index == "v2_dclm_all"
    assert all(entry.url == "https://api.infini-gram-mini.io/" for entry in BUILTIN.values() if entry.backend == MINI)
    corpus = open_corpus("cc-2025-08", offline=True)
    assert isinstance(corpus, MiniCorpus) and corpus.details["longest_match"] == "count"
    registry = tmp_path / "corpora.toml"
    registry.write_text('[corpora.x]\nbackend = "infini-gram-mini"\nindex = "v2_pileval"\nlongest_match = "creativity"\n', encoding="utf-8")
    with pytest.raises(CorpusError, match="creativity' is not offered by the infini-gram mini API"):
        read_registry(registry)
    with pytest.raises(OfflineMiss):
        open_corpus("pile-val-mini", offline=True).count("a question never asked")


def test_audit_provenance_in_cjk_hindi_and_hebrew_is_the_documents_text(served: Served, demo_dir: Path):
    """Through a whole check, windows of 300 bytes (long documents need decode retries): every
    provenance entry of a Chinese, Japanese, Hindi or Hebrew variant quotes its document
    exactly, at its offset where that is exact, and says how many retries its window took."""
    items = load_benchmark(SAMPLE).items[:4]
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    rules = {name: table.for_source("demo") for name, table in policy.rules["ngram"].items()}
    remote = mini(served, "demo", max_ctx_len=300)
    records = checked_records(items, [partial(ngram.run, remote, config=config, rules=rules)], policy)
    local = LocalIndex(demo_dir, name="demo")
    by_place = {(meta["path"], meta["linenum"]): doc for doc in range(local.info.documents) for meta in [local.metadata(doc)]}
    checked: Counter = Counter()
    exact: Counter = Counter()
    for record in records:
        if record["lang"] not in ("zh", "ja", "hi", "he"):
            continue
        for entry in (entry for evidence in record["evidence"] for entry in evidence.get("provenance", [])):
            meta = entry["metadata"]
            checked[record["lang"]] += 1
            data = local.surrounding(Occurrence(by_place[(meta["path"], meta["linenum"])], 0), 0, 1 << 40)
            snippet, (a, b) = entry["snippet"], entry["snippet_match"]
            assert snippet in data.decode("utf-8") and len(snippet[a:b].encode("utf-8")) == entry["length"]
            assert meta.get("infini_gram_mini", {"decode_retries": 1})["decode_retries"] >= 1
            if meta.get("infini_gram_api", {}).get("offset_exact", True):
                assert data[entry["offset"] : entry["offset"] + entry["length"]] == snippet[a:b].encode("utf-8")
                assert (snippet, a, b) == cut_snippet(data, entry["offset"], entry["length"], config.snippet_chars)
                exact[record["lang"]] += 1
    # Hebrew's long documents hold their matches past the first 300 bytes: offsets there are lower bounds.
    assert set(checked) == {"zh", "ja", "hi", "he"} and sum(exact.values()) > 0 and remote.details["windows_decode_retried"] > 0
