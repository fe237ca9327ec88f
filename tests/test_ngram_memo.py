"""A repeated field is measured once: BMLAMA-17's published files (answers and relation words
recur across items) checked against a real index of real text with a language table give the
same evidence with the memo as without it, and a copy the caller may change."""
from __future__ import annotations

import collections
import json
import pickle

import pytest
from conftest import FIXTURES
from test_ngram_language import demo_rows, with_table

from audit import forms
from audit.corpora.base import Budget
from audit.evidence import FAILED, Evidence
from audit.policyfile import load_policy
from audit.readers import load_benchmark
from audit.signals import plan
from audit.signals.ngram import NgramConfig, field_language, run
from audit.signals.ngram_match import FieldMatch, FieldText
from audit.signals.ngram_memo import ENTRY_BYTES, FieldMemo
from audit.text import normalize

CONFIG = NgramConfig()
LANGS = ("en", "es", "fr", "ja")


@pytest.fixture(scope="module")
def items():
    return load_benchmark(FIXTURES / "bmlama17", "bmlama").items[:40]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, items):
    """PUD sentences of four languages, and some of the benchmark's own prompts and answers
    planted in their language, so fields match whole and in part."""
    planted = [{"text": f"{v.question} {v.answer}", "lang": lang} for item in items[:10] for lang, v in item.variants.items() if lang in LANGS]
    rows = [row for lang in LANGS for row in demo_rows(lang, 80)] + planted
    return with_table(rows, tmp_path_factory.mktemp("memo") / "index")


def written(evidence: list[Evidence]) -> str:
    return json.dumps([e.to_dict() for e in evidence], sort_keys=True, ensure_ascii=False)


def test_a_templated_benchmark_gets_the_same_evidence_with_its_repeated_fields_kept(corpus, items):
    memo, met = FieldMemo(), collections.Counter()
    for item in items:
        for lang in item.variants:
            remembered = run(corpus, item, lang, CONFIG, memo=memo)
            assert written(remembered) == written(run(corpus, item, lang, CONFIG))
            shared = forms.source_texts(item, lang)
            for checked in forms.text_fields(item, lang):
                field_lang = field_language(item.variants[lang], checked.field, lang)
                met.update(FieldText.of(checked.field, normalize(f.text), field_lang, shared, CONFIG.window_for) for f in checked.forms[: CONFIG.max_forms])
    # Each field met more than once is kept once; one met once is not, unless its hash shares
    # a slot with one met before (rare in a table of a million slots).
    repeated = sum(1 for count in met.values() if count > 1)
    assert 100 < repeated <= len(memo) <= repeated + len(met) // 100 < len(met)
    assert any(e.figures["longest_match_chars"] > 0 for e in run(corpus, items[0], "en", CONFIG) if e.field == "prompt")


def test_a_repeat_is_a_copy_the_caller_may_change(corpus, items):
    memo = FieldMemo()
    item, lang = items[0], "en"
    run(corpus, item, lang, CONFIG, memo=memo)
    first = run(corpus, item, lang, CONFIG, memo=memo)
    assert len(memo) > 0
    pristine = written(first)
    for evidence in first:
        evidence.figures["changed"] = True
        evidence.provenance.append({"changed": True})
    assert written(run(corpus, item, lang, CONFIG, memo=memo)) == pristine


def test_a_runner_over_a_local_index_keeps_fields_and_ships_without_them(corpus, items):
    policy = load_policy()
    runner = plan([corpus], ["ngram"], policy.configs, policy.rules)[0][0]
    memo = runner.ask.keywords["memo"]
    assert isinstance(memo, FieldMemo)
    runner(items[0], "en")
    assert len(memo) == 0
    runner(items[0], "en")
    assert len(memo) > 0
    shipped = pickle.loads(pickle.dumps(memo))
    assert len(shipped) == 0 and shipped.limit == memo.limit


def key(text: str) -> FieldText:
    return FieldText.of("answer", text, "en", (), CONFIG.window_for)


def answer(figures: dict, status: str = "ok") -> tuple[Evidence, FieldMatch]:
    return Evidence(signal="ngram", source="index", field="answer", status=status, figures=figures), FieldMatch("x", [1])


def test_a_field_is_kept_when_measured_a_second_time_and_equal_fields_share_it():
    memo, calls = FieldMemo(), []

    def measure():
        calls.append(1)
        return answer({"exact_count": len(calls)})

    assert memo.measured(key("Paris"), Budget(), measure)[0].figures == {"exact_count": 1}
    assert len(memo) == 0
    assert memo.measured(key("Paris"), Budget(), measure)[0].figures == {"exact_count": 2}
    assert memo.measured(key("Paris"), Budget(), measure)[0].figures == {"exact_count": 2}
    assert len(calls) == 2
    # Another language, or text shared with the source, is another field.
    for other in (FieldText.of("answer", "Paris", "fr", (), CONFIG.window_for), FieldText.of("answer", "Paris", "en", ("Paris est en France",), CONFIG.window_for)):
        assert other != key("Paris")
        memo.measured(other, Budget(), measure)
        memo.measured(other, Budget(), measure)
    assert len(calls) == 6 and len(memo) == 3


def twice(memo: FieldMemo, field: FieldText, budget: Budget, measure) -> None:
    memo.measured(field, budget, measure)
    memo.measured(field, budget, measure)


def test_evidence_that_cost_count_queries_or_failed_is_not_kept():
    memo = FieldMemo()

    def counted():
        budget.take(10)
        return answer({"count_queries": 1})

    budget = Budget()
    twice(memo, key("Lyon"), budget, counted)
    twice(memo, key("Nice"), Budget(), lambda: answer({}, FAILED))
    assert len(memo) == 0
    twice(memo, key("Metz"), Budget(), lambda: answer({}))
    assert len(memo) == 1


def test_the_oldest_fields_go_once_the_kept_bytes_pass_the_limit():
    size = len(pickle.dumps(answer({"text": "a" * 100}), pickle.HIGHEST_PROTOCOL)) + len("city 0") + ENTRY_BYTES
    memo = FieldMemo(limit=3 * size)
    for n in range(5):
        twice(memo, key(f"city {n}"), Budget(), lambda: answer({"text": "a" * 100}))
    assert len(memo) == 3
    calls = []
    memo.measured(key("city 0"), Budget(), lambda: calls.append(1) or answer({"text": "a" * 100}))
    memo.measured(key("city 4"), Budget(), lambda: calls.append(1) or answer({"text": "a" * 100}))
    assert calls == [1]
    twice(memo, key("huge"), Budget(), lambda: answer({"text": "a" * (4 * size)}))
    assert len(memo) == 3


def test_a_copy_keeps_every_field_of_the_evidence():
    """`_copy` names Evidence's fields one by one (a `dataclasses.replace` costs twice as much a
    repeat): a field Evidence gains must be copied too, not left at its default."""
    from dataclasses import fields

    from audit.signals.ngram_memo import _copy

    values = {f.name: f"value of {f.name}" for f in fields(Evidence)} | {"figures": {"n": [1]}, "provenance": [{"document": 3}]}
    evidence = Evidence(**values)
    copied, match = _copy((evidence, "match"))
    assert match == "match"
    assert {f.name: getattr(copied, f.name) for f in fields(Evidence)} == values
    assert copied.figures is not evidence.figures and copied.provenance is not evidence.provenance
    assert copied.figures["n"] is evidence.figures["n"]
