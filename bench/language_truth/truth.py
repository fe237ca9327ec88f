"""What an audit file says about language, judged against corpora whose contents are known.

Read by the contract's names only: `exposure`, `decided_by` (the checks that fired; an entry
with a `status` did not), each evidence's `figures` and `provenance` (its documents' own `lang`
is the truth; the tool's `language` is shown beside it where it gives one)."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from audit.neardup import SCRIPT_NAMES, ShingleSizes, tokenize
from audit.text import normalize

from .cases import base_language
from .corpora import Known, language_of_document

SHORT = 40  # characters: the short questions
CARRY = 3  # shingles shared as text, at the least, for a near-duplicate of a question
SEEN = "seen"


def fired(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks that made a variant `seen` (none for any other tag)."""
    if record.get("exposure") != SEEN:
        return []
    return [check for check in record.get("decided_by", []) if "status" not in check and "figure" in check]


def evidence_for(record: dict[str, Any], check: dict[str, Any]) -> dict[str, Any] | None:
    for found in record.get("evidence", []):
        same = all(found.get(key) == check.get(key) for key in ("signal", "source", "field"))
        if same and found.get("figures", {}).get("form") == check.get("form"):
            return found
    return None


def absent_languages(records: list[dict[str, Any]], present: frozenset[str]) -> dict[str, Any]:
    """Variants of languages the corpus holds no text in, and how many of them are `seen`."""
    have = {base_language(lang) for lang in present}
    variants, seen = Counter(), Counter()
    for record in records:
        lang = record["lang"]
        if base_language(lang) in have:
            continue
        variants[lang] += 1
        seen[lang] += record["exposure"] == SEEN
    return {
        "variants": sum(variants.values()), "seen": sum(seen.values()),
        "by_language": {lang: {"variants": variants[lang], "seen": seen[lang]} for lang in sorted(variants)},
    }


def _check_languages(record: dict[str, Any], check: dict[str, Any], known: Known) -> dict[str, Any]:
    """One fired check: the true languages of the documents its evidence points to, and the tool's."""
    found = evidence_for(record, check) or {}
    field = check["field"]
    wanted = base_language((record.get("field_languages") or {}).get(field, record["lang"]))
    truth = [language_of_document(entry, known) for entry in found.get("provenance", [])]
    said = sorted({str(entry["language"]) for entry in found.get("provenance", []) if "language" in entry})
    return {
        "signal": check["signal"], "field": field, "figure": check["figure"], "value": check["value"],
        "wanted": wanted, "documents": dict(Counter(str(lang) for lang in truth)), "tool_says": said,
        "own": any(lang is not None and base_language(lang) == wanted for lang in truth),
    }


def deciding_evidence(records: list[dict[str, Any]], known: Known) -> dict[str, Any]:
    """For every `seen` variant, whether each check that fired points to a document of the
    variant's (or the field's) language: `strict` when every one does, `some` when one does."""
    strict = some = 0
    exceptions = []
    per_language: dict[str, Counter] = defaultdict(Counter)
    seen = [record for record in records if record["exposure"] == SEEN]
    for record in seen:
        checks = [_check_languages(record, check, known) for check in fired(record)]
        ok = bool(checks) and all(c["own"] for c in checks)
        strict += ok
        some += any(c["own"] for c in checks)
        per_language[record["lang"]].update(seen=1, own=ok)
        if not ok:
            exceptions.append({"item": record["item_id"], "lang": record["lang"], "role": record.get("role"), "checks": [c for c in checks if not c["own"]]})
    return {
        "seen": len(seen), "own_language": strict, "some_own_language": some,
        "share": round(strict / len(seen), 4) if seen else None,
        "by_language": {lang: dict(counts) for lang, counts in sorted(per_language.items())},
        "exceptions": exceptions,
    }


def text_shingles(text: str) -> set[tuple[str, ...]]:
    """The near-duplicate signal's shingles as text (case-folded tokens), sizes by script."""
    text = normalize(text)
    tokens = tokenize(text)
    sizes = ShingleSizes()
    words = [text[s:e].casefold() for s, e in zip(tokens.starts.tolist(), tokens.ends.tolist(), strict=True)]
    out = set()
    for i, script in enumerate(np.asarray(tokens.scripts).tolist()):
        n = sizes.size(SCRIPT_NAMES[script])
        if i + n <= len(words):
            out.add(tuple(words[i : i + n]))
    return out


def shared_text(field_text: str, snippets: list[str], source_texts: list[str] = ()) -> tuple[int, int]:
    """How many of the field's shingles, as text, one of the matched snippets holds (the best
    snippet), and how many it has; those it shares with its source-language variant are left
    out, as the signal leaves them."""
    own = text_shingles(field_text).difference(*(text_shingles(t) for t in source_texts))
    return max((len(own & text_shingles(snippet)) for snippet in snippets), default=0), len(own)


def text_containment(field_text: str, snippets: list[str], source_texts: list[str] = ()) -> float:
    shared, own = shared_text(field_text, snippets, source_texts)
    return shared / own if own else 0.0


def judged(check: dict[str, Any], found: dict[str, Any], text: str, source: list[str]) -> dict[str, Any]:
    """A near-duplicate rule that fired, judged on the text.  `false`: the matched snippets do
    not hold a copy of the question, that is fewer of its shingles (as text) than the rule's
    threshold asks of all of them, or fewer than `CARRY` (a whole question of fewer shingles
    excepted).  `collision`: fewer shared as text than the threshold asks even of the shingles the
    signal counted (its `shingles` figure), so only a hash could have matched."""
    snippets = [entry.get("snippet", "") for entry in found.get("provenance", [])]
    shared, own = shared_text(text, snippets, source)
    counted = found.get("figures", {}).get("shingles") or own
    return {
        "text_containment": round(shared / own, 3) if own else 0.0, "shared_as_text": shared,
        "false": shared < max(min(CARRY, own), check["threshold"] * own), "collision": shared < check["threshold"] * counted,
    }


Asked = dict[tuple[str, str], tuple[str, list[str]]]  # (item, language): (question, source-language texts)


def short_questions(records: list[dict[str, Any]], questions: Asked) -> dict[str, Any]:
    """Checks that fired on a question under 40 characters: near-duplicate ones, each judged on
    its shingles as text against the matched snippets (`judged`), and n-gram ones (counted and
    listed)."""
    near, false, exact, collisions = [], [], [], 0
    for record in records:
        text, source = questions.get((record["item_id"], record["lang"]), (None, []))
        for check in fired(record):
            if check["field"] != "question" or text is None or len(normalize(text)) >= SHORT:
                continue
            row = {"item": record["item_id"], "lang": record["lang"], "question": text, "figure": check["figure"], "value": check["value"]}
            if check["signal"] == "ngram":
                exact.append(row)
                continue
            row.update(judged(check, evidence_for(record, check) or {}, text, source))
            near.append(row)
            collisions += row["collision"]
            if row["false"]:
                false.append(row)
    short = sum(1 for text, _ in questions.values() if len(normalize(text)) < SHORT)
    return {
        "short_questions": short, "near_duplicate_fired": len(near), "near_duplicate_false": len(false), "hash_collisions": collisions,
        "false": false, "ngram_fired": len(exact), "ngram": exact,
    }


def seen_elsewhere(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Variants not `seen` in their own language whose text or fact the tool says was seen in
    other languages (`seen_in_languages`); None for audits that do not record it."""
    if not records or not any("seen_in_languages" in record for record in records):
        return None
    elsewhere = Counter()
    for record in records:
        others = [lang for lang in record.get("seen_in_languages") or [] if base_language(lang) != base_language(record["lang"])]
        if record["exposure"] != SEEN and others:
            elsewhere.update(others)
            elsewhere["variants"] += 1
    variants = elsewhere.pop("variants", 0)
    return {"variants": variants, "languages": dict(elsewhere.most_common())}
