"""`html_text` writes what markupsafe's `escape` (the templates' autoescaping) writes, byte for
byte, for every kind of value an audit holds, short (kept once escaped) or long."""
from __future__ import annotations

import random

import pytest
from markupsafe import Markup, escape

from audit.report.escaping import SHORT, html_text

SPECIAL = "&<>'\""


def _strings() -> list[str]:
    rng = random.Random(0)
    alphabet = SPECIAL + "ab \u00e9\u4e2d\U0001f600;#x"
    made = ["", "plain", SPECIAL, "&amp;", "<script>alert(1)</script>", "a" * SHORT, "<" * (SHORT + 1)]
    made += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 3 * SHORT))) for _ in range(500)]
    return made


@pytest.mark.parametrize("text", _strings())
def test_a_string_is_escaped_as_markupsafe_escapes_it(text):
    assert html_text(text) == str(escape(text))
    assert html_text(text) == str(escape(text)), "a second time, from the cache"


@pytest.mark.parametrize("value", [0, -7, 10**30, 1.5, float("inf"), True, False, None, [1, "<b>"], {"k": "<v>"}, ("<", 2)])
def test_any_other_value_is_shown_as_its_text_escaped(value):
    assert html_text(value) == str(escape(value))


def test_markup_is_taken_as_already_safe_as_the_templates_take_it():
    assert html_text(Markup("<mark>x</mark>")) == "<mark>x</mark>"


def test_a_string_that_is_not_exactly_a_str_is_escaped_by_its_text():
    class Name(str):
        pass

    assert html_text(Name("<b>")) == "&lt;b&gt;"
