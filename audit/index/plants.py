"""Planted near-duplicates: copies of benchmark fields, edited the ways real copies differ,
put into real documents of the same language, to measure what a signal finds.

The four edits are the ones exact n-gram matching misses: (a) every seventh word altered
(every seventh character in unsegmented scripts), (b) sentences reordered, (c) punctuation and
whitespace changed, (d) only the first half copied.  `tests/test_minhash.py` and
`bench/bench_minhash.py` plant them to set and check the near-duplicate thresholds.
"""
from __future__ import annotations

import gzip
import json
import random
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from audit.index.documents import JsonValue
from audit.items import Item
from audit.text import UNSEGMENTED_SCRIPTS, normalize, script_of, units

_SENTENCE_END = re.compile(r"(?<=[.!?।])\s+|(?<=[。！？])\s*")
_PUNCTUATION = {
    ".": " ;", ",": " -", "?": " ?!", "!": ".", ":": " —", ";": ",", "(": "[ ", ")": " ]", '"': "", "'": "’",
    "«": "", "»": "", "“": "", "”": "", "、": " ", "。": "\n", "，": "；", "？": "?", "！": "!", "：": ":",
    "「": "『", "」": "』", "（": "(", "）": ")", "।": " |", "־": " ",
}  # fmt: skip


def _altered(char: str) -> str:
    """A neighbouring letter of the same category and script, so the word stays a plausible word."""
    for step in (1, -1, 2, -2, 3):
        other = chr(ord(char) + step)
        if unicodedata.category(other) == unicodedata.category(char) and script_of(other) == script_of(char):
            return other
    return char


def every_seventh(text: str) -> str:
    """Every seventh unit (word, or character of an unsegmented script) gets one letter changed."""
    text = normalize(text)
    pieces, last = [], 0
    for i, unit in enumerate(units(text)):
        if i % 7 != 6:
            continue
        word = text[unit.start : unit.end]
        at = next((j for j, char in enumerate(word) if char.isalpha()), 0)
        pieces += [text[last : unit.start], word[:at], _altered(word[at]), word[at + 1 :]]
        last = unit.end
    return "".join([*pieces, text[last:]])


def sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(normalize(text)) if part]


def reorder(text: str) -> str:
    """Sentences in reverse order; a single sentence has its two halves swapped."""
    parts = sentences(text)
    if len(parts) > 1:
        return " ".join(reversed(parts))
    text = normalize(text)
    pieces = units(text)
    if len(pieces) < 2:
        return text
    middle = pieces[len(pieces) // 2].start
    return f"{text[middle:]} {text[:middle].rstrip()}"


def punctuation(text: str) -> str:
    """Punctuation swapped or dropped, spaces doubled or turned into line breaks, and a space
    after every fifth character of an unsegmented script."""
    out = []
    for i, char in enumerate(normalize(text)):
        if char in _PUNCTUATION:
            out.append(_PUNCTUATION[char])
        elif char == " ":
            out.append("  " if i % 3 else "\n")
        else:
            out.append(char)
            if i % 5 == 4 and script_of(char) in UNSEGMENTED_SCRIPTS:
                out.append(" ")
    return "".join(out)


def half(text: str) -> str:
    """The first half of the units."""
    text = normalize(text)
    pieces = units(text)
    return text[: pieces[(len(pieces) + 1) // 2 - 1].end] if pieces else text


EDITS: dict[str, Callable[[str], str]] = {"every_seventh": every_seventh, "reorder": reorder, "punctuation": punctuation, "half": half}
FIELDS = ("question", "context")


@dataclass(frozen=True)
class Plant:
    """One planted copy: which field of which variant, how it was edited, and the document
    (host text before, the copy, host text after) that carries it."""

    item_id: str
    lang: str
    field: str
    edit: str
    text: str
    document: dict[str, str | None]


def planted_pairs(items: Sequence[Item], langs: Sequence[str]) -> dict[tuple[str, str], str]:
    """Half of every language's items, alternating, each with one of the four edits in turn:
    {(item id, language): edit}.  The rest are the unplanted pairs false positives are counted on."""
    plan = {}
    names = list(EDITS)
    for li, lang in enumerate(langs):
        for ii, item in enumerate(items):
            if (ii + li) % 2 == 0 and lang in item.variants:
                plan[(item.item_id, lang)] = names[(ii // 2 + li) % len(names)]
    return plan


def plant(items: Sequence[Item], hosts: Mapping[str, Sequence[str]], plan: Mapping[tuple[str, str], str], seed: int = 7) -> list[Plant]:
    """For every planted pair, each of its fields edited and put between two sentences of a
    random host document of its language."""
    rng = random.Random(seed)
    by_id = {item.item_id: item for item in items}
    plants = []
    for (item_id, lang), edit in plan.items():
        variant = by_id[item_id].variants[lang]
        for name in FIELDS:
            raw = variant.text(name)
            if not raw:
                continue
            copy = EDITS[edit](raw)
            host = sentences(rng.choice(hosts[lang]))
            cut = len(host) // 2
            text = " ".join([*host[:cut], copy, *host[cut:]])
            document = {"id": f"planted-{item_id}-{lang}-{name}", "lang": lang, "title": None, "text": text}
            plants.append(Plant(item_id, lang, name, edit, copy, document))
    return plants


def host_rows(cap: int | None) -> list[dict[str, JsonValue]]:
    """Documents to plant into: the first `cap` bytes of text (all of it for None) of every
    file of the demo corpus the package ships but the ECLeKTic passages, so that no item is in
    them unless planted."""
    corpus = Path(str(resources.files("audit").joinpath("data/demo/corpus")))
    rows = []
    for path in sorted(corpus.glob("*.jsonl.gz")):
        if path.name.startswith("eclektic"):
            continue
        size = 0
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                rows.append(row)
                size += len(row["text"].encode("utf-8"))
                if cap is not None and size >= cap:
                    break
    return rows
