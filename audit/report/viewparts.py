"""Pieces the evidence views written in Python share (`ngramview`, `minhashview`): each writes
what the template it replaced wrote, byte for byte.  Every value from the audit is escaped
here, as the templates' autoescaping would; a key the evidence lacks shows as nothing, as a
template shows an undefined name.
"""
from __future__ import annotations

from audit.records import Json, JsonObject
from audit.report.escaping import html_text
from audit.report.inert import web_url


def get(mapping: Json, key: str) -> Json:
    return mapping.get(key) if isinstance(mapping, dict) else None


def at(mapping: Json, key: str) -> str:
    """`{{ mapping.key }}`: escaped, nothing when the key is missing."""
    return html_text(mapping[key]) if isinstance(mapping, dict) and key in mapping else ""


def pct(value: Json) -> str:
    """The templates' `pct` filter; a value that is not a number shows as its dash."""
    return "–" if not isinstance(value, int | float) else f"{100 * value:.1f}%"


def snippet(doc: JsonObject) -> str:
    """The document's text around the match, the match marked."""
    text, match = doc.get("snippet"), doc.get("snippet_match")
    text = text if isinstance(text, str) else ""
    start, end = (match[0], match[1]) if isinstance(match, list | tuple) and len(match) == 2 else (0, 0)
    return f'<div class="snippet">…{html_text(text[:start])}<mark>{html_text(text[start:end])}</mark>{html_text(text[end:])}…</div>\n'


def failed(evidence: JsonObject) -> str:
    """The line of evidence whose status is not `ok`: the status, and the error when there is one."""
    error = evidence.get("error")
    return f'<div class="figures-line muted">{at(evidence, "status")}{f": {html_text(error)}" if error else ""}</div>\n'


def documents(evidence: JsonObject) -> list[JsonObject]:
    """The evidence's provenance entries that are objects."""
    found = evidence.get("provenance")
    return [doc for doc in found if isinstance(doc, dict)] if isinstance(found, list) else []


def document_name(where: Json) -> str:
    """A document's link (only an http(s) URL becomes one) or its name, from its `metadata`:
    the title, else the id, else the URL as text or "untitled"."""
    m = get(where, "metadata") or {}
    url = web_url(get(m, "url"))
    title, name = get(m, "title"), get(m, "id")
    if url:
        return f'<a href="{html_text(url)}">{html_text(title or name or get(m, "url"))}</a>'
    raw = get(m, "url")
    code = f' <code class="url">{html_text(raw)}</code>' if raw else ""
    return f"{html_text(title or name or 'untitled')}{code}"


def line_of(where: Json) -> str:
    """`path:line` of a document's line in its file, the line counted from one."""
    line = get(where, "linenum")
    number = html_text(line + 1) if isinstance(line, int) else ""
    return f"<code>{at(where, 'path')}:{number}</code>"
