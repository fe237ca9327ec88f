"""Fewer requests per decision against real servers on 127.0.0.1 (`audit serve` over a real
byte-level index and a real OLMo-tokenized one): answers grouped into OR queries equal the
answers asked one by one, co-occurrence from one CNF query equals the documents read one
occurrence at a time, and the server-side leading space of byte-level BPE tokenizers (as the
public server's `tokenize` adds it, api/api_server.py of liujch1998/infini-gram, commit
37d2929) is neither doubled by the client nor missing from `audit serve`."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from replay.nocnf import no_cnf
from test_server import OLMO, TOKEN_DOCS, Served, build_token_index, load_tokenizer, start_server

from audit.corpora.api import ApiCorpus, ApiOptions
from audit.corpora.base import MatchQuestions
from audit.corpora.client import ClientSettings, InfiniGramClient
from audit.corpora.grouped import QueryLimits, pack, resolve
from audit.corpora.local import LocalIndex
from audit.corpora.mini import MiniCorpus
from audit.corpora.surface import AS_IS, LEADING_SPACE, WORD_START, TokenizerKind, conjunction, disjunction, forms, kind_of_index
from audit.text import windows


@pytest.fixture(scope="module")
def olmo1_index(tmp_path_factory) -> Path:
    return build_token_index(TOKEN_DOCS, OLMO, tmp_path_factory.mktemp("olmo1") / "index", width=2)


@pytest.fixture(scope="module")
def served(wiki_index: Path, olmo1_index: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server("--index", f"wiki={wiki_index}", "--index", f"olmo={olmo1_index}", "--tokenizer", f"olmo={OLMO}", "--jobs-dir", str(tmp_path_factory.mktemp("jobs")))
    yield server
    server.stop()


def corpus(url: str, index: str, **options) -> ApiCorpus:
    return ApiCorpus(InfiniGramClient(ClientSettings(url=url, index=index, backoff=0.01, max_backoff=0.05)), index, ApiOptions(**options))


def test_the_tokenizer_type_is_read_from_the_documented_index_names():
    # Names and types from api/api_config.json and docs/source/api.rst of liujch1998/infini-gram.
    assert kind_of_index("v4_pileval_llama") == TokenizerKind.LLAMA
    assert kind_of_index("v4_rpj_llama_s4") == TokenizerKind.LLAMA
    assert kind_of_index("v4_dolma-v1_7_llama") == TokenizerKind.LLAMA
    assert kind_of_index("v4_pileval_gpt2") == TokenizerKind.GPT2
    assert kind_of_index("v4_dolmasample_olmo") == TokenizerKind.OLMO
    assert kind_of_index("v4_olmo-mix-1124_llama") == TokenizerKind.LLAMA
    assert kind_of_index("v4_olmo-3-7b-instruct_olmo2") == TokenizerKind.TOKENS
    assert kind_of_index("demo") is None and kind_of_index("v2_cc-2025-05") is None
    with pytest.raises(ValueError, match="tokenizer 'sentencepiece' is not one of"):
        ApiOptions(tokenizer="sentencepiece")


def test_surface_forms_by_tokenizer():
    assert forms(TokenizerKind.GPT2, " Seattle rain") == [(AS_IS, "Seattle rain")]
    assert forms(TokenizerKind.OLMO, "Seattle rain") == [(LEADING_SPACE, "Seattle rain")]
    assert forms(TokenizerKind.LLAMA, " 18, 2005") == [(WORD_START, "18, 2005")]
    assert forms(TokenizerKind.LLAMA, "Seattle") == [(AS_IS, "Seattle")]
    assert forms(TokenizerKind.TOKENS, "Seattle") == [(AS_IS, "Seattle"), (LEADING_SPACE, " Seattle")]
    assert forms(TokenizerKind.BYTES, " Seattle") == [(AS_IS, " Seattle")]


def test_cnf_queries_refuse_terms_the_server_would_split_otherwise():
    assert disjunction(["a b", " c"]) == "a b OR  c"
    assert disjunction(["cats OR dogs", "x"]) is None and disjunction(["x AND y"]) is None and disjunction(["x OR", "y"]) is None
    assert conjunction(["Seattle", "rain"]) == "Seattle AND rain"
    assert conjunction(["Seattle"]) is None and conjunction(["a AND", "b"]) is None and conjunction(["a OR b", "c"]) is None


def test_group_testing_answers_every_question_as_asked_alone():
    present = {"f"}
    asked: list[tuple[str, ...]] = []

    def any_occurs(terms: tuple[str, ...]) -> bool:
        asked.append(terms)
        return any(term in present for term in terms)

    questions = [(t,) for t in "abcdefgh"]
    groups = pack(questions, QueryLimits(terms=4))
    assert groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    answers = [found for group in groups for found in resolve([questions[i] for i in group], any_occurs)]
    assert answers == [t in present for t in "abcdefgh"]
    assert len(asked) < len(questions)
    # Nothing asked twice, and a lone second half after an empty first half is known without asking.
    assert len(set(asked)) == len(asked) and ("f",) not in asked
    many = {"b", "e", "f"}
    assert [found for group in groups for found in resolve([questions[i] for i in group], lambda terms: any(t in many for t in terms))] == [t in many for t in "abcdefgh"]


def test_packing_keeps_each_request_within_the_limits():
    questions = [("x" * 400,), ("y" * 150,), ("z" * 100,), ("w",)]
    groups = pack(questions, QueryLimits(terms=4, chars=1000, tokens=500))
    assert groups == [[0], [1, 2, 3]]
    assert all(QueryLimits().holds([t for i in g for t in questions[i]]) for g in groups if len(g) > 1)


def test_grouped_answers_equal_one_by_one_answers_with_fewer_requests(served: Served, wiki_index: Path, wiki_docs):
    local = LocalIndex(wiki_index)
    # A passage of the corpus with three words in four spelled backwards: few pieces occur.
    texts = [" ".join(w if i % 4 == 0 else w[::-1] for i, w in enumerate(rows[7]["text"].split()))[:300] for lang, rows in wiki_docs.items() if lang in ("en", "fr", "de", "es")]
    for text in texts:
        spans = windows(text, 3)
        grouped, single = corpus(served.url, "wiki", longest_match="count"), corpus(served.url, "wiki", longest_match="count", forms="both")
        a = grouped.match_lengths(text, MatchQuestions(longest=(12, 40), windows=spans, coverage=(0.5,)))
        b = single.match_lengths(text, MatchQuestions(longest=(12, 40), windows=spans, coverage=(0.5,)))
        truth = local.match_lengths(text).lengths
        # The same answers, so the same lower bounds; grouping also asks the whole text, which may
        # settle upper bounds differently: both hold the truth.
        assert a.lengths == b.lengths
        for found in (a, b):
            assert all(low <= t <= high for low, t, high in zip(found.lengths, truth, found.upper(), strict=True))
        assert grouped.details["grouped"]["requests"] >= 1 and grouped.client.stats["requests"] < single.client.stats["requests"]
        assert grouped.count(text) == local.count(text) == 0


def test_cooccurrence_from_one_cnf_query_equals_reading_every_document(served: Served, wiki_index: Path):
    pairs = [("University", "Washington"), ("the", "of"), ("東京", "日本"), ("zqxj", "the")]
    for strings in pairs:
        cnf, documents = corpus(served.url, "wiki", cnf_above=0), corpus(served.url, "wiki", cooccurrence="documents")
        found = [cnf.occurrences(text, 500) for text in strings]
        counts = [total for total, _ in found]
        if not all(counts):
            continue
        near = cnf.near_documents(strings, counts, 300, 500)
        assert near is not None, strings
        by_cnf, exhaustive = near
        assert exhaustive and cnf.details["cooccurrence"]["cnf_queries"] == 1
        # The same documents as reading every occurrence of the rarer string (all fit the limit).
        rarest = min(range(2), key=counts.__getitem__)
        rare, other = strings[rarest].encode(), strings[1 - rarest].encode()
        if counts[rarest] > 500:
            continue
        hits = documents.occurrences(strings[rarest], 500)[1]
        expected = {h.document for h in hits if other in documents.surrounding(h, 300 + len(other), len(rare) + 300 + len(other))}
        # The engine drops a pair whose other string also stands just before, in the preceding
        # document (see audit.corpora.cooccur): every document found is one reading finds.
        assert set(by_cnf) <= expected and bool(by_cnf) == bool(expected), strings
        for document, (occurrence, text) in by_cnf.items():
            hit = cnf.document_hit(occurrence, len(text.encode()), 20)
            assert hit.document == document and text in hit.snippet


def test_a_byte_level_window_beyond_the_servers_reach_reads_documents(served: Served):
    api = corpus(served.url, "wiki")
    counts = [api.occurrences(text, 500)[0] for text in ("University", "Washington")]
    assert api.near_documents(["University", "Washington"], counts, 2000, 500) is None
    assert api.details["cooccurrence"]["by_documents"] == 1 and api.details["cooccurrence"]["cnf_queries"] == 0


def test_audit_serve_prepends_the_space_for_a_byte_level_bpe_tokenizer(served: Served):
    tokenizer = load_tokenizer(OLMO)
    body = served.post({"index": "olmo", "query_type": "count", "query": "Washington"}).json()
    assert body["token_ids"] == tokenizer.encode(" Washington", add_special_tokens=False).ids
    assert body["count"] == sum(doc.count(" Washington") for doc in TOKEN_DOCS)
    cnf = served.post({"index": "olmo", "query_type": "count", "query": "deep learning OR machine learning"}).json()
    assert cnf["token_ids"] == [[tokenizer.encode(" deep learning", add_special_tokens=False).ids, tokenizer.encode(" machine learning", add_special_tokens=False).ids]]
    assert served.post({"index": "olmo", "query_type": "count", "query": ""}).json()["token_ids"] == []


def test_the_client_learns_the_servers_space_and_adds_none(served: Served):
    api = corpus(served.url, "olmo")
    assert api.count("University of Washington") == 3
    assert api.details["tokenizer"] == "gpt2 (learned)" and api.details["tokenization"] == "tokens"
    # A text starting with a space is sent without it: the server puts it back, never doubled.
    assert api._variants(" University of Washington") == [(AS_IS, "University of Washington")]
    assert api.count(" University of Washington") == 3
    told = corpus(served.url, "olmo", tokenizer="olmo")
    assert told.details["tokenizer"] == "olmo" and told.count(" deep learning") == 2
    # Mid-sentence text is found; a document's first word, never preceded by a space, is not.
    lengths = told.match_lengths("natural language processing and deep learning at the zoo")
    assert max(lengths.lengths) == len("natural language processing and deep learning at the")
    assert told.count("Research in natural language") == 0 and told.count("in natural language") == 1


def test_cooccurrence_on_a_tokenized_index(served: Served):
    strings = ["natural language processing", "deep learning"]
    truth = {i for i, doc in enumerate(TOKEN_DOCS) if all(s in doc for s in strings)}
    # Few occurrences: their documents are read, exactly.
    api = corpus(served.url, "olmo")
    counts = [api.occurrences(text, 500)[0] for text in strings]
    assert api.near_documents(strings, counts, 200, 500) is None and api.details["cooccurrence"]["by_documents"] == 1
    # Through the CNF query: within reach, and what it finds is there.
    cnf = corpus(served.url, "olmo", cnf_above=0)
    counts = [cnf.occurrences(text, 500)[0] for text in strings]
    near = cnf.near_documents(strings, counts, 200, 500)
    assert near is not None
    documents, exhaustive = near
    assert exhaustive and 1 in documents and set(documents) <= truth
    assert cnf.details["cooccurrence"]["cnf_queries"] == 1 and cnf.details["cooccurrence"]["documents_read"] >= 1


def test_infini_gram_mini_is_never_sent_an_or_query():
    mini = MiniCorpus(InfiniGramClient(ClientSettings(url="http://127.0.0.1:9/", index="v2_cc-2025-05")), "cc")
    assert mini.cnf_refused and "no CNF queries" in mini.details["grouped"]["cnf_refused"]


def test_a_server_refusing_cnf_queries_gets_each_term_asked_alone(served: Served, wiki_docs):
    text = " ".join(w if i % 4 == 0 else w[::-1] for i, w in enumerate(wiki_docs["en"][7]["text"].split()))[:300]
    questions = MatchQuestions(longest=(12, 40), windows=windows(text, 3), coverage=(0.5,))
    direct = corpus(served.url, "wiki", longest_match="count").match_lengths(text, questions)
    with no_cnf(served.url) as (url, refused):
        api = corpus(url, "wiki", longest_match="count")
        found = api.match_lengths(text, MatchQuestions(longest=(12, 40), windows=windows(text, 3), coverage=(0.5,)))
    assert len(refused) == 1 and "not served from a distributed index" in api.details["grouped"]["cnf_refused"]
    assert found.lengths == direct.lengths and api.cnf_refused
