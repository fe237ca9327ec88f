"""Planted truth: the ECLeKTic sample's passages and questions copied into real documents of
the variant's own language, in every exact kind of copy, then audited.

Pairs are chosen as `audit.index.plants.planted_pairs` chooses them (half of every language's items)
and the host documents and the partial, edited and reordered copies are `audit.index.plants`' own;
this adds the kinds exact matching must also find: verbatim, question+answer, split across
two documents, inside a 300 KB document, NFD and full-width digits."""
from __future__ import annotations

import json
import random
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit.index import plants
from audit.items import Item, Variant
from audit.readers import load_benchmark
from audit.text import normalize, units

from .cases import ECLEKTIC
from .truth import evidence_for, fired

BIG = 300_000  # bytes of the document the "inside 300 KB" copy sits in
FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
PLANTED_ID = re.compile(r"^lt-(?P<item>.+)-(?P<lang>[^-]+)-\d+$")
Host = Callable[[], str]


def _between(host: str, copy: str) -> str:
    """The copy put between two sentences of a host document, as `audit.index.plants.plant` puts it."""
    parts = plants.sentences(host)
    cut = len(parts) // 2
    return " ".join([*parts[:cut], copy, *parts[cut:]])


def _split(text: str) -> tuple[str, str]:
    text = normalize(text)
    pieces = units(text)
    middle = pieces[len(pieces) // 2].start
    return text[:middle].rstrip(), text[middle:]


def _big(hosts: list[str], copy: str) -> str:
    """Host documents of the language, one after another (again from the first when there are
    too few) until 300 KB, with the copy in the middle."""
    texts, size, i = [], 0, 0
    while size < BIG:
        texts.append(hosts[i % len(hosts)])
        size += len(texts[-1].encode("utf-8")) + 1
        i += 1
    half = len(texts) // 2
    return "\n".join([*texts[:half], copy, *texts[half:]])


KINDS: dict[str, Callable[[Variant, Host, list[str]], list[str]]] = {
    "verbatim": lambda v, host, _: [_between(host(), v.context)],
    "partial": lambda v, host, _: [_between(host(), plants.half(v.context))],
    "edited": lambda v, host, _: [_between(host(), plants.every_seventh(v.context))],
    "question+answer": lambda v, host, _: [_between(host(), f"{v.question} {v.answer}")],
    "split across two documents": lambda v, host, _: [_between(host(), part) for part in _split(v.context)],
    "inside a 300 KB document": lambda v, _, hosts: [_big(hosts, v.context)],
    "NFD": lambda v, host, _: [_between(host(), unicodedata.normalize("NFD", v.context))],
    "full-width digits": lambda v, host, _: [_between(host(), v.context.translate(FULL_WIDTH))],
    "reordered sentences": lambda v, host, _: [_between(host(), plants.reorder(v.context))],
}


def assign(items: list[Item], langs: list[str]) -> dict[tuple[str, str], str]:
    """{(item, language): kind} for the pairs `audit.index.plants.planted_pairs` picks, the kinds in
    turn; full-width digits only for passages that have a digit to widen."""
    by_id = {item.item_id: item for item in items}
    names, turn, plan = list(KINDS), 0, {}
    for item_id, lang in plants.planted_pairs(items, langs):
        kind = names[turn % len(names)]
        if kind == "full-width digits" and not re.search(r"[0-9]", by_id[item_id].variants[lang].context or ""):
            turn += 1
            kind = names[turn % len(names)]
        plan[(item_id, lang)] = kind
        turn += 1
    return plan


def corpus(path: Path, cap: int | None, bench: Path = ECLEKTIC, only: tuple[str, ...] = (), seed: int = 11) -> dict[tuple[str, str], str]:
    """Write the planted corpus (demo host documents, up to `cap` bytes per file, plus the
    copies; only in the languages `only` names, when it names any) to `path` as JSON Lines;
    the plan it carries."""
    items = load_benchmark(bench).items
    langs = list(items[0].variants)
    rows = plants.host_rows(cap)
    hosts: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        hosts[row["lang"]].append(row["text"])
    rng = random.Random(seed)
    plan = {key: kind for key, kind in assign(items, langs).items() if not only or key[1] in only}
    by_id = {item.item_id: item for item in items}
    for (item_id, lang), kind in plan.items():
        texts = KINDS[kind](by_id[item_id].variants[lang], lambda lang=lang: rng.choice(hosts[lang]), hosts[lang])
        rows += [{"id": f"lt-{item_id}-{lang}-{n}", "lang": lang, "title": None, "text": text} for n, text in enumerate(texts)]
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return plan


def _documents(record: dict[str, Any]) -> list[str]:
    """Ids of the documents behind the checks that made a variant `seen`."""
    ids = set()
    for check in fired(record):
        for entry in (evidence_for(record, check) or {}).get("provenance", []):
            meta = entry.get("metadata") or {}
            inner = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else meta
            ids.add(str(inner.get("id") or entry.get("document")))
    return sorted(ids)


def recall(records: list[dict[str, Any]], plan: dict[tuple[str, str], str]) -> dict[str, Any]:
    """Recall per kind (a planted variant tagged `seen`; and seen through its own planted copy),
    and the unplanted variants tagged `seen`, with the documents that decided."""
    hits, own, total = Counter(), Counter(), Counter()
    false = []
    for record in records:
        key = (record["item_id"], record["lang"])
        seen = record["exposure"] == "seen"
        if key not in plan:
            if seen:
                false.append({"item": key[0], "lang": key[1], "role": record.get("role"), "documents": _documents(record)})
            continue
        kind = plan[key]
        total[kind] += 1
        hits[kind] += seen
        own[kind] += seen and any(d.startswith(f"lt-{key[0]}-{key[1]}-") for d in _documents(record))
    kinds = {kind: {"planted": total[kind], "seen": hits[kind], "recall": round(hits[kind] / total[kind], 4) if total[kind] else None, "through_own_copy": own[kind]} for kind in KINDS}
    unplanted = sum(1 for record in records if (record["item_id"], record["lang"]) not in plan)
    return {"kinds": kinds, "planted": sum(total.values()), "unplanted": unplanted, "false_seen": len(false), "false": false}
