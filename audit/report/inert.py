"""Text from benchmarks, corpora, link sources, models and judges stays text in every page the
report writes: HTML is autoescaped by the templates, and these filters decide what may become
a link and escape what the Markdown report shows, since Markdown has no autoescaping."""
from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from audit.records import Json

WEB_SCHEMES = ("http", "https")
# Characters that start Markdown (and GitHub-flavoured Markdown) syntax anywhere in a line:
# code, emphasis, links and images, raw HTML and entities, table cells, strikethrough, and
# the `@` of an address GitHub would turn into a mailto: link or a mention.
# Underscores inside a word (`not_known`) cannot open or close emphasis and are left alone.
_MARKDOWN = re.compile(r"_+|[\\`*\[\]<>|&!~@]")
# What a Markdown link's destination keeps of a URL as written; blanks and angle brackets,
# which would end it, are percent-encoded.
URL_KEPT = ":/?#[]@!$&'()*+,;=%~"
_LINE_BREAK = re.compile(r"[\r\n\u2028\u2029]+")
# Control characters a browser strips from a URL (C0 and DEL).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Content-Security-Policy of every page: no script, no frame, no request anywhere; the
# figures are data: URIs and the style is inline.
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def web_url(value: Json) -> str | None:
    """The value when it is an absolute http(s) URL a browser reads as written, else None:
    anything else (javascript:, data:, relative, `//host`, a URL with leading blanks or
    control characters a browser would strip) is shown as text, never followed."""
    if not isinstance(value, str) or value != value.strip() or _CONTROL.search(value):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme.lower() not in WEB_SCHEMES or not parts.netloc or not value.lower().startswith(f"{parts.scheme.lower()}://"):
        return None
    return value


def page_href(path: Json, fragment: Json = None) -> str:
    """A link to a page the report wrote, percent-encoded so that no part of it (a folder
    name, an item's language in the fragment) can read as a scheme or leave the path."""
    href = quote(str(path), safe="/")
    return href if fragment is None else f"{href}#{quote(str(fragment), safe='')}"


def markdown_text(value: Json) -> str:
    """Input text for the Markdown report: on one line, with every character that could start
    markup, a link or a table cell backslash-escaped."""
    text = _LINE_BREAK.sub(" ", "" if value is None else str(value))

    def escaped(found: re.Match[str]) -> str:
        start, end = found.span()
        if found[0][0] == "_" and start > 0 and end < len(text) and text[start - 1].isalnum() and text[end].isalnum():
            return found[0]
        return "".join("\\" + c for c in found[0])

    return _MARKDOWN.sub(escaped, text)


def markdown_code(value: Json) -> str:
    """A name as inline code when a code span can hold it as is; otherwise as escaped text
    (a backtick would end the span, a pipe the table cell)."""
    text = "" if value is None else str(value)
    if text and not re.search(r"[`|\r\n\u2028\u2029]", text) and text == text.strip():
        return f"`{text}`"
    return markdown_text(text)


def markdown_link(title: Json, url: Json) -> str:
    """A Markdown link for http(s) URLs only; the title alone, escaped, for anything else."""
    target = web_url(url)
    if target is None:
        return markdown_text(title)
    return f"[{markdown_text(title)}](<{quote(target, safe=URL_KEPT)}>)"


def markdown_page(path: Json, title: Json, fragment: Json = None) -> str:
    """A Markdown link to a page the report wrote (percent-encoded: no blank or parenthesis
    can end the destination)."""
    return f"[{markdown_text(title)}]({page_href(path, fragment)})"
