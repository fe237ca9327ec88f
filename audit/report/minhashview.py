"""The near-duplicate signal's evidence on one field from one source, as a provenance page
shows it: the exact containment and Jaccard of the field's shingles in the best span of each
document the MinHash index proposed, the sketch's estimates beside them, and the span itself
in its document.  Written in Python rather than as a template macro, as `ngramview` is: an
ECLeKTic-sized page shows two dozen of these, each with its long snippets, and the macro took
about 80 µs an entry against 32 here.  The pieces it shares with that view, and how they
escape, are in `viewparts`.
"""
from __future__ import annotations

from markupsafe import Markup

from audit.records import JsonObject
from audit.report.escaping import html_text
from audit.report.viewparts import at, document_name, documents, failed, get, line_of, pct, snippet


def _figures(f: JsonObject) -> str:
    """The field's figures: containment and Jaccard, of how many shingles, the sketch's estimate
    and how many LSH candidates were verified."""
    line = f"containment {pct(f.get('containment'))} · Jaccard {pct(f.get('jaccard'))}"
    if f.get("shingles") is not None:
        line += f" of {html_text(f['shingles'])} {html_text(f.get('script', ''))} shingles"
    if f.get("shingles_shared_with_source"):
        line += f" ({html_text(f['shingles_shared_with_source'])} shared with the source text set aside)"
    if f.get("estimated_containment") is not None:
        line += f" · estimated {pct(f['estimated_containment'])} / {pct(f.get('estimated_jaccard'))}"
    if f.get("verified") is not None:
        line += f" · {html_text(f['verified'])} of {html_text(f.get('candidates'))} LSH candidates verified{'' if f.get('exhaustive') else ' (the likeliest)'}"
    return f'<div class="figures-line muted">{line}</div>\n'


def _document(doc: JsonObject) -> str:
    """One near-duplicate: its document, where the span lies, its own figures, and the span."""
    where = doc.get("metadata")
    length = f", {html_text(doc['length'])} bytes" if doc.get("length") is not None else ""
    figures = f" ·\n    containment {pct(doc['containment'])} · Jaccard {pct(doc.get('jaccard'))}" if doc.get("containment") is not None else ""
    return (
        f'  <div class="muted doc">near-duplicate in document {at(doc, "document")}:\n{document_name(where)}'
        f"    {line_of(where)} at byte {html_text(doc.get('offset'))}{length}{figures}  </div>\n  {snippet(doc)}"
    )


def show(evidence: JsonObject) -> Markup:
    """The evidence as the page's HTML."""
    if evidence.get("status") != "ok":
        return Markup(failed(evidence))
    f = get(evidence, "figures")
    return Markup(_figures(f if isinstance(f, dict) else {}) + "".join(_document(doc) for doc in documents(evidence)))
