"""Cloze and multiple-choice items checked by what they stand for: real X-FACTR facts and XCOPA
items from tests/fixtures, against an index of real Wikipedia text (the demo corpus) with
copies planted the ways a corpus would hold them: a fact stated with an alias, a subject near
its answer in a document of one language, a question followed by an option."""
from __future__ import annotations

import pytest
from conftest import CORPUS, FIXTURES, read_jsonl_gz, write_jsonl

from audit import forms
from audit.corpora.local import LocalIndex
from audit.exposure import SEEN, UNSEEN, decide
from audit.forms import Form
from audit.index.build import build_index
from audit.items import Item, ItemKind, Variant
from audit.policyfile import load_policy
from audit.readers import load_benchmark
from audit.signals.ngram import NgramConfig, run

CONFIG = NgramConfig()


def by_id(path, item_id):
    return next(item for item in load_benchmark(path).items if item.item_id == item_id)


LEE = "6b0eee38-7ee0-11ea-9dd9-1913630c02b2"  # Lee Kuan Yew was born in [Y] . -> Singapore
ZOG = "6b0ef068-7ee0-11ea-9dd9-1913630c02b2"  # Zog I was born in [Y] . -> Albania


@pytest.fixture(scope="module")
def facts():
    return by_id(FIXTURES / "xfactr", LEE), by_id(FIXTURES / "xfactr", ZOG)


@pytest.fixture(scope="module")
def choices():
    items = load_benchmark(FIXTURES / "xcopa" / "data" / "it" / "test.it.jsonl").items
    return items[0], items[1], items[2]


def host(rows, n):
    return rows[n]["text"][:400]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, facts, choices):
    lee, _ = facts
    copied, distracted, options = choices
    en = read_jsonl_gz(CORPUS / "wiki-en.jsonl.gz", 60)
    fr = read_jsonl_gz(CORPUS / "wikilead-fr.jsonl.gz", 60)
    docs = [*en, *fr]
    ru, el = lee.variants["ru"], lee.variants["el"]
    it_copied, it_distracted, it_options = copied.variants["it"], distracted.variants["it"], options.variants["it"]
    wrong = next(option for option in it_distracted.options if option != it_distracted.answer)
    docs += [
        {"id": "alias-statement", "lang": "en", "text": f"{host(en, 1)} Lee Kuan Yew was born in Lion City. {host(en, 2)}"},
        {"id": "ru-pair", "lang": "ru", "text": f"{ru.subject} — первый премьер-министр. {host(en, 3)} Он родился в стране {ru.answer}."},
        {"id": "el-pair-in-a-russian-page", "lang": "ru", "text": f"{el.subject} {host(en, 4)} {el.answer}"},
        {"id": "zog-pair", "lang": "en", "text": f"{host(en, 5)} King Zog I of Albania ruled until 1939. {host(en, 6)}"},
        {"id": "xcopa-correct", "lang": "it", "text": f"{host(fr, 1)} {it_copied.question} {it_copied.answer} {host(fr, 2)}"},
        {"id": "xcopa-distractor", "lang": "it", "text": f"{host(fr, 3)} {it_distracted.question} {wrong} {host(fr, 4)}"},
        {"id": "xcopa-options", "lang": "it", "text": f"1. {it_options.options[0]} {host(fr, 5)} 2. {it_options.options[1]}"},
    ]
    root = tmp_path_factory.mktemp("kinds")
    write_jsonl(root / "docs.jsonl", docs)
    build_index([root / "docs.jsonl"], root / "index")
    return LocalIndex(root / "index")


def evidence_of(corpus, item, lang, field):
    return [e for e in run(corpus, item, lang, CONFIG) if e.field == field]


def test_cloze_forms_fill_the_mask_with_each_answer_and_alias(facts):
    lee, _ = facts
    en = lee.variants["en"]
    checked = {c.field: c.forms for c in forms.text_fields(lee, "en")}
    assert [f.field for f in forms.text_fields(lee, "en")] == ["statement", "prompt", "answer", "context"]
    assert checked["statement"][0] == Form("answer", "Lee Kuan Yew was born in Singapore.")
    assert [f.label for f in checked["statement"]] == ["answer", *(f"alias {n}" for n in range(1, len(en.aliases) + 1))]
    assert all(form.text == f"Lee Kuan Yew was born in {alias}." for form, alias in zip(checked["statement"][1:], en.aliases, strict=True))
    assert checked["prompt"] == (Form("before mask", "Lee Kuan Yew was born in"),)
    assert checked["context"] == ()
    assert "[Y]" not in " ".join(form.text for forms_ in checked.values() for form in forms_)


def test_a_fact_stated_with_an_alias_is_seen_and_the_record_names_the_alias(corpus, facts):
    lee, _ = facts
    statements = evidence_of(corpus, lee, "en", "statement")
    counts = {e.figures["form"]: e.figures["exact_count"] for e in statements}
    alias = f"alias {lee.variants['en'].aliases.index('Lion City') + 1}"
    assert counts[alias] == 1 and counts["answer"] == 0
    assert next(e for e in statements if e.figures["form"] == alias).figures["text"] == "Lee Kuan Yew was born in Lion City."
    decision = decide(load_policy(), run(corpus, lee, "en", CONFIG))
    assert decision.exposure is SEEN
    assert {(d["field"], d["form"]) for d in decision.decided_by} == {("statement", alias), ("subject+answer", alias)}


def test_prompt_around_the_mask_is_reported_but_decides_nothing(corpus, facts):
    lee, _ = facts
    (prompt,) = evidence_of(corpus, lee, "en", "prompt")
    assert prompt.figures["form"] == "before mask" and prompt.figures["exact_count"] >= 1
    assert not any(d["field"] == "prompt" for d in decide(load_policy(), run(corpus, lee, "en", CONFIG)).decided_by)


def test_subject_near_answer_counts_in_documents_of_that_language_only(corpus, facts):
    lee, _ = facts
    (ru,) = [e for e in evidence_of(corpus, lee, "ru", "subject+answer") if e.figures["form"] == "answer"]
    assert (ru.figures["documents"], ru.figures["documents_in_language"]) == (1, 1)
    assert ru.provenance[0]["language"] == "ru" and ru.provenance[0]["metadata"]["metadata"]["id"] == "ru-pair"
    assert decide(load_policy(), run(corpus, lee, "ru", CONFIG)).exposure is SEEN

    (el,) = [e for e in evidence_of(corpus, lee, "el", "subject+answer") if e.figures["form"] == "answer"]
    assert (el.figures["documents"], el.figures["documents_in_language"], el.figures["documents_other_language"]) == (0, 0, 1)
    assert el.figures["any_language"]["documents"] == 1 and el.figures["languages"] == {"ru": 1}
    assert el.figures["language"] == {"lang": "el", "by": "table", "unknown_language": "count", "unknown_documents": 0}
    assert decide(load_policy(), run(corpus, lee, "el", CONFIG)).exposure is UNSEEN


def test_a_subject_answer_pair_written_as_in_the_source_is_set_aside_for_the_target(corpus, facts):
    _, zog = facts
    en = zog.variants["en"]
    copy = Variant(question=en.question, answer=en.answer, subject=en.subject)
    item = Item("zog", "en", {"en": en, "de": copy}, kind=ItemKind.CLOZE, mask=zog.mask)
    (source,) = [e for e in evidence_of(corpus, item, "en", "subject+answer") if e.figures["form"] == "answer"]
    (target,) = [e for e in evidence_of(corpus, item, "de", "subject+answer") if e.figures["form"] == "answer"]
    assert source.figures["documents_in_language"] == 1 and source.figures["anchors"][0]["text"] == "Zog I"
    assert target.figures["documents"] == 0 and target.figures["anchors_shared_with_source"] == ["Zog I"]
    assert decide(load_policy(), run(corpus, item, "de", CONFIG)).exposure is UNSEEN


def test_multiple_choice_forms_put_each_option_after_the_question(choices):
    item, _, _ = choices
    it = item.variants["it"]
    checked = {c.field: c.forms for c in forms.text_fields(item, "it")}
    assert item.kind is ItemKind.MULTIPLE_CHOICE
    assert [f.field for f in forms.text_fields(item, "it")] == ["question", "question+correct", "question+distractor", "answer", "context"]
    correct = it.options.index(it.answer) + 1
    assert checked["question+correct"] == (Form(f"option {correct}", f"{it.question} {it.answer}"),)
    assert [f.label for f in checked["question+distractor"]] == [f"option {n}" for n in range(1, len(it.options) + 1) if n != correct]


def test_question_with_its_correct_option_or_a_distractor_is_seen(corpus, choices):
    copied, distracted, _ = choices
    policy = load_policy()
    correct = decide(policy, run(corpus, copied, "it", CONFIG))
    assert correct.exposure is SEEN and {d["field"] for d in correct.decided_by} == {"question", "question+correct"}
    distractor = decide(policy, run(corpus, distracted, "it", CONFIG))
    assert distractor.exposure is SEEN and {d["field"] for d in distractor.decided_by} == {"question", "question+distractor"}
    (correct_evidence,) = evidence_of(corpus, distracted, "it", "question+correct")
    assert correct_evidence.figures["exact_count"] == 0


def test_options_together_in_one_document_are_found_and_decide_when_a_policy_says_so(corpus, choices, tmp_path):
    _, _, options = choices
    (together,) = evidence_of(corpus, options, "it", "options")
    assert together.figures["documents_in_language"] == 1 and together.figures["options"] == 2
    assert together.provenance[0]["metadata"]["metadata"]["id"] == "xcopa-options"
    assert decide(load_policy(), run(corpus, options, "it", CONFIG)).exposure is UNSEEN
    strict = tmp_path / "options.toml"
    strict.write_text('name = "options"\n[rules.ngram.options]\ndocuments_in_language = 1\n')
    decision = decide(load_policy(strict), run(corpus, options, "it", CONFIG))
    assert decision.exposure is SEEN and {d["field"] for d in decision.decided_by} == {"options"}


def test_fields_beyond_max_forms_are_counted_not_checked(corpus, facts):
    lee, _ = facts
    few = NgramConfig(max_forms=2)
    statements = [e for e in run(corpus, lee, "en", few) if e.field == "statement"]
    total = 1 + len(lee.variants["en"].aliases)
    assert len(statements) == 2
    assert all(e.figures["forms"] == total and e.figures["forms_unchecked"] == total - 2 for e in statements)


def test_check_records_forms_and_the_report_shows_which_form_matched(corpus, tmp_path):
    from click.testing import CliRunner

    from audit.auditfile import read_audit
    from audit.cli import main
    from audit.report.itemrows import page_name

    out = tmp_path / "xfactr.audit.jsonl"
    result = CliRunner().invoke(main, ["check", str(FIXTURES / "xfactr"), "--corpus", str(corpus.path), "--out", str(out)], env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    assert "(30 cloze)" in result.output
    audit = read_audit(out)
    assert "template" in audit.manifest["benchmark"]["unused_fields"] and "aliases" not in audit.manifest["benchmark"]["unused_fields"]
    record = next(r for r in audit.records if r["item_id"] == LEE and r["lang"] == "en")
    assert record["exposure"] == "seen" and any(d.get("form") == "alias 2" and d["field"] == "statement" for d in record["decided_by"])
    page = (tmp_path / "xfactr.report" / page_name(LEE)).read_text(encoding="utf-8")
    assert "alias 2: exact 1" in page and "<mark>Lee Kuan Yew was born in Lion City.</mark>" in page
    assert "answer “Республика Сингапур” occurs" in page
