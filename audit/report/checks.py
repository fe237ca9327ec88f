"""The checks behind a decision (`decided_by`), as a provenance page lists them.

Written in Python rather than as a template macro: a page lists every check of every language
variant, and the macro took a sixth of the pages' time on BMLAMA-17's report.  Every value
from the audit is escaped here, as the templates' autoescaping would; a key a check lacks
shows as nothing, as a template shows an undefined name.
"""
from __future__ import annotations

from markupsafe import Markup

from audit.records import Json
from audit.report.escaping import html_text

BELOW_FLOOR = "; not decided: the field is below its floor"


def _shown(check: dict[str, Json], key: str) -> str:
    return html_text(check.get(key, ""))


def _bound(bounds: Json, index: int) -> str:
    try:
        return html_text(bounds[index])  # type: ignore[index]
    except (TypeError, LookupError):
        return ""


def _check(check: Json) -> str:
    """One check: the rule it applied and what it found, in the check's own words."""
    if not isinstance(check, dict):
        return ""
    figure = check.get("figure")
    rule = f"{_shown(check, 'signal')}.{_shown(check, 'field')}{f'.{html_text(figure)}' if figure else ''}"
    source = _shown(check, "source")
    bounds = check.get("bounds")
    if bounds:
        where = f"[{_bound(bounds, 0)}, {_bound(bounds, 1)}]"
        return f"<code>{rule}</code> in {source} only known to lie in {where} ({_shown(check, 'op')} {_shown(check, 'threshold')})"
    if figure:
        floor = BELOW_FLOOR if check.get("status") == "below_floor" else ""
        return f"<code>{rule} = {_shown(check, 'value')}</code> in {source} ({_shown(check, 'op')} {_shown(check, 'threshold')}{floor})"
    if check.get("error"):
        return f"<code>{rule}</code> failed in {source}: {html_text(check['error'])}"
    return _shown(check, "reason")


def checks_html(decided_by: Json) -> Markup:
    """The checks one after another, separated by semicolons."""
    return Markup("; ".join(_check(check) for check in decided_by)) if isinstance(decided_by, list) else Markup("")
