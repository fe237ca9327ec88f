"""The checks behind a decision, listed on a provenance page by `checks_html`: the same bytes as
the template macro it replaced (kept here as the reference), for every shape of check the audit
schema lets through, with every value escaped."""
from __future__ import annotations

import random

from hostile_pages import PAYLOADS

from audit.report.checks import checks_html
from audit.report.render import _environment

# The template macro the pages rendered the checks with, under the report's own environment.
REFERENCE = """{% macro checks(decided_by) %}
    {% for d in decided_by %}
      {% set rule %}{{ d.signal }}.{{ d.field }}{% if d.figure %}.{{ d.figure }}{% endif %}{% endset %}
      {% if d.bounds %}<code>{{ rule }}</code> in {{ d.source }} only known to lie in [{{ d.bounds[0] }}, {{ d.bounds[1] }}] ({{ d.op }} {{ d.threshold }}){% elif d.figure %}<code>{{ rule }} = {{ d.value }}</code> in {{ d.source }} ({{ d.op }} {{ d.threshold }}{% if d.status == "below_floor" %}; not decided: the field is below its floor{% endif %}){% elif d.error %}<code>{{ rule }}</code> failed in {{ d.source }}: {{ d.error }}{% else %}{{ d.reason }}{% endif %}{% if not loop.last %}; {% endif %}
    {% endfor %}
{% endmacro %}{{ checks(x) }}"""

TEXTS = [*PAYLOADS.values(), "", "ngram", "question+answer", "demo"]
SCALARS = [None, True, False, 0, 3, 0.4359, 1e-07, -2.5, *TEXTS]


def random_check(rng: random.Random) -> dict:
    """A check as the schema allows one: names are text, values and thresholds any scalar,
    bounds a list of scalars of any length, errors text or null."""
    check: dict = {}
    for key in ("signal", "source", "field", "form", "figure", "reason"):
        if rng.random() < 0.7:
            check[key] = rng.choice(TEXTS)
    for key in ("value", "threshold"):
        if rng.random() < 0.7:
            check[key] = rng.choice(SCALARS)
    if rng.random() < 0.7:
        check["op"] = rng.choice([">=", "<=", "=="])
    if rng.random() < 0.3:
        check["bounds"] = [rng.choice(SCALARS) for _ in range(rng.choice([0, 1, 2, 2, 3]))]
    if rng.random() < 0.4:
        check["status"] = rng.choice(["below_floor", "failed", "unknown", "bounded"])
    if rng.random() < 0.3:
        check["error"] = rng.choice([None, *TEXTS])
    return check


def test_the_checks_read_as_the_macro_rendered_them_with_every_value_escaped():
    template = _environment().from_string(REFERENCE)
    rng = random.Random(5)
    shapes = set()
    for _ in range(4000):
        decided_by = [random_check(rng) for _ in range(rng.randint(0, 4))]
        shown = checks_html(decided_by)
        assert shown == template.render(x=decided_by), decided_by
        assert "<script" not in shown and "<img" not in shown and "<b " not in shown
        shapes.update(("bounds" if check.get("bounds") else "figure" if check.get("figure") else "error" if check.get("error") else "reason") for check in decided_by)
    assert shapes == {"bounds", "figure", "error", "reason"}


def test_the_checks_of_a_real_audit_read_as_before():
    template = _environment().from_string(REFERENCE)
    checks = [
        {"signal": "ngram", "source": "demo", "field": "statement", "form": "answer", "figure": "exact_count", "op": ">=", "value": 0, "threshold": 1},
        {"signal": "ngram", "source": "demo", "field": "context", "figure": "coverage", "op": ">=", "value": 0.1, "threshold": 0.5, "status": "below_floor", "floor": {"needed": 3}},
        {"signal": "ngram", "source": "olmo", "field": "context", "figure": "coverage", "op": ">=", "value": 0.4, "threshold": 0.5, "status": "bounded", "bounds": [0.4, 0.6]},
        {"signal": "ngram", "source": "olmo", "field": "context", "status": "failed", "error": "ConnectionError: refused"},
        {"reason": "no text that any rule applies to"},
    ]
    shown = checks_html(checks)
    assert shown == template.render(x=checks)
    assert shown.startswith("<code>ngram.statement.exact_count = 0</code> in demo (&gt;= 1); <code>ngram.context.coverage = 0.1</code> in demo (&gt;= 0.5; not decided")
    assert shown.endswith("; <code>ngram.context</code> failed in olmo: ConnectionError: refused; no text that any rule applies to")
