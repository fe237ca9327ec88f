"""The near-duplicate signal counts only real shared text in the variant's language: shingles
compared as text (a 32-bit hash collision matches nothing), documents of other languages kept
apart, short fields below a floor, and shingles common in the corpus set aside."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS, FIXTURES, strip_table, write_jsonl
from shingle_reference import folded, shingle_strings

from audit.corpora.base import UnknownLanguage
from audit.corpora.local import LocalIndex
from audit.index.build import build_index
from audit.index.doclangs import DocumentLanguages, How
from audit.items import Item, ItemKind, Variant
from audit.langupgrade import install_table
from audit.neardup import NearDuplicateIndex, NearDupParams, add_neardup, shingle_text
from audit.neardup.rarity import CommonShingles
from audit.readers import load_benchmark
from audit.signals import minhash
from audit.signals.minhash_language import DocumentFilter
from audit.text import normalize

# The Chinese Wikipedia page of the demo corpus on which the XCOPA question below "matched" at
# containment 0.5 when shingles were compared by their 32-bit hashes.
COLLIDING_PAGE = ("wiki-zh.jsonl.gz", 715)
XCOPA_ID = FIXTURES / "xcopa" / "collision" / "id" / "test.id.jsonl"
# A German XQuAD question (tests/fixtures/xquad/xquad.de.json), planted edited into German text.
GERMAN = "Wie viele Jahre war es her, dass die Broncos zuletzt im Super Bowl gespielt hatten?"
GERMAN_EDITED = "Wie viele Jahre war es her, dass die Broncos zuletzt beim Super Bowl gespielt hatten?"


def demo_lines(name: str, lines: range) -> list[dict]:
    with gzip.open(CORPUS / name, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for n, line in enumerate(handle, 1) if n in lines]
    return [{"id": row["id"], "text": row["text"]} for row in rows]


def build(root: Path, rows: list[dict], langs: list[str] | None = None) -> Path:
    """A real index of `rows` with its near-duplicate index, and the per-document language
    table `langs` (one per row, in order; None: no table, as an index built before one)."""
    write_jsonl(root / "docs.jsonl", rows)
    build_index([root / "docs.jsonl"], root / "index")
    add_neardup(LocalIndex(root / "index"))
    if langs is None:
        strip_table(root / "index")
    else:
        names = ["und", *sorted(set(langs) - {"und"})]
        codes = np.array([names.index(lang) for lang in langs], dtype=np.uint16)
        how = np.array([How.NONE if lang == "und" else How.METADATA for lang in langs], dtype=np.uint8)
        install_table(root / "index", DocumentLanguages(names, codes, how))
    return root / "index"


def question_item(question: str, lang: str, item_id: str = "q") -> Item:
    return Item(item_id=item_id, source_lang=lang, variants={lang: Variant(question=question)}, kind=ItemKind.OPEN)


def question_evidence(index: Path, item: Item, lang: str, config: minhash.MinhashConfig | None = None, rules=None):
    found = minhash.run(NearDuplicateIndex.open(index, corpus=LocalIndex(index)), item, lang, config or minhash.MinhashConfig(), rules)
    return next(e for e in found if e.field == "question")


# 1. Shingles are compared as text.


@pytest.fixture(scope="module")
def collision_index(tmp_path_factory) -> Path:
    name, line = COLLIDING_PAGE
    rows = demo_lines(name, range(line - 3, line + 4)) + demo_lines("pud-id.jsonl.gz", range(1, 40))
    return build(tmp_path_factory.mktemp("collision"), rows)


def test_a_32_bit_hash_collision_matches_nothing(collision_index: Path):
    item = load_benchmark(XCOPA_ID).items[0]
    question = normalize(item.variants["id"].question)
    assert question == "Salju menghalangi jalanan masuk."
    sizes = NearDupParams().shingle
    asked = shingle_text(question, sizes)
    corpus = LocalIndex(collision_index)
    page = next(raw.decode() for _, raw in corpus.documents() if "肿瘤基因组学" in raw.decode()[:40])
    held = shingle_text(page, sizes)
    same = np.flatnonzero(held.valid & np.isin(held.hashes, asked.hashes[asked.valid]))
    # The premise: the page holds a shingle with one of the question's 32-bit hashes, not its text.
    assert len(same) and set(shingle_strings(folded(page), held.tokens, sizes.table(), same)).isdisjoint(
        shingle_strings(folded(question), asked.tokens, sizes.table(), np.flatnonzero(asked.valid))
    )
    evidence = question_evidence(collision_index, item, "id")
    figures = evidence.figures
    assert figures["verified"] >= 1, "the page was proposed and read back"
    assert (figures["containment"], figures["any_language"]["containment"], figures["matched_shingles"]) == (0.0, 0.0, [])
    assert evidence.provenance == []


def test_matched_shingles_are_recorded_as_text(collision_index: Path):
    corpus = LocalIndex(collision_index)
    sentence = next(raw.decode() for _, raw in corpus.documents() if len(raw.decode().split()) > 12)
    question = " ".join(sentence.split()[:12])
    evidence = question_evidence(collision_index, question_item(question, "id"), "id")
    shingled = shingle_text(question, NearDupParams().shingle)
    every = shingle_strings(folded(question), shingled.tokens, NearDupParams().shingle.table(), np.flatnonzero(shingled.valid))
    expected = list(dict.fromkeys(every))[:5]
    assert evidence.figures["containment"] == 1.0
    assert evidence.figures["matched_shingles"] == expected
    assert evidence.provenance[0]["matched_shingles"] == expected


# 2. Documents of another language do not count.


@pytest.fixture(scope="module")
def german_french(tmp_path_factory) -> Path:
    """Real German and French text (parallel PUD sentences); an edited copy of a German XQuAD
    question planted in one German and one French document, and one document of unknown language."""
    german, french = demo_lines("pud-de.jsonl.gz", range(1, 60)), demo_lines("pud-fr.jsonl.gz", range(1, 60))
    german[10]["text"] += " " + GERMAN_EDITED
    french[20]["text"] += " " + GERMAN_EDITED
    unknown = {"id": "unknown", "text": french[30]["text"] + " " + GERMAN_EDITED}
    rows = [*german, *french, unknown]
    return build(tmp_path_factory.mktemp("defr"), rows, ["de"] * len(german) + ["fr"] * len(french) + ["und"])


def test_a_planted_edited_copy_in_the_variants_language_is_found(german_french: Path):
    evidence = question_evidence(german_french, question_item(GERMAN, "de"), "de")
    figures = evidence.figures
    assert figures["containment"] >= 0.5 and "below_floor" not in figures
    assert figures["language"] == {"lang": "de", "by": "table", "unknown_language": "count", "unknown_documents": 1}
    counted = [p for p in evidence.provenance if p["counted"]]
    assert {p["language"] for p in counted} == {"de", "und"}
    assert all(p["language_by"] == ("metadata" if p["language"] == "de" else "unknown") for p in counted)


def test_a_copy_in_another_languages_document_is_not_counted_but_listed(german_french: Path):
    from audit.rules import parse_rule

    rules = {"question": [parse_rule("containment", 0.5)]}
    config = minhash.MinhashConfig(unknown_language="ignore")
    evidence = question_evidence(german_french, question_item(GERMAN, "fr"), "fr", config, rules)
    figures = evidence.figures
    # The same German question asked as if it were French: only the French copy counts.
    assert figures["containment"] >= 0.5 and figures["documents"] == 1
    assert figures["languages"] == {"de": 1, "fr": 1, "und": 1}
    assert figures["language"]["unknown_documents"] == 0
    french_only = question_evidence(german_french, question_item(GERMAN, "it"), "it", config, rules)
    assert french_only.figures["containment"] == 0.0 and french_only.figures["documents"] == 0
    assert french_only.figures["any_language"]["containment"] >= 0.5
    assert french_only.figures["languages"] == {"de": 1, "fr": 1, "und": 1}
    assert {p["language"] for p in french_only.provenance} <= {"de", "fr", "und"} and not any(p["counted"] for p in french_only.provenance)


def test_a_copy_in_the_fields_language_is_verified_when_other_languages_outrank_it(german_french: Path):
    # One candidate verified: the copies in German, French and unknown documents rank one above
    # the other, so at most one language's copy can be the best overall; each is found.
    config = minhash.MinhashConfig(candidates=1, unknown_language="ignore")
    for lang in ("de", "fr"):
        figures = question_evidence(german_french, question_item(GERMAN, lang), lang, config).figures
        assert figures["containment"] >= 0.5, lang


def test_a_field_in_another_language_counts_in_its_own(german_french: Path):
    item = Item(item_id="x", source_lang="en", variants={"fr": Variant(question=GERMAN, field_languages={"question": "de"})}, kind=ItemKind.OPEN)
    evidence = question_evidence(german_french, item, "fr", minhash.MinhashConfig(unknown_language="ignore"))
    assert evidence.figures["language"]["lang"] == "de"
    assert {p["language"] for p in evidence.provenance if p["counted"]} == {"de"}


def test_an_index_without_a_language_table_counts_every_document(tmp_path: Path):
    rows = demo_lines("pud-fr.jsonl.gz", range(1, 30))
    rows[5]["text"] += " " + GERMAN_EDITED
    index = build(tmp_path, rows)
    figures = question_evidence(index, question_item(GERMAN, "de"), "de").figures
    assert figures["containment"] >= 0.5
    assert figures["language"] == {"lang": "de", "by": "unavailable", "unknown_language": "count", "unknown_documents": 1}


def test_documents_asked_at_once_count_as_asked_one_by_one():
    """`DocumentFilter.many`, which a query ranks its candidates' documents with, against
    `counts` for every document: language tags with regions and in other cases, documents of
    unknown language counted or not, and no table at all."""
    names = ["und", "de", "de-CH", "fr", "ZH-hant", "zh"]
    codes = np.array([0, 1, 2, 3, 4, 5, 0, 3, 1, 5, 2], dtype=np.uint16)
    table = DocumentLanguages(names, codes, np.zeros(len(codes), dtype=np.uint8))
    documents = np.array([*range(len(codes)), 3, 0, 10], dtype=np.int64)
    for lang in ("de", "de-AT", "fr", "zh", "zh-Hans", "en"):
        for unknown in UnknownLanguage:
            for chosen in (table, None):
                asked = DocumentFilter(lang, chosen, unknown)
                assert asked.many(documents).tolist() == [asked(d) for d in documents.tolist()], (lang, unknown, chosen is None)
    assert DocumentFilter("de", table, UnknownLanguage.COUNT).many(documents).sum() == 8


# 3. Short fields and common shingles.


def test_a_three_shingle_question_is_below_the_floor(german_french: Path):
    evidence = question_evidence(german_french, question_item("Die Broncos zuletzt beim Super", "de"), "de")
    figures = evidence.figures
    assert figures["shingles"] == 3 and figures["containment"] == 1.0
    assert figures["below_floor"] == ["containment", "jaccard"]
    assert figures["floor"]["containment"] == {"needed": 4, "had": 3, "unit": "shingles"}


@pytest.mark.parametrize("question", ["船失事了。", "受精卵は、", "What is a molecule?"])
def test_short_questions_from_the_report_are_below_their_floor(question: str, collision_index: Path):
    figures = question_evidence(collision_index, question_item(question, "en"), "en").figures
    assert "containment" in figures["below_floor"] and figures["floor"]["containment"]["had"] <= 2


@pytest.fixture(scope="module")
def english(tmp_path_factory) -> Path:
    """The demo corpus's English Wikipedia text (9 MB), and one document holding a sentence that shares only its
    common shingles with the question below."""
    rows = demo_lines("wiki-en.jsonl.gz", range(1, 6000))
    rows.append({"id": "host", "text": rows[0]["text"] + " It was the name of the university until the war."})
    return build(tmp_path_factory.mktemp("english"), rows, ["en"] * len(rows))


def test_a_common_shingle_does_not_carry_a_question(english: Path):
    question = "What was the name of the university?"
    item = question_item(question, "en")
    without = minhash.MinhashConfig(common=minhash.Common(per_million_bytes=1e6, at_least=10**9))
    plain = question_evidence(english, item, "en", without).figures
    assert plain["containment"] >= 0.5 and "below_floor" not in plain, "with every shingle counted, the question would be seen"
    cut = CommonShingles(LocalIndex(english), minhash.Common().per_million_bytes, minhash.Common().at_least)
    assert cut(["the name of", "name of the"]) == {"the name of", "name of the"}
    assert cut(["The name of", "Zebra quartz lamp", "name of the"]) == {"The name of", "name of the"}, "counted in their casings, the rare one left out"
    figures = question_evidence(english, item, "en").figures
    assert figures["shingles_common"] >= 2
    assert figures["containment"] < 0.5 or "containment" in figures["below_floor"]


# A page quoting another language: the window around the match decides.
RUSSIAN = "Москва была основана князем Юрием Долгоруким в 1147 году, и с тех пор город не переставал расти."


@pytest.fixture(scope="module")
def quoting(tmp_path_factory) -> Path:
    """Real Portuguese sentences (PUD), one of which quotes a Russian sentence in Cyrillic."""
    portuguese = demo_lines("pud-pt.jsonl.gz", range(1, 60))
    portuguese[7]["text"] += " A frase citada no artigo diz: «" + RUSSIAN + "» Isto é tudo."
    return build(tmp_path_factory.mktemp("quote"), portuguese, ["pt"] * len(portuguese))


def test_a_quotation_in_another_languages_page_counts_for_the_quoted_language(quoting: Path):
    evidence = question_evidence(quoting, question_item(RUSSIAN, "ru"), "ru")
    figures = evidence.figures
    assert figures["containment"] == 1.0 and figures["languages"] == {"ru": 1}
    counted = [p for p in evidence.provenance if p["counted"]]
    assert [(p["language"], p["language_by"]) for p in counted] == [("ru", "window")]



def test_two_shared_phrases_do_not_carry_a_short_question(tmp_path: Path):
    """An English XQuAD question of four shingles (google-deepmind/xquad) whose own
    passage holds two of them reaches containment 0.5, but two shingles are below
    `min_matched`: the figure is listed below the floor and decides nothing."""
    question = "What was the average family size?"
    rows = demo_lines("pud-en.jsonl.gz", range(1, 60))
    rows[5]["text"] += " The average household size was 2.46 and the average family size was 3.03."
    index = build(tmp_path, rows, ["en"] * len(rows))
    figures = question_evidence(index, question_item(question, "en"), "en").figures
    assert figures["containment"] == 0.5 and figures["below_floor"] == ["containment", "jaccard"]
    assert figures["floor"]["containment"] == {"needed": 3, "had": 2, "unit": "matched shingles"}
