"""The near-duplicate signal's view (`audit.report.minhashview`), in Python rather than a
template: the bytes it writes for each kind of evidence (those the template it replaced wrote),
and that every string of the evidence is escaped, whichever branch shows it."""
from __future__ import annotations

import pytest
from viewcases import assert_every_string_escaped, assert_only_web_urls_link

from audit.report.minhashview import show

HOSTILE = "<script>x</script>"
DOC = {"document": 7, "offset": 100, "length": 40, "containment": 0.5, "jaccard": 0.25, "snippet": "before Lisbon after", "snippet_match": [7, 13], "metadata": {"path": "wiki-pt.jsonl", "linenum": 4, "metadata": {"url": "https://pt.wikipedia.org/wiki/Lisboa", "title": "Lisboa"}}}
CASES = {
    "estimated_and_verified": {
        "signal": "minhash", "source": "demo", "field": "context", "status": "ok",
        "figures": {"containment": 0.5, "jaccard": 0.25, "shingles": 12, "script": "latin", "shingles_shared_with_source": 3, "estimated_containment": 0.4, "estimated_jaccard": 0.2, "verified": 10, "candidates": 50, "exhaustive": False},
        "provenance": [
            DOC,
            {"document": 8, "offset": 0, "snippet": "Lisbon", "snippet_match": [0, 6], "metadata": {"path": "a.jsonl", "linenum": None, "metadata": {"url": "ftp://host/x", "id": "doc-8"}}},
            {"document": 9, "offset": 2, "length": 6, "containment": 0.1, "snippet": "x Lisbon", "snippet_match": [2, 8], "metadata": {"path": "b.jsonl", "linenum": 0, "metadata": None}},
        ],
    },
    "exhaustive_nothing_shared": {
        "signal": "minhash", "source": "demo", "field": "question", "status": "ok",
        "figures": {"containment": 1.0, "jaccard": 0.8, "shingles": 5, "script": "han", "shingles_shared_with_source": 0, "estimated_containment": 1.0, "estimated_jaccard": 0.9, "verified": 3, "candidates": 3, "exhaustive": True},
        "provenance": [DOC],
    },
    "no_candidates": {
        "signal": "minhash", "source": "demo", "field": "question", "status": "ok",
        "figures": {"containment": 0.0, "jaccard": 0.0, "shingles": 4, "script": "latin", "verified": 0, "candidates": 0},
        "provenance": [],
    },
    "no_shingles": {"signal": "minhash", "source": "demo", "field": "answer", "status": "ok", "figures": {"containment": None, "jaccard": None}, "provenance": []},
    "failed": {"signal": "minhash", "source": "demo", "field": "question", "status": "failed", "error": "the index is gone", "figures": {}, "provenance": []},
    "absent": {"signal": "minhash", "source": "demo", "field": "context", "status": "absent", "figures": {}, "provenance": []},
}

EXPECTED = {
    'estimated_and_verified': '<div class="figures-line muted">containment 50.0% · Jaccard 25.0% of 12 latin shingles (3 shared with the source text set aside) · estimated 40.0% / 20.0% · 10 of 50 LSH candidates verified (the likeliest)</div>\n  <div class="muted doc">near-duplicate in document 7:\n<a href="https://pt.wikipedia.org/wiki/Lisboa">Lisboa</a>    <code>wiki-pt.jsonl:5</code> at byte 100, 40 bytes ·\n    containment 50.0% · Jaccard 25.0%  </div>\n  <div class="snippet">…before <mark>Lisbon</mark> after…</div>\n  <div class="muted doc">near-duplicate in document 8:\ndoc-8 <code class="url">ftp://host/x</code>    <code>a.jsonl:</code> at byte 0  </div>\n  <div class="snippet">…<mark>Lisbon</mark>…</div>\n  <div class="muted doc">near-duplicate in document 9:\nuntitled    <code>b.jsonl:1</code> at byte 2, 6 bytes ·\n    containment 10.0% · Jaccard –  </div>\n  <div class="snippet">…x <mark>Lisbon</mark>…</div>\n',
    'exhaustive_nothing_shared': '<div class="figures-line muted">containment 100.0% · Jaccard 80.0% of 5 han shingles · estimated 100.0% / 90.0% · 3 of 3 LSH candidates verified</div>\n  <div class="muted doc">near-duplicate in document 7:\n<a href="https://pt.wikipedia.org/wiki/Lisboa">Lisboa</a>    <code>wiki-pt.jsonl:5</code> at byte 100, 40 bytes ·\n    containment 50.0% · Jaccard 25.0%  </div>\n  <div class="snippet">…before <mark>Lisbon</mark> after…</div>\n',
    'no_candidates': '<div class="figures-line muted">containment 0.0% · Jaccard 0.0% of 4 latin shingles · 0 of 0 LSH candidates verified (the likeliest)</div>\n',
    'no_shingles': '<div class="figures-line muted">containment – · Jaccard –</div>\n',
    'failed': '<div class="figures-line muted">failed: the index is gone</div>\n',
    'absent': '<div class="figures-line muted">absent</div>\n',
}


@pytest.mark.parametrize("name", CASES)
def test_each_kind_of_evidence_is_written_as_the_template_wrote_it(name):
    assert str(show(CASES[name])) == EXPECTED[name]


@pytest.mark.parametrize("name", CASES)
def test_every_string_of_the_evidence_is_escaped(name):
    figures = {"shingles": HOSTILE, "shingles_shared_with_source": HOSTILE, "verified": HOSTILE, "candidates": HOSTILE}
    assert_every_string_escaped(show, CASES[name], HOSTILE, ("status", "snippet_match"), figures, ("document", "offset", "length"))


def test_a_web_url_is_a_link_and_any_other_stays_text():
    assert_only_web_urls_link(show, CASES["estimated_and_verified"], "near-duplicate in document 8")


def test_what_the_evidence_lacks_shows_as_nothing_rather_than_failing_the_page():
    """The template raised on a document without `metadata`; a missing offset shows as a
    template showed `doc.get("offset")`, None."""
    evidence = {"signal": "minhash", "source": "demo", "field": "question", "status": "ok", "provenance": [{"document": 1}, "not an object"]}
    assert str(show(evidence)) == (
        '<div class="figures-line muted">containment – · Jaccard –</div>\n'
        '  <div class="muted doc">near-duplicate in document 1:\nuntitled    <code>:</code> at byte None  </div>\n'
        '  <div class="snippet">…<mark></mark>…</div>\n'
    )
