"""Each signal's evidence on a provenance page is drawn by the `show(evidence)` macro of its
template, or by its view in Python (`PYTHON_VIEWS`); a signal without either gets the
default's.  These pin that contract, which a new signal's view must keep, and that a view
escapes what it is given."""
from __future__ import annotations

from importlib import resources

import pytest
from jinja2.runtime import Macro

from audit.report.render import PYTHON_VIEWS, _environment

TEMPLATES = sorted(path.name.removesuffix(".html.j2") for path in resources.files("audit.report").joinpath("templates", "evidence").iterdir() if path.name.endswith(".html.j2"))
VIEWS = TEMPLATES + sorted(PYTHON_VIEWS)
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def view():
    return _environment().globals["evidence_view"]


def test_the_package_ships_the_default_view_and_the_signals_own():
    assert {"_default", "langlinks", "probe"} <= set(TEMPLATES)
    assert set(PYTHON_VIEWS) == {"ngram", "minhash"}
    assert not set(TEMPLATES) & set(PYTHON_VIEWS)


@pytest.mark.parametrize("signal", sorted(PYTHON_VIEWS))
def test_a_python_view_is_the_one_its_signal_gets(view, signal):
    assert view(signal) is PYTHON_VIEWS[signal]


@pytest.mark.parametrize("signal", TEMPLATES)
def test_every_evidence_template_defines_show_of_the_evidence_alone(view, signal):
    show = view(signal)
    assert isinstance(show, Macro)
    assert show.arguments == ("evidence",)
    assert view(signal) is show


def test_a_signal_without_a_template_is_shown_by_the_default(view):
    assert view("pageviews") is view("_default")
    assert view("pageviews") is not view("ngram")


@pytest.mark.parametrize("signal", VIEWS)
def test_a_view_escapes_every_string_of_the_evidence(view, signal):
    evidence = {
        "signal": signal, "source": HOSTILE, "field": "question", "status": "failed", "error": HOSTILE,
        "figures": {"note": HOSTILE}, "provenance": [{"title": HOSTILE, "snippet": HOSTILE, "snippet_match": [0, 3]}],
    }  # fmt: skip
    html = str(view(signal)(evidence))
    assert "&lt;script&gt;" in html
    assert "<script>" not in html


def test_the_ngram_view_marks_the_matched_segments(view):
    evidence = {
        "signal": "ngram", "source": "demo", "field": "question", "status": "ok", "provenance": [],
        "figures": {"exact_count": 2, "longest_match_chars": 5, "longest_match_fraction": 0.5, "coverage": 0.25, "windows": 4, "window_size": 3, "window_unit": "word"},
        "segments": [("plain <b> ", False), ("matched", True)],
    }  # fmt: skip
    html = str(view("ngram")(evidence))
    assert '<div class="text">plain &lt;b&gt; <mark>matched</mark></div>' in html
    assert "exact 2 · longest 5 chars (50.0%) · coverage 25.0% of 4 3-word windows" in html


def test_a_page_lists_every_source_under_each_field_first_met_and_says_when_one_has_none():
    """Fields in the order first met across a signal's sources; under each, every source of the
    signal in its order, with its evidence on that field in the recorded order, or a line
    saying it has none."""
    from audit.report.itempage import by_field, grouped_evidence

    def entry(source: str, field: str, n: int) -> dict:
        return {"signal": "ngram", "source": source, "field": field, "status": "failed", "error": f"failure-{n}"}

    recorded = [entry("a", "question", 1), entry("b", "answer", 2), entry("a", "context", 3), entry("b", "question", 4), entry("a", "question", 5)]
    grouped = grouped_evidence(recorded, None)
    shown = by_field(grouped)
    assert [(signal, [(field, [(source, [e["error"] for e in on]) for source, on in sources]) for field, sources in fields]) for signal, fields in shown] == [
        ("ngram", [("question", [("a", ["failure-1", "failure-5"]), ("b", ["failure-4"])]), ("context", [("a", ["failure-3"]), ("b", [])]), ("answer", [("a", []), ("b", ["failure-2"])])]),
    ]
    language = {"lang": "fr", "role": "source", "exposure": "unknown", "decided_by": [], "seen_in_languages": None, "knowledge": None,
                "knowledge_decided_by": [], "alone": {"signal": {}, "source": {}}, "signals": shown}  # fmt: skip
    page = {"item_id": "q1", "source_lang": "fr", "item_exposure": "unknown", "seen_in": None, "asked_in": ["fr"], "languages": [language]}
    html = _environment().get_template("item.html.j2").render(page=page, data={"audit": {"signal_runs": []}})
    assert html.count("no ngram evidence on") == 2
    assert "no ngram evidence on context from b" in html and "no ngram evidence on answer from a" in html
    assert [html.index(f"failure-{n}") for n in (1, 5, 4, 3, 2)] == sorted(html.index(f"failure-{n}") for n in (1, 5, 4, 3, 2))
