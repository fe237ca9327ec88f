"""The n-gram signal and the default policy on planted contamination in a real index."""
from __future__ import annotations

import pytest
from conftest import ECLEKTIC_CSV, FIXTURES, write_jsonl

from audit.corpora.local import LocalIndex
from audit.evidence import Evidence
from audit.exposure import SEEN, UNSEEN, decide
from audit.index.build import build_index
from audit.items import Item, Variant
from audit.policyfile import load_policy
from audit.readers import load_benchmark
from audit.signals.ngram import NgramConfig, run

CONFIG = NgramConfig()


def edited(text: str, every: int = 30) -> str:
    """A light edit: every `every`-th word replaced, as a paraphrasing copy-editor might."""
    words = text.split()
    return " ".join("[edit]" if i % every == every - 1 else w for i, w in enumerate(words))


@pytest.fixture(scope="module")
def planted(tmp_path_factory, wiki_docs):
    items = load_benchmark(ECLEKTIC_CSV).items
    verbatim, paraphrased, absent = items[0], items[1], items[2]
    host = wiki_docs["en"][0]["text"]
    docs = [row for rows in wiki_docs.values() for row in rows]
    # Each planted document is recorded in the language of the copy it holds, as a corpus's metadata would.
    docs.append({"id": "planted-verbatim", "lang": "fr", "text": host[:300] + " " + verbatim.variants["fr"].context + " " + host[300:]})
    docs.append({"id": "planted-edited", "lang": "de", "text": edited(paraphrased.variants["de"].context) + " " + host})
    docs.append(
        {
            "id": "planted-pair",
            "lang": "en",
            "text": f"{host[:500]} The station of {absent.variants['en'].title} became known. {host[500:700]} "
            f"Answer: {absent.variants['en'].answer}.",
        }
    )
    root = tmp_path_factory.mktemp("planted")
    write_jsonl(root / "docs.jsonl", docs)
    build_index([root / "docs.jsonl"], root / "index")
    return LocalIndex(root / "index"), verbatim, paraphrased, absent


def tags_for(corpus, item):
    policy = load_policy()
    return {lang: decide(policy, run(corpus, item, lang, CONFIG)).exposure for lang in item.variants}


def alone(variant: Variant) -> Item:
    return Item("t", "xx", {"xx": variant})


def by_field(evidence, name):
    return next(e for e in evidence if e.field == name)


def test_verbatim_context_is_seen_in_that_language_only(planted):
    corpus, verbatim, _, _ = planted
    tags = tags_for(corpus, verbatim)
    assert tags["fr"] == SEEN
    assert {lang for lang, tag in tags.items() if tag == SEEN} == {"fr"}
    context = by_field(run(corpus, verbatim, "fr", CONFIG), "context")
    assert context.figures["exact_count"] == 1
    assert context.figures["coverage"] == 1.0
    assert context.figures["longest_match_fraction"] == 1.0
    assert context.provenance[0]["metadata"]["metadata"]["id"] == "planted-verbatim"
    assert context.provenance[0]["snippet"]


def test_lightly_edited_copy_shows_in_longest_match_and_coverage(planted):
    corpus, _, paraphrased, _ = planted
    context = by_field(run(corpus, paraphrased, "de", CONFIG), "context")
    figures = context.figures
    assert figures["exact_count"] == 0
    assert 0.5 < figures["coverage"] < 1.0
    assert 150 <= figures["longest_match_chars"] < figures["chars"]
    assert figures["spans"] and all(end - start >= CONFIG.span_min_chars for start, end in figures["spans"])
    assert context.provenance[0]["metadata"]["metadata"]["id"] == "planted-edited"
    assert tags_for(corpus, paraphrased)["de"] == SEEN


def test_absent_text_is_unseen_with_its_figures(planted):
    corpus, _, _, absent = planted
    evidence = run(corpus, absent, "ja", CONFIG)
    decision = decide(load_policy(), evidence)
    assert decision.exposure == UNSEEN
    assert {check["field"] for check in decision.decided_by} >= {"question", "context"}
    assert all(check["value"] < check["threshold"] for check in decision.decided_by)
    assert by_field(evidence, "context").figures["coverage"] < 0.05


def test_title_and_answer_in_one_document_is_paired_contamination(planted):
    corpus, _, _, absent = planted
    english = absent.variants["en"]
    pair = by_field(run(corpus, absent, "en", CONFIG), "question+answer")
    assert pair.figures["documents"] >= 1
    assert pair.provenance[0]["metadata"]["metadata"]["id"] == "planted-pair"
    far = Variant(question=english.question, answer=english.answer, title=english.title)
    narrow = NgramConfig(cooccurrence_window_bytes=10)
    assert by_field(run(corpus, alone(far), "xx", narrow), "question+answer").figures["documents"] == 0


def test_missing_fields_are_absent_not_unseen(planted):
    corpus = planted[0]
    evidence = run(corpus, alone(Variant()), "xx", CONFIG)
    assert {e.status for e in evidence} == {"absent"}
    assert decide(load_policy(), evidence).exposure == "unknown"


def test_anchor_shared_with_the_source_language_is_not_evidence_for_a_target(planted):
    corpus, _, _, absent = planted
    english = absent.variants["en"]
    french = Variant(question="Quelle est la réponse à cette question ?", answer=english.answer, title=english.title)
    item = Item("shared", "en", {"en": english, "fr": french})
    pair = by_field(run(corpus, item, "fr", CONFIG), "question+answer")
    assert pair.figures["documents"] == 0
    assert pair.figures["anchors_shared_with_source"] == [english.title]
    assert by_field(run(corpus, item, "en", CONFIG), "question+answer").figures["documents"] >= 1


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({"coverage": [0.6, 0.9]}, "seen"),
        ({"coverage": [0.1, 0.4]}, "unseen"),
        ({"coverage": [0.1, 0.6]}, "unknown"),
        ({"coverage": [0.1, 0.4], "longest_match_chars": [40, 150]}, "unknown"),
        ({"coverage": [0.1, 0.4], "longest_match_chars": [40, 149]}, "unseen"),
    ],
)
def test_a_bounded_figure_fires_on_its_lowest_and_passes_on_its_highest(bounds, expected):
    figures = {"coverage": bounds["coverage"][0], "longest_match_chars": bounds.get("longest_match_chars", [40])[0], "bounds": bounds}
    decision = decide(load_policy(), [Evidence(signal="ngram", source="c", field="context", figures=figures)])
    assert decision.exposure == expected
    if expected == "unknown":
        undecided = [d for d in decision.decided_by if d.get("status") == "bounded"]
        assert undecided and all(d["bounds"][0] < d["threshold"] <= d["bounds"][1] for d in undecided)


@pytest.fixture(scope="module")
def xquad_museum(tmp_path_factory, wiki_docs):
    """XQuAD's Victoria and Albert Museum paragraph (real rows): its Romanian and Vietnamese
    translations keep a 363-character list of painters' names in English.  The corpus holds the
    English paragraph only."""
    items = {item.item_id: item for item in load_benchmark(FIXTURES / "xquad").items}
    item = next(i for i in items.values() if i.variants["en"].title == "Victoria and Albert Museum")
    docs = [*wiki_docs["en"][:200], {"id": "xquad-en", "text": item.variants["en"].context}]
    root = tmp_path_factory.mktemp("xquad-museum")
    write_jsonl(root / "docs.jsonl", docs)
    build_index([root / "docs.jsonl"], root / "index")
    return LocalIndex(root / "index"), item


@pytest.mark.parametrize("lang", ["ro", "vi"])
def test_text_shared_with_the_source_is_set_aside_for_every_rule(xquad_museum, lang):
    corpus, item = xquad_museum
    target = item.variants[lang]
    names = "Jan Brueghel the Elder"
    assert names in target.context and names in item.variants["en"].context
    context = by_field(run(corpus, item, lang, CONFIG), "context")
    shared = [target.context[start:end] for start, end in context.figures["shared_with_source"]]
    assert any(names in span and len(span) >= 300 for span in shared)
    assert context.figures["longest_match_chars"] < 150
    assert tags_for(corpus, item)[lang] == UNSEEN
    single = Item("t", lang, {lang: target})
    alone_context = by_field(run(corpus, single, lang, CONFIG), "context")
    assert alone_context.figures["any_language"]["longest_match_chars"] >= 300, "without its source the name list alone would be a long match"
    assert alone_context.figures["longest_match_chars"] == 0 and set(alone_context.figures["languages"]) == {"en"}
    decision = decide(load_policy(), run(corpus, single, lang, CONFIG))
    assert decision.exposure == UNSEEN, "the English document holding the list is no evidence for this language either"
