"""The n-gram signal's evidence on one field from one source, as a provenance page shows it.

The field's text with the matched spans highlighted, the figures, and the documents behind the
longest match; for a field checked in several forms, which form; for "question+answer" and
"subject+answer", the co-occurrence of the answer (or alias) with its anchors; for "options",
of all the options.  Written in Python rather than as a template macro, as `checks` is: a
BMLAMA-17 page shows some ninety of these, and the macro was a third of the page's time.
Every value from the audit is escaped here, as the templates' autoescaping would; a key the
evidence lacks shows as nothing, as a template shows an undefined name.
"""
from __future__ import annotations

from markupsafe import Markup

from audit.records import Json, JsonObject
from audit.report.escaping import html_text
from audit.report.viewparts import at, document_name, documents, failed, line_of, pct, snippet

CO_OCCURRENCE = ("question+answer", "subject+answer")


def _listed(values: Json, quoted: bool = False) -> str:
    """`{% for v in values %}{{ v }}{% if not loop.last %}, {% endif %}{% endfor %}`."""
    if not isinstance(values, list):
        return ""
    return ", ".join(f"“{html_text(value)}”" for value in values) if quoted else ", ".join(html_text(value) for value in values)


def _options(evidence: JsonObject, f: JsonObject) -> str:
    if f.get("shared_with_source"):
        line = f"all {at(f, 'options')} options are written as in the source language: not looked up."
    else:
        counts = _listed(f.get("option_counts"))
        line = f"{at(f, 'documents')} document(s) hold all {at(f, 'options')} options within {at(f, 'window_bytes')} bytes (each occurs {counts} times)."
    return f'<div class="figures-line muted">{line}</div>\n' + "".join(snippet(doc) for doc in documents(evidence))


def _co_occurrence(evidence: JsonObject, f: JsonObject) -> str:
    anchors = f.get("anchors")
    named = ", ".join(f"“{at(anchor, 'text')}”" for anchor in anchors) if isinstance(anchors, list) and anchors else "no anchor"
    shared = f.get("anchors_shared_with_source")
    aside = f"Set aside (shared with the source text): {_listed(shared, quoted=True)}." if shared else ""
    head = (
        f'<div class="figures-line muted">{at(f, "form")} “{at(f, "answer")}” occurs {at(f, "answer_count")} times; '
        f"{at(f, 'documents')} document(s) hold it within {at(f, 'window_bytes')} bytes of\n{named}.\n{aside}</div>\n"
    )
    return head + "".join(snippet(doc) for doc in documents(evidence))


def _bounds(bounds: Json) -> str:
    if not isinstance(bounds, dict) or not bounds:
        return ""
    shown = ", ".join(f"{html_text(name)} in [{html_text(_get_index(b, 0))}, {html_text(_get_index(b, 1))}]" for name, b in bounds.items())
    return f" · only bounded: {shown}"


def _get_index(values: Json, index: int) -> Json:
    return values[index] if isinstance(values, list | tuple) and len(values) > index else ""


def _found_in(doc: JsonObject) -> str:
    """Where a document behind the longest match lies: its link or name, file, line and byte."""
    where = doc.get("metadata")
    return (
        f'  <div class="muted doc">found in document {at(doc, "document")}:\n{document_name(where)}'
        f"    {line_of(where)} at byte {at(doc, 'offset')}\n  </div>\n  {snippet(doc)}"
    )


def _matches(evidence: JsonObject, f: JsonObject) -> str:
    form = f"{html_text(f['form'])}: " if f.get("form") else ""
    line = (
        f'<div class="figures-line muted">{form}exact {at(f, "exact_count")} · longest {at(f, "longest_match_chars")} chars '
        f"({pct(f.get('longest_match_fraction'))}) · coverage {pct(f.get('coverage'))} of {at(f, 'windows')} "
        f"{at(f, 'window_size')}-{at(f, 'window_unit')} windows{_bounds(f.get('bounds'))}</div>\n"
    )
    segments = evidence.get("segments")
    text = "".join(f"<mark>{html_text(piece)}</mark>" if matched else html_text(piece) for piece, matched in segments) if segments else ""
    return line + (f'<div class="text">{text}</div>' if segments else "") + "".join(_found_in(doc) for doc in documents(evidence))


def show(evidence: JsonObject) -> Markup:
    """The evidence as the page's HTML."""
    f = evidence.get("figures")
    f = f if isinstance(f, dict) else {}
    if evidence.get("status") != "ok":
        return Markup(failed(evidence))
    if evidence.get("field") == "options":
        return Markup(_options(evidence, f))
    if evidence.get("field") in CO_OCCURRENCE:
        return Markup(_co_occurrence(evidence, f))
    return Markup(_matches(evidence, f))
