"""What the tests of the evidence views written in Python (`test_ngram_view.py`,
`test_minhash_view.py`) both ask: every string of some evidence made hostile, and that only an
http(s) URL of a document becomes a link."""
from __future__ import annotations

import copy
from collections.abc import Callable

from markupsafe import Markup


def with_strings(value, text: str, keep: tuple[str, ...]):
    """Every string in `value` replaced by `text`, keeping its shape and the `keep` keys."""
    if isinstance(value, str):
        return text
    if isinstance(value, dict):
        return {key: item if key in keep else with_strings(item, text, keep) for key, item in value.items()}
    if isinstance(value, list):
        return [with_strings(item, text, keep) for item in value]
    if isinstance(value, tuple):
        return tuple(with_strings(item, text, keep) for item in value)
    return value


def assert_only_web_urls_link(show: Callable[[dict], Markup], evidence: dict, next_document: str) -> None:
    """`evidence`'s first document links to Lisbon's Wikipedia page and its second names an ftp
    URL: the first is a link, the second text, and a `javascript:` URL in the first is text too
    (nothing before `next_document`, the second's heading, is a link)."""
    html = str(show(evidence))
    assert '<a href="https://pt.wikipedia.org/wiki/Lisboa">Lisboa</a>' in html
    assert '<code class="url">ftp://host/x</code>' in html
    hostile = copy.deepcopy(evidence)
    hostile["provenance"][0]["metadata"]["metadata"] = {"url": "javascript:alert(1)", "title": "t"}
    html = str(show(hostile))
    assert "<a " not in html.split(next_document)[0]
    assert '<code class="url">javascript:alert(1)</code>' in html


def assert_every_string_escaped(show: Callable[[dict], Markup], evidence: dict, hostile: str, keep: tuple[str, ...], figures: dict, document_keys: tuple[str, ...]) -> None:
    """Every string of `evidence` (but the `keep` keys), the `figures` added and each
    document's `document_keys` made `hostile` (a `<script>` element), the error too when it
    failed: the view shows them all escaped, whichever branch shows them."""
    evidence = with_strings(copy.deepcopy(evidence), hostile, keep)
    evidence["figures"] = {**evidence["figures"], **figures}
    for doc in evidence["provenance"]:
        for key in document_keys:
            doc[key] = hostile
    if evidence["status"] != "ok":
        evidence["error"] = hostile
    html = str(show(evidence))
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
