"""The infini-gram API client and corpus against real servers on 127.0.0.1: `audit serve` over
real indexes (compared with the local backend); tests/test_client_scripted.py has the servers
that misbehave on purpose.  No HTTP is patched or mocked."""
from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from conftest import checked_records, strip_table
from test_server import OLMO, SAMPLE, Served, build_token_index, start_server

from audit.corpora import counting
from audit.corpora.api import ApiCorpus, ApiOptions
from audit.corpora.base import Budget
from audit.corpora.cache import ResponseCache
from audit.corpora.client import (
    ClientSettings,
    InfiniGramClient,
    OfflineMiss,
)
from audit.corpora.demo import demo_index
from audit.corpora.local import LocalIndex
from audit.corpora.registry import cache_dir
from audit.exposure import decide
from audit.items import Item, Variant
from audit.policyfile import build_config, load_policy
from audit.readers import load_benchmark
from audit.signals import ngram


@pytest.fixture(scope="module")
def demo_dir() -> Path:
    return demo_index(cache_dir())


@pytest.fixture(scope="module")
def olmo_index(tmp_path_factory) -> Path:
    docs = ["The rain in Seattle, Washington is light.", "Seattle, Washington has a port.", "Washington\nwas the first president."]
    return build_token_index(docs, OLMO, tmp_path_factory.mktemp("olmo") / "index")


@pytest.fixture(scope="module")
def served(demo_dir: Path, wiki_index: Path, olmo_index: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server(
        "--index", f"demo={demo_dir}",
        "--index", f"wiki={wiki_index}",
        "--index", f"olmo={olmo_index}",
        "--tokenizer", f"olmo={OLMO}",
        "--jobs-dir", str(tmp_path_factory.mktemp("jobs")),
    )
    yield server
    server.stop()


def corpus(url: str, index: str, cache: Path | None = None, offline: bool = False, **options) -> ApiCorpus:
    client = InfiniGramClient(ClientSettings(url=url, index=index, offline=offline, backoff=0.01, max_backoff=0.05), ResponseCache(cache) if cache else None)
    return ApiCorpus(client, index, ApiOptions(**options))


def head(text: str, size: int) -> str:
    """The longest prefix of at most `size` UTF-8 bytes."""
    return text.encode("utf-8")[:size].decode("utf-8", errors="ignore")


def texts_from(docs: dict[str, list[dict]]) -> list[str]:
    """Passages, pieces of them, and strings the corpus lacks, in several scripts, each within
    the query limits (a longer field's longest match is capped: see the windowing test)."""
    picked = []
    for lang, rows in docs.items():
        text = " ".join(rows[7]["text"].split())
        picked += [head(text, 420), text[40:90], f"zq{lang} " + text[10:60] + " qz"]
    return [*picked, "University", "東京都", "xyzzy plugh", "1945"]


def without_api_metadata(entry: dict) -> dict:
    """A provenance entry less what only the API client records, to compare with the local backend's."""
    return {**entry, "metadata": {k: v for k, v in entry["metadata"].items() if k != "infini_gram_api"}}


def test_counts_and_longest_matches_equal_the_local_backend(served: Served, wiki_index: Path, wiki_docs):
    local = LocalIndex(wiki_index)
    api = corpus(served.url, "wiki")
    for text in texts_from(wiki_docs):
        assert api.count(text) == local.count(text), text
        assert api.match_lengths(text) == local.match_lengths(text), text
    assert api.details["tokenization"] == "bytes" and api.details["longest_match"] == "auto"
    assert api.details["fields_capped"] == 0 and api.details["fields_bounded"] == 0


def test_longest_matches_derived_from_counts_are_exact_within_budget(served: Served, wiki_index: Path, wiki_docs):
    local = LocalIndex(wiki_index)
    api = corpus(served.url, "wiki", longest_match="count", budget=5000)
    for text in texts_from(wiki_docs)[:9]:
        assert api.match_lengths(text) == local.match_lengths(text), text
    assert api.details["fields_bounded"] == 0


def test_over_budget_lengths_are_lower_bounds_and_counted(served: Served, wiki_index: Path, wiki_docs):
    local = LocalIndex(wiki_index)
    api = corpus(served.url, "wiki", longest_match="count", budget=20)
    text = " ".join(reversed(wiki_docs["en"][3]["text"].split()))[:400]
    got, want = api.match_lengths(text), local.match_lengths(text)
    assert all(low <= w <= high for low, w, high in zip(got.lengths, want.lengths, got.upper(), strict=True))
    assert got.lengths != want.lengths and want.highest is None
    first = next(i for i, (low, high) in enumerate(zip(got.lengths, got.upper(), strict=True)) if low != high)
    assert first > 0 and got.lengths[:first] == want.lengths[:first]
    assert api.details["fields_bounded"] == 1


def test_a_bounded_field_is_unknown_never_unseen(served: Served, wiki_index: Path, wiki_docs):
    """A passage the corpus holds (but for its last words), checked through a budget too small
    to find that out: the evidence carries bounds and the variant is `unknown`; with budget
    enough it is `seen`.  Text the corpus lacks is likewise `unknown`, not `unseen`, until the
    budget suffices."""
    policy = load_policy()
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "ngram")
    passage = head(" ".join(wiki_docs["en"][5]["text"].split()), 380) + " zq plugh xyzzy"
    absent = "xq " + " ".join(f"zz{k}q" for k in range(40))

    rules = policy.rules["ngram"]["context"].for_source("wiki")

    def tags(budget: int, text: str, profile: str = "decide") -> tuple[str, dict]:
        api = corpus(served.url, "wiki", longest_match="count", budget=budget, profile=profile)
        evidence, _ = ngram.field_evidence(api, "context", text, config, rules)
        return decide(policy, [evidence]).exposure, evidence.figures

    tag, figures = tags(3, passage)
    assert tag == "unknown" and figures["bounds"]["coverage"][0] < 0.5 <= figures["bounds"]["coverage"][1]
    assert tags(5000, passage)[0] == "seen" and "bounds" not in tags(5000, passage, "full")[1]
    assert tags(3, absent)[0] == "unknown" and tags(5000, absent)[0] == "unseen"


def test_long_fields_are_windowed_within_the_query_limits(served: Served, demo_dir: Path):
    local = LocalIndex(demo_dir)
    item = load_benchmark(SAMPLE).items[0]
    passage = " ".join(item.variants[item.source_lang].context.split())
    assert len(passage.encode()) > 500
    api = corpus(served.url, "demo")
    got, want = api.match_lengths(passage), local.match_lengths(passage)
    cap = 499 - 50
    pairs = list(zip(got.lengths, want.lengths, strict=True))
    assert all(g == w for g, w in pairs if w < cap) and all(g >= min(w, cap) for g, w in pairs)
    assert all(g < got.upper()[i] for i, (g, w) in enumerate(pairs) if g != w)
    assert api.count(passage) == local.count(passage) or local.count(passage) == 0
    assert api.details["counts_over_limit"] >= 1


def test_occurrences_and_provenance_equal_the_local_backend(served: Served, wiki_index: Path):
    local = LocalIndex(wiki_index)
    api = corpus(served.url, "wiki")
    for text, limit in (("University", 3), ("東京", 3), ("नई", 2), ("the", 500)):
        total, hits = api.occurrences(text, limit)
        local_total, local_hits = local.occurrences(text, limit)
        assert total == local_total
        if limit <= 10:
            assert [(o.document, o.offset) for o in hits] == [(o.document, o.offset) for o in local_hits]
        else:
            assert sorted((o.document, o.offset) for o in hits) == sorted((o.document, o.offset) for o in local_hits)
        for hit in hits[:3]:
            mine, theirs = api.document_hit(hit, len(text.encode()), 40), local.document_hit(hit, len(text.encode()), 40)
            assert mine == theirs
            assert api.surrounding(hit, 30, 60) == local.surrounding(hit, 30, 60)


def test_audit_check_through_the_api_gives_the_local_exposure_tags(served: Served, demo_dir: Path, tmp_path: Path):
    """Tags are identical.  What may differ, by design: a field past the query limits has an
    inexact count and may have a longest match capped (at least 450 bytes) where the local
    index reports it whole; the remote evidence then gives those figures at their lowest with
    `bounds` that hold the local figure, and its provenance shows the capped match.  Every
    other figure is equal.  The API answers over every document (it knows no document's
    language), so the local index is asked as one built before language tables."""
    plain = tmp_path / "demo"
    shutil.copytree(demo_dir, plain)
    strip_table(plain)
    items = load_benchmark(SAMPLE).items[:8]
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    direct = checked_records(items, [partial(ngram.run, LocalIndex(plain, name="demo"), config=config)], policy)
    api = corpus(served.url, "demo")
    remote = checked_records(items, [partial(ngram.run, api, config=config)], policy)
    assert [(r["item_id"], r["lang"], r["exposure"], r["item_exposure"]) for r in remote] == [(r["item_id"], r["lang"], r["exposure"], r["item_exposure"]) for r in direct]
    bounded = 0
    for mine, theirs in zip(remote, direct, strict=True):
        for a, b in zip(mine["evidence"], theirs["evidence"], strict=True):
            assert a["status"] == b["status"] == "ok" or a["status"] == b["status"] == "absent"
            bounds = a["figures"].get("bounds", {})
            for figure, (lowest, highest) in bounds.items():
                assert lowest == a["figures"][figure] <= b["figures"][figure] <= highest, (mine["item_id"], mine["lang"], a["field"], figure)
            if bounds:
                bounded += 1
                same = {k for k in a["figures"] if k not in bounds and k not in ("bounds", "spans", "longest_match_start", "longest_match_count", "any_language")}
                assert {k: a["figures"][k] for k in same} == {k: b["figures"][k] for k in same}
                continue
            assert a["figures"] == b["figures"], (mine["item_id"], mine["lang"], a["field"])
            exact = [p for p in a["provenance"] if p["metadata"].get("infini_gram_api", {}).get("offset_exact", True)]
            if len(exact) == len(a["provenance"]):
                assert [without_api_metadata(p) for p in a["provenance"]] == b["provenance"]
    assert bounded and api.details["counts_over_limit"] >= 1


def test_offline_replays_the_cache_and_a_miss_is_unknown(wiki_index: Path, wiki_docs, tmp_path: Path):
    cache = tmp_path / "responses.sqlite"
    server = start_server("--index", f"wiki={wiki_index}", "--jobs-dir", str(tmp_path / "jobs"))
    texts = texts_from(wiki_docs)[:6]
    try:
        online = corpus(server.url, "wiki", cache)
        answers = [(online.count(t), online.match_lengths(t), online.occurrences(t, 3)[0]) for t in texts]
        sent = online.client.stats["requests"]
        again = corpus(server.url, "wiki", cache)
        assert [(again.count(t), again.match_lengths(t), again.occurrences(t, 3)[0]) for t in texts] == answers
        assert again.client.stats["requests"] == 0 and again.client.stats["cache_hits"] >= sent
    finally:
        server.stop()
    offline = corpus(server.url, "wiki", cache, offline=True)
    assert [(offline.count(t), offline.match_lengths(t), offline.occurrences(t, 3)[0]) for t in texts] == answers
    with pytest.raises(OfflineMiss):
        offline.count("a question never asked")
    item = Item(item_id="x", source_lang="en", variants={"en": Variant(question="Which question was never asked online?", answer="none")})
    evidence = ngram.run(offline, item, "en", ngram.NgramConfig())
    assert {e.field: e.status for e in evidence}["question"] == "failed"
    assert decide(load_policy(None), evidence).exposure == "unknown"
    assert offline.client.stats["offline_misses"] >= 1 and ResponseCache(cache).entries(server.url, "wiki") > 0


def test_concurrent_clients_get_consistent_answers(served: Served, wiki_index: Path, wiki_docs):
    local = LocalIndex(wiki_index)
    texts = texts_from(wiki_docs)
    want = [(local.count(t), local.match_lengths(t)) for t in texts]
    shared = corpus(served.url, "wiki")
    results: dict[int, list] = {}

    def work(k: int) -> None:
        own = corpus(served.url, "wiki") if k % 2 else shared
        results[k] = [(own.count(t), own.match_lengths(t)) for t in texts[k % 3 :] + texts[: k % 3]]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k, got in results.items():
        assert got == want[k % 3 :] + want[: k % 3]
    assert len(results) == 8


def test_token_level_index_tries_the_leading_space_form_and_records_it(served: Served):
    api = corpus(served.url, "olmo")
    assert api.count("Washington") == 2
    assert api.details["tokenization"] == "tokens" and api.details["variant_matches"]["leading space"] == 1
    total, hits = api.occurrences("Washington", 3)
    assert total == 2
    hit = api.document_hit(hits[0], len(b"Washington"), 20)
    assert hit.metadata["infini_gram_api"]["variant"] == "leading space" and "Washington" in hit.snippet
    lengths = api.match_lengths("Seattle, Washington has rain")
    # The server prepends the space, so "Seattle, Washington has" at a document's start is out of reach.
    assert lengths.lengths[0] == len("Seattle, Washington") and lengths.highest is None


def count_only_tags(url: str, index: str, items: list, profile: str, budget: int = 256) -> tuple[list[dict], ApiCorpus]:
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    rules = {name: table.for_source(index) for name, table in policy.rules["ngram"].items()}
    api = corpus(url, index, longest_match="count", budget=budget, profile=profile)
    return checked_records(items, [partial(ngram.run, api, config=config, rules=rules)], policy, workers=4), api


def test_count_only_decisions_on_the_sample_agree_with_the_local_index(served: Served, demo_dir: Path):
    """The sample through `audit serve` as through the public API (counts only, a byte-level
    index: every character a possible match start): at least 95% of variants decided with the
    default budget, and no decided tag that differs from the local index's."""
    items = load_benchmark(SAMPLE).items[:10]
    policy = load_policy(None)
    config = build_config(ngram.NgramConfig, policy.section("ngram"), "built-in")
    local = checked_records(items, [partial(ngram.run, LocalIndex(demo_dir, name="demo"), config=config)], policy)
    remote, api = count_only_tags(served.url, "demo", items, "decide")
    decided = [(mine, theirs) for mine, theirs in zip(remote, local, strict=True) if mine["exposure"] != "unknown"]
    assert len(decided) >= 0.95 * len(remote)
    assert all(mine["exposure"] == theirs["exposure"] for mine, theirs in decided)
    assert {r["exposure"] for r in remote} >= {"seen", "unseen"}
    spent = [sum(e["figures"].get("count_queries", 0) for e in r["evidence"]) for r in remote]
    assert max(spent) <= 256 and api.details["count_budget_per_variant"] == 256
    sampled = [e["figures"]["coverage_sample"] for r in remote for e in r["evidence"] if "coverage_sample" in e.get("figures", {})]
    assert sampled and all(s["confidence"] == 0.99 and s["sampled"] >= 1 for s in sampled)


@pytest.fixture(scope="module")
def olmo_demo(tmp_path_factory) -> Path:
    """The demo corpus's ECLeKTic passages and its parallel sentences in every language,
    tokenized with OLMo's tokenizer into an index of infini-gram's format."""
    from conftest import CORPUS, read_jsonl_gz

    docs = [row["text"] for name in ("eclektic-en-passages", *(f"pud-{lang}" for lang in ("de", "en", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "zh"))) for row in read_jsonl_gz(CORPUS / f"{name}.jsonl.gz")]
    return build_token_index(docs, OLMO, tmp_path_factory.mktemp("olmo-demo") / "index")


def test_count_only_decisions_on_a_tokenized_index_hold_the_exact_figures(olmo_demo: Path, tmp_path: Path):
    """On a token-level index served over HTTP, at least 98% of variants are decided, and every
    longest-match and coverage figure the decisions rest on is bounded around the exact one:
    the full longest-match profile, computed from the same index's counts in this process
    (exact at word boundaries, as `test_counting` checks against a direct index)."""
    from audit.server.engine import ServedIndex
    from audit.server.messages import QueryRequest
    from audit.server.tokenizer import Tokenizer
    from audit.text import normalize, windows

    server = start_server("--index", f"olmo-demo={olmo_demo}", "--tokenizer", f"olmo-demo={OLMO}", "--jobs-dir", str(tmp_path / "jobs"))
    try:
        items = load_benchmark(SAMPLE).items[:8]
        decided, api = count_only_tags(server.url, "olmo-demo", items, "decide")
    finally:
        server.stop()
    assert api.details["tokenization"] == "tokens"
    assert sum(r["exposure"] != "unknown" for r in decided) >= 0.98 * len(decided)
    assert any(r["exposure"] == "seen" for r in decided)
    served = ServedIndex("olmo-demo", olmo_demo, Tokenizer(OLMO))

    def occurs(piece: str) -> bool:
        return any(served.answer(QueryRequest(index="olmo-demo", query_type="count", query=form))["count"] for _, form in api._variants(piece))

    by_key = {(r["item_id"], r["lang"]): r for r in decided}
    checked = 0
    for item in items:
        for lang, variant in item.variants.items():
            for evidence in by_key[item.item_id, lang]["evidence"]:
                if evidence["field"] not in ("question", "context") or evidence["status"] != "ok":
                    continue
                text = normalize(variant.text(evidence["field"]))
                ask = counting.Asker(text, occurs, counting.Known(counting.Geometry.of(len(text), lambda i, t=text: api._boundary(t, i), api._reaches(text))), Budget(), 10**9, lambda f, xs: [f(x) for x in xs])
                counting.scan(ask)
                lengths = ask.known.lengths().lengths
                spans = windows(text, evidence["figures"]["window_size"])
                exact = {"longest_match_chars": max(lengths), "coverage": round(sum(lengths[a] >= b - a for a, b in spans) / len(spans), 4)}
                figures = evidence["figures"]
                for name, value in exact.items():
                    low, high = figures.get("bounds", {}).get(name, (figures[name], figures[name]))
                    assert low <= value <= high, (item.item_id, lang, evidence["field"], name, low, value, high)
                checked += 1
    assert checked >= 150
