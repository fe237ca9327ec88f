"""Scoring probe outputs and cutting probes, on real ECLeKTic passages in several scripts,
and reading the judge's verdicts."""
from __future__ import annotations

import re

import pytest
from conftest import ECLEKTIC_CSV

from audit.items import Item
from audit.probes.judge import JudgeReading, Verdict, majority, parse_verdict
from audit.probes.scoring import (
    MIN_PROBE_CHARS,
    Match,
    answer_recall,
    best_match,
    chrf,
    cloze_entity,
    mask,
    normalize,
    probe_passage,
    similarity,
    split_passage,
)
from audit.readers import load_benchmark

SCRIPTS = ("en", "de", "ja", "zh", "he", "hi", "ko")
SPACELESS = ("ja", "zh")


@pytest.fixture(scope="module")
def items() -> dict[str, Item]:
    return {item.item_id: item for item in load_benchmark(ECLEKTIC_CSV).items}


def test_normalize():
    assert normalize("  ＡＦＮ\u3000Bremerhaven!! ") == "afn bremerhaven"
    assert normalize("Straße") == "strasse"
    assert normalize("l'Allemagne") == "l allemagne"
    assert normalize("「ドイツ」。") == "ドイツ"
    assert normalize("ロイド・ブラジル") == "ロイド ブラジル"
    assert normalize("जर्मनी।") == "जर्मनी"
    assert normalize("$100 + 5%") == "100 5"
    assert normalize("") == ""


@pytest.mark.parametrize("lang", SCRIPTS)
def test_answer_recall_on_real_passages(items, lang):
    variant = items["56"].variants[lang]
    assert answer_recall([variant.answer], variant.context) == 1.0
    first_sentence = re.split(r"(?<=[.。।])", variant.context)[0]
    assert variant.answer not in first_sentence
    recall = answer_recall([variant.answer], first_sentence)
    # Scored in characters, a katakana or hangul name shares some with other words (the
    # ド, ロ, イ, ル of フットボール and デトロイト): a floor of chance overlap, not zero.
    assert recall < 0.6 if lang in ("ja", "ko") else recall == 0.0


def test_answer_recall_partial_and_best_form(items):
    assert answer_recall(["Lloyd Brazil"], "Lloyd was a halfback.") == 0.5
    # Katakana is scored in characters (the middle dot is punctuation): ロイド is 3 of 7.
    assert answer_recall(["ロイド・ブラジル"], "ロイドはハーフバックだった。") == pytest.approx(3 / 7)
    # Hangul too, so a particle attached to the name does not hide it.
    assert answer_recall(["로이드 브라질"], "로이드가 팀을 이끌었다.") == 0.5
    assert answer_recall(["독일"], items["33"].variants["ko"].context) == 1.0
    assert answer_recall(["Tailgunner", "tail gunner"], "He served as a tail gunner in the war.") == 1.0
    # No stemming: the genitive is not the word.
    assert answer_recall(["Deutschland"], "im Norden Deutschlands") == 0.0
    assert answer_recall(["Deutschland"], "in Deutschland.") == 1.0
    # Multiplicity: one "New" in the text covers only one of two.
    assert answer_recall(["New New York"], "New York") == pytest.approx(2 / 3)


def test_answer_recall_empty():
    assert answer_recall([], "anything") == 0.0
    assert answer_recall(["", "  ", "!"], "anything !") == 0.0
    assert answer_recall(["Germany"], "") == 0.0


def test_chrf_bounds(items):
    prefix, suffix = split_passage(items["33"].variants["en"].context, 400)
    assert chrf(suffix, suffix) == 1.0
    assert chrf("", suffix) == 0.0
    assert 0.0 <= chrf(prefix, suffix) < 0.5
    german = split_passage(items["33"].variants["de"].context, 400)[1]
    assert 0.0 <= chrf(german, suffix) <= 1.0
    near = suffix.replace("Bremerhaven", "Bremerhafen")
    assert chrf(prefix, suffix) < chrf(near, suffix) < 1.0
    ja = items["33"].variants["ja"].context
    assert 0.5 < chrf(ja[:200], ja[:220]) < 1.0


def test_similarity_bounds():
    assert similarity("AFN Bremerhaven", "afn bremerhaven!") == 1.0
    assert similarity("", "") == 0.0
    assert similarity("AFN Bremerhaven", "") == 0.0
    assert similarity("abc", "xyz") == 0.0
    value = similarity("AFN Bremerhafen", "AFN Bremerhaven")
    assert 0.9 < value < 1.0
    assert value == similarity("AFN Bremerhaven", "AFN Bremerhafen")
    assert similarity("ブレーマーハーフェン", "ブレーマーハーヘン") > 0.8


def test_best_match_containment_and_first_line():
    targets = ["AFN Bremerhaven", "AFN Bremen"]
    assert best_match("Title: AFN Bremerhaven", targets, 0.9) == Match("AFN Bremerhaven", 1.0, True)
    assert best_match("タイトル：AFNブレーマーハーフェン", ["AFNブレーマーハーフェン"], 0.9).similarity == 1.0
    # The explanation after the answer would drown it; the first line is compared on its own.
    answer = "AFN Bremerhafen\nIt was an American forces radio station in northern Germany, first called AFN Bremen Radio."
    assert similarity(answer, "AFN Bremerhaven") < 0.5
    found = best_match(answer, ["AFN Bremerhaven"], 0.9)
    assert found.target == "AFN Bremerhaven" and 0.9 < found.similarity < 1.0 and found.matched
    assert not best_match(answer, ["AFN Bremerhaven"], 0.95).matched


def test_best_match_whole_words_only():
    found = best_match("AFN Bremerhaven", ["Bremen"], 0.8)
    assert found.similarity < 1.0 and not found.matched
    assert best_match("Detroit Titans", ["Titan"], 0.9).similarity < 0.9
    assert best_match("ロイド・ブラジルです", ["ブラジル"], 0.9).similarity == 1.0


@pytest.mark.parametrize(("threshold", "matched"), [(0.0, True), (0.79, True), (0.8, True), (0.81, False), (1.0, False)])
def test_best_match_threshold(threshold, matched):
    found = best_match("Detroit Titan football", ["1929 Detroit Titans football team"], threshold)
    assert found.similarity == pytest.approx(0.8)
    assert found.matched is matched


def test_best_match_edge_cases():
    assert best_match("anything", [], 0.5) == Match(None, 0.0, False)
    assert best_match("anything", ["", "!!"], 0.5) == Match(None, 0.0, False)
    assert best_match("", ["Germany"], 0.0) == Match("Germany", 0.0, True)
    assert best_match("Germany", ["Germany", "germany"], 0.9).target == "Germany"


@pytest.mark.parametrize("lang", SCRIPTS)
def test_split_passage_on_real_passages(items, lang):
    passage = items["33"].variants[lang].context
    text = probe_passage(passage, 400)
    prefix, suffix = split_passage(passage, 400)
    assert len(text) <= 400 and text.startswith(prefix) and text.endswith(suffix)
    assert abs(len(prefix) - len(suffix)) <= 0.1 * len(text)
    gap = text[len(prefix):len(text) - len(suffix)]
    if lang in SPACELESS:
        assert gap.strip() == ""
    else:
        assert gap.isspace()


@pytest.mark.parametrize(("item", "lang"), [("30", "en"), ("33", "ja"), ("33", "hi"), ("33", "he"), ("33", "ko"), ("33", "zh")])
def test_probe_passage_ends_at_a_sentence(items, item, lang):
    passage = items[item].variants[lang].context
    cut = probe_passage(passage, 400)
    assert len(passage) > 400 >= len(cut) >= 200
    assert passage.startswith(cut) and cut[-1] in ".。।"


def test_probe_passage_fallbacks(items):
    passage = items["63"].variants["en"].context
    assert probe_passage(passage, 10_000) == passage.strip()
    words = probe_passage("word " * 100, 52)
    assert words == ("word " * 10).strip()
    assert probe_passage("x" * 100, 30) == "x" * 30
    zh = items["33"].variants["zh"].context
    assert "==" not in probe_passage(zh, 400)[-20:]


def test_split_passage_too_short(items):
    assert split_passage("Lloyd Brazil led the team.", 400) is None
    assert split_passage(items["56"].variants["en"].context, MIN_PROBE_CHARS - 1) is None
    assert split_passage("x" * 100, 400) is None
    assert split_passage("a" * 30 + " " + "b" * 30, 400) == ("a" * 30, "b" * 30)


@pytest.mark.parametrize("lang", SCRIPTS)
def test_cloze_entity_prefers_the_items_names(items, lang):
    item = items["56"]
    variant = item.variants[lang]
    names = [item.meta["title"], variant.answer, *variant.aliases]
    expected = item.meta["title"] if lang == "en" else variant.answer
    entity = cloze_entity(variant.context, names, lang)
    assert entity == expected
    masked = mask(variant.context, entity)
    assert entity not in masked and "[MASK]" in masked


def test_cloze_entity_name_rules(items):
    en = items["56"].variants["en"].context
    assert cloze_entity(en, ["1929", "Lloyd Brazil"], "en") == "Lloyd Brazil"
    assert cloze_entity(en, ["troit"], "en") != "troit"
    hi = items["33"].variants["hi"].context
    assert "मनी" in hi and cloze_entity(hi, ["मनी"], "hi") is None
    he = "תחנת השותפים בברמרהאפן הייתה ממוקמת בצפון גרמניה."
    assert cloze_entity(he, ["ברמרהאפן"], "he") == "ברמרהאפן"


def test_cloze_entity_capitalised_spans(items):
    assert cloze_entity(items["33"].variants["en"].context, [], "en") == "Germany"
    assert cloze_entity(probe_passage(items["33"].variants["en"].context, 400), [], "en") == "American Forces Network"
    assert cloze_entity(items["33"].variants["de"].context, [], "de") == "Zweiten Weltkrieg"
    assert cloze_entity(items["63"].variants["en"].context, [], "en") == "Uganda"
    for lang in ("ja", "zh", "he", "hi", "ko"):
        assert cloze_entity(items["33"].variants[lang].context, [], lang) is None
    assert cloze_entity("Radio stations were built. Radio stations closed.", [], "en") is None
    assert cloze_entity("Elle a vu La Grande Vadrouille, puis la suite.", [], "fr") == "Grande Vadrouille"
    # German capitalises nouns: one capitalised word is not a name there.
    assert cloze_entity("Der Sender lag im Norden. Ein Sender und noch ein Sender.", [], "de") is None


def test_mask_every_occurrence(items):
    passage = items["33"].variants["de"].context
    masked = mask(passage, "Deutschland")
    assert "deutschland" not in masked.lower()
    assert masked.count("[MASK]") == passage.lower().count("deutschland")
    assert mask("a+b and A+B", "a+b", "<x>") == "<x> and <x>"
    assert mask("Bremen", "Bremen", r"\1") == r"\1"
    with pytest.raises(ValueError):
        mask(passage, "")


@pytest.mark.parametrize(("text", "verdict", "error"), [
    ('{"verdict": "known"}', Verdict.KNOWN, None),
    ('{"verdict": "not_known"}', Verdict.NOT_KNOWN, None),
    ('```json\n{"verdict": "not_known"}\n```', Verdict.NOT_KNOWN, None),
    ('The answer names the right country.\n{"verdict": "known"}\nThat is my verdict.', Verdict.KNOWN, None),
    ('{"verdict": " KNOWN "}', Verdict.KNOWN, None),
    ('{"verdict": "Not Known"}', Verdict.NOT_KNOWN, None),
    ('{"verdict": "not-known"}', Verdict.NOT_KNOWN, None),
    ('Braces {like these} are prose. {"verdict": "known"}', Verdict.KNOWN, None),
    ('{"Verdict": "not_known"}', Verdict.NOT_KNOWN, None),
    ('{"reason": "says {x} and \\"quotes\\" }", "verdict": "known"}', Verdict.KNOWN, None),
    ('{"reason": "generic"}\n{"verdict": "not_known"}', Verdict.NOT_KNOWN, None),
    ('{"verdict": "known"}\n{"verdict": "known"}', Verdict.KNOWN, None),
    ('<think>Maybe {"verdict": "known"}?</think>{"verdict": "not_known"}', Verdict.NOT_KNOWN, None),
    ('{"verdict": "unknown"}', None, "'unknown' is neither"),
    ('{"verdict": true}', None, "True is neither"),
    ('{"verdict": "known"} {"verdict": "not_known"}', None, "conflicting verdicts"),
    ('{"verdict": "kno', None, "not closed"),
    ('```json\n{"verdict": "known"', None, "not closed"),
    ('{"verdict": known}', None, "not valid JSON"),
    ("{'verdict': 'known'}", None, "not valid JSON"),
    ('{"answer": "known"}', None, "no 'verdict' key"),
    ('{"result": {"verdict": "known"}}', None, "no 'verdict' key"),
    ("known", None, "no JSON object"),
    ("The model clearly knows it.", None, "no JSON object"),
    ("", None, "empty output"),
    ("  \n", None, "empty output"),
    ('<think>It says {"verdict": "kn', None, "no answer after the reasoning"),
])
def test_parse_verdict(text, verdict, error):
    reading = parse_verdict(text)
    assert reading.verdict is verdict
    assert reading.raw == text
    if error is None:
        assert reading.parse_error is None
    else:
        assert error in reading.parse_error


def test_parse_verdict_of_no_output():
    assert parse_verdict(None) == JudgeReading(None, "empty output", "")


def reading(verdict: Verdict | None) -> JudgeReading:
    return JudgeReading(verdict, None if verdict else "no JSON object in the output", "")


K, N, U = Verdict.KNOWN, Verdict.NOT_KNOWN, None


@pytest.mark.parametrize(("votes", "winner", "counts"), [
    ([K], K, (1, 0, 0)),
    ([K, K, N], K, (2, 1, 0)),
    ([N, N, K, K, N], N, (2, 3, 0)),
    ([K, N], None, (1, 1, 0)),
    ([K, K, N, N], None, (2, 2, 0)),
    ([K, K, U], K, (2, 0, 1)),
    ([K, U, U], None, (1, 0, 2)),
    ([K, N, U], None, (1, 1, 1)),
    ([K, K, U, U], None, (2, 0, 2)),
    ([U, U, U], None, (0, 0, 3)),
    ([], None, (0, 0, 0)),
])
def test_majority(votes, winner, counts):
    verdict, tally = majority(reading(vote) for vote in votes)
    assert verdict is winner
    assert tally == dict(zip(("known", "not_known", "unparsed"), counts, strict=True))
