"""Each signal's evidence on a provenance page is drawn by the `show(evidence)` macro of its
template; a signal without one gets the default's.  These pin that contract, which a new
signal's template must keep, and that a view escapes what it is given."""
from __future__ import annotations

from importlib import resources

import pytest
from jinja2.runtime import Macro

from audit.report.render import _environment

TEMPLATES = sorted(path.name.removesuffix(".html.j2") for path in resources.files("audit.report").joinpath("templates", "evidence").iterdir() if path.name.endswith(".html.j2"))
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def view():
    return _environment().globals["evidence_view"]


def test_the_package_ships_the_default_view_and_the_signals_own():
    assert {"_default", "ngram", "minhash", "langlinks", "probe"} <= set(TEMPLATES)


@pytest.mark.parametrize("signal", TEMPLATES)
def test_every_evidence_template_defines_show_of_the_evidence_alone(view, signal):
    show = view(signal)
    assert isinstance(show, Macro)
    assert show.arguments == ("evidence",)
    assert view(signal) is show


def test_a_signal_without_a_template_is_shown_by_the_default(view):
    assert view("pageviews") is view("_default")
    assert view("pageviews") is not view("ngram")


@pytest.mark.parametrize("signal", TEMPLATES)
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
