"""Exposure per language: a variant's rules count documents of its own language, what the same
rules find in every language is kept apart as the languages it was seen in, and a figure the
field is too short to carry never decides.  Evidence is built with the figures the corpus
signals write, then decided, written and read back by the tool's own code."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from audit.auditfile import AuditFileError, read_audit, write_audit
from audit.evidence import Evidence
from audit.exposure import SEEN, UNKNOWN, UNSEEN, decide
from audit.items import Item, Variant
from audit.policyfile import load_policy
from audit.records import ExposureRecord
from audit.run.executors import check_items
from audit.run.summary import summarise

POLICY = load_policy()
FIXTURES = Path(__file__).resolve().parent / "fixtures"
NOTHING = {"exact_count": 0, "coverage": 0.0, "longest_match_chars": 0, "longest_match_fraction": 0.0}
VERBATIM = {"exact_count": 3, "coverage": 1.0, "longest_match_chars": 40, "longest_match_fraction": 1.0}


def language(lang: str, unknown_documents: int = 0) -> dict[str, Any]:
    return {"lang": lang, "by": "table", "unknown_language": "count", "unknown_documents": unknown_documents}


def question(lang: str, restricted: dict[str, Any], every: dict[str, Any], found_in: dict[str, int], **more: Any) -> Evidence:
    """n-gram evidence on a question, as the signal writes it for a variant in `lang`."""
    figures = {**restricted, "language": language(lang), "any_language": every, "languages": found_in, **more}
    return Evidence("ngram", "demo", "question", figures=figures)


def test_a_rule_firing_only_in_other_languages_leaves_the_variant_unseen_and_names_them():
    found = question("fi", NOTHING, VERBATIM, {"pt": 2, "es": 1, "und": 4})
    decision = decide(POLICY, [found], "fi")
    assert decision.exposure == UNSEEN
    assert decision.seen_in_languages == ["es", "pt"]
    assert {check["figure"] for check in decision.decided_by} == {"exact_count", "coverage", "longest_match_fraction"}


def test_a_pair_seen_in_other_languages_only_is_named_and_does_not_decide():
    pair = Evidence("ngram", "demo", "question+answer", figures={"documents": 0, "language": language("sw"), "any_language": {"documents": 2}, "languages": {"pt": 1, "es": 1}})
    decision = decide(POLICY, [pair], "sw")
    assert (decision.exposure, decision.seen_in_languages) == (UNSEEN, ["es", "pt"])


def test_the_variants_own_language_is_named_when_its_rules_fire():
    found = question("en", {**NOTHING, "exact_count": 1}, VERBATIM, {"en": 1, "de": 2, "und": 1})
    decision = decide(POLICY, [found], "en")
    assert decision.exposure == SEEN
    assert decision.seen_in_languages == ["de", "en"]
    assert [check["figure"] for check in decision.decided_by] == ["exact_count"]


def test_nothing_found_anywhere_is_seen_nowhere():
    decision = decide(POLICY, [question("de", NOTHING, NOTHING, {})], "de")
    assert (decision.exposure, decision.seen_in_languages) == (UNSEEN, [])


def test_languages_with_no_documents_or_unknown_ones_are_not_named():
    decision = decide(POLICY, [question("de", NOTHING, VERBATIM, {"fr": 0, "und": 3})], "de")
    assert (decision.exposure, decision.seen_in_languages) == (UNSEEN, [])


def test_evidence_without_language_figures_names_the_variants_language_when_it_fires():
    """A signal that does not put documents in languages (the langlinks articles, an older
    signal) speaks for the variant's own language only."""
    fired = Evidence("ngram", "demo", "question", figures={**NOTHING, "exact_count": 2})
    assert decide(POLICY, [fired], "ja").seen_in_languages == ["ja"]
    assert decide(POLICY, [Evidence("ngram", "demo", "question", figures=NOTHING)], "ja").seen_in_languages == []


def test_a_figure_below_the_floor_never_fires_in_any_language():
    short = question(
        "zh",
        {**NOTHING, "coverage": 1.0},
        {**NOTHING, "coverage": 1.0},
        {"zh": 5, "ja": 2},
        below_floor=["coverage"],
        floor={"coverage": {"needed": 3, "had": 1, "unit": "windows"}},
    )
    decision = decide(POLICY, [short], "zh")
    assert decision.exposure == UNSEEN and decision.seen_in_languages == []
    floored = [check for check in decision.decided_by if check["figure"] == "coverage"]
    assert floored == [
        {"signal": "ngram", "source": "demo", "field": "question", "figure": "coverage", "op": ">=", "value": 1.0, "threshold": 0.8,
         "status": "below_floor", "floor": {"needed": 3, "had": 1, "unit": "windows"}}
    ]  # fmt: skip


def test_a_floor_on_one_figure_leaves_the_others_deciding():
    short = question("zh", {**NOTHING, "coverage": 1.0, "exact_count": 1}, VERBATIM, {"zh": 1}, below_floor=["coverage"])
    decision = decide(POLICY, [short], "zh")
    assert decision.exposure == SEEN and [check["figure"] for check in decision.decided_by] == ["exact_count"]


def test_a_near_duplicate_below_the_floor_is_not_seen():
    near = Evidence(
        "minhash", "demo", "question",
        figures={"containment": 1.0, "jaccard": 0.2, "language": language("ar"), "any_language": {"containment": 1.0, "jaccard": 0.2},
                 "languages": {"fr": 1}, "below_floor": ["containment", "jaccard"], "floor": {"containment": {"needed": 8, "had": 3, "unit": "shingles"}}},
    )  # fmt: skip
    decision = decide(POLICY, [near], "ar")
    assert (decision.exposure, decision.seen_in_languages) == (UNSEEN, [])
    assert [check["status"] for check in decision.decided_by] == ["below_floor"]


def test_a_failed_source_names_no_language():
    failed = Evidence("ngram", "demo", "question", status="failed", error="index unreadable")
    decision = decide(POLICY, [failed], "de")
    assert (decision.exposure, decision.seen_in_languages) == (UNKNOWN, [])


def manifest_for(items: list[Item], records: list[ExposureRecord]) -> dict[str, Any]:
    languages = sorted({lang for item in items for lang in item.variants})
    return {
        "tool": "audit", "version": "test", "created": "2026-01-01T00:00:00Z", "command": [],
        "benchmark": {"path": "bench.jsonl", "absolute_path": "/nowhere/bench.jsonl", "format": "jsonl", "sha256": "0" * 64, "items": len(items), "languages": languages, "skipped_rows": []},
        "corpora": [{"name": "demo"}], "signals": ["ngram"], "signal_runs": [{"signal": "ngram", "source": "demo", "ran": True, "reason": None}],
        "policy": {"name": POLICY.name, "source": POLICY.source, "hash": POLICY.digest, "settings": POLICY.settings}, "config_hash": "0" * 16,
        "summary": summarise(records).to_dict(),
    }  # fmt: skip


def transfer_items() -> list[Item]:
    """Item 1's English source is in the corpus in English; its German question only in
    English documents; its Finnish context is written in Swedish.  Item 2 is nowhere."""
    one = {"en": Variant(question="Who wrote On the Origin of Species?"), "de": Variant(question="Wer schrieb Über die Entstehung der Arten?"),
           "fi": Variant(question="Kuka kirjoitti?", context="Darwin skrev boken.", field_languages={"context": "sv"})}  # fmt: skip
    two = {"en": Variant(question="What is a molecule?"), "de": Variant(question="Was ist ein Molekül?")}
    return [Item("1", "en", one), Item("2", "en", two)]


def runner(item: Item, lang: str) -> list[Evidence]:
    if item.item_id == "2":
        return [question(lang, NOTHING, NOTHING, {})]
    if lang == "en":
        return [question("en", VERBATIM, VERBATIM, {"en": 2})]
    return [question(lang, NOTHING, VERBATIM, {"en": 2, "und": 1})]


@pytest.fixture
def transfer_audit(tmp_path: Path) -> Path:
    items = transfer_items()
    records = check_items(items, [runner], POLICY, workers=1)
    path = tmp_path / "transfer.audit.jsonl"
    write_audit(path, manifest_for(items, records), [record.to_dict() for record in records])
    return path


def test_records_carry_the_languages_seen_in_beside_those_asked_in(transfer_audit: Path):
    records = {(r["item_id"], r["lang"]): r for r in read_audit(transfer_audit).records}
    assert records["1", "de"]["exposure"] == UNSEEN and records["1", "de"]["seen_in_languages"] == ["en"]
    assert records["1", "en"]["exposure"] == SEEN and records["1", "en"]["seen_in_languages"] == ["en"]
    assert {tuple(r["seen_in"]) for key, r in records.items() if key[0] == "1"} == {("en",)}
    assert {tuple(r["asked_in"]) for key, r in records.items() if key[0] == "1"} == {("de", "en", "fi")}
    assert records["2", "de"]["seen_in"] == [] and records["2", "de"]["asked_in"] == ["de", "en"]
    assert records["1", "fi"]["field_languages"] == {"context": "sv"}
    assert "field_languages" not in records["1", "de"]


def rewrite(path: Path, target: Path, manifest_edit, record_edit) -> Path:
    """The audit's lines edited, resealed with a correct digest, so only the schema can tell."""
    lines = path.read_text(encoding="utf-8").splitlines()
    manifest, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    manifest_edit(manifest)
    for record in records:
        record_edit(record)
    body = [(json.dumps(record, ensure_ascii=False) + "\n").encode() for record in records]
    manifest["records_sha256"] = hashlib.sha256(b"".join(body)).hexdigest()
    target.write_bytes((json.dumps(manifest) + "\n").encode() + b"".join(body))
    return target


def test_a_version_3_audit_reads_with_the_languages_not_recorded(transfer_audit: Path, tmp_path: Path):
    def older(record: dict[str, Any]) -> None:
        for name in ("seen_in_languages", "seen_in", "asked_in", "field_languages"):
            record.pop(name, None)

    old = rewrite(transfer_audit, tmp_path / "v3.audit.jsonl", lambda m: m.update(schema_version=3), older)
    audit = read_audit(old)
    assert audit.manifest["schema_version"] == 3
    assert all(r.get("seen_in_languages") is None and r.get("seen_in") is None for r in audit.records)


def test_a_version_1_audit_still_reads():
    audit = read_audit(FIXTURES / "audit-v1" / "v1.audit.jsonl")
    assert audit.manifest["upgraded_from"] == 1 and audit.records
    assert all("seen_in" not in r and "asked_in" not in r for r in audit.records)


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda r: r.update(seen_in=["fr"]) if r["item_id"] == "1" else None, "seen_in", "seen_in_languages give ['en']"),
        (lambda r: r.update(seen_in_languages=[7]) if r["item_id"] == "2" else None, "seen_in_languages[0]", "expected a non-empty string"),
        (lambda r: r.update(asked_in=["de"]) if r["lang"] == "en" else None, "asked_in", "where line"),
        (lambda r: r.update(field_languages=["sv"]) if r["lang"] == "fi" else None, "field_languages", "expected an object"),
    ],
)
def test_an_edited_language_field_is_refused_naming_line_and_field(transfer_audit: Path, tmp_path: Path, edit, field: str, message: str):
    bad = rewrite(transfer_audit, tmp_path / "bad.audit.jsonl", lambda m: None, edit)
    with pytest.raises(AuditFileError) as refused:
        read_audit(bad)
    assert f"{bad}:" in str(refused.value) and f"field '{field}'" in str(refused.value) and message in str(refused.value)
