"""Benchmark: infini-gram mini provenance in bytes, on the demo corpus's Chinese, Japanese, Hindi
and Hebrew documents.

    pip install -e '.[bench,serve]'
    python bench/bench_mini_offsets.py              # about a minute on 2 cores
    python bench/bench_mini_offsets.py --docs 10    # fewer documents per language

The demo index is served by `python -m audit.server`, whose `/mini/` route answers as the public
infini-gram mini server does: windows counted in bytes, the needle's reach in the query's
characters, and a window that cuts a multi-byte character refused with a decode error.  For
each language, up to DOCS documents are taken evenly from the index, and from each three
6-character needles (at a quarter, a half and three quarters of the document).  The mini
backend (`MiniCorpus`) finds up to three occurrences of each and builds their provenance at
several `max_ctx_len` values; every snippet is checked against the document's text as the
local index holds it:
- the window's bytes are the document's own, at a place where the needle lies;
- where the window says its offset is exact, it starts at the document's start;
- the snippet is a substring of the document, its match is the needle, and its context before
  the match is the document's text before it (up to 40 characters).
Printed per language and `max_ctx_len`: snippets checked and exact, windows that needed a
decode retry, the retries, the most on one window, `get_doc_by_rank` requests per window, and
the windows whose match a reading of the offsets in characters (this client's before) would
have misplaced.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from collections import defaultdict
from pathlib import Path

from bench_api import start_server

from audit import __version__
from audit.corpora.api import ApiOptions
from audit.corpora.base import Occurrence
from audit.corpora.client import ClientSettings, InfiniGramClient
from audit.corpora.demo import demo_index
from audit.corpora.local import LocalIndex
from audit.corpora.mini import MiniCorpus, MiniWindow
from audit.corpora.registry import cache_dir

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("zh", "ja", "hi", "he")
CONTEXTS = (10000, 1000, 100, 10)
NEEDLE_CHARS = 6
HITS = 3
SNIPPET_CHARS = 40


def documents(local: LocalIndex, per_lang: int) -> tuple[dict[str, list[int]], dict[tuple[str, int], int]]:
    """Up to `per_lang` document numbers per language, spread evenly, and every document's
    number by its (source file, line), which the served metadata names."""
    by_lang: dict[str, list[int]] = defaultdict(list)
    by_place: dict[tuple[str, int], int] = {}
    for doc in range(local.info.documents):
        meta = local.metadata(doc)
        by_place[(meta["path"], meta["linenum"])] = doc
        lang = meta.get("metadata", {}).get("lang")
        if lang in LANGS:
            by_lang[lang].append(doc)
    chosen = {lang: docs[:: max(1, len(docs) // per_lang)][:per_lang] for lang, docs in by_lang.items()}
    return chosen, by_place


def needles(text: str) -> list[str]:
    picks = [text[len(text) * k // 4 :][:NEEDLE_CHARS] for k in (1, 2, 3)]
    return [p for p in picks if len(p) == NEEDLE_CHARS and p.strip()]


def snippet_exact(local: LocalIndex, by_place: dict, corpus: MiniCorpus, hit, needle: str) -> bool:
    """Whether the hit's window and snippet are the document's own text (see the docstring)."""
    encoded = needle.encode("utf-8")
    shown = corpus.document_hit(hit, len(encoded), SNIPPET_CHARS)
    window = hit.window()
    doc = by_place[(shown.metadata["path"], shown.metadata["linenum"])]
    data = local.surrounding(Occurrence(doc, 0), 0, 1 << 40)
    starts, at = [], data.find(window.data)
    while at >= 0:
        if data[at + window.needle_at :].startswith(encoded):
            starts.append(at)
        at = data.find(window.data, at + 1)
    if not starts or (window.offset_exact and (starts[0] != 0 or shown.offset != window.needle_at)):
        return False
    before = data[starts[0] : starts[0] + window.needle_at].decode("utf-8")[-SNIPPET_CHARS:]
    text = data.decode("utf-8")
    return shown.snippet in text and shown.snippet[shown.snippet_match_start : shown.snippet_match_end] == needle and shown.snippet.startswith(before) and shown.snippet_match_start == len(before)


def measure(url: str, local: LocalIndex, chosen: dict, by_place: dict, context: int, lang: str) -> dict:
    client = InfiniGramClient(ClientSettings(url=url + "mini/", index="demo"))
    corpus = MiniCorpus(client, "demo", ApiOptions(longest_match="count", max_ctx_len=context))
    row = {"lang": lang, "max_ctx_len": context, "docs": len(chosen[lang]), "needles": 0, "checked": 0, "exact": 0, "offset_exact": 0, "retried": 0, "retries": 0, "most": 0, "misread": 0}
    for doc in chosen[lang]:
        for needle in needles(local.surrounding(Occurrence(doc, 0), 0, 1 << 40).decode("utf-8")):
            row["needles"] += 1
            for hit in corpus.occurrences(needle, HITS)[1]:
                window = hit.window()
                assert isinstance(window, MiniWindow)
                row["checked"] += 1
                row["exact"] += snippet_exact(local, by_place, corpus, hit, needle)
                row["offset_exact"] += window.offset_exact
                # Read as characters (as this client did before), needle_offset would miss the match.
                row["misread"] += len(window.data[: window.needle_at].decode("utf-8")) != window.needle_at
                row["retried"] += window.decode_retries > 0
                row["retries"] += window.decode_retries
                row["most"] = max(row["most"], window.decode_retries)
    row["per_window"] = (row["checked"] + row["retries"]) / max(row["checked"], 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=40, help="documents per language")
    args = parser.parse_args()
    index = demo_index(cache_dir())
    local = LocalIndex(index, name="demo")
    chosen, by_place = documents(local, args.docs)
    process, url = start_server(index, dict(os.environ))
    started = time.perf_counter()
    try:
        rows = [measure(url, local, chosen, by_place, context, lang) for context in CONTEXTS for lang in LANGS]
    finally:
        process.terminate()
        process.wait(timeout=10)
    elapsed = time.perf_counter() - started
    print(f"audit {__version__}, Python {platform.python_version()}, {os.cpu_count()} cores, {elapsed:.1f} s\n")
    print("| lang | max_ctx_len (bytes) | docs | needles | snippets checked | equal to the document | offsets exact | windows retried | decode retries | most on one window | get_doc_by_rank per window | misplaced if read as characters |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['lang']} | {r['max_ctx_len']:,} | {r['docs']} | {r['needles']} | {r['checked']} | {r['exact']} | {r['offset_exact']} | {r['retried']} | {r['retries']} | {r['most']} | {r['per_window']:.2f} | {r['misread']} |")
    total = sum(r["checked"] for r in rows)
    print(f"\nAll: {total} snippets, {sum(r['exact'] for r in rows)} equal to the document text, {sum(r['retries'] for r in rows)} decode retries over {sum(r['retried'] for r in rows)} windows.")


if __name__ == "__main__":
    main()
