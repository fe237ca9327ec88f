"""The n-gram signal's view (`audit.report.ngramview`), in Python rather than a template: the
bytes it writes for each kind of evidence (those the template it replaced wrote), and that every
string of the evidence is escaped, whichever branch shows it."""
from __future__ import annotations

import pytest
from viewcases import assert_every_string_escaped, assert_only_web_urls_link

from audit.report.ngramview import show

HOSTILE = "<script>x</script>"
DOC = {"document": 12, "offset": 40, "snippet": "before Lisbon after", "snippet_match": [7, 13], "metadata": {"path": "wiki-pt.jsonl", "linenum": 4, "metadata": {"url": "https://pt.wikipedia.org/wiki/Lisboa", "title": "Lisboa"}}}
CASES = {
    "matches": {
        "signal": "ngram", "source": "demo", "field": "question", "status": "ok",
        "figures": {"form": "lower", "exact_count": 3, "longest_match_chars": 6, "longest_match_fraction": 0.4, "coverage": 0.25, "windows": 4, "window_size": 8, "window_unit": "word", "bounds": {"exact_count": [1, 9], "coverage": [0.1, 0.5]}},
        "segments": [("capital ", False), ("Lisbon", True)],
        "provenance": [
            DOC,
            {"document": 13, "offset": 0, "snippet": "Lisbon", "snippet_match": [0, 6], "metadata": {"path": "a.jsonl", "linenum": None, "metadata": {"url": "ftp://host/x", "id": "doc-13"}}},
            {"document": 14, "offset": 2, "snippet": "x Lisbon", "snippet_match": [2, 8], "metadata": {"path": "b.jsonl", "linenum": 0, "metadata": None}},
        ],
    },
    "co_occurrence": {
        "signal": "ngram", "source": "demo", "field": "question+answer", "status": "ok",
        "figures": {"form": "answer", "answer": "Lisbon", "answer_count": 7, "documents": 2, "window_bytes": 300, "anchors": [{"text": "capital"}, {"text": "Portugal"}], "anchors_shared_with_source": ["Lisboa"]},
        "provenance": [DOC],
    },
    "co_occurrence_no_anchor": {
        "signal": "ngram", "source": "demo", "field": "subject+answer", "status": "ok",
        "figures": {"form": "alias", "answer": "Lisboa", "answer_count": 0, "documents": 0, "window_bytes": 300, "anchors": [], "anchors_shared_with_source": []},
        "provenance": [],
    },
    "options": {
        "signal": "ngram", "source": "demo", "field": "options", "status": "ok",
        "figures": {"options": 3, "documents": 1, "window_bytes": 500, "option_counts": [4, 2, 9]},
        "provenance": [DOC],
    },
    "options_shared": {"signal": "ngram", "source": "demo", "field": "options", "status": "ok", "figures": {"options": 3, "shared_with_source": True}, "provenance": []},
    "failed": {"signal": "ngram", "source": "demo", "field": "question", "status": "failed", "error": "the index is gone", "figures": {}, "provenance": []},
    "absent": {"signal": "ngram", "source": "demo", "field": "context", "status": "absent", "figures": {}, "provenance": []},
}

EXPECTED = {
    'matches': '<div class="figures-line muted">lower: exact 3 · longest 6 chars (40.0%) · coverage 25.0% of 4 8-word windows · only bounded: exact_count in [1, 9], coverage in [0.1, 0.5]</div>\n<div class="text">capital <mark>Lisbon</mark></div>  <div class="muted doc">found in document 12:\n<a href="https://pt.wikipedia.org/wiki/Lisboa">Lisboa</a>    <code>wiki-pt.jsonl:5</code> at byte 40\n  </div>\n  <div class="snippet">…before <mark>Lisbon</mark> after…</div>\n  <div class="muted doc">found in document 13:\ndoc-13 <code class="url">ftp://host/x</code>    <code>a.jsonl:</code> at byte 0\n  </div>\n  <div class="snippet">…<mark>Lisbon</mark>…</div>\n  <div class="muted doc">found in document 14:\nuntitled    <code>b.jsonl:1</code> at byte 2\n  </div>\n  <div class="snippet">…x <mark>Lisbon</mark>…</div>\n',
    'co_occurrence': '<div class="figures-line muted">answer “Lisbon” occurs 7 times; 2 document(s) hold it within 300 bytes of\n“capital”, “Portugal”.\nSet aside (shared with the source text): “Lisboa”.</div>\n<div class="snippet">…before <mark>Lisbon</mark> after…</div>\n',
    'co_occurrence_no_anchor': '<div class="figures-line muted">alias “Lisboa” occurs 0 times; 0 document(s) hold it within 300 bytes of\nno anchor.\n</div>\n',
    'options': '<div class="figures-line muted">1 document(s) hold all 3 options within 500 bytes (each occurs 4, 2, 9 times).</div>\n<div class="snippet">…before <mark>Lisbon</mark> after…</div>\n',
    'options_shared': '<div class="figures-line muted">all 3 options are written as in the source language: not looked up.</div>\n',
    'failed': '<div class="figures-line muted">failed: the index is gone</div>\n',
    'absent': '<div class="figures-line muted">absent</div>\n',
}


@pytest.mark.parametrize("name", CASES)
def test_each_kind_of_evidence_is_written_as_the_template_wrote_it(name):
    assert str(show(CASES[name])) == EXPECTED[name]


@pytest.mark.parametrize("name", CASES)
def test_every_string_of_the_evidence_is_escaped(name):
    figures = {"form": HOSTILE, "window_unit": HOSTILE, "bounds": {HOSTILE: [HOSTILE, HOSTILE]}, "options": HOSTILE, "option_counts": [HOSTILE]}
    assert_every_string_escaped(show, CASES[name], HOSTILE, ("status", "field", "snippet_match"), figures, ("document", "offset"))


def test_a_web_url_is_a_link_and_any_other_stays_text():
    assert_only_web_urls_link(show, CASES["matches"], "found in document 13")


def test_what_the_evidence_lacks_shows_as_nothing_rather_than_failing_the_page():
    evidence = {"signal": "ngram", "source": "demo", "field": "question", "status": "ok", "figures": {}, "provenance": [{"document": 1}]}
    assert str(show(evidence)) == (
        '<div class="figures-line muted">exact  · longest  chars (–) · coverage – of  - windows</div>\n'
        '  <div class="muted doc">found in document 1:\nuntitled    <code>:</code> at byte \n  </div>\n'
        '  <div class="snippet">…<mark></mark>…</div>\n'
    )
